// Search playground: which mode ran and why each result ranked where it did — for processes
// (find_processes) and, when the server has them, memories (recall) in a collection picked from
// those that exist, with a hint when other collections match or hold data.
import { get } from "../api.js";
import { clear, h, link, route, s } from "../dom.js";

export async function render(ctx) {
  const hasMemories = ctx.session.features.includes("experiences");
  const what = h("select", { id: "search-what", "aria-label": "search what" },
    h("option", { value: "processes" }, "processes"), hasMemories ? h("option", { value: "memories" }, "memories") : null);
  const q = h("input", { type: "search", id: "search-query", placeholder: "an instruction, e.g. bring me the parcel from the mail room", value: ctx.params.get("q") || "" });
  const k = h("input", { type: "number", id: "search-k", min: 1, max: 50, value: 5 });
  const robot = h("input", { type: "text", id: "search-robot", placeholder: "as robot (optional)", maxlength: 64 });
  const collection = h("select", { id: "search-collection", "aria-label": "collection", hidden: true });
  let cols = [];
  if (hasMemories) {
    cols = (await get("/api/collections")).collections; // the collections that exist, largest first
    if (!cols.length) cols = [{ name: "default", count: 0 }];
    const wanted = ctx.params.get("collection");
    // The asked-for collection, else `default` when it holds memories, else the largest one.
    const start = cols.find((c) => c.name === wanted) || cols.find((c) => c.name === "default" && c.count > 0) || cols[0];
    for (const c of cols) {
      collection.append(h("option", { value: c.name, selected: c.name === start.name }, `${c.name} (${c.count})`));
    }
  }
  what.addEventListener("change", () => {
    collection.hidden = what.value !== "memories";
    robot.hidden = what.value === "memories" || ctx.session.scoped;
  });
  if (hasMemories && ctx.params.get("what") === "memories") {
    what.value = "memories";
    collection.hidden = false;
    robot.hidden = true;
  }
  const out = h("div", { id: "search-results" });
  const run = async (event) => {
    if (event) event.preventDefault();
    try {
      if (what.value === "memories") {
        const found = await get("/api/search/memories", { q: q.value, n: k.value, collection: collection.value });
        clear(out).append(memories(found));
        const hint = await elsewhere(q.value, k.value, collection.value, cols, found.memories.length, (name) => {
          collection.value = name;
          run();
        });
        if (hint) out.prepend(hint);
      } else {
        if (!q.value.trim()) return;
        const found = await get("/api/search/processes", { q: q.value, k: k.value, robot: ctx.session.scoped ? "" : robot.value });
        clear(out).append(processes(found));
      }
    } catch (error) { ctx.showError(error); }
  };
  const form = h("form", { class: "row", onsubmit: run }, what, q, collection, h("label", {}, "k ", k),
    ctx.session.scoped ? null : robot, h("button", { type: "submit", id: "search-run" }, "Search"));
  if (q.value) setTimeout(run, 0);
  return h("div", {}, h("h1", {}, "Search playground"),
    h("p", { class: "muted" }, "Runs the same search a robot brain would (with your scope) and shows the numbers behind the order."),
    form, out);
}

/** Which other collections match the same query (or, when none does, hold data): recall searches
 * one collection, and "No matches." alone hid memories sitting in another. */
async function elsewhere(query, n, current, cols, here, pick) {
  const others = cols.filter((c) => c.name !== current && c.count > 0).slice(0, 12);
  if (!others.length) return null;
  const counts = await Promise.all(others.map((c) => get("/api/search/memories", { q: query, n, collection: c.name })
    .then((r) => r.memories.length).catch(() => 0)));
  const matching = others.map((c, i) => ({ ...c, matches: counts[i] })).filter((c) => c.matches > 0);
  const button = (c, text) => h("button", { type: "button", class: "small", dataset: { collection: c.name }, onclick: () => pick(c.name) }, text);
  if (matching.length) {
    return h("div", { class: "callout", id: "search-elsewhere" },
      here ? "Also matching in other collections: " : `No matches in “${current}”, but other collections match: `,
      matching.flatMap((c) => [button(c, `${c.name} (${c.matches} match${c.matches === 1 ? "" : "es"})`), " "]));
  }
  if (here) return null;
  return h("div", { class: "callout", id: "search-elsewhere" },
    `No matches in “${current}”. Other collections hold memories: `,
    others.flatMap((c) => [button(c, `${c.name} (${c.count})`), " "]));
}

function processes(found) {
  const max = Math.max(1e-9, ...found.processes.map((p) => p.score));
  return h("div", {},
    h("div", { class: "callout", id: "search-mode" }, h("strong", {}, `Mode: ${found.mode}`), h("div", {}, found.mode_reason)),
    found.processes.length === 0 ? h("p", { class: "muted" }, "No matches.") :
      h("ol", { class: "ranked" }, found.processes.map((p) => h("li", {},
        h("div", { class: "ranked-head" }, link(route("processes", p.id), p.title), h("span", { class: "muted" }, ` ${p.id} · ${p.robot}`)),
        scoreBar(p.relevance, p.score, max, `reliability ${p.reliability.toFixed(3)}`),
        h("div", { class: "muted small" }, p.explanation)))));
}

function memories(found) {
  const why = found.mode === "hybrid"
    ? "keyword (FTS5 bm25) and vector candidates fused by reciprocal rank, weighted by source and decayed confidence"
    : found.mode === "filter"
      ? "no query text: every memory passing the filters, by decayed confidence"
      : "keyword-only: FTS5 bm25 weighted by source and decayed confidence";
  return h("div", {},
    h("div", { class: "callout", id: "search-mode" }, h("strong", {}, `Mode: ${found.mode}`), h("div", {}, why)),
    found.memories.length === 0 ? h("p", { class: "muted" }, "No matches.") :
      h("ol", { class: "ranked" }, found.memories.map((m) => h("li", {},
        h("div", { class: "ranked-head" }, link(route("experiences", m.id), m.content.length > 140 ? m.content.slice(0, 139) + "…" : m.content),
          h("span", { class: "muted" }, ` #${m.id} · ${m.robot} · ${m.category}`)),
        scoreBar(m.score, m.score, 1, `confidence ${m.decayed_confidence.toFixed(3)}`),
        h("div", { class: "muted small" }, `#${m.rank}: score ${m.score.toFixed(3)} (best = 1.000) · decayed confidence `
          + `${m.decayed_confidence.toFixed(3)}${m.distance === null ? "" : ` · distance ${m.distance.toFixed(3)}`}`
          + `${m.task.success === false ? " · task failed" : m.task.success === true ? " · task succeeded" : ""}`)))));
}

function scoreBar(relevance, score, max, note) {
  const width = 300;
  const rel = Math.min(1, relevance / Math.max(relevance, max));
  return s("svg", { width, height: 14, viewBox: `0 0 ${width} 14`, class: "scorebar", role: "img", "aria-label": `score ${score.toFixed(3)}` },
    s("rect", { x: 0, y: 2, width, height: 10, rx: 3, class: "chart-track" }),
    s("rect", { x: 0, y: 2, width: Math.round(width * rel), height: 10, rx: 3, class: "relevance" },
      s("title", {}, `relevance ${relevance.toFixed(3)}`)),
    s("rect", { x: 0, y: 2, width: Math.max(2, Math.round(width * (score / max))), height: 10, rx: 3, class: "score" },
      s("title", {}, `score ${score.toFixed(3)} (${note})`)));
}
