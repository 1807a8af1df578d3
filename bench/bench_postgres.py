"""Benchmark: the PostgreSQL adapters beside SQLite's, per call, with the server's CPU from /proc.

    python -m bench.bench_postgres [--docs 1000] [--queries 100] [--outcomes 200] [--lessons 200]

Starts a throwaway PostgreSQL cluster (tests/pgcluster.py: the image's binaries, fsync off), fills
a fresh schema and a fresh ``index.db`` with the same synthetic process documents
(`bench_processes.make_documents`), and times through each repository (no MCP, no service):
``save`` while filling, the PostgreSQL posting cache's cold load (a fresh
`processes.postgres.postings.PostingCache` reading every process's postings in one snapshot, once
per size), keyword ``find`` (k = 3; one untimed find first on each backend, so the figures are a
warm cache's — its load is the row before), hybrid ``find_hybrid`` (k = 3; the hashing
embedder, vectors filled by ``reembed`` after the saves, so the save figures stay keyword-only),
``record_outcome`` without a note, and ``lessons.record``. For each it reports wall p50 (the
machine is shared: read the CPU columns), this process's CPU per call, and — PostgreSQL only —
the CPU the cluster's server processes spent per call, read from ``/proc/<pid>/stat`` before and
after. SQLite runs inside this process, so its whole cost is in the client column.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

from tests.pgcluster import Cluster

from bench.bench_processes import make_documents, make_queries
from robot_mcp_memory import logs
from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.lessons.sqlite.store import ParamStore
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.postgres.postings import PostingCache
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.embedders import HashingEmbedder
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.storage.sqlite import index_db

TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu(cluster: Cluster) -> float:
    """CPU seconds (user + system) of every process of the cluster so far."""
    pid_file = cluster.data / "postmaster.pid"
    root = int(pid_file.read_text().split()[0])
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        if pid == root or ppid == root:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


async def timed(
    calls: Sequence[Callable[[], Awaitable[object]]], cluster: Cluster | None
) -> tuple[float, float, float | None]:
    """(wall p50 ms, client CPU ms per call, server CPU ms per call or None)."""
    walls = []
    cpu0, srv0 = time.process_time(), server_cpu(cluster) if cluster else 0.0
    for call in calls:
        t = time.perf_counter()
        await call()
        walls.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu0) / len(calls) * 1000
    srv = (server_cpu(cluster) - srv0) / len(calls) * 1000 if cluster else None
    return statistics.median(walls) * 1000, cpu, srv


async def run(
    args: argparse.Namespace, cluster: Cluster, work: Path
) -> list[tuple[str, str, tuple[float, float, float | None]]]:
    docs = [docmodel.parse(text) for text in make_documents(args.docs)]
    queries = make_queries(args.queries)
    lite_db = index_db.open_index(work / "index.db")
    pg_db = PostgresStore.open(cluster.url(), schema=f"bench_{uuid.uuid4().hex[:8]}", max_size=2)
    lite, pg = ProcessStore(lite_db), PostgresProcesses(pg_db)
    lite_lessons, pg_lessons = ParamStore(work / "lessons.db"), PostgresLessons(pg_db)
    out: list[tuple[str, str, tuple[float, float, float | None]]] = []
    ids = [d.id for d in docs]
    try:
        for name, repo, srv in (("sqlite", lite, None), ("postgres", pg, cluster)):
            saves = [partial(repo.save, d) for d in docs]
            out.append((f"save (fill to {args.docs})", name, await timed(saves, srv)))
            if name == "postgres":
                cold = [partial(pg_db.read, lambda c: PostingCache().score(c, [("the",)]))] * 3
                out.append((f"posting cache cold load, {args.docs} docs", name, await timed(cold, srv)))
            await repo.find(Query.parse(queries[0]), 3)  # the posting cache loads (untimed)
            finds = [partial(repo.find, Query.parse(q), 3) for q in queries]
            out.append((f"find, keyword, k=3, {args.docs} docs", name, await timed(finds, srv)))
            repo.embedder = ResilientEmbedder(HashingEmbedder(), background=False)
            repo.embedder.start()
            await repo.reembed()
            for q in queries:  # query vectors made once, outside the timing, on both backends alike
                repo.embedder.embed_query(q)
            hybrid = [partial(repo.find_hybrid, Query.parse(q), 3) for q in queries]
            out.append((f"find_hybrid, hashing embedder, k=3, {args.docs} docs", name, await timed(hybrid, srv)))
            repo.embedder = None
            outcomes = [partial(repo.record_outcome, ids[n % len(ids)], n % 3 != 0) for n in range(args.outcomes)]
            out.append(("record_outcome, no note", name, await timed(outcomes, srv)))
        for name, store, srv in (("sqlite", lite_lessons, None), ("postgres", pg_lessons, cluster)):
            reports = [
                partial(store.record, "group:g", f"grasp/{n % 20}", "", {"force": 0.3}, n % 4 != 0, "rap-1")
                for n in range(args.lessons)
            ]
            out.append(("lessons.record", name, await timed(reports, srv)))
    finally:
        lite.close()
        lite_lessons.close()
        lite_db.close()
        pg_db.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--outcomes", type=int, default=200)
    parser.add_argument("--lessons", type=int, default=200)
    args = parser.parse_args(argv)
    logs.configure("warning")
    with Cluster.running() as cluster, tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(run(args, cluster, Path(tmp)))
    print("| call | backend | wall p50 ms (shared machine) | client CPU ms/call | server CPU ms/call |")
    print("|---|---|---:|---:|---:|")
    for what, backend, (wall, cpu, srv) in rows:
        print(f"| {what} | {backend} | {wall:.2f} | {cpu:.2f} | {'—' if srv is None else f'{srv:.2f}'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
