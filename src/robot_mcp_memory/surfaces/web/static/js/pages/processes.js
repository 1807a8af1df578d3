// Processes: paged list with search, a detail view (rendered markdown, reliability, outcome log),
// editing by re-saving the markdown, recording outcomes, deleting.
import { del, get, post } from "../api.js";
import { clear, h, link, pager, reliabilityBar, route, table, trustedHtml, when } from "../dom.js";

const LIMIT = 25;
const TEMPLATE = `---
title: A new process
task_pattern: "what instructions this answers"
tags: []
---

## Steps
1. …

## Pitfalls & fixes
- …
`;

export async function render(ctx, id) {
  if (id === "~new") return editor(ctx, TEMPLATE, null);
  if (id) return detail(ctx, id);
  return list(ctx);
}

async function list(ctx) {
  const offset = Number(ctx.params.get("offset") || 0);
  const q = ctx.params.get("q") || "";
  const box = h("div", {});
  const input = h("input", { type: "search", id: "process-query", placeholder: "Search processes (any language)…", value: q });
  const form = h("form", { class: "row", onsubmit: (e) => {
    e.preventDefault();
    location.hash = input.value.trim() ? `#/processes?q=${encodeURIComponent(input.value.trim())}` : "#/processes";
  } }, input, h("button", { type: "submit" }, "Search"), link("#/processes/~new", "New process", { class: "button" }));
  box.append(h("h1", {}, "Processes"), form);
  if (q) {
    const found = await get("/api/search/processes", { q, k: 50 });
    box.append(h("p", { class: "muted" }, `${found.processes.length} matches · mode ${found.mode}`),
      table(["#", "Process", "Robot", "Reliability", "Score"], found.processes.map((p) => h("tr", {},
        h("td", {}, p.rank), h("td", {}, link(route("processes", p.id), p.title), h("div", { class: "muted small" }, p.id)),
        h("td", {}, p.robot), h("td", {}, reliabilityBar(p.reliability, p.success_count, p.failure_count)), h("td", {}, p.score.toFixed(3)))),
      { id: "process-table" }));
    return box;
  }
  const page = await get("/api/processes", { limit: LIMIT, offset });
  box.append(table(["Process", "Robot", "Reliability", "Outcomes", "Updated"], page.processes.map((p) => h("tr", {},
    h("td", {}, link(route("processes", p.id), p.title), h("div", { class: "muted small" }, p.id)),
    h("td", {}, p.robot),
    h("td", {}, reliabilityBar(p.reliability, p.success_count, p.failure_count)),
    h("td", {}, `${p.success_count} ✓ · ${p.failure_count} ✗`),
    h("td", {}, when(p.updated)))), { id: "process-table" }),
  pager(page.total, LIMIT, offset, (o) => { location.hash = `#/processes?offset=${o}`; }));
  return box;
}

async function detail(ctx, id) {
  const p = await get(`/api/processes/${encodeURIComponent(id)}`);
  const body = trustedHtml(h("article", { class: "markdown", id: "process-body" }), p.html);
  const outcomes = table(["When", "Result", "Note"], p.outcomes.map((o) => h("tr", {},
    h("td", {}, when(o.when)), h("td", { class: o.success ? "ok" : "bad" }, o.success ? "success" : "failure"), h("td", {}, o.note))));
  const note = h("input", { type: "text", placeholder: "note (optional)", maxlength: 2000 });
  const record = async (success) => {
    try {
      await post(`/api/processes/${encodeURIComponent(p.id)}/outcomes`, { success, note: note.value });
      ctx.toast(`Recorded a ${success ? "success" : "failure"}`);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (error) { ctx.showError(error); }
  };
  const remove = async () => {
    if (!confirm(`Delete the process “${p.title}”? This cannot be undone.`)) return;
    try {
      await del(`/api/processes/${encodeURIComponent(p.id)}`);
      ctx.toast("Deleted");
      location.hash = "#/processes";
    } catch (error) { ctx.showError(error); }
  };
  return h("div", {},
    h("p", {}, link("#/processes", "‹ All processes")),
    h("h1", { id: "process-title" }, p.title),
    h("p", { class: "meta" }, h("code", {}, p.id), ` · robot ${p.robot} · updated ${when(p.updated)} · `,
      reliabilityBar(p.reliability, p.success_count, p.failure_count), ` ${p.success_count} ✓ · ${p.failure_count} ✗`,
      p.tags.length ? ` · tags: ${p.tags.join(", ")}` : ""),
    p.task_pattern ? h("p", { class: "muted" }, `Answers: ${p.task_pattern}`) : null,
    body,
    h("h2", {}, "Outcome log"), outcomes,
    h("div", { class: "row" }, note,
      h("button", { type: "button", onclick: () => record(true) }, "Record success"),
      h("button", { type: "button", onclick: () => record(false) }, "Record failure")),
    await editor(ctx, p.markdown, p),
    h("p", {}, h("button", { type: "button", class: "danger", onclick: remove }, "Delete process")));
}

async function editor(ctx, markdown, current) {
  const area = h("textarea", { id: "process-editor", rows: 18, spellcheck: "false" });
  area.value = markdown;
  const status = h("span", { class: "muted" });
  const save = async () => {
    try {
      // A new document never replaces one whose id its title happens to give (409 instead).
      const saved = await post("/api/processes", current ? { markdown: area.value } : { markdown: area.value, create: true });
      ctx.toast(`Saved (${saved.action}) as ${saved.id}`);
      if (!current || saved.id !== current.id) location.hash = route("processes", saved.id);
      else window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (error) {
      clear(status).append(error.message);
      ctx.showError(error);
    }
  };
  return h("section", { class: "editor" },
    h("h2", {}, current ? "Edit (re-save the markdown)" : "New process"),
    h("p", { class: "muted small" }, "The same id from the same mission updates the document and keeps its counters; "
      + "a different source_mission_id (or someone else's document) forks it to a new id."),
    area, h("div", { class: "row" }, h("button", { type: "button", id: "save-process", onclick: save }, "Save"), status));
}
