"""Benchmark: the experience memory's learn throughput and recall latency at 1k and 10k memories.

    python -m bench.bench_experiences [--sizes 1000,10000] [--big] [--queries 200] [--append-doc]

On a fresh ``index.db`` in a temporary directory, with the synthetic robot corpus of
`bench.experience_corpus` (fully determined by the seed):

1. **learn** through the Python API (`RobotMemory.learn`, one call per insight, the way a training
   loop calls it) while filling to each size: throughput over the whole fill and over its last
   10 %, plus `learn_many` (one transaction per 1,000) for bulk loads;
2. **recall** at each size, in-process through the Python API and through the async service (the
   path the MCP tools take: reader pool, event loop), p50/p95 over natural queries: keyword only,
   keyword + ``context_filter``, filter only (no query), and keyword + ``spatial_sort``;
3. the CPU time per call next to the wall time: on a shared machine the wall clock includes
   other processes' time slices, the CPU time does not.

`--big` adds 100,000 memories (bulk-loaded with learn_many, then measured the same way).
Results are a markdown report on stdout; `--append-doc` also appends it to docs/benchmarks.md
under "## Experiences". `run_benchmark` is the importable core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.experience_corpus import QUERIES, Item, corpus
from robot_mcp_memory import logs
from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.tenancy.principal import LOCAL

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
FILTER = {"task.success": True}
RANGE_FILTER = {"task.success": True, "params.grip_force": {"$lt": 10}}


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    cpu_ms: float  # mean CPU time per call (all threads of this process)

    @classmethod
    def of(cls, walls: Sequence[float], cpu_total: float) -> Latency:
        xs = sorted(walls)
        return cls(
            round(statistics.median(xs) * 1000, 3),
            round(xs[min(len(xs) - 1, int(len(xs) * 0.95))] * 1000, 3),
            round(cpu_total / len(xs) * 1000, 3),
        )


@dataclass
class SizeResult:
    size: int
    learn_per_s: float = 0.0
    learn_last10_per_s: float = 0.0
    learn_cpu_us: float = 0.0
    bulk_per_s: float = 0.0
    recall: dict[str, Latency] = field(default_factory=dict)


def _timed(fn: Callable[[int], Any], n: int) -> Latency:
    walls = []
    cpu0 = time.process_time()
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        walls.append(time.perf_counter() - t)
    return Latency.of(walls, time.process_time() - cpu0)


def _learn_loop(mem: RobotMemory, items: Sequence[Item]) -> tuple[float, float, float]:
    """(per second overall, per second over the last 10 %, CPU µs per call)."""
    n = len(items)
    tail = max(1, n // 10)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    t_tail = t0
    for i, it in enumerate(items):
        if i == n - tail:
            t_tail = time.perf_counter()
        mem.learn(it.insight, it.context, collection=it.collection)
    t1 = time.perf_counter()
    cpu = time.process_time() - cpu0
    return n / (t1 - t0), tail / (t1 - t_tail), cpu / n * 1e6


def _recalls(mem: RobotMemory, queries: int) -> dict[str, Latency]:
    qs = QUERIES
    out = {
        "keyword": _timed(lambda i: mem.recall(qs[i % len(qs)]), queries),
        "keyword + filter": _timed(lambda i: mem.recall(qs[i % len(qs)], context_filter=FILTER), queries),
        "keyword + range filter": _timed(lambda i: mem.recall(qs[i % len(qs)], context_filter=RANGE_FILTER), queries),
        "filter only": _timed(lambda i: mem.recall("", context_filter=RANGE_FILTER), max(20, queries // 4)),
        "keyword + spatial": _timed(
            lambda i: mem.recall(qs[i % len(qs)], spatial_sort={"target": [0.5, -0.5, 0.8], "max_distance": 1.5}),
            max(20, queries // 4),
        ),
    }
    return out


def _service_recalls(mem: RobotMemory, queries: int) -> Latency:
    """The async path the MCP tools take: one event loop, reads on the reader pool."""
    svc = mem.memory.experiences

    async def run() -> Latency:
        walls = []
        cpu0 = time.process_time()
        for i in range(queries):
            t = time.perf_counter()
            await svc.recall(LOCAL, QUERIES[i % len(QUERIES)])
            walls.append(time.perf_counter() - t)
        return Latency.of(walls, time.process_time() - cpu0)

    return asyncio.run(run())


def run_benchmark(sizes: Sequence[int], queries: int = 200, big: bool = False) -> list[SizeResult]:
    results: list[SizeResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-exp-") as tmp:
        items = list(corpus(max(sizes)))
        with RobotMemory(Path(tmp) / "loop", robot_id="bench-01") as mem:
            done = 0
            for size in sorted(sizes):
                r = SizeResult(size)
                r.learn_per_s, r.learn_last10_per_s, r.learn_cpu_us = _learn_loop(mem, items[done:size])
                done = size
                mem.memory.index.flush()  # counters settle before reads
                r.recall = _recalls(mem, queries)
                r.recall["keyword (async service)"] = _service_recalls(mem, queries)
                results.append(r)
        for r in results:
            with RobotMemory(Path(tmp) / f"bulk-{r.size}", robot_id="bench-01") as bulk:
                t = time.perf_counter()
                for start in range(0, r.size, 1000):
                    bulk.learn_many([(it.insight, it.context) for it in items[start : min(r.size, start + 1000)]])
                r.bulk_per_s = r.size / (time.perf_counter() - t)
        if big:
            r = SizeResult(100_000)
            with RobotMemory(Path(tmp) / "big", robot_id="bench-01") as bulk:
                t = time.perf_counter()
                batch: list[tuple[str, Any]] = []
                for it in corpus(100_000):
                    batch.append((it.insight, it.context))
                    if len(batch) == 1000:
                        bulk.learn_many(batch)
                        batch = []
                r.bulk_per_s = 100_000 / (time.perf_counter() - t)
                r.learn_per_s, r.learn_last10_per_s, r.learn_cpu_us = _learn_loop(bulk, list(corpus(2000, seed=7)))
                r.recall = _recalls(bulk, queries)
                r.recall["keyword (async service)"] = _service_recalls(bulk, queries)
            results.append(r)
    return results


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return (
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, load average {load[0]:.1f} at start"
    )


def report(results: Sequence[SizeResult], started: str) -> str:
    lines = [
        "## Experiences",
        "",
        f"`python -m bench.bench_experiences` on {started}. Machine: {machine()}.",
        "",
        "Learn (per call through the Python API, the way a training loop calls it; bulk = `learn_many`, "
        "1,000 per transaction):",
        "",
        "| memories | learn/s | learn/s, last 10 % | CPU µs per learn | bulk learn/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.size:,} | {r.learn_per_s:,.0f} | {r.learn_last10_per_s:,.0f} | {r.learn_cpu_us:,.0f} "
            f"| {r.bulk_per_s:,.0f} |"
        )
    lines += [
        "",
        "Recall (wall p50 / p95 in ms, and mean CPU ms per call):",
        "",
        "| memories | recall | p50 ms | p95 ms | CPU ms |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in results:
        for name, lat in r.recall.items():
            lines.append(f"| {r.size:,} | {name} | {lat.p50_ms} | {lat.p95_ms} | {lat.cpu_ms} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--big", action="store_true", help="also measure at 100,000 memories")
    parser.add_argument("--append-doc", action="store_true", help=f"append the report to {DOC}")
    args = parser.parse_args(argv)
    logs.configure("warning")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = run_benchmark([int(s) for s in args.sizes.split(",")], args.queries, args.big)
    text = report(results, started)
    print(text)
    if args.append_doc:
        existing = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Benchmarks\n"
        DOC.write_text(existing.rstrip("\n") + "\n\n" + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
