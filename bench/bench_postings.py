"""Benchmark: the processes' posting cache against FTS5, for a find's keyword leg.

    python -m bench.bench_postings [--sizes 1000,10000] [--queries 200]

On a fresh ``index.db`` per size (`bench.bench_search`'s corpus: short documents, four robots and
``shared``; and its queries), one read-only connection, each query in its own read transaction:

1. the cache's cold start: reading and tokenizing every process (wall and CPU), the RSS it adds;
2. the keyword leg of a hybrid find (`Snapshot.phrase_counts` + `keyword_relevant`, top 50) and
   keyword mode's list (`keyword_top`, k = 3, a group's tenant view), each unscoped and scoped to
   one robot and ``shared``, through SQL (`Snapshot` without the cache) and through the cache:
   CPU per query (process time), median of three interleaved passes;
3. what one save costs the next find: a document saved (through SQL, as a writer does), then
   the next query's CPU above a query with nothing to patch.

The ``worst`` queries (`bench.load_sse.worst_queries` on `bench.bench_processes`' corpus, every
query matching nearly every document) are run too at 1,000 documents. Results are a markdown
table on stdout; docs/benchmarks.md carries the current figures.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from bench.bench_processes import SEED, make_documents
from bench.bench_search import corpus, queries, rss_mb
from bench.load_sse import worst_queries
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite import search as sql
from robot_mcp_memory.processes.sqlite import store
from robot_mcp_memory.processes.sqlite.postings import PostingCache
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.storage.sqlite import index_db as db

SCOPE = frozenset({"rap-1", "shared"})
TENANT = "group:g-1"


def _filled(path: Path, docs: Sequence[ProcessDoc]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for step in db.MIGRATIONS:
        step(conn)
    conn.execute("BEGIN")
    for d in docs:
        store.upsert(conn, d, index=False)
    store.rebuild_index(conn)
    conn.execute("COMMIT")
    conn.close()


def _cpu_per_call(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection, int], object], n: int) -> float:
    """CPU ms per call of `fn(conn, i)`, each in its own read transaction."""
    started = time.process_time()
    for i in range(n):
        conn.execute("BEGIN")
        fn(conn, i)
        conn.execute("COMMIT")
    return (time.process_time() - started) / n * 1000


def _leg(cache: PostingCache | None, parsed: Sequence[Query], visible: Collection[str] | None) -> Callable[..., object]:
    def run(conn: sqlite3.Connection, i: int) -> object:
        snap = sql.Snapshot(conn, None, cache)
        q = parsed[i % len(parsed)]
        counted = snap.phrase_counts(q.phrases)
        return snap.keyword_relevant(q.phrases, counted, 50, visible)

    return run


def _top(cache: PostingCache | None, parsed: Sequence[Query], visible: Collection[str] | None) -> Callable[..., object]:
    def run(conn: sqlite3.Connection, i: int) -> object:
        snap = sql.Snapshot(conn, None, cache)
        q = parsed[i % len(parsed)]
        return snap.keyword_top(q.phrases, snap.phrase_counts(q.phrases), 3, visible, TENANT)

    return run


def measure(label: str, docs: Sequence[ProcessDoc], texts: Sequence[str], tmp: Path) -> list[str]:
    path = tmp / f"{label}.db"
    _filled(path, docs)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    parsed = [Query.parse(t) for t in texts]
    cache = PostingCache()
    before, wall, cpu = rss_mb(), time.perf_counter(), time.process_time()
    conn.execute("BEGIN")
    assert cache.score(conn, parsed[0].phrases) is not None, "the cache did not answer"
    conn.execute("COMMIT")
    wall, cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
    added = rss_mb() - before
    cold = f"{wall:,.0f} ms wall, {cpu:,.0f} ms CPU, +{added:,.0f} MB RSS"
    rows = [f"| {label} | cold start: every process read and tokenized | {cold} | |"]
    n = len(parsed)
    for name, make in (("keyword leg (counts + top 50)", _leg), ("keyword mode list (k = 3, a group's view)", _top)):
        for scope, visible in (("unscoped", None), ("one robot + shared", SCOPE)):
            passes: dict[str, list[float]] = {"sql": [], "cache": []}
            for _ in range(3):
                passes["sql"].append(_cpu_per_call(conn, make(None, parsed, visible), n))
                passes["cache"].append(_cpu_per_call(conn, make(cache, parsed, visible), n))
            s, c = statistics.median(passes["sql"]), statistics.median(passes["cache"])
            rows.append(
                f"| {label} | {name}, {scope}: SQL → cache, CPU per query | {s:.2f} → {c:.2f} ms | {s / c:.1f}× |"
            )
    # One save, then the next query patches it in.
    writer = sqlite3.connect(path, isolation_level=None)
    rng = random.Random(SEED)
    quiet = _cpu_per_call(conn, _leg(cache, parsed, None), n)
    patched = []
    for i in range(50):
        writer.execute("BEGIN")
        store.upsert(writer, docs[rng.randrange(len(docs))].model_copy(update={"title": f"renamed {i}"}))
        writer.execute("COMMIT")
        patched.append(_cpu_per_call(conn, _leg(cache, parsed[i:], None), 1))
    writer.close()
    extra = statistics.median(patched) - quiet
    rows.append(f"| {label} | the first find after a save: CPU above a find with nothing to patch | {extra:.2f} ms | |")
    assert cache.loads == 1, "a save made the cache read everything again"
    conn.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-postings-"))
    lines = ["| corpus | measure | figure | ratio |", "|---|---|---:|---:|"]
    worst = [docmodel.parse(m) for m in make_documents(1000, seed=SEED)]
    own = ("rap-1", "rap-2", "rap-3", "shared")
    worst = [d.model_copy(update={"robot": own[n % len(own)]}) for n, d in enumerate(worst)]
    lines += measure("worst, 1,000", worst, worst_queries(args.queries, seed=SEED), tmp)
    for size in sizes:
        rng = random.Random(SEED)
        lines += measure(f"search, {size:,}", corpus(size, rng), queries(args.queries, random.Random(SEED + 1)), tmp)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
