"""Where one find_processes spends its CPU, in-process, on a corpus where every query matches
every document (the worst case of `bench.load_sse --corpus worst`).

    python -m bench.profile_find [--processes 1000] [--calls 60] [--embedder use|none|hashing]

Prints process CPU time per call (all threads: the figure a shared machine disturbs least) of
each part, measured one after another on one store: the query embedding, the keyword search
(keyword mode's `store.search`; hybrid's keyword top 50), rendering the hits, and the whole tool
call through the in-memory MCP client (client side included), beside a ping over the same client.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from mcp.shared.memory import create_connected_server_and_client_session

from bench.bench_processes import make_documents
from bench.load_sse import SEED, worst_queries
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.sqlite import store
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import ADMIN


def _per_call_ms(fn: Callable[[int], object], calls: int) -> float:
    fn(0)
    started = time.process_time()
    for i in range(calls):
        fn(i)
    return (time.process_time() - started) / calls * 1000


async def _per_call_ms_async(fn: Callable[[int], Awaitable[object]], calls: int) -> float:
    await fn(0)
    started = time.process_time()
    for i in range(calls):
        await fn(i)
    return (time.process_time() - started) / calls * 1000


async def profile(processes: int, calls: int, embedder: str) -> list[tuple[str, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="profile-find-"))
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp), "MEMORY_EMBEDDER": embedder}))
    out: list[tuple[str, float]] = []
    try:
        if memory.embedder is not None and memory.embedder.mode != "off":
            memory.embedder.wait_ready(120)
        docs = [docmodel.parse(m) for m in make_documents(processes, seed=SEED)]
        await memory.process_store.restore(docs)
        memory.process_store.backfiller.wait_idle(600)
        queries = worst_queries(calls, seed=SEED)
        conn = sqlite3.connect(f"file:{tmp / 'index.db'}?mode=ro", uri=True)
        emb = memory.embedder
        if emb is not None and emb.mode != "off":
            out.append(("query embedding", _per_call_ms(lambda i: emb.embed([queries[i]]), calls)))
        out.append(
            ("keyword mode: store.search, k=3", _per_call_ms(lambda i: store.search(conn, queries[i], 3, None), calls))
        )
        out.append(
            (
                "hybrid: keyword top 50",
                _per_call_ms(lambda i: store.keyword_candidates(conn, queries[i], 50, None), calls),
            )
        )
        found = await memory.processes.find(ADMIN, queries[0], 3)
        hits = [h.doc for h in found.hits]
        out.append(("rendering the 3 hits", _per_call_ms(lambda _i: [d.render() for d in hits], calls)))
        out.append(
            (
                f"service find ({found.mode})",
                await _per_call_ms_async(lambda i: memory.processes.find(ADMIN, queries[i], 3), calls),
            )
        )
        server = build_server(memory)
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            out.append(("MCP ping, in-memory client", await _per_call_ms_async(lambda _i: client.send_ping(), calls)))
            out.append(
                (
                    "MCP find_processes, in-memory client",
                    await _per_call_ms_async(
                        lambda i: client.call_tool("find_processes", {"query": queries[i], "k": 3}), calls
                    ),
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
