// Experiences: filterable, paged memory list and a detail view (params / spatial / robot / task),
// with update and forget.
import { api, get, post } from "../api.js";
import { h, json, link, pager, route, table, when } from "../dom.js";

const LIMIT = 25;
const FILTERS = ["collection", "robot", "category", "type", "since", "until", "success", "status"];

export async function render(ctx, id) {
  if (id) return detail(ctx, id);
  return list(ctx);
}

function successCell(task) {
  if (task.success === true) return h("span", { class: "ok" }, "success");
  if (task.success === false) return h("span", { class: "bad" }, "failure");
  return h("span", { class: "muted" }, "—");
}

/** The day after a YYYY-MM-DD date: the API's `until` is exclusive, the "to" field includes its day. */
function dayAfter(day) {
  const t = new Date(`${day}T00:00:00Z`);
  if (Number.isNaN(t.getTime())) return day;
  t.setUTCDate(t.getUTCDate() + 1);
  return t.toISOString().slice(0, 10);
}

async function list(ctx) {
  const offset = Number(ctx.params.get("offset") || 0);
  const args = Object.fromEntries(FILTERS.map((k) => [k, ctx.params.get(k) || ""]));
  const [page, collections, categories] = await Promise.all([
    get("/api/memories", { ...args, until: args.until ? dayAfter(args.until) : "", limit: LIMIT, offset }),
    get("/api/collections"),
    get("/api/categories"),
  ]);
  const field = {};
  const select = (name, options, label) => {
    field[name] = h("select", { name, "aria-label": label },
      options.map(([value, text]) => h("option", { value, selected: args[name] === value }, text)));
    return field[name];
  };
  const input = (name, props) => { field[name] = h("input", { name, value: args[name], ...props }); return field[name]; };
  const form = h("form", { class: "row", id: "memory-filters", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const k of FILTERS) if (field[k] && field[k].value) q.set(k, field[k].value);
    location.hash = `#/experiences?${q}`;
  } },
  select("collection", [["", "all collections"], ...collections.collections.map((c) => [c.name, `${c.name} (${c.count})`])], "collection"),
  ctx.session.scoped ? null : input("robot", { type: "text", placeholder: "robot", maxlength: 64 }),
  select("category", [["", "all categories"], ...categories.categories.map((c) => [c.name, `${c.name} (${c.count})`])], "category"),
  select("type", [["", "facts and perceptions"], ["fact", "facts"], ["perception", "perceptions"]], "type"),
  h("label", {}, "from ", input("since", { type: "date" })),
  h("label", {}, "to ", input("until", { type: "date" })),
  select("success", [["", "any outcome"], ["true", "task succeeded"], ["false", "task failed"]], "task success"),
  select("status", [["active", "active"], ["forgotten", "forgotten"], ["superseded", "superseded"], ["all", "every status"]], "status"),
  h("button", { type: "submit" }, "Filter"));
  const rows = page.memories.map((m) => h("tr", {},
    h("td", {}, link(route("experiences", m.id), `#${m.id}`)),
    h("td", { class: "content-cell" }, m.content.length > 160 ? m.content.slice(0, 159) + "…" : m.content),
    h("td", {}, m.robot), h("td", {}, m.collection), h("td", {}, m.category),
    h("td", {}, m.confidence.toFixed(2)), h("td", {}, successCell(m.task)), h("td", {}, when(m.created))));
  const keep = new URLSearchParams(ctx.params);
  return h("div", {}, h("h1", {}, "Experiences"), form,
    table(["Id", "Memory", "Robot", "Collection", "Category", "Confidence", "Task", "Created"], rows, { id: "memories-table" }),
    pager(page.total, LIMIT, offset, (o) => { keep.set("offset", String(o)); location.hash = `#/experiences?${keep}`; }));
}

async function detail(ctx, id) {
  const m = await get(`/api/memories/${encodeURIComponent(id)}`);
  const facts = h("dl", { class: "facts" },
    ...[["Robot", m.robot], ["Collection", m.collection], ["Category", m.category], ["Type", m.type + (m.perception_type ? ` (${m.perception_type})` : "")],
      ["Confidence", m.confidence.toFixed(3)], ["Status", m.status + (m.forget_reason ? ` — ${m.forget_reason}` : "")],
      ["Created", when(m.created)], ["Updated", when(m.updated)], ["Recalled", m.access_count === null ? "— (fleet-wide)" : `${m.access_count} times`],
      ["Tags", m.tags.join(", ") || "—"]].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
    h("dt", {}, "Session"), h("dd", {}, m.session_id ? link(route("sessions", m.session_id), m.session_id) : "—"));
  const area = h("textarea", { rows: 4, id: "memory-editor", maxlength: 10000 });
  area.value = m.content;
  const reason = h("input", { type: "text", placeholder: "why forget it?", maxlength: 1000, required: true });
  const reload = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  const active = m.status === "active";
  return h("div", {},
    h("p", {}, link("#/experiences", "‹ All experiences")),
    h("h1", {}, `Memory #${m.id}`),
    h("blockquote", { class: "memory-content", id: "memory-content" }, m.content),
    facts,
    h("div", { class: "grid2" },
      ...["params", "spatial", "robot_info", "task"].map((k) => h("section", {},
        h("h2", {}, k === "robot_info" ? "robot" : k), json(m[k])))),
    Object.keys(m.metadata).length ? h("section", {}, h("h2", {}, "metadata"), json(m.metadata)) : null,
    m.data !== null && m.data !== undefined ? h("section", {}, h("h2", {}, "data"), json(m.data)) : null,
    active ? h("section", { class: "editor" }, h("h2", {}, "Update"), area,
      h("div", { class: "row" }, h("button", { type: "button", onclick: async () => {
        try { await api("PATCH", `/api/memories/${m.id}`, { body: { content: area.value } }); ctx.toast("Updated"); reload(); }
        catch (error) { ctx.showError(error); }
      } }, "Save"))) : null,
    active ? h("form", { class: "row", onsubmit: async (e) => {
      e.preventDefault();
      try { await post(`/api/memories/${m.id}/forget`, { reason: reason.value }); ctx.toast("Forgotten"); reload(); }
      catch (error) { ctx.showError(error); }
    } }, reason, h("button", { type: "submit", class: "danger" }, "Forget")) : null);
}
