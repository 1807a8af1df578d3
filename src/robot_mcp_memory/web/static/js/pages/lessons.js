// Lessons: learned parameters per scope (group:<G>, solo:<robot>, robot:<id>), paged.
import { get } from "../api.js";
import { h, pager, reliabilityBar, table, when } from "../dom.js";

const LIMIT = 50;

export async function render(ctx) {
  const offset = Number(ctx.params.get("offset") || 0);
  const robot = ctx.params.get("robot") || "";
  const page = await get("/api/lessons", { robot, limit: LIMIT, offset });
  const input = h("input", { type: "text", placeholder: "one robot's view (robot id)", value: robot, maxlength: 64 });
  const form = h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); location.hash = `#/lessons?robot=${encodeURIComponent(input.value.trim())}`; } },
    input, h("button", { type: "submit" }, "Show"));
  const rows = page.lessons.map((x) => h("tr", {},
    h("td", {}, h("code", {}, x.scope), x.orphaned ? h("span", { class: "pill off", title: "its group no longer exists" }, "orphaned") : null,
      x.private ? h("span", { class: "pill" }, "private") : null),
    h("td", {}, x.key), h("td", {}, x.place || "—"),
    h("td", {}, h("code", { class: "small" }, JSON.stringify(x.params))),
    h("td", {}, reliabilityBar(x.reliability), ` ${x.success_count} ✓ · ${x.failure_count} ✗`),
    h("td", {}, x.recorded_by), h("td", {}, when(x.updated))));
  return h("div", {}, h("h1", {}, "Lessons"),
    h("p", { class: "muted" }, ctx.session.scoped
      ? `Lessons robot ${ctx.session.robot_id} reads: its private scope and its group's (or solo) scope.`
      : "Every scope, newest first — or one robot's view."),
    ctx.session.scoped ? null : form,
    table(["Scope", "Key", "Place", "Params", "Reliability", "Recorded by", "Updated"], rows, { id: "lessons-table" }),
    pager(page.total, LIMIT, offset, (o) => { location.hash = `#/lessons?robot=${encodeURIComponent(robot)}&offset=${o}`; }));
}
