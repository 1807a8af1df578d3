// Lessons: learned parameters per scope (group:<G>, solo:<robot>, robot:<id>), paged, with charts
// of the most tried lessons' reliability and of lessons recorded per day.
import { get } from "../api.js";
import { barChart, dayColumns, rangeControl, rangeDays } from "../charts.js";
import { h, pager, reliabilityBar, table, when } from "../dom.js";

const LIMIT = 50;
/** The charts read at most this many lessons (newest first): one page of the API's largest. */
const CHART_SCAN = 500;

/** The last `n` UTC days, oldest first, as YYYY-MM-DD (the axis the server's charts use). */
function lastDays(n) {
  const today = new Date();
  return Array.from({ length: n }, (_, i) => new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (n - 1 - i)))
    .toISOString().slice(0, 10));
}

function charts(lessons, days) {
  const tried = [...lessons]
    .sort((a, b) => (b.success_count + b.failure_count) - (a.success_count + a.failure_count) || a.key.localeCompare(b.key))
    .slice(0, 15);
  const reliability = barChart(tried.map((x) => ({ label: `${x.key} · ${x.scope}`, value: x.reliability,
    successes: x.success_count, failures: x.failure_count })), { title: "Reliability per lesson (most tried 15)" });
  const perDay = new Map(lastDays(days).map((d) => [d, { day: d, success: 0, other: 0 }]));
  for (const x of lessons) {
    const created = perDay.get((x.created || "").slice(0, 10));
    if (created) created.other += 1;
    const updated = perDay.get((x.updated || "").slice(0, 10));
    if (updated && (x.updated || "").slice(0, 10) !== (x.created || "").slice(0, 10)) updated.success += 1;
  }
  const timeline = dayColumns([...perDay.values()], { title: `Lessons per day (last ${days} days)`,
    series: ["other", "success"], labels: { other: "recorded (new)", success: "updated (an outcome or new params)" } });
  return h("div", { class: "grid2", id: "lesson-charts" }, reliability, timeline);
}

export async function render(ctx) {
  const offset = Number(ctx.params.get("offset") || 0);
  const robot = ctx.params.get("robot") || "";
  const days = rangeDays(ctx.params);
  const [page, all] = await Promise.all([
    get("/api/lessons", { robot, limit: LIMIT, offset }),
    get("/api/lessons", { robot, limit: CHART_SCAN, offset: 0 }),
  ]);
  const input = h("input", { type: "text", placeholder: "one robot's view (robot id)", value: robot, maxlength: 64 });
  const form = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); location.hash = `#/lessons?robot=${encodeURIComponent(input.value.trim())}`; } },
    input, h("button", { type: "submit" }, "Show"));
  const rows = page.lessons.map((x) => h("tr", {},
    h("td", {}, h("code", {}, x.scope), x.orphaned ? h("span", { class: "pill off", title: "its group no longer exists" }, "orphaned") : null,
      x.private ? h("span", { class: "pill" }, "private") : null),
    h("td", {}, x.key), h("td", {}, x.place || "—"),
    h("td", {}, h("code", { class: "small" }, JSON.stringify(x.params))),
    h("td", {}, reliabilityBar(x.reliability, x.success_count, x.failure_count), ` ${x.success_count} ✓ · ${x.failure_count} ✗`),
    h("td", {}, x.recorded_by), h("td", {}, when(x.updated))));
  return h("div", {}, h("h1", {}, "Lessons"),
    h("p", { class: "muted" }, ctx.session.scoped
      ? `Lessons robot ${ctx.session.robot_id} reads: its private scope and its group's (or solo) scope.`
      : "Every scope, newest first — or one robot's view."),
    ctx.session.scoped ? null : form,
    h("div", { class: "row" }, rangeControl(ctx.params, "lessons"),
      all.total > all.lessons.length ? h("span", { class: "muted small" }, `charts read the newest ${all.lessons.length} of ${all.total}`) : null),
    charts(all.lessons, days),
    table(["Scope", "Key", "Place", "Params", "Reliability", "Recorded by", "Updated"], rows, { id: "lessons-table" }),
    pager(page.total, LIMIT, offset, (o) => { location.hash = `#/lessons?robot=${encodeURIComponent(robot)}&offset=${o}`; }));
}
