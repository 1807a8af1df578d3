// Search playground: which mode ran and why each result ranked where it did.
import { get } from "../api.js";
import { clear, h, link, route, s } from "../dom.js";

export async function render(ctx) {
  const q = h("input", { type: "search", id: "search-query", placeholder: "an instruction, e.g. bring me the parcel from the mail room", value: ctx.params.get("q") || "" });
  const k = h("input", { type: "number", id: "search-k", min: 1, max: 50, value: 5 });
  const robot = h("input", { type: "text", id: "search-robot", placeholder: "as robot (optional)", maxlength: 64 });
  const out = h("div", { id: "search-results" });
  const run = async (event) => {
    if (event) event.preventDefault();
    if (!q.value.trim()) return;
    try {
      const found = await get("/api/search/processes", { q: q.value, k: k.value, robot: ctx.session.scoped ? "" : robot.value });
      clear(out).append(result(found));
    } catch (error) { ctx.showError(error); }
  };
  const form = h("form", { class: "row", onsubmit: run }, q, h("label", {}, "k ", k),
    ctx.session.scoped ? null : robot, h("button", { type: "submit", id: "search-run" }, "Search"));
  if (q.value) setTimeout(run, 0);
  return h("div", {}, h("h1", {}, "Search playground"),
    h("p", { class: "muted" }, "Runs find_processes exactly as a robot brain would (with your scope) and shows the numbers behind the order."),
    form, out);
}

function result(found) {
  const max = Math.max(1e-9, ...found.processes.map((p) => p.score));
  return h("div", {},
    h("div", { class: "callout", id: "search-mode" }, h("strong", {}, `Mode: ${found.mode}`), h("div", {}, found.mode_reason)),
    found.processes.length === 0 ? h("p", { class: "muted" }, "No matches.") :
      h("ol", { class: "ranked" }, found.processes.map((p) => h("li", {},
        h("div", { class: "ranked-head" }, link(route("processes", p.id), p.title), h("span", { class: "muted" }, ` ${p.id} · ${p.robot}`)),
        scoreBar(p, max),
        h("div", { class: "muted small" }, p.explanation)))));
}

function scoreBar(p, max) {
  const width = 300;
  const rel = Math.min(1, p.relevance / Math.max(p.relevance, max));
  return s("svg", { width, height: 14, viewBox: `0 0 ${width} 14`, class: "scorebar", role: "img", "aria-label": `score ${p.score.toFixed(3)}` },
    s("rect", { x: 0, y: 2, width, height: 10, rx: 3, class: "chart-track" }),
    s("rect", { x: 0, y: 2, width: Math.round(width * rel), height: 10, rx: 3, class: "relevance" },
      s("title", {}, `relevance ${p.relevance.toFixed(3)}`)),
    s("rect", { x: 0, y: 2, width: Math.max(2, Math.round(width * (p.score / max))), height: 10, rx: 3, class: "score" },
      s("title", {}, `score ${p.score.toFixed(3)} (reliability ${p.reliability.toFixed(3)})`)));
}
