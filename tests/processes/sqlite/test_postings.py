"""The processes' posting cache (`processes.sqlite.postings`) answers a find's keyword leg exactly
as a plain join over every match ranks — the same ids, the same order, the very same doubles —
through every kind of write, from any connection, or it does not answer and SQL ranks."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Phrases
from robot_mcp_memory.processes.sqlite import postings, store
from robot_mcp_memory.processes.sqlite import search as sql
from robot_mcp_memory.processes.sqlite.postings import PostingCache
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.postings import PostingIndex
from robot_mcp_memory.storage.sqlite import index_db as db

WORDS = ("fetch", "deliver", "parcel", "mailroom", "kitchen", "door", "left", "right", "red", "blue", "the", "floor")
EXTRA = ("1.2.10", "12.5", "v2", "取包裹", "收发室", "error E-42", "open the door")
ROBOTS = ("rap-1", "rap-2", "g1", "shared", "rare")
TENANTS = (None, "group:g-1", "group:g-2")
QUERIES = (
    "fetch the red parcel",
    "the",
    "deliver to the kitchen left",
    "open the door",
    "right door floor",
    "zebra",
    "deliver 12.5 to floor 1.2.10",
    "1.2.10",
    "收发室 取包裹",
    "error E-42",
    "mailroom mailroom parcel",
)
VISIBLE: tuple[frozenset[str] | None, ...] = (
    None,
    frozenset({"rap-1"}),
    frozenset({"rap-1", "shared"}),
    frozenset({"rare"}),
    frozenset({"nobody"}),
    frozenset(),
)


def migrated(conn: sqlite3.Connection) -> sqlite3.Connection:
    for step in db.MIGRATIONS:
        step(conn)
    return conn


def random_doc(rng: random.Random, pid: str) -> ProcessDoc:
    words = rng.choices(WORDS, k=rng.randint(1, 8))
    extra = [rng.choice(EXTRA)] if rng.random() < 0.4 else []
    return ProcessDoc(
        id=pid,
        title=" ".join(words[:3]),
        task_pattern=" ".join(rng.choices(WORDS, k=rng.randint(0, 3))),
        tags=tuple(rng.sample(WORDS, rng.randint(0, 2))),
        body=" ".join(words + extra) + "\n",
        robot=rng.choice(ROBOTS),
        created="2026-01-01T00:00:00Z",
        updated="2026-01-01T00:00:00Z",
        success_count=rng.choice((0, 0, 1, 3, 9)),
        failure_count=rng.choice((0, 0, 1, 2)),
    )


def filled(seed: int, n: int) -> tuple[sqlite3.Connection, random.Random]:
    """A migrated index in memory holding `n` random documents d0, d1, …, and the generator
    that drew them (to draw more)."""
    conn = migrated(sqlite3.connect(":memory:", isolation_level=None))
    rng = random.Random(seed)
    for i in range(n):
        store.upsert(conn, random_doc(rng, f"d{i}"))
    return conn, rng


def plain_join(
    conn: sqlite3.Connection,
    phrases: Phrases,
    n: int,
    visible: Collection[str] | None,
    tenant: str | None = None,
    *,
    reliability: bool,
) -> list[tuple[str, float]]:
    """(id, relevance) of every visible match joined to its row: the `n` best by relevance, or by
    relevance × the tenant's reliability (`reliability`), then id."""
    expr = fts.any_of(phrases)
    if expr is None:
        return []
    where, params = sql.visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in ranking.BM25_WEIGHTS)
    succ, fail, others, join, oargs = sql._tenant_counts_sql(tenant)
    order = f"relevance * ({succ} + 1.0) / ({succ} + {fail} + 2.0)" if reliability else "relevance"
    rows = conn.execute(
        f"{'WITH ' + others + ' ' if others else ''}"  # noqa: S608
        f"SELECT p.id, -bm25(processes_fts, {w}) AS relevance FROM processes_fts "
        f"JOIN processes p ON p.id = processes_fts.id{join} WHERE processes_fts MATCH ? AND {where} "
        f"ORDER BY {order} DESC, p.id LIMIT ?",
        [*oargs, expr, *params, n],
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def plain_relevant(
    conn: sqlite3.Connection, phrases: Phrases, n: int, visible: Collection[str] | None
) -> list[tuple[str, float]]:
    return plain_join(conn, phrases, n, visible, reliability=False)


def plain_top(
    conn: sqlite3.Connection, phrases: Phrases, k: int, visible: Collection[str] | None, tenant: str | None
) -> list[tuple[str, float]]:
    return plain_join(conn, phrases, k, visible, tenant, reliability=True)


def assert_cache_answers_as_sql(conn: sqlite3.Connection, cache: PostingCache) -> None:
    every = [pid for (pid,) in conn.execute("SELECT id FROM processes")] + ["no-such-doc"]
    for query in QUERIES:
        phrases = tuple(fts.phrases(query))
        counts = sql.phrase_counts(conn, phrases)
        snap = sql.Snapshot(conn, None, cache)
        assert cache.score(conn, phrases) is not None, query
        assert snap.phrase_counts(phrases) == counts, query
        assert snap.agreement_texts(every) == sql.select_agreement_texts(conn, every)  # from the cache now
        for visible in VISIBLE:
            for n in (1, 3, 50):
                assert snap.keyword_relevant(phrases, None, n, visible) == plain_relevant(conn, phrases, n, visible)
            for k in (1, 3, 10):
                for tenant in TENANTS:
                    got = [(h.doc.id, h.relevance) for h in snap.keyword_top(phrases, None, k, visible, tenant)]
                    assert got == plain_top(conn, phrases, k, visible, tenant), (query, visible, k, tenant)


def write_round(conn: sqlite3.Connection, rng: random.Random, ids: list[str], fresh: Iterator[int]) -> None:
    """Random writes of every kind, in one transaction, through SQL as any process would."""
    conn.execute("BEGIN")
    for _ in range(rng.randint(5, 40)):
        kind = rng.random()
        if kind < 0.3 or not ids:
            pid = f"doc-{next(fresh):05d}"
            ids.append(pid)
            store.upsert(conn, random_doc(rng, pid))
        elif kind < 0.55:  # new text, same id
            store.upsert(conn, random_doc(rng, rng.choice(ids)))
        elif kind < 0.6:  # another title only (an agreement text changes, the index entry too)
            conn.execute("UPDATE processes SET title = ? WHERE id = ?", (rng.choice(WORDS), rng.choice(ids)))
        elif kind < 0.65:  # another owner only
            conn.execute("UPDATE processes SET robot = ? WHERE id = ?", (rng.choice(ROBOTS), rng.choice(ids)))
        elif kind < 0.75:
            pid = ids.pop(rng.randrange(len(ids)))
            store.delete_doc(conn, pid)
        elif kind < 0.9:  # outcomes: counters, none of the cache's business
            pid = rng.choice(ids)
            conn.execute("UPDATE processes SET success_count = success_count + 1 WHERE id = ?", (pid,))
            conn.execute(
                "INSERT INTO process_tenant_counts(process_id, tenant, success_count, failure_count) "
                "VALUES (?, ?, 0, 1) ON CONFLICT(process_id, tenant) DO UPDATE SET failure_count = failure_count + 1",
                (pid, rng.choice(TENANTS[1:])),
            )
            conn.execute("UPDATE processes SET failure_count = failure_count + 1 WHERE id = ?", (pid,))
        else:  # an id renamed in place
            old = rng.choice(ids)
            new = f"doc-{next(fresh):05d}"
            conn.execute("UPDATE processes SET id = ? WHERE id = ?", (new, old))
            ids[ids.index(old)] = new
            # the index entry still names the old id: written again, as a save would
            store._index(conn, store.select_one(conn, new))  # type: ignore[arg-type]
    conn.execute("COMMIT")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_cache_ranks_exactly_as_a_plain_join_through_every_kind_of_write(seed: int) -> None:
    rng = random.Random(seed)
    conn = migrated(sqlite3.connect(":memory:", isolation_level=None))
    fresh = iter(range(1_000_000))
    ids: list[str] = []
    for _ in range(6):
        write_round(conn, rng, ids, fresh)  # ~150 documents, with ties (a small vocabulary)
    cache = PostingCache()
    assert cache.enabled
    assert_cache_answers_as_sql(conn, cache)
    assert cache.loads == 1
    for _ in range(4):
        write_round(conn, rng, ids, fresh)
        assert_cache_answers_as_sql(conn, cache)
    assert cache.loads == 1  # every change since was patched in, none read again


def test_an_unchanged_store_is_not_read_again_and_outcomes_change_nothing_in_it() -> None:
    conn, _rng = filled(5, 50)
    cache = PostingCache()
    phrases = tuple(fts.phrases("fetch the parcel"))
    assert cache.score(conn, phrases) is not None
    (before,) = conn.execute("SELECT count(*) FROM process_index_log").fetchone()
    store.add_outcome(conn, "d1", True, "ok", "2026-01-02T00:00:00Z")
    (after,) = conn.execute("SELECT count(*) FROM process_index_log").fetchone()
    assert after == before  # an outcome logs nothing
    assert cache.score(conn, phrases) is not None
    assert cache.loads == 1


def test_many_changes_at_once_read_everything_again_and_still_rank_as_sql() -> None:
    conn, _rng = filled(9, 100)
    cache = PostingCache(max_batch=10)
    assert_cache_answers_as_sql(conn, cache)
    conn.execute("BEGIN")
    db.rebuild_process_index(conn)  # every row's entry written again: all logged
    conn.execute("COMMIT")
    assert_cache_answers_as_sql(conn, cache)
    assert cache.loads == 2


def test_a_log_trimmed_past_the_cache_reads_everything_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "KEEP_CHANGES", 20)
    monkeypatch.setattr(postings, "TRIM_EVERY", 5)
    conn, rng = filled(11, 40)
    cache = PostingCache(max_batch=1000)
    assert_cache_answers_as_sql(conn, cache)
    for i in range(40):  # more than the log keeps: the cache's place is trimmed away
        store.upsert(conn, random_doc(rng, f"d{i % 7}"))
    (oldest,) = conn.execute("SELECT min(seq) FROM process_index_log").fetchone()
    assert oldest > 100
    assert_cache_answers_as_sql(conn, cache)
    assert cache.loads == 2


def test_a_snapshot_older_than_the_cache_ranks_in_sql(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    writer = migrated(sqlite3.connect(path, isolation_level=None))
    writer.execute("PRAGMA journal_mode=WAL")
    rng = random.Random(13)
    for i in range(60):
        store.upsert(writer, random_doc(rng, f"d{i}"))
    old = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    new = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    cache = PostingCache()
    phrases = tuple(fts.phrases("deliver the red parcel"))
    old.execute("BEGIN")
    before = plain_relevant(old, phrases, 50, None)  # the old snapshot starts here
    for i in range(20):
        store.upsert(writer, random_doc(rng, f"new{i}"))
    assert cache.score(new, phrases) is not None  # the cache moves to the newer snapshot
    assert cache.score(old, phrases) is None  # and cannot answer for the older one
    snap = sql.Snapshot(old, None, cache)
    got = snap.keyword_relevant(phrases, None, 50, None)  # SQL, in the old snapshot
    # (its plans agree with the plain join to 12 significant digits: tests/search/test_keyword.py)
    assert [pid for pid, _ in got] == [pid for pid, _ in before]
    assert [r for _, r in got] == pytest.approx([r for _, r in before], rel=1e-12)
    old.execute("COMMIT")
    assert cache.loads == 1


def test_an_index_entry_written_by_hand_turns_the_cache_off_until_the_next_write() -> None:
    conn, rng = filled(17, 30)
    conn.execute("INSERT INTO processes_fts(id, title, task_pattern, tags, body) VALUES ('ghost', 'red', '', '', '')")
    cache = PostingCache()
    phrases = tuple(fts.phrases("red parcel"))
    assert cache.score(conn, phrases) is None  # FTS5 counts an entry the cache would not
    snap = sql.Snapshot(conn, None, cache)
    assert snap.keyword_relevant(phrases, None, 10, None) == sql.keyword_candidates(conn, phrases, 10, None)
    conn.execute("DELETE FROM processes_fts WHERE id = 'ghost'")
    store.upsert(conn, random_doc(rng, "d1"))  # a write: the mirror is checked again
    assert cache.score(conn, phrases) is not None


def test_dead_entries_are_compacted_away_and_scores_stay_exact() -> None:
    conn, rng = filled(19, 40)
    cache = PostingCache(max_batch=2000)
    assert_cache_answers_as_sql(conn, cache)
    for round_ in range(30):  # 1,200 replacements: more dead slots than the compaction threshold
        conn.execute("BEGIN")
        for i in range(40):
            store.upsert(conn, random_doc(rng, f"d{i}"))
        conn.execute("COMMIT")
        if round_ % 10 == 9:
            assert_cache_answers_as_sql(conn, cache)
    index = cache._index
    assert index is not None
    assert len(index._key_of) < 40 + 1_200  # compacted at least once: fewer slots than were ever used
    assert cache.loads == 1


def test_a_phrase_matches_only_consecutive_tokens_of_one_column() -> None:
    index = PostingIndex((0.0, 1.0, 1.0))
    index.put(
        [
            ("a", "r", [(1, 0, "open"), (1, 1, "the"), (1, 2, "door")]),
            ("b", "r", [(1, 0, "open"), (2, 0, "the"), (2, 1, "door")]),  # across columns
            ("c", "r", [(1, 0, "the"), (1, 1, "open"), (1, 2, "door")]),  # another order
            ("d", "r", [(2, 0, "open"), (2, 1, "the"), (2, 2, "door"), (2, 3, "open"), (2, 4, "the"), (2, 5, "door")]),
        ]
    )
    term = index.phrase(["open", "the", "door"])
    assert index.keys(term.ids.tolist()) == ["a", "d"]
    assert term.f.tolist() == [1.0, 2.0]  # d holds it twice
    index.remove(["a"])
    assert index.keys(index.phrase(["open", "the", "door"]).ids.tolist()) == ["d"]
    assert (index.rows, index.tokens) == (3, 12)


@pytest.fixture(scope="module")
def corpus() -> Iterator[sqlite3.Connection]:
    conn = migrated(sqlite3.connect(":memory:", isolation_level=None))
    rng = random.Random(23)
    for i in range(300):
        store.upsert(conn, random_doc(rng, f"d{i:03d}"))
    yield conn
    conn.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from([*WORDS, *EXTRA, "zebra", '"', "*", "OR", "NEAR", "(", "门", "🤖", "E", "42"]),
        min_size=1,
        max_size=12,
    ).map(" ".join),
    st.sampled_from([1, 3, 50]),
    st.sampled_from(VISIBLE),
)
def test_any_query_ranks_exactly_as_a_plain_join(
    corpus: sqlite3.Connection, query: str, n: int, visible: frozenset[str] | None
) -> None:
    cache = _module_cache(corpus)
    phrases = tuple(fts.phrases(query))
    snap = sql.Snapshot(corpus, None, cache)
    assert snap.keyword_relevant(phrases, None, n, visible) == plain_relevant(corpus, phrases, n, visible)
    want = plain_top(corpus, phrases, n, visible, "group:g-1")
    assert [(h.doc.id, h.relevance) for h in snap.keyword_top(phrases, None, n, visible, "group:g-1")] == want
    if phrases:
        assert snap.phrase_counts(phrases) == sql.phrase_counts(corpus, phrases)


_CACHES: dict[int, PostingCache] = {}


def _module_cache(conn: sqlite3.Connection) -> PostingCache:
    return _CACHES.setdefault(id(conn), PostingCache())
