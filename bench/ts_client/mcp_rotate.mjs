// bench/bench_robotmem_compare.py --ts-client: the same MCP stdio calls as the Python SDK part,
// from the TypeScript SDK's Client (what most MCP hosts are built on). It validates each structured
// result with an Ajv validator compiled once per tool from tools/list.
//
//   node mcp_rotate.mjs SPEC.json  ->  one JSON array on stdout, a record per server
//
// SPEC: {"servers": [{name, command, args, env, hybrid}], "calls": N, "queries": [...],
//        "learn": [[insight, context, collection], ...]}
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const parse = (result) => {
  try {
    const value = JSON.parse(result.content[0].text);
    return value && typeof value === "object" ? value : { error: "not an object" };
  } catch {
    return { error: "no JSON text" };
  }
};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

const sessions = [];
for (const server of spec.servers) {
  const started = now();
  const transport = new StdioClientTransport({
    command: server.command,
    args: server.args,
    env: server.env,
    stderr: "ignore",
  });
  const client = new Client({ name: "robot-mcp-memory-bench", version: "1.0.0" });
  await client.connect(transport);
  await client.listTools(); // the output schemas, compiled once
  sessions.push({ server, client, init_s: (now() - started) / 1000, ping: [], learn: [], recall: [], errors: 0, empty: 0, mode: "?" });
}
for (const s of sessions) {
  // warm up: the first calls load what is loaded lazily; a hybrid server until its model is ready
  for (const query of spec.queries.slice(0, 5)) await s.client.callTool({ name: "recall", arguments: { query, n: 5 } });
  const deadline = now() + 120_000;
  while (s.server.hybrid && now() < deadline) {
    const got = parse(await s.client.callTool({ name: "recall", arguments: { query: spec.queries[0], n: 5 } }));
    if (got.mode === "hybrid") break;
    await sleep(500);
  }
}
for (let i = 0; i < spec.calls; i++) {
  const query = spec.queries[i % spec.queries.length];
  for (const s of sessions) { // rotate: each call of each kind meets the same neighbours
    let t = now();
    await s.client.ping();
    s.ping.push(now() - t);
    const [insight, context, collection] = spec.learn[i % spec.learn.length];
    t = now();
    const learned = parse(await s.client.callTool({ name: "learn", arguments: { insight, context: JSON.stringify(context), collection } }));
    s.learn.push(now() - t);
    t = now();
    const recalled = parse(await s.client.callTool({ name: "recall", arguments: { query, n: 5 } }));
    s.recall.push(now() - t);
    s.errors += Number("error" in learned) + Number("error" in recalled);
    s.empty += Number(!(recalled.memories && recalled.memories.length));
    if (s.mode === "?" && typeof recalled.mode === "string") s.mode = recalled.mode;
  }
}
const out = sessions.map(({ server, client, ...rest }) => ({ name: server.name, ...rest }));
for (const s of sessions) await s.client.close();
process.stdout.write(JSON.stringify(out) + "\n");
