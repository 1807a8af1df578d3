// Overview: counts, embedder mode, reliability per process, outcomes (and memories) over time,
// recent failures.
import { get } from "../api.js";
import { barChart, dayColumns, rangeControl, rangeDays } from "../charts.js";
import { card, h, link, route, when } from "../dom.js";

export async function render(ctx) {
  const days = rangeDays(ctx.params);
  const [stats, page, outcomes] = await Promise.all([
    get("/api/stats"),
    get("/api/processes", { limit: 15, sort: "used" }), // the most used of all, not of the newest 200
    get("/api/charts/outcomes", { days }),
  ]);
  const hasExperiences = ctx.session.features.includes("experiences");
  const cards = h("div", { class: "cards" },
    card("Processes", stats.processes),
    card("Robots", stats.robots),
    card("Groups", stats.groups),
    card("Lessons", stats.lessons),
    hasExperiences && stats.experiences ? card("Memories", stats.experiences.active ?? stats.experiences.total ?? 0) : null,
    card("Embedder", stats.embedder.mode, stats.embedder.model || ""),
    card("Self-improvement", stats.global_self_improve ? "on" : "off", "global switch"),
  );
  const used = [...page.processes]
    .sort((a, b) => (b.success_count + b.failure_count) - (a.success_count + a.failure_count) || a.id.localeCompare(b.id))
    .slice(0, 15);
  const reliability = barChart(
    used.map((p) => ({ label: p.title, value: p.reliability, successes: p.success_count, failures: p.failure_count })),
    { title: "Reliability per process (most used 15)" },
  );
  const timeline = dayColumns(outcomes.days, { title: `Logged process outcomes per day (last ${days} days)` });
  const parts = [h("h1", {}, "Overview"), cards, h("div", { class: "row" }, rangeControl(ctx.params, "")),
    h("div", { class: "grid2" }, reliability, timeline)];
  if (hasExperiences) {
    const [memories, failures] = await Promise.all([
      get("/api/charts/memories", { days }),
      get("/api/recent-failures", { limit: 10 }),
    ]);
    parts.push(h("div", { class: "grid2" },
      dayColumns(memories.days, { title: `Memories per day (last ${days} days, by task success)`, series: ["success", "failure", "other"] }),
      h("section", { class: "chart-box" }, h("h2", {}, "Recent failures (task.success = false)"),
        failures.memories.length
          ? h("ul", { class: "plain", id: "recent-failures" }, failures.memories.map((m) => h("li", {},
            link(route("experiences", m.id), m.content.length > 120 ? m.content.slice(0, 119) + "…" : m.content),
            h("span", { class: "muted" }, ` · ${m.robot || "—"} · ${when(m.created)}`))))
          : h("p", { class: "muted" }, "No failed episodes recorded."))));
  }
  return h("div", {}, ...parts);
}
