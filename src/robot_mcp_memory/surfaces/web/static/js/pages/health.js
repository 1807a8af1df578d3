// Health (doctor): integrity, schema, index vs rows, sizes, disk, embedder. Operators only.
import { get, post } from "../api.js";
import { card, facts, h, table } from "../dom.js";

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

// Rows saved without provenance (robot "unknown") are invisible to robot tokens: count them, then
// hand them to "shared" or one robot after a confirm (POST /api/hand-over, admin only).
function handOver(ctx) {
  const to = h("input", { type: "text", id: "hand-over-to", value: "shared", maxlength: 64, required: true });
  const out = h("span", { id: "hand-over-result", class: "muted" });
  const run = async (apply) => {
    try {
      const r = await post("/api/hand-over", { to: to.value.trim(), apply });
      const kinds = `${r.processes} processes, ${r.memories} memories, ${r.sessions} sessions`;
      out.textContent = r.applied ? `Handed ${kinds} to ${r.to}.` : `${kinds} carry robot "unknown".`;
      if (!apply && r.processes + r.memories + r.sessions > 0
        && confirm(`Hand ${kinds} from "unknown" to "${r.to}"?`)) await run(true);
      else if (apply) ctx.toast(`Handed over to ${r.to}`);
    } catch (error) { ctx.showError(error); }
  };
  return h("form", { class: "row", id: "hand-over", onsubmit: (e) => { e.preventDefault(); run(false); } },
    h("label", {}, "Rows without a robot → ", to), h("button", { type: "submit" }, "Count and hand over"), out);
}

export async function render(ctx) {
  const d = await get("/api/doctor");
  return h("div", {}, h("h1", {}, "Health"),
    h("div", { class: "cards" },
      card("Status", d.ok ? "ok" : "problem"),
      card("Schema", `v${d.schema_version ?? "?"}`, `server supports v${d.schema_supported}`),
      card("Process index", `${d.process_index_entries} / ${d.process_rows}`, "index entries / rows"),
      card("Database", bytes(d.db_size_bytes), `WAL ${bytes(d.wal_size_bytes)}`),
      card("Embedder", d.embedder.mode, d.embedder.model || "")),
    table(["Check", "Detail", ""], d.checks.map((c) => h("tr", {},
      h("td", {}, c.check), h("td", {}, c.detail), h("td", { class: c.ok ? "ok" : "bad" }, c.ok ? "ok" : "FAIL"))), { id: "doctor-table" }),
    h("h2", {}, "Embedder detail"), h("div", { class: "chart-box", id: "embedder-detail" }, facts(d.embedder.detail)),
    h("h2", {}, "Saved before tokens"), handOver(ctx));
}
