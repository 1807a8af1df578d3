// The dashboard shell: learns who you are up front (GET /api/session), draws the navigation,
// and routes by URL hash. Pages are modules under ./pages/.
import { ApiError, get, post, setCsrf } from "./api.js";
import { clear, h } from "./dom.js";
import * as experiences from "./pages/experiences.js";
import * as fleet from "./pages/fleet.js";
import * as health from "./pages/health.js";
import * as lessons from "./pages/lessons.js";
import * as overview from "./pages/overview.js";
import * as processes from "./pages/processes.js";
import * as robots from "./pages/robots.js";
import * as search from "./pages/search.js";
import * as sessions from "./pages/sessions.js";

const view = document.getElementById("view");
const toastEl = document.getElementById("toast");

export function toast(message, kind = "info") {
  toastEl.textContent = message;
  toastEl.className = `toast ${kind}`;
  toastEl.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { toastEl.hidden = true; }, 4000);
}

export function showError(error) {
  if (error instanceof ApiError) {
    toast(`${error.code}: ${error.message}${error.reference ? ` (reference ${error.reference})` : ""}`, "error");
  } else {
    toast(String(error), "error");
  }
}

function pages(session) {
  const list = [
    { path: "", label: "Overview", page: overview },
    { path: "processes", label: "Processes", page: processes },
    { path: "search", label: "Search", page: search },
  ];
  if (session.features.includes("experiences")) {
    list.push({ path: "experiences", label: "Experiences", page: experiences });
    list.push({ path: "sessions", label: "Sessions", page: sessions });
  }
  list.push({ path: "robots", label: "Robots", page: robots }, { path: "fleet", label: "Fleet", page: fleet },
    { path: "lessons", label: "Lessons", page: lessons });
  if (session.can_administer) list.push({ path: "health", label: "Health", page: health });
  return list;
}

async function main() {
  let session;
  try {
    session = await get("/api/session");
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) showError(error);
    return;
  }
  session.features = session.features || [];
  setCsrf(session.csrf_token);
  const who = document.getElementById("who");
  who.textContent = session.scoped
    ? `robot ${session.robot_id}${session.group ? ` · group ${session.group}` : " · ungrouped"}`
    : session.auth_enabled ? "admin" : "open (no tokens configured)";
  if (session.scoped) {
    const banner = document.getElementById("scope-banner");
    banner.textContent = `Scoped to robot ${session.robot_id}: you see its group${session.group ? ` (${session.group})` : ""} `
      + "and fleet-wide documents only; fleet administration needs the admin token.";
    banner.hidden = false;
  }
  const logout = document.getElementById("logout");
  if (session.cookie) {
    logout.hidden = false;
    logout.addEventListener("click", async () => {
      await post("/api/logout", {}).catch(() => null);
      location.href = "/login";
    });
  }
  const list = pages(session);
  const nav = document.getElementById("nav");
  for (const p of list) nav.append(h("a", { href: `#/${p.path}`, dataset: { path: p.path } }, p.label));

  let latest = 0;
  async function render() {
    const mine = ++latest; // a slower, older render must not replace a newer page
    const [pathPart, query] = location.hash.replace(/^#\/?/, "").split("?");
    const decode = (x) => { try { return decodeURIComponent(x); } catch { return x; } }; // "50%" is not an escape
    const [first, ...rest] = pathPart.split("/").map(decode);
    const target = list.find((p) => p.path === (first || "")) || list[0];
    for (const a of nav.querySelectorAll("a")) a.classList.toggle("active", a.dataset.path === target.path);
    clear(view).append(h("p", { class: "muted" }, "Loading…"));
    const ctx = { session, toast, showError, params: new URLSearchParams(query || "") };
    try {
      const node = await target.page.render(ctx, ...rest);
      if (mine === latest) clear(view).append(node);
    } catch (error) {
      if (mine !== latest) return;
      clear(view).append(h("p", { class: "error" }, error instanceof ApiError ? `${error.code}: ${error.message}` : String(error)));
    }
  }
  window.addEventListener("hashchange", render);
  await render();
}

main();
