// Sessions (episodes): a chart of sessions per day, a paged list and each session's timeline of
// memories with its context and summary as readable facts.
import { get } from "../api.js";
import { dayColumns, rangeControl, rangeDays } from "../charts.js";
import { facts, h, link, pager, route, table, when } from "../dom.js";

const SCORE_LABELS = { success: "scored ≥ 0.5", failure: "scored < 0.5", other: "no score (open or unscored)" };

const LIMIT = 25;

export async function render(ctx, id) {
  if (id) return timeline(id);
  const offset = Number(ctx.params.get("offset") || 0);
  const days = rangeDays(ctx.params);
  const [page, perDay] = await Promise.all([
    get("/api/sessions", { limit: LIMIT, offset }),
    get("/api/charts/sessions", { days }),
  ]);
  const rows = page.sessions.map((s) => h("tr", {},
    h("td", {}, link(route("sessions", s.id), s.id.slice(0, 12))),
    h("td", {}, s.robot), h("td", {}, s.collection), h("td", {}, when(s.started)), h("td", {}, s.ended ? when(s.ended) : "open"),
    h("td", {}, s.outcome_score === null ? "—" : s.outcome_score.toFixed(2)),
    h("td", {}, `${s.memories}`), h("td", { class: s.failures ? "bad" : "" }, `${s.failures}`)));
  const chart = dayColumns(perDay.days, { title: `Sessions started per day (last ${days} days, by outcome score)`,
    series: ["success", "failure", "other"], labels: SCORE_LABELS });
  const keep = new URLSearchParams(ctx.params);
  return h("div", {}, h("h1", {}, "Sessions"),
    h("div", { class: "row" }, rangeControl(ctx.params, "sessions")),
    h("div", { id: "sessions-chart" }, chart),
    table(["Session", "Robot", "Collection", "Started", "Ended", "Outcome", "Memories", "Failures"], rows, { id: "sessions-table" }),
    pager(page.total, LIMIT, offset, (o) => { keep.set("offset", String(o)); location.hash = `#/sessions?${keep}`; }));
}

async function timeline(id) {
  const t = await get(`/api/sessions/${encodeURIComponent(id)}/memories`);
  const s = t.session;
  const items = t.memories.map((m) => {
    const outcome = m.task.success === true ? "success" : m.task.success === false ? "failure" : "";
    return h("li", { class: outcome },
      h("div", { class: "muted small" }, `${when(m.created)} · ${m.category} · ${m.type}${outcome ? ` · ${outcome}` : ""}${m.status !== "active" ? ` · ${m.status}` : ""}`),
      link(route("experiences", m.id), m.content.length > 200 ? m.content.slice(0, 199) + "…" : m.content));
  });
  return h("div", {}, h("p", {}, link("#/sessions", "‹ All sessions")),
    h("h1", {}, `Session ${s.id.slice(0, 12)}`),
    h("p", { class: "meta" }, `robot ${s.robot} · ${s.collection} · ${when(s.started)} → ${s.ended ? when(s.ended) : "open"}`,
      s.outcome_score === null ? "" : ` · outcome ${s.outcome_score.toFixed(2)}`),
    h("h2", {}, "Timeline"),
    items.length ? h("ol", { class: "timeline", id: "session-timeline" }, items) : h("p", { class: "muted" }, "No memories in this session."),
    Object.keys(s.context).length ? h("section", {}, h("h2", {}, "Context"), h("div", { class: "chart-box", id: "session-context" }, facts(s.context))) : null,
    s.summary ? h("section", {}, h("h2", {}, "Summary"), h("div", { class: "chart-box", id: "session-summary" }, facts(s.summary))) : null);
}
