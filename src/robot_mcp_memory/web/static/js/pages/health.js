// Health (doctor): integrity, schema, index vs rows, sizes, disk, embedder. Operators only.
import { get } from "../api.js";
import { card, facts, h, table } from "../dom.js";

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export async function render() {
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
    h("h2", {}, "Embedder detail"), h("div", { class: "chart-box", id: "embedder-detail" }, facts(d.embedder.detail)));
}
