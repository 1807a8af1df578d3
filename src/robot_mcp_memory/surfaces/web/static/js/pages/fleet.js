// Fleet admin: groups, moving robots between groups, self-improvement switches. A scoped caller
// (robot token) gets a read-only view under a banner naming its robot.
import { del, get, post, put } from "../api.js";
import { h, table, when } from "../dom.js";

const SWITCH = { inherit: null, on: true, off: false };

export async function render(ctx) {
  const [groups, robots] = await Promise.all([get("/api/fleet/groups"), get("/api/fleet/robots")]);
  const ro = !ctx.session.can_administer;
  const lock = ro ? { disabled: true, title: `Read-only: scoped to robot ${ctx.session.robot_id}` } : {};
  const reload = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  const act = (fn, message) => async (...args) => {
    try {
      if ((await fn(...args)) === false) return;
      ctx.toast(message);
      reload();
    } catch (error) { ctx.showError(error); }
  };

  const banner = ro ? h("div", { class: "banner readonly", id: "readonly-banner", role: "status" },
    `Read-only: this session is scoped to robot ${ctx.session.robot_id}`
    + `${ctx.session.group ? ` (group ${ctx.session.group})` : " (ungrouped)"}. `
    + "Moving robots, editing groups and switching self-improvement need the admin token.") : null;

  const globalToggle = h("input", { type: "checkbox", id: "global-self-improve", checked: groups.global_self_improve, ...lock,
    onchange: act((e) => put("/api/fleet/self-improve", { enabled: e.target.checked, group: "" }), "Global switch saved") });

  const groupRows = groups.groups.map((g) => {
    const current = g.self_improve === null ? "inherit" : g.self_improve ? "on" : "off";
    const select = h("select", { class: "group-switch", dataset: { group: g.group_id }, ...lock,
      onchange: act((e) => put("/api/fleet/self-improve", { enabled: SWITCH[e.target.value], group: g.group_id }),
        `Switch for ${g.group_id} saved`) },
    Object.keys(SWITCH).map((k) => h("option", { value: k, selected: k === current },
      k === "inherit" ? `follow global (${groups.global_self_improve ? "on" : "off"})` : k)));
    return h("tr", { dataset: { group: g.group_id } },
      h("td", {}, h("strong", {}, g.group_id), g.name ? h("div", { class: "muted small" }, g.name) : null),
      h("td", {}, g.customer || "—"), h("td", {}, g.factory || "—"),
      h("td", {}, g.robots.length ? g.robots.join(", ") : "—"),
      h("td", {}, select, h("span", { class: `pill ${g.effective_self_improve ? "on" : "off"}` }, g.effective_self_improve ? "on" : "off")),
      h("td", {}, h("button", { type: "button", class: "danger small", ...lock,
        onclick: act(async () => {
          if (!confirm(`Delete group ${g.group_id}? Its robots become ungrouped; its lessons are kept.`)) return false;
          return del(`/api/fleet/groups/${encodeURIComponent(g.group_id)}`);
        }, `Group ${g.group_id} deleted`) }, "Delete")));
  });

  const options = [h("option", { value: "" }, "— ungrouped —"), ...groups.groups.map((g) => h("option", { value: g.group_id }, g.group_id))];
  const robotRows = robots.robots.map((r) => {
    const select = h("select", { class: "robot-group", dataset: { robot: r.robot_id }, ...lock,
      onchange: act((e) => put(`/api/fleet/robots/${encodeURIComponent(r.robot_id)}/group`, { group: e.target.value }),
        `${r.robot_id} moved`) },
    options.map((o) => { const c = o.cloneNode(true); c.selected = (r.group || "") === o.value; return c; }));
    return h("tr", { dataset: { robot: r.robot_id } },
      h("td", {}, h("strong", {}, r.robot_id), r.name ? h("div", { class: "muted small" }, r.name) : null),
      h("td", {}, select),
      h("td", {}, h("span", { class: `pill ${r.self_improve ? "on" : "off"}` }, r.self_improve ? "on" : "off")),
      h("td", {}, Object.keys(r.meta).length ? h("code", { class: "small" }, JSON.stringify(r.meta)) : "—"),
      h("td", {}, when(r.updated)));
  });

  const gid = h("input", { type: "text", id: "new-group-id", placeholder: "group id (e.g. acme-line-2)", required: true, maxlength: 64, ...lock });
  const gname = h("input", { type: "text", placeholder: "name", maxlength: 200, ...lock });
  const gcust = h("input", { type: "text", placeholder: "customer", maxlength: 200, ...lock });
  const gfact = h("input", { type: "text", placeholder: "factory", maxlength: 200, ...lock });
  const groupForm = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); act(() => put(`/api/fleet/groups/${encodeURIComponent(gid.value.trim())}`,
    { name: gname.value, customer: gcust.value, factory: gfact.value }), "Group saved")(); } },
  gid, gname, gcust, gfact, h("button", { type: "submit", ...lock }, "Save group"));

  const rid = h("input", { type: "text", placeholder: "robot id", required: true, maxlength: 64, ...lock });
  const rname = h("input", { type: "text", placeholder: "name", maxlength: 200, ...lock });
  const robotForm = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); act(() => post("/api/fleet/robots",
    { robot_id: rid.value.trim(), name: rname.value }), "Robot registered")(); } },
  rid, rname, h("button", { type: "submit", ...lock }, "Add robot"));

  return h("div", { class: ro ? "readonly-view" : "" },
    h("h1", {}, "Fleet"), banner,
    h("p", {}, h("label", { class: "switch" }, globalToggle, " Self-improvement for the whole fleet (groups may override)")),
    h("h2", {}, "Groups"),
    table(["Group", "Customer", "Factory", "Robots", "Self-improvement", ""], groupRows, { id: "groups-table" }),
    groupForm,
    h("h2", {}, "Robots"),
    table(["Robot", "Group", "Self-improvement now", "Meta", "Updated"], robotRows, { id: "robots-table" }),
    robotForm);
}
