"""Benchmark: the experience memory on PostgreSQL beside SQLite, per call, with the server's CPU from /proc.

    python -m bench.bench_postgres_experiences [--memories 2000] [--queries 100] [--hybrid]

Starts a throwaway PostgreSQL cluster (tests/pgcluster.py: the image's binaries, fsync off) and
learns the same synthetic memories (`experience_corpus.corpus`) through `ExperienceService` into a
fresh schema (`PostgresMemories`) and a fresh data directory (the SQLite adapter), then recalls
the same queries — keyword, keyword under a context filter, filter only — n = 10. For each it
reports wall p50 (the machine is shared: read the CPU columns), this process's CPU per call and —
PostgreSQL only — the cluster's CPU per call (`bench_postgres.server_cpu`). SQLite runs inside
this process, so its whole cost is in the client column.

With ``--hybrid`` the memories are learned with their vectors (the hashing embedder, 256 d: the
cost measured is the plan's, not a model's) and a hybrid recall row is added; each backend ranks
by its own vector adapter (`MemoryVectorIndex`, `PostgresMemoryVectors`).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from tests.pgcluster import Cluster

from bench.bench_postgres import timed
from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.ports import MemoryVectors
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.postgres.vectors import PostgresMemoryVectors
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal

ROBOT = Principal.robot("r1")


class _Alone:
    def group_mates(self, robot_id: str) -> frozenset[str]:
        return frozenset({robot_id})

    def group_of(self, robot_id: str) -> str | None:
        return None


async def run(
    args: argparse.Namespace, cluster: Cluster, work: Path
) -> list[tuple[str, str, tuple[float, float, float | None]]]:
    items = list(corpus(args.memories, seed=3))
    queries = [it.insight.split(":")[0][:48] for it in items[: args.queries]]
    env = {"MEMORY_DATA_DIR": str(work)} | ({"MEMORY_EMBEDDER": "hashing"} if args.hybrid else {})
    memory = Memory.open(Settings.from_env(env))
    pg_db = PostgresStore.open(cluster.url(), schema=f"bench_{uuid.uuid4().hex[:8]}", max_size=2)
    pg = PostgresMemories(pg_db)
    lite_vectors: MemoryVectors | None = None
    pg_vectors: MemoryVectors | None = None
    if args.hybrid:
        if memory.embedder is None or not memory.embedder.wait_settled(30):
            raise SystemExit("the hashing embedder did not start")
        lite_vectors = memory.experiences.vectors
        pg_vectors = PostgresMemoryVectors(pg_db, memory.embedder)
    out: list[tuple[str, str, tuple[float, float, float | None]]] = []
    try:
        backends = (("sqlite", memory.memories, lite_vectors, None), ("postgres", pg, pg_vectors, cluster))
        for name, repo, vectors, srv in backends:
            svc = ExperienceService(repo, Policy(_Alone()), default_robot="r1")
            learner = ExperienceService(repo, Policy(_Alone()), default_robot="r1", vectors=vectors)
            learns = [partial(learner.learn, ROBOT, it.insight, it.context, it.collection) for it in items]
            out.append((f"learn (fill to {args.memories})", name, await timed(learns, srv)))
            if vectors is not None:
                hybrid = [partial(learner.recall, ROBOT, q, 10) for q in queries]
                out.append(("recall, hybrid, n=10", name, await timed(hybrid, srv)))
            keyword = [partial(svc.recall, ROBOT, q, 10) for q in queries]
            out.append(("recall, keyword, n=10", name, await timed(keyword, srv)))
            success = {"task.success": True}
            filtered = [partial(svc.recall, ROBOT, q, 10, context_filter=success) for q in queries]
            out.append(("recall, keyword + context_filter", name, await timed(filtered, srv)))
            only = [partial(svc.recall, ROBOT, "", 10, context_filter={"robot.type": "ur5e"}) for _ in queries]
            out.append(("recall, filter only", name, await timed(only, srv)))
    finally:
        close = getattr(pg_vectors, "close", None)
        if close is not None:
            close()  # its background backfill
        pg.close()
        pg_db.close()
        memory.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--hybrid", action="store_true", help="learn with vectors and add a hybrid recall row")
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
