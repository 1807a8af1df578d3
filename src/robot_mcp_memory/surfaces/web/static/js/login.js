// The login page: the token goes in a POST body once and comes back as an HttpOnly cookie.
const form = document.getElementById("login-form");
const input = document.getElementById("token");
const error = document.getElementById("login-error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  const response = await fetch("/api/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ token: input.value }),
  });
  input.value = "";
  if (response.ok) {
    location.replace("/");
    return;
  }
  const body = await response.json().catch(() => ({}));
  error.textContent = body.detail || `Login failed (${response.status})`;
  error.hidden = false;
  input.focus();
});
input.focus();
