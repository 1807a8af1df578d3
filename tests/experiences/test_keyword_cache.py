"""The keyword cache ranks exactly like the plain SQL query, and stays current through writes.

`keyword_repo.KeywordCache` computes FTS5's bm25 from posting lists in memory
(`search.bm25`); keyword recall hands the best matches to the floored ranking query. Compared
here with the plain query (every match scored by FTS5 and joined) — the very same rows, the
same relevance to the last bit, the same order — over a corpus full of common words, ties, ages,
robots and filters; and after learns, updates, forgets, writes by another process, an index
rebuild and a trimmed change log."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
from bench.experience_corpus import QUERIES, corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.sqlite import keyword_repo, ranking_repo, storage
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter
from robot_mcp_memory.experiences.sqlite.keyword_repo import KeywordCache
from robot_mcp_memory.experiences.sqlite.ranking_repo import Scope
from robot_mcp_memory.search import bm25, segment
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.storage.sqlite.index_db import rebuild_text_indexes
from robot_mcp_memory.tenancy.principal import STDIO
from tests.experiences.conftest import ranking_corpus, shown_id

EXTRA_QUERIES = (
    "grip force",
    "grip force approach angle speed",
    "grasp red mug zebra",  # a word no memory holds
    "zebra",
    "grasp grasp grasp",
    "grasping grasped grasps",  # three phrases, one stem: each counts, as in FTS5
    "mailroom",
    "mail room",  # a joined pair is offered as a phrase too
    "grip force 12.5 N",  # a dotted number is a two-word phrase: SQL ranks
    "The Pose ESTIMATE",
)
FILTERS: tuple[dict[str, Any] | None, ...] = (None, {"task.success": True}, {"task.name": "dock"})


def _cache_of(memory: Memory) -> KeywordCache:
    """The keyword cache of a store opened with it (the default)."""
    cache = memory.experience_store.keywords
    assert cache is not None
    return cache


def _plain(conn: sqlite3.Connection, scope: Scope, phrases: list[str], n: int) -> list[tuple[Any, ...]]:
    sql, params = ranking_repo._ranking_sql(scope, " OR ".join(phrases), "score", n, floored=False)
    return list(conn.execute(sql, params).fetchall())


def _cache() -> KeywordCache:
    return KeywordCache(storage.MEMORIES_TOKENIZE, storage.BM25_WEIGHTS)


def _answered(cache: KeywordCache, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the cache answered, for every keyword ranking from now on."""
    answered: list[bool] = []
    ranked_from_cache = ranking_repo._ranked_from_cache

    def counted(*args: Any) -> Any:
        got = ranked_from_cache(*args)
        answered.append(got is not None)
        return got

    monkeypatch.setattr(ranking_repo, "_ranked_from_cache", counted)
    return answered


def _check(memory: Memory, cache: KeywordCache, scope: Scope, queries: Any, ns: Any = (1, 5, 50)) -> int:
    """Compare the cached ranking with the plain query; how many lists held something."""
    found = 0
    for q in queries:
        phrases = segment.match_phrases(q)
        if not phrases:
            continue
        for n in ns:

            def both(c: sqlite3.Connection, p: list[str] = phrases, k: int = n) -> tuple[list[Any], list[Any]]:
                return ranking_repo._ranked_numbers(c, scope, p, "score", k, True, cache), _plain(c, scope, p, k)

            got, want = memory.index.read_blocking(both)
            assert got == want, (q, n)
            found += bool(want)
    return found


async def test_cached_ranking_is_the_plain_query_to_the_last_bit(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ranking_corpus(memory)
    cache = _cache()
    answered = _answered(cache, monkeypatch)
    now = time.time()
    found = 0
    for visible in (None, frozenset({"bench-01", "shared"}), frozenset({"rap-9"})):
        for coll in ("default", "kitchen-lab"):
            for spec in FILTERS:
                scope = Scope(visible, coll, 0.3, now, condition=compile_filter(spec, "m.context"))
                found += _check(memory, cache, scope, (*QUERIES, *EXTRA_QUERIES))
    assert found > 500
    # The cache answered most lists; a narrow filter (docking) and a dotted number went to SQL.
    assert answered.count(True) > 400, answered.count(True)
    assert answered.count(False) > 0


async def test_ties_at_the_bound_rank_like_the_plain_query(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where nothing has decayed (the scope's clock before every write), a score is exactly its
    bound, and memories of the same relevance, weight and confidence tie at the bound; the plain
    query orders them newest first, then by id. With pools of exactly n, the first pool holds n
    of them in no particular order: the list is only exact if a bound *equal* to the n-th score
    still sends every memory reaching it to the next query (`floor > left`, `tops >= floor`)."""
    await ranking_corpus(memory)
    cache = _cache()
    monkeypatch.setattr(ranking_repo, "BOUNDED_POOL_MIN", 1)
    monkeypatch.setattr(ranking_repo, "BOUNDED_POOL_FACTOR", 1)
    twin = next(iter(corpus(1, seed=7))).insight  # 29 copies with other numbers, and their sources
    scope = Scope(None, "default", 0.3, 0.0)
    assert _check(memory, cache, scope, [twin, "grip force", *QUERIES[:5]], ns=range(1, 12)) > 50


async def test_narrow_filters_are_ranked_by_the_cache_exactly_and_the_narrowest_by_sql(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a filter passing a few memories in a hundred the cache's rounds of given rows (each
    read by SQL, which applies every filter) rank the very list the plain query does: a pool
    scaled to the share, rounds that come back with too few, the bound's second round. Where
    the query's best matches pass the filter far less often than the sampled memories (docking
    under "grasp the red mug"), the cache gives up before a round would hand SQL a quarter of
    the matches, and the plain query ranks. Under a filter passing fewer than `CACHE_SHARE` of
    the sampled memories, or under a narrow one for a list so long that the first pool would pass
    `NARROW_FIRST_SHARE` of the memories, SQL ranks from the start."""
    await ranking_corpus(memory)
    # 1,800 memories: a sixteenth is 112, below most narrow pools; the rule is checked at the end.
    monkeypatch.setattr(ranking_repo, "NARROW_FIRST_SHARE", 1.0)
    cache = _cache()
    answered = _answered(cache, monkeypatch)
    now = time.time()
    narrow: tuple[dict[str, Any], ...] = (
        {"params.grip_force": {"$lt": 10}},  # about a fifth
        {"task.name": "dock", "task.success": True},
        {"params.grip_force": {"$lt": 6}, "task.success": True},
        {"robot.id": {"$in": ["spot-02", "tiago-07"]}, "params.speed": {"$gte": 0.7}},
        {"task.name": "dock"},
    )
    took: list[bool] = []
    found = 0
    for coll in ("default", "kitchen-lab"):
        for spec in narrow:
            scope = Scope(None, coll, 0.3, now, condition=compile_filter(spec, "m.context"))

            def share_of(c: sqlite3.Connection, s: Scope = scope) -> float:
                return ranking_repo._pass_share(c, s)

            share = memory.index.read_blocking(share_of)
            before = len(answered)
            found += _check(memory, cache, scope, QUERIES, ns=(1, 5, 50))
            if ranking_repo.CACHE_SHARE <= share < ranking_repo.BROAD_SHARE:
                took += answered[before:]
    assert found > 100
    # Narrow filters: the cache ranked most lists, and gave up on some for the plain query.
    assert took.count(True) > 100, took.count(True)
    assert took.count(False) > 5, took.count(False)
    scope = Scope(None, "default", 0.3, now, condition=compile_filter({"task.name": "dock"}, "m.context"))
    before = len(answered)
    _check(memory, cache, scope, ["grasp the red mug"], ns=(5,))
    assert answered[before:] == [False]
    # A list whose first pool would pass a share of the memories: the cache is not asked.
    monkeypatch.setattr(ranking_repo, "NARROW_FIRST_SHARE", 1 / 16)
    share = memory.index.read_blocking(lambda c: ranking_repo._pass_share(c, scope))
    largest = memory.index.read_blocking(ranking_repo._largest_id)
    assert ranking_repo._first_pool(50, share) > largest / 16 >= ranking_repo._first_pool(1, share)
    before = len(answered)
    _check(memory, cache, scope, QUERIES[:5], ns=(50, 1))
    assert len(answered[before:]) == 5  # n = 1 asked the cache for each query, n = 50 never
    # A filter passing none of the sampled memories: SQL ranks, the cache is not asked.
    scope = Scope(None, "default", 0.3, now, condition=compile_filter({"params.grip_force": {"$gt": 99}}, "m.context"))
    before = len(answered)
    _check(memory, cache, scope, QUERIES[:5])
    assert answered[before:] == []


async def test_the_cache_follows_learns_updates_and_forgets(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = memory.experiences
    cache = _cache_of(memory)
    answered = _answered(cache, monkeypatch)
    items = list(corpus(600, seed=3))
    await svc.learn_many(STDIO, [(it.insight, it.context) for it in items if it.collection == "default"])
    scope = Scope(None, "default", 0.0, time.time())
    queries = ("grasp the red mug", "zebra crossing", "purple kettle", "wet surface slipped", "grip force")
    rng = random.Random(5)
    assert _check(memory, cache, scope, queries)  # the cache now holds these words' lists
    for step in range(60):
        kind = step % 4
        if kind == 0:
            await svc.learn(STDIO, f"zebra crossing {step} seen near the purple kettle", {"task": {"success": True}})
        elif kind == 1:
            ids = memory.index.read_blocking(
                lambda c: [r[0] for r in c.execute("SELECT id FROM memories WHERE status = 'active'")]
            )
            mid = rng.choice(ids)
            text = rng.choice(["grasp the red mug twice", "zebra stripes on the floor", "nothing to see"])
            await svc.update(STDIO, shown_id(memory, mid), f"{text} ({step})")
        elif kind == 2:
            ids = memory.index.read_blocking(
                lambda c: [r[0] for r in c.execute("SELECT id FROM memories WHERE status = 'active'")]
            )
            await svc.forget(STDIO, shown_id(memory, rng.choice(ids)), "wrong")
        else:
            await svc.learn_many(STDIO, [(f"grip force {step} on the zebra mug", {}), (f"red kettle {step}", {})])
        scope = Scope(None, "default", 0.0, time.time())
        _check(memory, cache, scope, queries, ns=(5, 30))
    assert answered.count(True) > 100
    assert answered.count(False) == 0


async def test_the_cache_follows_any_update_of_a_ranking_attribute(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache bounds each match's score by the memory's source weight and confidence, and
    keeps only those in the collection and robots asked for. An update of any of these — or of
    the status, back to active — by whatever code, written straight in the table here, is in the
    change log (the trigger of migration 17), so the cached ranking stays the plain query's."""
    svc = memory.experiences
    cache = _cache_of(memory)
    answered = _answered(cache, monkeypatch)
    items = list(corpus(600, seed=11))
    await svc.learn_many(STDIO, [(it.insight, it.context) for it in items if it.collection == "default"])
    await svc.learn_many(STDIO, [(it.insight, it.context) for it in items[:100]], collection="kitchen-lab")
    queries = ("grasp the red mug", "wet surface slipped", "grip force", "open the door", "purple kettle")
    now = time.time()
    scopes = [
        Scope(None, "default", 0.0, now),
        Scope(None, "kitchen-lab", 0.0, now),
        Scope(frozenset({"rap-2"}), "default", 0.0, now),
    ]
    for scope in scopes:
        _check(memory, cache, scope, queries, ns=(5,))  # the cache holds these words' lists now
    rng = random.Random(17)
    ids = memory.index.read_blocking(lambda c: [r[0] for r in c.execute("SELECT id FROM memories")])
    updates = (
        "UPDATE memories SET confidence = 0.95, source_weight = 1.5 WHERE id = ?",  # a weak match rises
        "UPDATE memories SET confidence = 0.3, source_weight = 1.0 WHERE id = ?",
        "UPDATE memories SET collection = 'kitchen-lab' WHERE id = ?",
        "UPDATE memories SET collection = 'default' WHERE id = ?",
        "UPDATE memories SET robot = 'rap-2' WHERE id = ?",
        "UPDATE memories SET status = 'forgotten' WHERE id = ?",
        "UPDATE memories SET status = 'active' WHERE id = ?",
    )
    for _step in range(40):
        batch = [(rng.choice(updates), rng.choice(ids)) for _ in range(8)]

        def write(c: sqlite3.Connection, b: list[tuple[str, int]] = batch) -> None:
            for sql, mid in b:
                c.execute(sql, (mid,))

        memory.index.write_blocking(write)
        for scope in scopes:
            _check(memory, cache, scope, queries, ns=(1, 5))
    assert answered.count(False) == 0
    assert answered.count(True) > 500


@pytest.mark.parametrize(
    ("before", "write"),
    [
        # a forget (as storage.forget writes it): logged since migration 18
        ("", "UPDATE memories SET status = 'forgotten' WHERE id = {best}"),
        # an INSERT OR REPLACE by a row that is not active: the row it replaces goes without a
        # delete trigger (logged since migration 19)
        (
            "",
            "INSERT OR REPLACE INTO memories SELECT id, robot, collection, type, content, category, confidence, "
            "context, perception_type, metadata, session_id, 'forgotten', superseded_by, forget_reason, "
            "content_hash, facts_hash, source_weight, created_at, updated_at, access_count, last_accessed, data "
            "FROM memories WHERE id = {best}",
        ),
        # a forgotten memory moved onto an active one's id (logged since migration 19)
        (
            "UPDATE memories SET status = 'forgotten' WHERE id = {other}",
            "DELETE FROM memory_tags WHERE memory_id IN ({best}, {other}); "
            "UPDATE OR REPLACE memories SET id = {best} WHERE id = {other}",
        ),
    ],
)
async def test_a_reader_older_than_a_write_the_cache_has_seen_is_answered_exactly(
    memory: Memory, settings: Settings, before: str, write: str
) -> None:
    """Reader A opens its snapshot; the best match stops being active (by the service's forget or
    by raw SQL); reader B, newer, brings the cache up to that write. The write is in the log, so
    A's snapshot shows as older than the cache's and A is ranked in SQL — exactly, the best match
    still first."""
    await memory.experiences.learn_many(STDIO, [(f"grasp the red mug near shelf {i}", {"i": i}) for i in range(6)])
    scope = Scope(None, "default", 0.0, time.time())
    phrases = segment.match_phrases("grasp red mug")
    cache = _cache()
    writer, a, b = (sqlite3.connect(settings.data_dir / "index.db", isolation_level=None) for _ in range(3))
    try:
        ranked = [r[0] for r in _plain(writer, scope, phrases, 10)]
        ids = {"best": ranked[0], "other": ranked[-1]}
        writer.executescript(before.format(**ids))
        a.execute("BEGIN")
        want = _plain(a, scope, phrases, 10)  # A's snapshot starts here: the best match is active in it
        writer.executescript(write.format(**ids))
        b.execute("BEGIN")
        ranking_repo._ranked_numbers(b, scope, phrases, "score", 10, True, cache)  # B fills the cache
        assert ranking_repo._ranked_numbers(a, scope, phrases, "score", 10, True, cache) == want
        assert want[0][0] == ids["best"]
    finally:
        for c in (writer, a, b):
            c.close()


@pytest.mark.parametrize(
    "write",
    [
        # weights below 0 (a hand-edited archive): time decay raises such a score, and the
        # oldest, most confident memory comes first
        "UPDATE memories SET source_weight = -1.0, confidence = 0.5; "
        "UPDATE memories SET confidence = 1.0, updated_at = updated_at - 3e8 WHERE id = {worst}",
        "INSERT OR REPLACE INTO memories SELECT id, robot, 'kitchen-lab', type, content, category, confidence, "
        "context, perception_type, metadata, session_id, status, superseded_by, forget_reason, content_hash, "
        "facts_hash, source_weight, created_at, updated_at, access_count, last_accessed, data "
        "FROM memories WHERE id = {best}",  # moved to another collection by a replace
        "INSERT OR REPLACE INTO memories SELECT id, robot, collection, type, content, category, 0.95, "
        "context, perception_type, metadata, session_id, status, superseded_by, forget_reason, content_hash, "
        "facts_hash, 1.5, created_at, updated_at, access_count, last_accessed, data "
        "FROM memories WHERE id = {worst}",  # raised by a replace
        "DELETE FROM memories WHERE id = {best}",
    ],
)
async def test_writes_of_the_rows_by_hand_keep_the_cached_ranking_exact(
    memory: Memory, settings: Settings, write: str
) -> None:
    """Rows written by hand or by other code — a negative source weight, a row replaced rather
    than updated, a row deleted — and the cached ranking is still the plain query's."""
    await memory.experiences.learn_many(
        STDIO, [(f"grasp the red mug with force {i} N at station {i}", {"k": i}) for i in range(1, 41)]
    )
    cache = _cache()
    scope = Scope(None, "default", 0.0, time.time() + 400 * 86400)  # old enough for time decay to count
    phrases = segment.match_phrases("grasp red mug station")
    ranked = memory.index.read_blocking(lambda c: _plain(c, scope, phrases, 40))
    best, worst = ranked[0][0], ranked[-1][0]
    _check(memory, cache, scope, ("grasp red mug station",), ns=(1, 5))
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:
        conn.executescript(write.format(best=best, worst=worst))
    finally:
        conn.close()
    for tried in (scope, replace(scope, collection="kitchen-lab")):
        _check(memory, cache, tried, ("grasp red mug station", "grasp"), ns=(1, 5, 40))


async def test_the_change_log_is_trimmed_under_updates_alone(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """An update writes two entries (the trigger's and its own): the log is trimmed all the same."""
    monkeypatch.setattr(storage, "KEEP_CHANGES", 20)
    monkeypatch.setattr(storage, "TRIM_EVERY", 10)
    svc = memory.experiences
    mid = (await svc.learn(STDIO, "the heron stands by the pond")).memory_id
    assert mid is not None
    for i in range(120):
        await svc.update(STDIO, mid, f"the heron stands by the pond ({i})")
    kept = memory.index.read_blocking(lambda c: c.execute("SELECT count(*) FROM memory_index_log").fetchone()[0])
    assert kept <= 20 + 10 + 2


async def test_the_cache_follows_another_process_and_a_rebuild(memory: Memory, settings: Settings) -> None:
    svc = memory.experiences
    cache = _cache_of(memory)
    await svc.learn_many(STDIO, [(it.insight, it.context) for it in corpus(300, seed=1) if it.collection == "default"])
    queries = ("grasp the red mug", "okapi", "okapi sighting")
    scope = Scope(None, "default", 0.0, time.time())
    _check(memory, cache, scope, queries)
    other = Memory.open(settings)  # another writer on the same file, as the CLI would be
    try:
        for i in range(5):
            await other.experiences.learn(STDIO, f"okapi sighting {i} by the red mug")
        mid = (await other.experiences.learn(STDIO, "an okapi in the lab")).memory_id
        assert mid is not None
        await other.experiences.update(STDIO, mid, "no okapi after all, a red mug")
    finally:
        other.close()
    scope = Scope(None, "default", 0.0, time.time())
    assert _check(memory, cache, scope, queries)
    rows = memory.index.read_blocking(lambda c: _plain(c, scope, ['"okapi"'], 10))
    assert len(rows) == 6  # five sightings and the update's text
    # rows changed underneath the index (as a `load` writes them), then `reindex` makes every entry again
    memory.index.write_blocking(lambda c: c.execute("UPDATE memories SET content = 'okapi okapi okapi' WHERE id <= 3"))
    memory.index.write_blocking(rebuild_text_indexes)
    await svc.learn(STDIO, "okapi tracks after the rebuild")
    scope = Scope(None, "default", 0.0, time.time())
    assert _check(memory, cache, scope, queries)


async def test_a_cache_behind_a_trimmed_log_reads_everything_again(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "KEEP_CHANGES", 4)
    monkeypatch.setattr(storage, "TRIM_EVERY", 2)
    svc = memory.experiences
    cache = _cache_of(memory)
    await svc.learn_many(STDIO, [(f"heron {i} by the pond", {}) for i in range(20)])
    scope = Scope(None, "default", 0.0, time.time())
    _check(memory, cache, scope, ("heron", "pond"))
    for i in range(12):  # the log keeps four of these: the cache has not seen the rest
        await svc.learn(STDIO, f"heron {i} flew over the pond and the heron landed")
    kept = memory.index.read_blocking(lambda c: c.execute("SELECT count(*) FROM memory_index_log").fetchone()[0])
    assert kept < 12
    scope = Scope(None, "default", 0.0, time.time())
    assert _check(memory, cache, scope, ("heron", "pond", "heron landed"))


async def test_a_reader_behind_the_cache_is_answered_by_sql(memory: Memory, settings: Settings) -> None:
    """A snapshot older than what the cache has seen: the cache declines, SQL ranks it."""
    svc = memory.experiences
    await svc.learn_many(STDIO, [(f"ibis {i} on the roof", {}) for i in range(10)])
    cache = _cache()
    path = settings.data_dir / "index.db"
    old = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        old.execute("BEGIN")
        assert cache.scores(old, ['"ibis"']) is not None  # the snapshot starts here
        await svc.learn(STDIO, "ibis 11 on the roof")
        assert memory.index.read_blocking(lambda c: cache.scores(c, ['"ibis"'])) is not None  # moved on
        assert cache.scores(old, ['"ibis"']) is None  # still the old snapshot
        scope = Scope(None, "default", 0.0, time.time())
        got = ranking_repo._ranked_numbers(old, scope, ['"ibis"'], "score", 20, True, cache)
        assert len(got) == 10
        assert got == _plain(old, scope, ['"ibis"'], 20)
        old.execute("COMMIT")
    finally:
        old.close()


async def test_phrases_that_are_not_one_word_go_to_sql(memory: Memory) -> None:
    await memory.experiences.learn_many(STDIO, [("grip force 12.5 N on the mug", {}), ("mug 包裹", {})])
    cache = _cache()
    for phrases in (['"12 5"'], ['"mug"', '"12 5"'], ['"包" *'], ['""'], ['"mug'], ["mug"]):

        def scores(c: sqlite3.Connection, p: list[str] = phrases) -> Any:
            return cache.scores(c, p)

        assert memory.index.read_blocking(scores) is None, phrases
    got = memory.index.read_blocking(lambda c: cache.scores(c, ['"mug"', '"MUGS"']))
    assert got is not None
    assert len(got[0]) == 2


def test_weighted_frequency_adds_each_instance_in_column_order() -> None:
    """f is the column weight added once per instance (1.0 + 0.4 + 0.4 is not 1.0 + 0.8 in
    doubles everywhere): the order FTS5 adds them in."""
    f = 0.0
    for w in (1.0, 1.0, 0.4, 0.4, 0.4):
        f += w
    assert bm25.weighted_frequency((2, 3), (1.0, 0.4)) == f
    assert bm25.weighted_frequency((0, 0), (1.0, 0.4)) == 0.0
    assert bm25.idf(10, 10) == 1e-6  # a word in every document still counts a little
    ids, values = bm25.scores([], np.zeros(3), 10, 30)
    assert len(ids) == len(values) == 0
    head, left = ranking_repo._highest(np.array([0.5, 2.0, 1.0]), 2)
    assert sorted(head.tolist()) == [1, 2]
    assert left == 0.5
    assert ranking_repo._highest(np.array([0.5]), 2)[1] is None


async def test_without_the_change_log_sql_ranks(memory: Memory) -> None:
    """A file without the log (as one opened read-only before migration 15 would be): the cache
    declines, and starts again from the index next time."""
    await memory.experiences.learn_many(STDIO, [(f"stork {i} nesting", {}) for i in range(8)])
    cache = _cache()
    assert memory.index.read_blocking(lambda c: cache.scores(c, ['"stork"'])) is not None
    memory.index.write_blocking(lambda c: c.execute("ALTER TABLE memory_index_log RENAME TO kept_aside"))
    assert memory.index.read_blocking(lambda c: cache.scores(c, ['"stork"'])) is None
    scope = Scope(None, "default", 0.0, time.time())
    got = memory.index.read_blocking(
        lambda c: ranking_repo._ranked_numbers(c, scope, ['"stork"'], "score", 5, True, cache)
    )
    assert got == memory.index.read_blocking(lambda c: _plain(c, scope, ['"stork"'], 5))
    memory.index.write_blocking(lambda c: c.execute("ALTER TABLE kept_aside RENAME TO memory_index_log"))
    found = memory.index.read_blocking(lambda c: cache.scores(c, ['"stork"']))
    assert found is not None
    assert len(found[0]) == 8


def _unlogged(memory: Memory, mid: int, content: str) -> None:
    """Write an index entry as a build from before the change log would: without logging it, and
    without its `memory_lengths` row."""

    def write(c: sqlite3.Connection) -> None:
        if c.execute("SELECT 1 FROM memories WHERE id = ?", (mid,)).fetchone() is None:
            c.execute(
                "INSERT INTO memories(id, robot, collection, type, content, category, confidence, context, "
                "content_hash, created_at, updated_at) "
                "VALUES (?, 'bench-01', 'default', 'fact', ?, 'observation', 0.9, '{}', 'x', 0, 0)",
                (mid, content),
            )
        else:
            c.execute("UPDATE memories SET content = ? WHERE id = ?", (content, mid))
            c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
        c.execute("INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, '')", (mid, content))

    memory.index.write_blocking(write)


def _lengths(c: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    return {int(d): (int(a), int(b)) for d, a, b in c.execute("SELECT id, content, context FROM memory_lengths")}


def _lengths_in_the_index(c: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    """Each entry's tokens per column as the index itself holds them (its instances, fts5vocab)."""
    out = {int(d): (0, 0) for (d,) in c.execute("SELECT rowid FROM memories_fts")}
    view = keyword_repo.instances_view(c)
    for doc, col, n in c.execute(f"SELECT doc, col, count(*) FROM {view} GROUP BY doc, col"):  # noqa: S608
        a, b = out[int(doc)]
        out[int(doc)] = (a + n, b) if col == "content" else (a, b + n)
    return out


async def test_writes_of_a_build_without_the_log_or_the_lengths_are_followed_exactly(memory: Memory) -> None:
    """A process of an older build writes the index without logging it (before migration 15) and
    without the lengths (before migration 24). Its writes go through `memories`, whose triggers
    (on the file, whichever build writes) log them and drop the memory's length: the cache in
    use re-reads those memories, a cache filled afresh measures the entries left without a length
    — both rank exactly as SQL — and a rebuild of the index writes every length again."""
    svc = memory.experiences
    await svc.learn_many(STDIO, [(f"heron {i} by the pond", {}) for i in range(20)])
    cache = _cache_of(memory)
    scope = Scope(None, "default", 0.0, time.time())
    _check(memory, cache, scope, ("heron", "pond"))
    for i in range(5):
        _unlogged(memory, 1000 + i, f"heron heron {i}")
    _unlogged(memory, 3, "heron heron heron heron pond")  # longer than before
    got = memory.index.read_blocking(lambda c: cache.scores(c, ['"heron"']))
    assert got is not None
    assert 1004 in got[0].tolist()
    scope = Scope(None, "default", 0.0, time.time())
    assert _check(memory, cache, scope, ("heron", "pond"), ns=(3, 30))
    missing = {3, 1000, 1001, 1002, 1003, 1004}
    assert not missing & set(memory.index.read_blocking(_lengths))
    fresh = _cache()
    assert _check(memory, fresh, scope, ("heron", "pond"), ns=(3, 30))
    assert fresh._totals == memory.index.read_blocking(
        lambda c: (len(_lengths_in_the_index(c)), sum(a + b for a, b in _lengths_in_the_index(c).values()))
    )
    memory.index.write_blocking(rebuild_text_indexes)
    assert memory.index.read_blocking(_lengths) == memory.index.read_blocking(_lengths_in_the_index)


async def test_the_lengths_table_holds_what_the_index_holds_after_every_write(memory: Memory) -> None:
    """Each write of an entry writes its lengths in the same transaction — a learn, an update (of
    the text, of the context, with user tags), an id that comes round again, a rebuild — and they
    are the index's own counts, token for token."""
    svc = memory.experiences
    await svc.learn_many(
        STDIO,
        [("grasp the red mug, the red one", {"task": {"name": "grasp red mug"}}), ("ok", {}), ("dock at 3", {})],
    )
    await svc.learn(STDIO, "wet floor by the sink: slipped twice", {"place": "kitchen sink", "tags": ["wet", "floor"]})
    mid = memory.index.read_blocking(lambda c: c.execute("SELECT max(id) FROM memories").fetchone()[0])
    await svc.update(
        STDIO, shown_id(memory, mid), "wet floor near the sink, slipped once", {"place": "kitchen", "note": "mop it"}
    )
    await svc.update(STDIO, shown_id(memory, 1), "the mug")
    assert memory.index.read_blocking(_lengths) == memory.index.read_blocking(_lengths_in_the_index)
    # the newest memory deleted by hand, its entry left behind: the next learn takes its id
    memory.index.write_blocking(lambda c: c.execute("DELETE FROM memories WHERE id = ?", (mid,)))
    await svc.learn(STDIO, "a heron by the pond, a heron again")
    assert memory.index.read_blocking(_lengths) == memory.index.read_blocking(_lengths_in_the_index)
    assert memory.index.read_blocking(lambda c: c.execute("SELECT max(id) FROM memories").fetchone()[0]) == mid
    memory.index.write_blocking(lambda c: c.execute("UPDATE memories SET content = 'okapi okapi' WHERE id = 2"))
    memory.index.write_blocking(rebuild_text_indexes)
    lengths = memory.index.read_blocking(_lengths)
    assert lengths == memory.index.read_blocking(_lengths_in_the_index)
    assert lengths[2] == (2, 0)


async def test_while_one_query_fills_the_cache_others_are_ranked_by_sql(memory: Memory) -> None:
    """Reading everything again takes ~10 ms at 10,000 memories: meanwhile other readers (the
    HTTP server's pool) rank in SQL rather than wait for the lock."""
    await memory.experiences.learn_many(STDIO, [(f"avocet {i}", {}) for i in range(5)])
    cache = _cache()
    assert memory.index.read_blocking(lambda c: cache.scores(c, ['"avocet"'])) is not None
    cache._filling = True
    try:
        assert memory.index.read_blocking(lambda c: cache.scores(c, ['"avocet"'])) is None
    finally:
        cache._filling = False
    assert memory.index.read_blocking(lambda c: cache.scores(c, ['"avocet"'])) is not None


async def test_an_interrupted_first_read_leaves_the_cache_empty_not_wrong(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await memory.experiences.learn_many(STDIO, [(f"egret {i} " + "word " * i, {}) for i in range(20)])
    cache = _cache()
    calls = 0
    attributes = cache._attributes

    def interrupted(conn: sqlite3.Connection, where: str, params: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the lengths are in, the attributes not yet
            raise KeyboardInterrupt
        attributes(conn, where, params)

    monkeypatch.setattr(cache, "_attributes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        memory.index.read_blocking(lambda c: cache.scores(c, ['"egret"']))
    assert cache._seq is None
    assert not cache._doclen.any()
    scope = Scope(None, "default", 0.0, time.time())
    assert _check(memory, cache, scope, ("egret",))
    assert calls > 1  # read again, in full


@pytest.mark.parametrize("mid", [-1, 10**12])
async def test_ids_arrays_cannot_hold_are_ranked_by_sql(memory: Memory, mid: int) -> None:
    """Ids are array indexes in the cache: a negative one, or one in the trillions (an archive
    loaded with such ids), would alias another memory or need terabytes. SQL ranks then."""
    await memory.experiences.learn_many(STDIO, [(f"plover {i} on the shore", {}) for i in range(6)])
    cache = _cache_of(memory)
    scope = Scope(None, "default", 0.0, time.time())
    _check(memory, cache, scope, ("plover",))
    _unlogged(memory, mid, "plover plover plover")
    memory.index.write_blocking(lambda c: storage.log_changes(c, [mid]))
    assert memory.index.read_blocking(lambda c: cache.scores(c, ['"plover"'])) is None
    assert _check(memory, cache, scope, ("plover", "shore"))
    for i in range(3):  # ordinary writes meanwhile are no "writes the log missed"
        await memory.experiences.learn(STDIO, f"plover {i} again on the shore")
        assert _check(memory, cache, scope, ("plover", "shore"))
    fresh = _cache()
    assert memory.index.read_blocking(lambda c: fresh.scores(c, ['"plover"'])) is None


def test_a_sqlite_that_rounds_bm25_otherwise_turns_the_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache checks its arithmetic against this sqlite's bm25() on a sample index when made:
    a build that fuses multiply-adds (as GCC does on aarch64) rounds differently, and then SQL
    ranks everything."""
    assert _cache().enabled
    monkeypatch.setattr(bm25, "K1", bm25.K1 * (1 + 1e-15))
    off = _cache()
    assert not off.enabled
    assert off.scores(sqlite3.connect(":memory:"), ['"mug"']) is None


async def test_many_changes_fold_into_the_lists_and_a_big_batch_reads_everything_again(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `max_changed` tracked memories every overlay folds into its list; more than
    `max_batch` changes at once (an import) and the cache reads everything again."""
    svc = memory.experiences
    await svc.learn_many(STDIO, [(f"curlew {i} on the mudflat", {}) for i in range(30)])
    cache = KeywordCache(storage.MEMORIES_TOKENIZE, storage.BM25_WEIGHTS, max_changed=2, max_batch=3)
    folds = reloads = 0
    fold_all, load_all = cache._fold_all, cache._load_all

    def counted_fold() -> None:
        nonlocal folds
        folds += 1
        fold_all()

    def counted_load(conn: sqlite3.Connection, top: int) -> None:
        nonlocal reloads
        reloads += 1
        load_all(conn, top)

    monkeypatch.setattr(cache, "_fold_all", counted_fold)
    monkeypatch.setattr(cache, "_load_all", counted_load)
    queries = ("curlew", "mudflat curlew", "godwit")
    rng = random.Random(2)
    for step in range(30):
        if step % 5 == 4:
            await svc.learn_many(STDIO, [(f"godwit {step} {k} and a curlew", {}) for k in range(5)])
        elif step % 3 == 0:
            await svc.update(STDIO, shown_id(memory, rng.randint(1, 30)), f"curlew curlew godwit {step}")
        else:
            await svc.learn(STDIO, f"curlew {step} feeding on the mudflat with a godwit")
        _check(memory, cache, Scope(None, "default", 0.0, time.time()), queries, ns=(3, 20))
    assert folds > 3
    assert reloads > 3


@pytest.fixture
def blocking_memory(settings: Settings) -> Iterator[Memory]:
    """A `Memory` as a stdio server opens it (`StoreMode.BLOCKING`: reads on the event loop)."""
    m = Memory.open(replace(settings, data_dir=settings.data_dir.with_name("blocking")), mode=StoreMode.BLOCKING)
    yield m
    m.close()


def _logged(c: sqlite3.Connection) -> int:
    return int(c.execute("SELECT max(seq) FROM memory_index_log").fetchone()[0])


async def test_a_stdio_server_brings_the_cache_up_to_a_write_while_the_answer_travels(
    blocking_memory: Memory,
) -> None:
    """Reads on the event loop (stdio: one client): shortly after a write, the cache has read
    the changed memories, so the next recall does not wait for that; a cache never filled stays
    empty (filling it is a recall's business)."""
    memory = blocking_memory
    svc = memory.experiences
    cache = _cache_of(memory)
    await svc.learn_many(STDIO, [(f"dunlin {i} at low tide", {}) for i in range(10)])
    logged = _logged
    await svc.learn(STDIO, "dunlin flock at high tide")
    await asyncio.sleep(0.05)
    assert cache._seq is None  # never filled: left so
    scope = Scope(None, "default", 0.0, time.time())
    _check(memory, cache, scope, ("dunlin",))
    for i in range(3):
        await svc.learn(STDIO, f"dunlin {i} roosting on the spit")
        await asyncio.sleep(0.05)
        assert cache._seq == memory.index.read_blocking(logged)
    # a batch too big to patch is left to the next recall, which reads everything again
    await svc.learn_many(STDIO, [(f"dunlin {i} in the big flock", {}) for i in range(300)])
    await asyncio.sleep(0.05)
    assert cache._seq != memory.index.read_blocking(logged)
    _check(memory, cache, Scope(None, "default", 0.0, time.time()), ("dunlin", "flock"))
    assert cache._seq == memory.index.read_blocking(logged)


async def test_a_servers_cache_is_left_to_the_next_recall_after_a_write(memory: Memory) -> None:
    """Reads on reader threads (`StoreMode.SERVER`): nothing is done after a write; the next
    recall brings the cache up to it."""
    svc = memory.experiences
    cache = _cache_of(memory)
    await svc.learn_many(STDIO, [(f"dunlin {i} at low tide", {}) for i in range(10)])
    _check(memory, cache, Scope(None, "default", 0.0, time.time()), ("dunlin",))
    assert cache._seq == memory.index.read_blocking(_logged)
    await svc.learn(STDIO, "dunlin and knot together")
    await asyncio.sleep(0.05)
    assert cache._seq != memory.index.read_blocking(_logged)
    _check(memory, cache, Scope(None, "default", 0.0, time.time()), ("dunlin", "knot"))
    assert cache._seq == memory.index.read_blocking(_logged)


_TOKENIZER = keyword_repo._Tokenizer(storage.MEMORIES_TOKENIZE)
_ASCII = st.text(st.characters(max_codepoint=127))


@hypothesis.given(st.lists(st.tuples(_ASCII, st.text(st.characters(max_codepoint=300))), max_size=6))
@hypothesis.settings(max_examples=100)
def test_lengths_counted_on_write_are_the_tokenizers_for_any_text(texts: list[tuple[str, str]]) -> None:
    """A write counts an ASCII text's tokens as runs of letters and digits (no trip through a
    private FTS5 table): for any text, the very counts the tokenizer gives."""
    docs = [(i, a, b) for i, (a, b) in enumerate(texts, start=1)]
    assert sorted(_TOKENIZER.lengths(docs)) == sorted(_TOKENIZER._measured(docs))


def test_a_tokenizer_that_splits_ascii_otherwise_counts_every_text_in_fts5() -> None:
    other = keyword_repo._Tokenizer("unicode61 tokenchars '-_'")
    assert keyword_repo._Tokenizer(storage.MEMORIES_TOKENIZE)._ascii_exact
    assert not other._ascii_exact
    assert other.lengths([(1, "grip-force a_b", "x.y")]) == [(1, 2, 2)]
