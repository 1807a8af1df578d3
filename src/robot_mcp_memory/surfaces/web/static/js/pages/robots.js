// Robots: per robot and per group — last seen, activity and failures per day, failure rate, what it
// contributed and reads — and the processes whose dated outcomes are getting worse.
// One report (GET /api/robots) feeds the list and each robot's page.
import { get } from "../api.js";
import { dayColumns, rangeControl, rangeDays, sparkColumns } from "../charts.js";
import { card, h, link, pct, route, table, when } from "../dom.js";

const LABELS = { success: "memories, task succeeded", failure: "memories, task failed", other: "memories, no task outcome" };

/** A sparse day list (`report.days` from `report.first_day`, only days with activity) on the full axis. */
function filled(report, days) {
  const have = new Map(days.map((d) => [d.day, d]));
  const start = new Date(`${report.first_day}T00:00:00Z`);
  return Array.from({ length: report.days }, (_, i) => {
    const day = new Date(start.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    return have.get(day) || { day, success: 0, failure: 0, other: 0 };
  });
}

function rate(x) {
  if (x.failure_rate === null) return h("span", { class: "muted", title: "no memory with a task outcome" }, "no outcomes yet");
  const judged = x.successes + x.failures;
  return h("span", { class: x.failure_rate >= 0.5 ? "bad" : "", title: `${x.failures} failed of ${judged} with a task outcome` },
    `${pct(x.failure_rate)} (${x.failures} of ${judged})`);
}

function contributed(x) {
  return `${x.processes} process${x.processes === 1 ? "" : "es"} · ${x.memories} memor${x.memories === 1 ? "y" : "ies"} · `
    + `${x.lessons_recorded} lesson${x.lessons_recorded === 1 ? "" : "s"}`;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function active(report, x) {
  const n = x.days.reduce((sum, d) => sum + d.success + d.failure + d.other, 0);
  return h("div", {}, sparkColumns(filled(report, x.days), { labels: LABELS }),
    h("div", { class: "muted small" }, `${plural(n, "memory", "memories")} in the window · ${plural(x.sessions, "session", "sessions")} in all`));
}

function trendList(trends) {
  const worse = trends.filter((t) => t.change < 0);
  if (!trends.length) return h("p", { class: "muted", id: "process-trends" }, "No process has 4 or more dated outcomes yet.");
  if (!worse.length) {
    return h("p", { class: "muted", id: "process-trends" }, `None of the ${trends.length} processes with 4 or more dated outcomes is getting worse.`);
  }
  return table(["Process", "Robot", "Older half", "Newer half", "Change", "Dated outcomes"], worse.map((t) => h("tr", {},
    h("td", {}, link(route("processes", t.id), t.title), h("div", { class: "muted small" }, t.id)),
    h("td", {}, t.robot), h("td", {}, pct(t.earlier_rate)), h("td", {}, pct(t.recent_rate)),
    h("td", { class: "trend-down" }, `${Math.round(t.change * 100)} points`),
    h("td", {}, `${t.dated_outcomes} (${t.success_count} ✓ · ${t.failure_count} ✗ counted)`))), { id: "process-trends" });
}

export async function render(ctx, robotId) {
  const days = rangeDays(ctx.params);
  const report = await get("/api/robots", { days });
  if (robotId) return detail(ctx, report, robotId, days);
  const groupRows = report.groups.map((g) => h("tr", { dataset: { group: g.group || "" } },
    h("td", {}, h("strong", {}, g.group || "ungrouped"), g.name && g.group ? h("div", { class: "muted small" }, g.name) : null),
    h("td", {}, g.robots.length ? g.robots.join(", ") : "—"), h("td", {}, when(g.last_seen)),
    h("td", {}, active(report, g)), h("td", {}, rate(g)), h("td", {}, contributed(g))));
  const robotRows = report.robots.map((r) => h("tr", { dataset: { robot: r.robot_id } },
    h("td", {}, link(route("robots", r.robot_id), r.robot_id), r.name ? h("div", { class: "muted small" }, r.name) : null,
      r.registered ? null : h("span", { class: "pill off", title: "owns stored data but never registered" }, "unregistered")),
    h("td", {}, r.group || "—"), h("td", {}, when(r.last_seen)), h("td", {}, active(report, r)), h("td", {}, rate(r)),
    h("td", {}, contributed(r)),
    h("td", {}, r.lessons_readable === null ? h("span", { class: "muted" }, "—") : `${r.lessons_readable} lessons`,
      r.used.length ? h("div", { class: "muted small" }, plural(r.used.length, "process used", "processes used")) : null)));
  return h("div", {}, h("h1", {}, "Robots"),
    h("p", { class: "muted small", id: "robots-note" }, `How this is derived: ${report.note} (${report.processes_scanned} processes read).`),
    h("div", { class: "row" }, rangeControl(ctx.params, "robots")),
    h("h2", {}, "Getting worse"), trendList(report.trends),
    h("h2", {}, "Groups"),
    table(["Group", "Robots", "Last seen", `Activity (last ${days} days)`, "Failure rate", "Contributed"], groupRows, { id: "groups-activity" }),
    h("h2", {}, "Robots"),
    table(["Robot", "Group", "Last seen", `Activity (last ${days} days)`, "Failure rate", "Contributed", "Reads"], robotRows, { id: "robots-activity" }));
}

function detail(ctx, report, robotId, days) {
  const r = report.robots.find((x) => x.robot_id === robotId);
  if (!r) return h("div", {}, h("p", {}, link("#/robots", "‹ All robots")), h("p", { class: "error" }, `not_found: no robot '${robotId}' in your view`));
  const mine = report.trends.filter((t) => t.robot === r.robot_id);
  return h("div", {}, h("p", {}, link("#/robots", "‹ All robots")),
    h("h1", { id: "robot-title" }, `Robot ${r.robot_id}`),
    h("p", { class: "meta" }, `${r.name || "no name"} · group ${r.group || "none"}${r.registered ? "" : " · never registered"}`),
    h("div", { class: "row" }, rangeControl(ctx.params, `robots/${encodeURIComponent(r.robot_id)}`)),
    h("div", { class: "cards", id: "robot-cards" },
      card("Last seen", h("span", { class: "date-value" }, r.last_seen ? r.last_seen.slice(0, 10) : "—"), r.last_seen ? `${when(r.last_seen).slice(11)} · newest stored trace` : "nothing stored"),
      card("Failure rate", r.failure_rate === null ? "—" : pct(r.failure_rate), `${r.failures} failed · ${r.successes} succeeded`),
      card("Memories", r.memories, plural(r.sessions, "session", "sessions")),
      card("Processes", r.processes, "saved as author"),
      card("Lessons", r.lessons_recorded, r.lessons_readable === null ? "recorded" : `recorded · reads ${r.lessons_readable}`)),
    h("div", { id: "robot-activity" }, dayColumns(filled(report, r.days), { title: `Memories written per day (last ${days} days, by task outcome)`,
      series: ["success", "failure", "other"], labels: LABELS })),
    h("h2", {}, "Processes it used"),
    r.used.length
      ? table(["Process", "Outcomes it recorded", "Succeeded"], r.used.map((u) => h("tr", {},
        h("td", {}, link(route("processes", u.id), u.title), h("div", { class: "muted small" }, u.id)),
        h("td", {}, String(u.outcomes)), h("td", {}, pct(u.successes / u.outcomes)))), { id: "robot-used" })
      : h("p", { class: "muted", id: "robot-used" }, "It has recorded no outcome on a process you can see."),
    h("h2", {}, "Its processes' trends"),
    mine.length ? trendList(mine) : h("p", { class: "muted" }, "None of its processes has 4 or more dated outcomes."),
    h("p", {}, link(`#/experiences?robot=${encodeURIComponent(r.robot_id)}`, "Its memories"), " · ",
      ctx.session.scoped ? null : link(`#/lessons?robot=${encodeURIComponent(r.robot_id)}`, "The lessons it reads")));
}
