"""Benchmark: hybrid experience recall (vectors on) at 10k and 100k memories, beside keyword-only.

    python -m bench.bench_recall_hybrid [--sizes 10000,100000] [--real-up-to 10000] [--queries 200]

On a fresh ``index.db`` in a temporary directory, for each size:

1. fills N memories of the robot-shaped corpus (`bench/experience_corpus.py`) through
   ``learn_many`` with the embedder off (fast; the rows, tags and FTS entries as served);
2. gives the first ``--real-up-to`` memories their vectors from the default model (USE, offline,
   batches of 256: the embedding throughput) and the rest **synthetic unit vectors** with the real
   model id (latency does not depend on the values; embedding 100k texts on one core takes
   minutes);
3. reopens with the default embedder and times ``ExperienceService.recall`` (the served path: query
   embedding, keyword list, cosine list within the filters, weighted RRF, rows) over the
   corpus's natural queries, n=5: unfiltered, with a broad ``context_filter`` (task.success) and a
   narrow one (task.name = dock, ~1 memory in 10), each beside the same recall keyword-only; p50 /
   p95 and the process CPU time per recall (all threads);
4. process RSS after loading the vectors.

``--without keyword-cache`` / ``--without vector-matrix`` (repeatable) times the same recalls
again, on the same database, with that accelerator switched off (`Memory.open`'s switches): the
budget's ablation (docs/benchmarks.md).

Numbers are for this machine only; the report says which.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_search import rss_mb
from bench.experience_corpus import QUERIES, corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.tenancy.principal import LOCAL

SEED = 20261129
ACCELERATORS = ("keyword-cache", "vector-matrix")
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "task.success": {"task.success": True},
    "task.name = dock": {"task.name": "dock"},
}


@dataclass(frozen=True)
class Timing:
    p50: float
    p95: float
    cpu: float  # ms of process CPU per call

    @staticmethod
    def of(walls: Sequence[float], cpu_s: float) -> Timing:
        s = sorted(walls)
        return Timing(
            statistics.median(s) * 1000, s[min(len(s) - 1, round(0.95 * (len(s) - 1)))] * 1000, cpu_s * 1000 / len(s)
        )


@dataclass(frozen=True)
class SizeResult:
    size: int
    real: int
    embed_per_s: float | None
    hybrid: dict[str, Timing]
    keyword: dict[str, Timing]
    modes: tuple[str, ...]
    rss_mb: float
    db_mb: float
    accelerators: str = "all on"  # or those left off


async def _fill(data: Path, size: int) -> None:
    memory = Memory.open(
        Settings.from_env({"MEMORY_DATA_DIR": str(data), "ROBOT_ID": "bench-01", "MEMORY_EMBEDDER": "none"})
    )
    try:
        items = list(corpus(size))

        async def go() -> None:
            for coll in ("default", "kitchen-lab"):
                mine = [(it.insight, it.context) for it in items if it.collection == coll]
                for i in range(0, len(mine), 1000):
                    await memory.experiences.learn_many(LOCAL, mine[i : i + 1000], collection=coll)

        await go()
    finally:
        memory.close()


def _rows(c: Any) -> list[tuple[str, str, str]]:
    return [(str(r[0]), r[1], r[2]) for r in c.execute("SELECT id, robot, content FROM memories ORDER BY id")]


def _insert_vectors(c: Any, model_id: str, chunk: tuple[list[str], Any]) -> None:
    for ref, vec in zip(*chunk, strict=True):
        vectorstore.upsert(c, "memory", ref, model_id, vec)


async def _time(svc: ExperienceService, queries: Sequence[str], flt: dict[str, Any] | None) -> tuple[Timing, set[str]]:
    walls: list[float] = []
    modes: set[str] = set()
    cpu0 = time.process_time()
    for q in queries:
        t = time.perf_counter()
        got = await svc.recall(LOCAL, q, n=5, context_filter=flt)
        walls.append(time.perf_counter() - t)
        modes.add(got.mode)
    return Timing.of(walls, time.process_time() - cpu0), modes


async def run_size(
    size: int, real_up_to: int, n_queries: int, tmp: Path, configs: Sequence[frozenset[str]] = (frozenset(),)
) -> list[SizeResult]:
    """Fill, embed, then time the recalls once per configuration (the accelerators each leaves
    off), each on the same database opened afresh."""
    data = tmp / f"n{size}"
    await _fill(data, size)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), "ROBOT_ID": "bench-01", "MEMORY_EMBEDDER": "use"})
    memory = Memory.open(settings, backfill=False)  # the vectors come from here, not a backfill
    try:
        emb = memory.embedder
        assert emb is not None
        assert emb.wait_ready(120), "the default model did not load"
        model_id = emb.model_id
        assert model_id is not None
        rows = memory.index.read_blocking(_rows)
        real = min(size, real_up_to)
        t = time.perf_counter()
        parts = [emb.embed([r[2] for r in rows[i : min(i + 256, real)]]) for i in range(0, real, 256)]
        embed_s = time.perf_counter() - t
        made = np.concatenate([p for p in parts if p is not None]) if real else np.zeros((0, emb.dim), np.float32)
        synthetic = np.random.default_rng(SEED).standard_normal((size - real, emb.dim)).astype(np.float32)
        synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
        vectors = np.concatenate([made, synthetic]) if size > real else made
        refs = [r[0] for r in rows]
        for i in range(0, size, 5000):
            chunk = (refs[i : i + 5000], vectors[i : i + 5000])
            memory.index.write_blocking(functools.partial(_insert_vectors, model_id=model_id, chunk=chunk))
        del rows, parts, made, synthetic, vectors, refs
    finally:
        memory.close()
    gc.collect()
    out = []
    for without in configs:
        memory = Memory.open(
            settings,
            backfill=False,
            keyword_cache="keyword-cache" not in without,
            vector_matrix="vector-matrix" not in without,
        )
        try:
            assert memory.embedder is not None
            assert memory.embedder.wait_ready(120), "the default model did not load"
            svc = memory.experiences
            keyword_only = ExperienceService(svc.store, svc.policy, default_robot="bench-01")
            rng = random.Random(SEED + size)
            queries = [rng.choice(QUERIES) for _ in range(n_queries)]
            for q in queries[:10]:  # warm up: loads the cached matrix, the statement cache
                await svc.recall(LOCAL, q, n=5)
            rss = rss_mb()
            hybrid, keyword, modes = {}, {}, set()
            for name, flt in FILTERS.items():
                hybrid[name], m = await _time(svc, queries, flt)
                modes |= m
                keyword[name], _ = await _time(keyword_only, queries, flt)
            out.append(
                SizeResult(
                    size,
                    real,
                    real / embed_s if real else None,
                    hybrid,
                    keyword,
                    tuple(sorted(modes)),
                    rss,
                    settings.index_path.stat().st_size / 2**20,
                    ", ".join(f"no {w.replace('-', ' ')}" for w in sorted(without)) or "all on",
                )
            )
        finally:
            memory.close()
    return out


def report(results: Sequence[SizeResult], n_queries: int, command: str) -> str:
    cpu = platform.processor() or platform.machine()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"`{command}`. Machine: {os.cpu_count()} CPUs ({cpu}), load average at the end {load}, Python "
        f"{platform.python_version()}, numpy {np.__version__}; embedder USE-multilingual-v3 (512-d); {n_queries} "
        "recalls per row, n=5, in-process through `ExperienceService.recall` (no MCP framing).",
        "",
        "| memories | accelerators | vectors (real + synthetic) | filter | hybrid p50 / p95 | CPU per recall "
        "| keyword-only p50 / p95 "
        "| CPU per recall | RSS | index.db |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for name in FILTERS:
            h, k = r.hybrid[name], r.keyword[name]
            lines.append(
                f"| {r.size:,} | {r.accelerators} | {r.real:,} + {r.size - r.real:,} | {name} | "
                f"{h.p50:.2f} / {h.p95:.2f} ms | "
                f"{h.cpu:.2f} ms | {k.p50:.2f} / {k.p95:.2f} ms | {k.cpu:.2f} ms | {r.rss_mb:.0f} MB | "
                f"{r.db_mb:.0f} MB |"
            )
    lines.append("")
    for r in results:
        lines.append(f"- {r.size:,}, {r.accelerators}: recall modes seen {', '.join(r.modes)}")
        if r.embed_per_s:
            lines.append(f"  embedding throughput (batches of 256, one process): {r.embed_per_s:.0f} memories/s")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[SizeResult]:
    results: list[SizeResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            configs = [frozenset()] + [frozenset([w]) for w in args.without]
            results += await run_size(size, args.real_up_to, args.queries, Path(tmp), configs)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="hybrid experience recall latency beside keyword-only, RSS")
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--real-up-to", type=int, default=10_000, help="memories embedded with the real model")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument(
        "--without",
        action="append",
        default=[],
        choices=ACCELERATORS,
        help="also time the recalls with this accelerator off (repeatable)",
    )
    args = p.parse_args(argv)
    logs.configure("warning")
    results = asyncio.run(main_async(args))
    command = "python -m bench.bench_recall_hybrid " + " ".join(argv if argv is not None else sys.argv[1:])
    print(report(results, args.queries, command.strip()))


if __name__ == "__main__":
    main()
