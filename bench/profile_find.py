"""Where one find_processes spends its CPU, in-process, on a corpus where every query matches
every document (the worst case of `bench.load_sse --corpus worst`).

    python -m bench.profile_find [--processes 1000] [--calls 60] [--embedder use|none|hashing]

Prints process CPU time per call (all threads: the figure a shared machine disturbs least) of
each part, measured one after another on one store: the query embedding, the keyword search
(keyword mode's `store.search`; hybrid's keyword top 50), rendering the hits, the whole service
find (unscoped, and for a robot token: its group's and fleet-wide documents), the server's tool
call alone (`MemoryMCP.call_tool`: the service and the tool layer above it — argument rules,
the result model, its JSON), what the transport adds to write the answer (the JSON-RPC response
as JSON), what the SDK's client spends checking the result against the output schema, and the
whole call through the in-memory MCP client (client side included), beside a ping over the
same client.

Two query streams: *distinct* (every call a text not asked before: the model embeds each one)
and *repeated* (every call the same text, as a fleet's robots ask for one task at mission
start: its vector comes from the embedder's query cache). Both match nearly every document.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
from mcp import types
from mcp.shared.memory import create_connected_server_and_client_session

from bench.bench_processes import make_documents
from bench.load_sse import SEED, worst_queries
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes import docmodel, ranking
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import ADMIN, Principal


def _per_call_ms(fn: Callable[[int], object], calls: int) -> float:
    fn(calls)  # warm-up, on an index no measured call uses
    started = time.process_time()
    for i in range(calls):
        fn(i)
    return (time.process_time() - started) / calls * 1000


async def _per_call_ms_async(fn: Callable[[int], Awaitable[object]], calls: int) -> float:
    await fn(calls)
    started = time.process_time()
    for i in range(calls):
        await fn(i)
    return (time.process_time() - started) / calls * 1000


async def _find(memory: Memory, who: Principal, queries: list[str], i: int) -> object:
    return await memory.processes.find(who, queries[i], 3)


async def _call(call_tool: Callable[[str, dict[str, Any]], Awaitable[object]], queries: list[str], i: int) -> object:
    return await call_tool("find_processes", {"query": queries[i], "k": 3})


def _response_json(result: types.CallToolResult) -> str:
    """The answer as a transport writes it (`mcp.shared.session.BaseSession._send_response`)."""
    response = types.JSONRPCResponse(
        jsonrpc="2.0", id=1, result=types.ServerResult(result).model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    return types.JSONRPCMessage(response).model_dump_json(by_alias=True, exclude_none=True)


async def profile(processes: int, calls: int, embedder: str) -> list[tuple[str, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="profile-find-"))
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp), "MEMORY_EMBEDDER": embedder}))
    out: list[tuple[str, float]] = []
    try:
        if memory.embedder is not None and memory.embedder.mode != "off":
            memory.embedder.wait_ready(120)
        # Owned as the load bench owns them (`bench.load_sse.preload`): five robots, two per
        # group, and fleet-wide documents; robot-1 (group g-1) sees half of them.
        own = ["robot-1", "robot-2", "robot-3", "robot-4", "robot-5", "shared"]
        docs = [
            docmodel.parse(m).model_copy(update={"robot": own[n % len(own)]})
            for n, m in enumerate(make_documents(processes, seed=SEED))
        ]
        await memory.process_store.restore(docs)
        await memory.fleet.upsert_group(ADMIN, "g-1", customer="profile")
        for robot in ("robot-1", "robot-2"):
            await memory.fleet.register_robot(ADMIN, robot, group="g-1")
        memory.process_store.backfiller.wait_idle(600)
        # Each measured row gets texts of its own (calls + 1 with the warm-up): none is in the
        # cache from an earlier row.
        fresh = iter(range(1_000_000))

        def distinct() -> list[str]:
            start = next(fresh) * (calls + 1)
            return [f"{q}, ticket q{start + i}x" for i, q in enumerate(worst_queries(calls + 1, seed=SEED))]

        repeated = [worst_queries(1, seed=SEED)[0]] * (calls + 1)
        conn = sqlite3.connect(f"file:{tmp / 'index.db'}?mode=ro", uri=True)
        emb = memory.embedder
        if emb is not None and emb.mode != "off":
            qs = distinct()
            out.append(("query embedding, distinct (the model)", _per_call_ms(lambda i: emb.embed([qs[i]]), calls)))
            out.append(
                ("query embedding, repeated (query cache)", _per_call_ms(lambda i: emb.embed_query(repeated[i]), calls))
            )
        qs = distinct()
        parsed = [Query.parse(q) for q in qs]
        out.append(
            (
                "keyword mode: store.search, k=3",
                _per_call_ms(lambda i: keyword_sql.search(conn, parsed[i].phrases, 3, None), calls),
            )
        )
        out.append(
            (
                "keyword mode: keyword_search, k=3",
                _per_call_ms(lambda i: ranking.keyword_search(keyword_sql.Snapshot(conn), parsed[i], 3, None), calls),
            )
        )
        out.append(
            (
                "hybrid: keyword top 50",
                _per_call_ms(lambda i: keyword_sql.keyword_candidates(conn, parsed[i].phrases, 50, None), calls),
            )
        )
        found = await memory.processes.find(ADMIN, qs[0], 3)
        hits = [h.doc for h in found.hits]
        out.append(("rendering the 3 hits", _per_call_ms(lambda _i: [d.render() for d in hits], calls)))
        for who, scope in ((ADMIN, "unscoped"), (Principal.robot("robot-1"), "a robot token")):
            for label, stream in (("distinct", distinct), ("repeated", lambda: repeated)):
                out.append(
                    (
                        f"service find ({found.mode}), {scope}, {label}",
                        await _per_call_ms_async(functools.partial(_find, memory, who, stream()), calls),
                    )
                )
        server = build_server(memory)

        def args(q: str) -> dict[str, Any]:
            return {"query": q, "k": 3}

        for label, stream in (("distinct", distinct), ("repeated", lambda: repeated)):
            out.append(
                (
                    f"server call_tool (service + tool layer), {label}",
                    await _per_call_ms_async(functools.partial(_call, server.call_tool, stream()), calls),
                )
            )
        result = await server.call_tool("find_processes", args(repeated[0]))
        assert isinstance(result, types.CallToolResult)
        out.append(
            ("the answer as JSON (what a transport writes)", _per_call_ms(lambda _i: _response_json(result), calls))
        )
        (tool,) = [t for t in await server.list_tools() if t.name == "find_processes"]
        schema = tool.outputSchema
        out.append(
            (
                "client: result checked against outputSchema (jsonschema)",
                _per_call_ms(lambda _i: jsonschema.validate(result.structuredContent, schema), calls),
            )
        )
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            out.append(("MCP ping, in-memory client", await _per_call_ms_async(lambda _i: client.send_ping(), calls)))
            for label, stream in (("distinct", distinct), ("repeated", lambda: repeated)):
                out.append(
                    (
                        f"MCP find_processes, in-memory client, {label}",
                        await _per_call_ms_async(functools.partial(_call, client.call_tool, stream()), calls),
                    )
                )
    finally:
        memory.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--embedder", default="use")
    args = parser.parse_args(argv)
    logs.configure("warning")
    rows = asyncio.run(profile(args.processes, args.calls, args.embedder))
    lines = ["| part | CPU ms per call |", "|---|---:|", *(f"| {name} | {ms:.2f} |" for name, ms in rows)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
