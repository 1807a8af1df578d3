"""Cached sets of the memories passing a context_filter (`filter_repo.FilterMasks`) change no
answer, and stay current through writes.

A `Mask` lets keyword recall rank through the keyword cache under any filter, and hybrid recall
take the nearest vectors among the memories that may pass, without reading every context again.
Compared here with the plain query (keyword) and with the path that reads every id in scope
(hybrid): the very same lists — after learns, updates, forgets, raw SQL on the rows, a trimmed
log and a rebuilt index; and the masks are patched from the change log, not made again, when
a few memories change."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from bench.experience_corpus import QUERIES

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences import recall
from robot_mcp_memory.experiences.model import parse_spatial
from robot_mcp_memory.experiences.sqlite import filter_repo, keyword_repo, ranking_repo, storage
from robot_mcp_memory.experiences.sqlite.filter_repo import FilterMasks, Mask
from robot_mcp_memory.experiences.sqlite.filter_sql import Condition, compile_filter
from robot_mcp_memory.experiences.sqlite.keyword_repo import KeywordCache
from robot_mcp_memory.experiences.sqlite.ranking_repo import Scope
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.search import segment
from robot_mcp_memory.storage.sqlite.index_db import rebuild_text_indexes
from robot_mcp_memory.tenancy.principal import STDIO, Principal
from tests.experiences.conftest import ranking_corpus

NARROW: tuple[dict[str, Any], ...] = (
    {"task.name": "dock"},
    {"params.grip_force": {"$lt": 6}, "task.success": True},
    {"robot.id": {"$in": ["spot-02", "tiago-07"]}, "params.speed": {"$gte": 0.7}},
    {"params.grip_force": {"$gt": 99}},  # passed by none
    {"task.success": True},  # broad
)


def _plain(conn: sqlite3.Connection, scope: Scope, phrases: list[str], n: int) -> list[tuple[Any, ...]]:
    sql, params = ranking_repo._ranking_sql(scope, " OR ".join(phrases), "score", n, floored=False)
    return list(conn.execute(sql, params).fetchall())


def _scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per scan that made a mask from every context."""
    made: list[int] = []
    scan = filter_repo._scan

    def counted(*args: Any) -> Any:
        made.append(1)
        return scan(*args)

    monkeypatch.setattr(filter_repo, "_scan", counted)
    return made


def _masked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each keyword ranking through the cache from now on: whether it had a mask."""
    seen: list[bool] = []
    ranked_from_cache = ranking_repo._ranked_from_cache

    def counted(*args: Any) -> Any:
        seen.append(len(args) > 7 and args[7] is not None)
        return ranked_from_cache(*args)

    monkeypatch.setattr(ranking_repo, "_ranked_from_cache", counted)
    return seen


def _check(memory: Memory, cache: KeywordCache, masks: FilterMasks, scope: Scope, queries: Any, ns: Any) -> int:
    """Keyword rankings with the masks against the plain query; how many lists held something.
    Each is asked twice: a filter gets its mask the second time SQL ranks it."""
    found = 0
    for q in queries:
        phrases = segment.match_phrases(q)
        for n in ns:

            def both(c: sqlite3.Connection, p: list[str] = phrases, k: int = n) -> tuple[Any, Any, Any]:
                first = ranking_repo._ranked_numbers(c, scope, p, "score", k, True, cache, masks)
                again = ranking_repo._ranked_numbers(c, scope, p, "score", k, True, cache, masks)
                return first, again, _plain(c, scope, p, k)

            first, again, want = memory.index.read_blocking(both)
            assert first == want, (q, n)
            assert again == want, (q, n)
            found += bool(want)
    return found


@pytest.fixture
def shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcuts (and masks) from the first memory: the corpus here is 1,800."""
    monkeypatch.setattr(ranking_repo, "SHORTCUTS_FROM", 1)


@pytest.mark.usefixtures("shortcuts")
async def test_keyword_ranking_through_masks_is_the_plain_query(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ranking_corpus(memory)
    cache, masks = KeywordCache(storage.MEMORIES_TOKENIZE, storage.BM25_WEIGHTS), FilterMasks()
    masked = _masked(monkeypatch)
    now = time.time()
    found = 0
    for visible in (None, frozenset({"bench-01", "shared"}), frozenset({"rap-9"})):
        for coll in ("default", "kitchen-lab"):
            for spec in NARROW:
                scope = Scope(visible, coll, 0.3, now, condition=compile_filter(spec, "m.context"))
                found += _check(memory, cache, masks, scope, QUERIES[::3], ns=(1, 5, 50))
    assert found > 200
    assert masked.count(True) > 200, masked.count(True)  # the narrow filters went through their masks


@pytest.mark.usefixtures("shortcuts")
async def test_masks_follow_every_write_and_are_patched_not_made_again(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ranking_corpus(memory)
    svc = memory.experiences
    cache, masks = KeywordCache(storage.MEMORIES_TOKENIZE, storage.BM25_WEIGHTS), FilterMasks()
    scans = _scans(monkeypatch)
    dock = Scope(None, "default", 0.3, time.time(), condition=compile_filter({"task.name": "dock"}, "m.context"))
    queries = ("dock at the charger", "grasp the red mug", "charger")
    _check(memory, cache, masks, dock, queries, ns=(5, 50))
    assert len(scans) == 1

    def ids_of(task: str) -> list[int]:
        return [
            r[0]
            for r in memory.index.read_blocking(
                lambda c: c.execute(
                    "SELECT id FROM memories WHERE robot = 'tester' AND collection = 'default' AND status = 'active' "
                    "AND json_extract(context, '$.task.name') = ? ORDER BY id",
                    (task,),
                ).fetchall()
            )
        ]

    first, gone, *_ = ids_of("dock")
    other = ids_of("place")[0]
    # our writes: a learn that passes, an update that makes one pass and one that makes one fail, a forget
    await svc.learn(STDIO, "docked at the charger on the second try", {"task": {"name": "dock"}})
    await svc.update(STDIO, other, "docked at the charger, then picked the box", {"task": {"name": "dock"}})
    await svc.update(STDIO, first, "charger was blocked, picked a box instead", {"task": {"name": "place"}})
    await svc.forget(STDIO, gone, "wrong")
    _check(memory, cache, masks, dock, queries, ns=(5, 50))
    assert len(scans) == 1  # patched from the log
    # raw SQL from another connection: a context, a collection, a status, a row deleted
    picked, *_ = ids_of("place")
    moved, superseded, deleted, *_ = ids_of("dock")
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:
        conn.execute("UPDATE memories SET context = json_set(context, '$.task.name', 'dock') WHERE id = ?", (picked,))
        conn.execute("UPDATE memories SET collection = 'kitchen-lab' WHERE id = ?", (moved,))
        conn.execute("UPDATE memories SET status = 'superseded' WHERE id = ?", (superseded,))
        conn.execute("DELETE FROM memories WHERE id = ?", (deleted,))
    finally:
        conn.close()
    for scope in (dock, replace(dock, collection="kitchen-lab")):
        _check(memory, cache, masks, scope, queries, ns=(5, 50))
    assert len(scans) == 2  # the kitchen-lab filter's own mask; default's was patched
    # an index rebuild logs no ids: the mask is made again
    memory.index.write_blocking(rebuild_text_indexes)
    _check(memory, cache, masks, dock, queries, ns=(5, 50))
    assert len(scans) == 3


@pytest.mark.usefixtures("shortcuts")
async def test_filter_only_lists_through_masks_are_the_plain_query(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter-only list (no query) under a filter whose mask passes few memories looks those up
    by id: the same rows in the same order as the plain query over every memory, with spatial
    order too, after writes of ours and raw SQL — and every id past the mask's end is looked up."""
    await ranking_corpus(memory)
    masks = FilterMasks()
    scans = _scans(monkeypatch)
    now = time.time()
    spatial = parse_spatial({"field": "spatial.position", "target": [0.1, 0.2, 0.3]})

    def check() -> None:
        for spec in (None, *NARROW):
            for coll, visible, floor, at in (
                ("default", None, 0.3, now),
                ("kitchen-lab", frozenset({"rap-9", "tester"}), 0.3, now),
                ("default", frozenset({"rap-9"}), 0.6, now),
                # a year on, every memory has decayed to the floor: scores tie by weight and
                # confidence, and the newest comes first among them
                ("default", None, 0.3, now + 400 * 86400),
            ):
                for sp, order in ((None, "score"), (spatial, "blend")):
                    cond = compile_filter(spec, "m.context")
                    scope = Scope(visible, coll, floor, at, condition=cond, spatial=sp)
                    for n in (1, 5, 50):

                        def both(c: sqlite3.Connection, s: Scope = scope, k: int = n, o: Any = order) -> Any:
                            first = ranking_repo._ranked_numbers(c, s, None, o, k, True, None, masks)
                            again = ranking_repo._ranked_numbers(c, s, None, o, k, True, None, masks)
                            plain = c.execute(*ranking_repo._ranking_sql(s, None, o, k, True)).fetchall()
                            return first, again, plain

                        first, again, plain = memory.index.read_blocking(both)
                        assert first == plain, (spec, coll, n, order)
                        assert again == plain, (spec, coll, n, order)

    check()
    assert len(scans) >= 6  # the narrow filters' masks, in both collections
    made = len(scans)
    await memory.experiences.learn_many(
        STDIO,
        [
            (f"docked at charger {i}", {"task": {"name": "dock"}, "spatial": {"position": [0.1, 0.2, i]}})
            for i in range(5)
        ],
    )
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:  # a row past every mask's end that no log entry names: looked up all the same
        conn.execute(
            "INSERT INTO memories(robot, collection, type, content, confidence, source_weight, context, content_hash, "
            "created_at, updated_at) VALUES ('tester', 'default', 'fact', 'docked by hand', 1.0, 1.5, "
            '\'{"task": {"name": "dock"}, "spatial": {"position": [0.1, 0.2, 0.3]}}\', \'h\', ?, ?)',
            (now, now),
        )
        # made older by hand, and one made younger: logged, and ranked by it
        conn.execute(
            "UPDATE memories SET updated_at = updated_at - 200 * 86400 WHERE id % 5 = 0 AND content_hash != 'h'"
        )
        (young,) = conn.execute(  # the most confident real-world memory among the aged ones: now the best
            "SELECT id FROM memories WHERE collection = 'default' AND robot = 'tester' AND source_weight >= 1.5 "
            "AND status = 'active' AND updated_at < ? ORDER BY confidence DESC, id LIMIT 1",
            (now - 100 * 86400,),
        ).fetchone()
        conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (now + 1, young))
    finally:
        conn.close()
    check()
    assert len(scans) == made  # patched
    unfiltered = Scope(None, "default", 0.3, now)
    best = memory.index.read_blocking(
        lambda c: ranking_repo._ranked_numbers(c, unfiltered, None, "score", 3, True, None, masks)
    )
    assert young in [r[0] for r in best]  # after the row inserted by hand (confidence 1.0)
    found = await memory.experiences.recall(STDIO, "", n=3, context_filter={"task.name": "dock"})
    assert found.mode == "filter"
    assert found.hits[0].memory.content == "docked by hand"


async def test_filter_only_scores_a_hair_off_sqls_are_checked_by_sql(memory: Memory) -> None:
    """numpy's ``pow`` and SQLite's may differ in the last bits: the scores a mask's numbers give
    only choose which rows SQL ranks, and a list whose last score is within `SCORE_SLACK` of the
    best one left out goes round again with every row that close. Numbers made a hair off here, a
    year on (every memory decayed to the floor: runs of equal scores told apart by age and id),
    and the lists are still the plain query's."""
    await ranking_corpus(memory)
    masks = FilterMasks()
    later = time.time() + 400 * 86400
    rng = np.random.default_rng(5)
    checked = 0
    for spec in (None, {"task.success": True}, {"task.name": "dock"}):
        scope = Scope(None, "default", 0.3, later, condition=compile_filter(spec, "m.context"))

        def made(c: sqlite3.Connection, s: Scope = scope) -> Mask | None:
            return masks.mask(c, s.collection, s.condition, make="now")

        mask = memory.index.read_blocking(made)
        assert mask is not None
        off = replace(mask, ranking=mask.ranking * (1 + rng.uniform(-1e-13, 1e-13, mask.ranking.shape)))
        for n in (1, 3, 5, 20, 50):

            def both(c: sqlite3.Connection, s: Scope = scope, k: int = n, m: Mask = off) -> Any:
                got = ranking_repo._filter_only_ranked(c, s, k, True, m, [])
                return got, c.execute(*ranking_repo._ranking_sql(s, None, "score", k, True)).fetchall()

            got, plain = memory.index.read_blocking(both)
            assert got == plain, (spec, n)
            checked += 1
    assert checked == 15


@pytest.mark.usefixtures("shortcuts")
async def test_a_mask_behind_a_trimmed_log_is_made_again(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "KEEP_CHANGES", 20)
    monkeypatch.setattr(storage, "TRIM_EVERY", 10)
    await ranking_corpus(memory)
    cache, masks = KeywordCache(storage.MEMORIES_TOKENIZE, storage.BM25_WEIGHTS), FilterMasks()
    scans = _scans(monkeypatch)
    dock = Scope(None, "default", 0.3, time.time(), condition=compile_filter({"task.name": "dock"}, "m.context"))
    _check(memory, cache, masks, dock, ("dock at the charger",), ns=(5,))
    await memory.experiences.learn_many(  # not docking: the sample of recent memories still finds the filter narrow
        STDIO, [(f"placed the box on shelf {i} after {i} tries", {"task": {"name": "place"}}) for i in range(60)]
    )
    _check(memory, cache, masks, dock, ("dock at the charger", "charger"), ns=(5, 50))
    assert len(scans) == 2


async def test_hybrid_recall_with_masks_is_the_scan_of_every_id(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector list among the memories a mask allows is the one ranked among every id in scope
    (the path before masks), when the nearest of every robot's seldom pass: made on the first such
    recall, and used from then on, also after writes."""
    await ranking_corpus(memory)
    monkeypatch.setattr(recall, "PROBE_FACTORS", (1,))  # the nearest 30 of all: too few pass a narrow filter
    svc = memory.experiences
    scans = _scans(monkeypatch)
    mask_of = FilterMasks.mask

    async def both(query: str, spec: dict[str, Any], n: int) -> None:
        with_masks = await svc.recall(STDIO, query, n=n, context_filter=spec)
        monkeypatch.setattr(FilterMasks, "mask", lambda *a, **k: None)
        try:
            scanned = await svc.recall(STDIO, query, n=n, context_filter=spec)
        finally:
            monkeypatch.setattr(FilterMasks, "mask", mask_of)
        assert with_masks.mode == scanned.mode == "hybrid"
        got = [(h.memory.id, h.score) for h in with_masks.hits]
        assert got == [(h.memory.id, h.score) for h in scanned.hits], (query, spec, n)

    for spec in NARROW[:4]:
        for q in QUERIES[::4]:
            for n in (1, 5, 20):
                await both(q, spec, n)
    made = len(scans)
    assert made >= 3  # the filters' masks, each made once
    await svc.learn_many(STDIO, [(f"docked at charger {i} on try {i}", {"task": {"name": "dock"}}) for i in range(20)])
    for q in ("dock at the charger", *QUERIES[:3]):
        await both(q, {"task.name": "dock"}, 5)
    assert len(scans) == made  # patched


async def test_rounds_among_what_a_mask_allows_stop_at_a_cap(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the mask allows far more than pass every filter (here a min_confidence most memories
    miss), the rounds grow eightfold until `MASK_ROUNDS_UP_TO`; past it every id in scope is read
    — never an unbounded list of ids for SQL — and the answer is the same."""
    await ranking_corpus(memory)
    monkeypatch.setattr(recall, "PROBE_FACTORS", (1,))
    monkeypatch.setattr(recall, "MASK_ROUNDS_UP_TO", 500)
    svc = memory.experiences
    every_id, fallbacks = ranking_repo.ids_in_scope, []

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        fallbacks.append(1)
        return every_id(*args, **kwargs)

    monkeypatch.setattr(ranking_repo, "ids_in_scope", counted)
    confident = memory.index.read_blocking(
        lambda c: [r[0] for r in c.execute("SELECT id FROM memories WHERE robot = 'tester' ORDER BY id LIMIT 40")]
    )
    memory.index.write_blocking(
        lambda c: c.executemany("UPDATE memories SET confidence = 1.0 WHERE id = ?", [(m,) for m in confident])
    )
    mask_of = FilterMasks.mask
    for q in QUERIES[::5]:
        for _ in range(2):
            got = await svc.recall(STDIO, q, n=5, min_confidence=0.95, context_filter={"task.success": True})
            monkeypatch.setattr(FilterMasks, "mask", lambda *a, **k: None)
            want = await svc.recall(STDIO, q, n=5, min_confidence=0.95, context_filter={"task.success": True})
            monkeypatch.setattr(FilterMasks, "mask", mask_of)
            assert [(h.memory.id, h.score) for h in got.hits] == [(h.memory.id, h.score) for h in want.hits]
            assert got.hits
    assert memory.experience_store.filters._masks  # the mask was made and used
    assert len(fallbacks) > len(QUERIES[::5]) * 2  # and its rounds gave up, as well as the masks-off path


async def test_ids_an_array_cannot_hold_make_no_mask(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking_repo, "SHORTCUTS_FROM", 1)
    await memory.experiences.learn_many(
        STDIO, [(f"dock at charger {i}", {"task": {"name": "dock" if i % 3 else "pick"}}) for i in range(30)]
    )
    memory.index.write_blocking(
        lambda c: c.execute(
            "INSERT INTO memories(id, robot, collection, type, content, confidence, context, content_hash, "
            "created_at, updated_at) VALUES (?, 'tester', 'default', 'fact', 'dock at charger far', 0.9, "
            '\'{"task": {"name": "dock"}}\', \'x\', 0, 0)',
            (10**12,),
        )
    )
    masks = FilterMasks()
    cond = compile_filter({"task.name": "dock"}, "m.context")
    assert memory.index.read_blocking(lambda c: masks.mask(c, "default", cond, make="now")) is None
    for _ in range(2):  # recall goes on without one
        got = await memory.experiences.recall(STDIO, "dock at charger", n=5, context_filter={"task.name": "dock"})
        assert len(got.hits) == 5
        assert got.mode == "hybrid"


def test_a_mask_allows_the_ids_it_knows_pass_and_every_id_past_its_end() -> None:
    numbers = np.full((4, 3), np.nan)
    mask = Mask(
        3, np.array([False, True, False, True]), np.array([0, 0, 1, 1], dtype=np.int32), {"a": 0, "b": 1}, numbers
    )
    ids = np.array([-1, 0, 1, 2, 3, 4, 10**12], dtype=np.int64)
    assert mask.allows(ids).tolist() == [True, False, True, False, True, True, True]
    assert mask.allowing(frozenset({"b"}))(ids).tolist() == [True, False, False, False, True, True, True]
    assert mask.allowing(frozenset({"c"}))(ids).tolist() == [True, False, False, False, False, True, True]
    unknown = Mask(
        3, np.array([True, True]), np.array([filter_repo.ANY_ROBOT, 0], dtype=np.int32), {"a": 0}, numbers[:2]
    )
    assert unknown.allowing(frozenset({"b"}))(np.array([0, 1], dtype=np.int64)).tolist() == [True, False]


DOCK = {"task.name": "dock"}


async def _on_and_off(memory: Memory, monkeypatch: pytest.MonkeyPatch, query: str, who: Any = STDIO) -> list[Any]:
    """Hybrid recall under DOCK with masks, and the same with none (the scan of every id in scope)."""
    svc = memory.experiences
    mask_of = FilterMasks.mask
    with_masks = await svc.recall(who, query, n=5, context_filter=DOCK)
    monkeypatch.setattr(FilterMasks, "mask", lambda *a, **k: None)
    try:
        scanned = await svc.recall(who, query, n=5, context_filter=DOCK)
    finally:
        monkeypatch.setattr(FilterMasks, "mask", mask_of)
    got = [(h.memory.id, h.score) for h in with_masks.hits]
    assert got == [(h.memory.id, h.score) for h in scanned.hits], query
    return got


def _by_hand(settings: Settings, mid: int | None, content: str, ctx: dict[str, Any], robot: str = "tester") -> int:
    """A row inserted by another connection, without an index entry (so no trigger logs it)."""
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:
        cur = conn.execute(
            "INSERT INTO memories(id, robot, collection, type, content, confidence, context, content_hash, "
            "created_at, updated_at) VALUES (?, ?, 'default', 'fact', ?, 0.9, ?, 'x', ?, ?)",
            (mid, robot, content, json.dumps(ctx), time.time(), time.time()),
        )
        return int(cur.lastrowid or 0)
    finally:
        conn.close()


async def _docking_and_placing(memory: Memory, monkeypatch: pytest.MonkeyPatch, who: Any = STDIO) -> None:
    monkeypatch.setattr(recall, "PROBE_FACTORS", (1,))  # the nearest 30 leave too few docking: masks
    placing = [(f"placed box {i} on the shelf near station {i}", {"task": {"name": "place"}}) for i in range(60)]
    docking = [(f"docked at the charger on try {i}", {"task": {"name": "dock"}}) for i in range(3)]
    await memory.experiences.learn_many(who, placing + docking)


@pytest.mark.parametrize("where", ["past the end, then a learn", "in a gap"])
async def test_a_row_inserted_by_hand_without_an_index_entry_is_allowed(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """No trigger logs such a row (the insert trigger logs only a row over an index entry): an id
    the mask cannot vouch for is allowed, never taken for one that fails — once the backfill gives
    the row a vector, hybrid recall finds it as the scan of every id does (review)."""
    await _docking_and_placing(memory, monkeypatch)
    if where == "in a gap":
        _by_hand(settings, 1000, "placed a crate far away", {"task": {"name": "place"}})  # ids 64..999 hold no row
    await _on_and_off(memory, monkeypatch, "docked at the charger")
    assert memory.experience_store.filters._masks
    if where == "in a gap":
        row = _by_hand(settings, 500, "docked at the charger quickly", {"task": {"name": "dock"}})
    else:
        row = _by_hand(settings, None, "docked at the charger quickly", {"task": {"name": "dock"}})
        await memory.experiences.learn(STDIO, "placed the crate on the shelf", {"task": {"name": "place"}})
    vectors = memory.experiences.vectors
    assert isinstance(vectors, MemoryVectorIndex)
    vectors.backfill_blocking()
    assert row in [m for m, _ in await _on_and_off(memory, monkeypatch, "docked at the charger quickly")]


async def test_a_memory_moved_to_another_robot_by_hand_is_ranked_by_its_row(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row's robot changed by hand leaves its vector filed under the old robot; the rounds among
    what a mask allows take the robot from the table (the mask's), as the scan of every id did."""
    rap = Principal.robot("rap-9")
    await _docking_and_placing(memory, monkeypatch, rap)
    mine = await memory.experiences.learn(
        STDIO, "docked at the charger quickly, then moved", {"task": {"name": "dock"}}
    )
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:
        conn.execute("UPDATE memories SET robot = 'rap-9' WHERE id = ?", (mine.memory_id,))
    finally:
        conn.close()
    for _ in range(2):
        assert mine.memory_id in [
            m for m, _ in await _on_and_off(memory, monkeypatch, "docked at the charger quickly", rap)
        ]


@pytest.mark.usefixtures("shortcuts")
async def test_a_reader_older_than_the_mask_is_answered_without_a_scan(
    memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader whose snapshot is older than the held mask (a newer reader patched it after a
    write) is answered by SQL at once: a scan there would be thrown away (review: one per call)."""
    svc = memory.experiences
    placing = [
        (f"placed box {i} on the shelf near the dock charger {i}", {"task": {"name": "place"}}) for i in range(300)
    ]
    await svc.learn_many(
        STDIO, [*placing, *[(f"docked at the charger {i}", {"task": {"name": "dock"}}) for i in range(20)]]
    )
    store = memory.experience_store
    scope = Scope(None, "default", 0.3, time.time(), condition=compile_filter(DOCK, "m.context"))
    phrases = segment.match_phrases("dock charger")
    scans = _scans(monkeypatch)

    def rank(c: sqlite3.Connection) -> list[Any]:
        return ranking_repo._ranked_numbers(c, scope, phrases, "score", 5, True, store.keywords, store.filters)

    memory.index.read_blocking(rank)
    memory.index.read_blocking(rank)  # the second time: the mask is made
    assert len(scans) == 1
    old = sqlite3.connect(f"file:{settings.data_dir / 'index.db'}?mode=ro", uri=True, isolation_level=None)
    try:
        old.execute("BEGIN")
        old.execute("SELECT count(*) FROM memories").fetchone()  # an older snapshot from here on
        want = rank(old)
        await svc.learn(STDIO, "docked at the charger again", {"task": {"name": "dock"}})
        memory.index.read_blocking(rank)  # a newer reader patches the mask forward
        for _ in range(3):
            assert rank(old) == want
    finally:
        old.close()
    assert len(scans) == 1


async def test_a_filter_asked_once_gets_no_mask_and_masks_are_bounded(memory: Memory) -> None:
    await memory.experiences.learn_many(STDIO, [(f"dock at charger {i}", {"task": {"k": i}}) for i in range(50)])
    masks = FilterMasks(capacity=3, max_bytes=10**9)
    conds = [compile_filter({"task.k": i}, "m.context") for i in range(5)]

    def ask(c: sqlite3.Connection, cond: Condition) -> Mask | None:
        return masks.mask(c, "default", cond, make="again")

    assert memory.index.read_blocking(lambda c: ask(c, conds[0])) is None  # once: not worth a scan
    made = memory.index.read_blocking(lambda c: ask(c, conds[0]))
    assert made is not None
    assert made.passing.nonzero()[0].tolist() == [0, 1]  # id 0 holds no row: allowed, as unknown

    def make(into: FilterMasks, cond: Condition) -> None:
        memory.index.read_blocking(lambda c: into.mask(c, "default", cond, make="now"))

    for cond in conds[1:]:
        make(masks, cond)
    assert len(masks._masks) == 3  # least recently used first out
    small = FilterMasks(capacity=10, max_bytes=1)
    for cond in conds:
        make(small, cond)
    assert len(small._masks) == 1  # by bytes, keeping the newest
    assert keyword_repo.dense_ids(1, 51, 51)


async def test_a_learn_after_the_newest_row_was_deleted_by_hand_takes_its_id(
    memory: Memory, settings: Settings
) -> None:
    """Deleted by another connection (no cascade), the newest memory leaves its index entry and
    tags behind, and the next learn gets its id: it failed on the index entry, and so did every
    learn after it (review). It replaces them now, and recall finds the new memory only."""
    svc = memory.experiences
    await svc.learn_many(STDIO, [(f"placed box {i} on the shelf", {"k": i}) for i in range(5)])
    reference = await svc.learn(STDIO, "docked at the charger", {"task": {"name": "dock"}}, collection="ref")
    conn = sqlite3.connect(settings.data_dir / "index.db", isolation_level=None)
    try:
        conn.execute("DELETE FROM memories WHERE id = ?", (reference.memory_id,))
        conn.execute("DELETE FROM memories WHERE id = ?", (reference.memory_id - 1,))  # the box, tags and all
        (gone,) = conn.execute("SELECT max(id) + 1 FROM memories").fetchone()
    finally:
        conn.close()
    learned = await svc.learn(STDIO, "docked at the charger", {"task": {"name": "dock"}})
    assert learned.memory_id == gone
    again = await svc.learn(STDIO, "opened the fire door", {"task": {"name": "open_door"}})
    assert again.memory_id == gone + 1
    found = await svc.recall(STDIO, "box shelf charger", n=10)
    assert [h.memory.content for h in found.hits if h.memory.id == gone] == ["docked at the charger"]
    assert "placed box 4 on the shelf" not in [h.memory.content for h in found.hits]
    box_tags = set((await svc.get(STDIO, 1)).tags)
    assert not box_tags & set((await svc.get(STDIO, gone)).tags) - {"observation"}
    memory.index.write_blocking(
        lambda c: c.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    )
