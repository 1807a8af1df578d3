// The REST client: same-origin cookies, JSON bodies, the CSRF header on every change.
let csrfToken = null;

export function setCsrf(token) {
  csrfToken = token || null;
}

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.detail ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error ? body.error : "error";
    this.reference = body && body.reference ? body.reference : null;
  }
}

export async function api(method, path, { params, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body || {});
    if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  }
  const response = await fetch(url, init);
  const data = await response.json().catch(() => ({ error: "internal", detail: response.statusText }));
  if (response.status === 401) {
    location.href = "/login";
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path, params) => api("GET", path, { params });
export const post = (path, body) => api("POST", path, { body });
export const put = (path, body) => api("PUT", path, { body });
export const del = (path) => api("DELETE", path);
