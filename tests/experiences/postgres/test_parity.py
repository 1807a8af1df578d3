"""Cross-backend parity of the experience memory: the same memories learned on SQLite and on
PostgreSQL read back equal, and the same recall lists — keyword, filter-only, context filters,
sessions, spatial orders — hold the same ids in the same order with equal numbers (FTS5's
``bm25()`` on one side, `search.bm25` over FTS5's own tokens on the other)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from bench.experience_corpus import corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.filters import parse_filter
from robot_mcp_memory.experiences.model import Session, Spatial
from robot_mcp_memory.experiences.ports import (
    Filters,
    MemoryCatalogue,
    MemoryRepository,
    Order,
    Ranked,
    Scope,
    Snapshot,
)
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.search import segment
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import Principal

pytestmark = pytest.mark.postgres

#: Every memory's time is set to this, less a few days (so decay differs), on both backends.
NOW = 1_800_000_000.0
DAY = 86_400.0
R1, R2 = Principal.robot("r1"), Principal.robot("r2")

QUERIES = (
    "grasp the silver mug",
    "grip force",
    "open the double door in the warehouse",
    "dock at the charger",
    "insert the green bottle into the conveyor slot",
    "it worked",
    "approach angle 90 deg",
    "the",
    "26.0 N",
    "0.14 m/s",
    "Kitchen",
    "purple key rack",
    "把包裹送到收发室",
    "包",
    "café naïve",
    "zebra",
    "spatula spatula rim",
)
FILTERS: tuple[dict[str, Any], ...] = (
    {"task.success": True},
    {"task.success": False},
    {"params.grip_force": {"$gte": 10, "$lt": 25.5}},
    {"robot.type": {"$in": ["ur5e", "panda"]}},
    {"robot.type": {"$nin": ["ur5e", "panda"]}, "task.source": "real"},
    {"params.approach_angle": 90},
    {"params.approach_angle": 90.0},
    {"spatial.position.0": {"$lt": 0}},
    {"spatial.position": {"$exists": True}, "task.name": {"$ne": "insert"}},
    {"task": {"name": "grasp", "success": True, "source": "sim"}},
    {"task.name": {"$gte": "insert"}},
    {"params": {"$exists": False}},
    {"note": None},
    {"extra.flags": [True, 0, "x"]},
    {"extra.flags.0": 1},
    {"extra": {"0": "key"}},
)


@dataclass
class Side:
    name: str
    repo: MemoryRepository
    service: ExperienceService


def _extra(i: int) -> dict[str, Any]:
    """A few hand-made contexts beyond the corpus: nulls, lists with booleans, a key that is a number."""
    extras: list[dict[str, Any]] = [
        {"note": None, "extra": {"flags": [True, 0, "x"]}},
        {"extra": {"flags": [1, False, "x"], "0": "key"}},
        {"extra": {"flags": [1.0, 0.0, "x", None]}},
        {"extra": {"0": "key"}, "note": "café naïve"},
    ]
    return extras[i % 4]


async def _fill(side: Side) -> list[int]:
    """The memories every test here compares, learned through the service: their stored ids."""
    items = list(corpus(240, seed=11))
    ids: list[int] = []
    for k, it in enumerate(items):
        who = R1 if k % 5 else R2
        ctx = dict(it.context) if k % 9 else {**it.context, **_extra(k)}
        learned = await side.service.learn(who, it.insight, ctx, collection=it.collection)
        ids.append(learned.memory_id)
    for k, text in enumerate(("把包裹送到收发室", "包装盒在收发室", "the café is naïve about spatula rims")):
        ids.append((await side.service.learn(R1, text, {"note": "café naïve", "k": k})).memory_id)
    again = await side.service.learn(R1, items[1].insight, dict(items[1].context))  # a duplicate: no new id
    ids.append(again.memory_id)
    await side.service.forget(R1, ids[3] if ids[3] % 5 else ids[4], "moved")
    await side.service.update(R1, ids[6], "the grip force on the silver mug is 12 N by the rim", {"task": {}})
    return await _stored(side, ids)


async def _stored(side: Side, public_ids: list[int]) -> list[int]:
    """The stored ids (which the repository works in) of memories the service showed as `public_ids`."""

    def read(s: Snapshot) -> list[int]:
        found = [s.select_public(p) for p in public_ids]
        assert None not in found
        return [e.id for e in found if e is not None]

    return await side.repo.snapshot(read)


def _age(side: Side, ids: list[int]) -> None:
    """Every memory's times made fixed, some days apart, straight in the database."""
    ages = [(NOW - (mid % 37) * 7 * DAY, mid) for mid in sorted(set(ids))]
    if isinstance(side.repo, PostgresMemories):
        side.repo.db.write_blocking(
            lambda c: c.cursor().executemany(
                "UPDATE memories SET updated_at = %s, created_at = %s - 1 WHERE id = %s", [(t, t, m) for t, m in ages]
            )
        )
    else:
        side.repo.store.db.write_blocking(  # type: ignore[attr-defined] # the SQLite adapter's store
            lambda c: c.executemany(
                "UPDATE memories SET updated_at = ?, created_at = ? - 1 WHERE id = ?", [(t, t, m) for t, m in ages]
            )
        )


@pytest.fixture
def sides(memory: Memory, pg_store: PostgresStore) -> Iterator[tuple[Side, Side]]:
    policy = Policy(SoloMembership())
    pg = PostgresMemories(pg_store)
    sqlite = Side("sqlite", memory.memories, ExperienceService(memory.memories, policy, default_robot="tester"))
    postgres = Side("postgres", pg, ExperienceService(pg, policy, default_robot="tester"))
    yield sqlite, postgres
    pg.close()


def _key(r: Ranked) -> tuple[Any, ...]:
    return (r.memory.id, r.relevance, r.score, r.confidence, r.dist2, r.blend)


async def _rank(side: Side, scope: Scope, query: str | None, order: Order, n: int) -> list[tuple[Any, ...]]:
    match = segment.match_phrases(query) if query else None

    def read(s: Snapshot) -> list[tuple[Any, ...]]:
        return [_key(r) for r in s.rank(scope, match, order, n, accelerated=False)]

    return await side.repo.snapshot(read)


def _scope(visible: frozenset[str] | None = None, **kw: Any) -> Scope:
    return Scope(visible=visible, collection=kw.pop("collection", "default"), min_confidence=0.0, now=NOW, **kw)


async def test_the_same_memories_read_back_equal_on_both_backends(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    assert await _fill(pg) == ids
    _age(lite, ids)
    _age(pg, ids)
    every = sorted(set(ids))
    got_lite = await lite.repo.snapshot(lambda s: s.rows_of(every, include_data=True))
    got_pg = await pg.repo.snapshot(lambda s: s.rows_of(every, include_data=True))
    assert got_pg == got_lite
    assert {m.status for m in got_pg.values()} == {"active", "forgotten"}


async def test_keyword_recall_ranks_alike_with_equal_scores(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    await _fill(pg)
    _age(lite, ids)
    _age(pg, ids)
    compared = 0
    for query in QUERIES:
        for visible in (None, frozenset({"r1"}), frozenset({"r2", "nobody"})):
            for collection in ("default", "kitchen-lab"):
                for order in ("score", "relevance"):
                    scope = _scope(visible, collection=collection)
                    want = await _rank(lite, scope, query, order, 25)
                    assert await _rank(pg, scope, query, order, 25) == want, (query, visible, collection, order)
                    compared += len(want)
        hybrid_lite = await lite.repo.snapshot(lambda s: s.weighed(_scope(), segment.match_phrases(query), 40))  # noqa: B023
        hybrid_pg = await pg.repo.snapshot(lambda s: s.weighed(_scope(), segment.match_phrases(query), 40))  # noqa: B023
        assert hybrid_pg == hybrid_lite, query
    assert compared > 500  # the lists were not all empty


async def test_filtered_recall_passes_the_same_memories_in_the_same_order(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    await _fill(pg)
    _age(lite, ids)
    _age(pg, ids)
    nonempty = 0
    for spec in FILTERS:
        tree = parse_filter(spec)
        for query in (None, "grip force", "café"):
            scope = _scope(context_filter=tree)
            want = await _rank(lite, scope, query, "score", 100)
            assert await _rank(pg, scope, query, "score", 100) == want, (spec, query)
            nonempty += bool(want)
        passing_lite = await lite.repo.snapshot(lambda s: s.ids_in_scope(_scope(context_filter=tree)))  # noqa: B023
        passing_pg = await pg.repo.snapshot(lambda s: s.ids_in_scope(_scope(context_filter=tree)))  # noqa: B023
        assert sorted(passing_pg) == sorted(passing_lite), spec
    assert nonempty >= 2 * len(FILTERS)


async def test_spatial_orders_and_the_confidence_floor_rank_alike(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    await _fill(pg)
    _age(lite, ids)
    _age(pg, ids)
    for spatial in (
        Spatial("spatial.position", (0.0, 0.0, 0.0)),
        Spatial("spatial.position", (0.5, -1.0, 0.2), max_distance=1.5, weight=0.3),
        Spatial("spatial.position", (1.0,)),
    ):
        for order in ("distance", "blend", "score"):
            for query in (None, "grasp the mug"):
                scope = Scope(None, "default", 0.45, NOW, spatial=spatial)
                want = await _rank(lite, scope, query, order, 30)
                assert await _rank(pg, scope, query, order, 30) == want, (spatial, order, query)
                assert want or query is not None


async def test_sessions_recall_and_end_alike(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    assert await _fill(pg) == ids
    ended = []
    for side in sides:
        s = await side.service.start_session(R1, "default")
        learned = [
            (await side.service.learn(R1, text, {"task": {"success": k % 2 == 0}}, session_id=s.id)).memory_id
            for k, text in enumerate(
                (
                    "the mug slips when the gripper is wet",
                    "the mug slips when the gripper is wet and cold",
                    "open the drawer slowly at 0.1 m/s",
                    "the drawer sticks near the end",
                )
            )
        ]
        inside = await side.service.recall(R1, "mug drawer", n=10, session_id=s.id)
        everywhere = await side.service.recall(R1, "mug drawer", n=10)
        done = await side.service.end_session(R1, s.id, outcome_score=0.75)
        summary = {k: v for k, v in done.session.summary.items() if k != "duration_s"} if done.session.summary else {}
        ended.append(
            (
                learned,
                [h.memory.id for h in inside.hits],
                [h.memory.id for h in everywhere.hits],
                summary,
                [h.memory.status for h in (await side.service.recall(R1, "mug", n=10, session_id=s.id)).hits],
            )
        )
    assert ended[1] == ended[0]
    assert ended[0][1]  # the session's memories were found


async def _sessions(side: Side) -> list[int]:
    """Three sessions of fixed ids and times, with memories whose outcomes are written four ways;
    the first ended (scored), the second ended unscored, the third open."""
    learned: list[int] = []
    for k, (robot, started) in enumerate((("r1", NOW - 3 * DAY), ("r2", NOW - 2 * DAY), ("r1", NOW - DAY))):
        s = Session(f"s{k}", robot, "default", {"k": k}, started)
        await side.repo.transaction(lambda t: t.insert_session(s))  # noqa: B023
        for j, outcome in enumerate((True, False, 1.0, "yes", None, 0)):
            ctx = {"task": {"success": outcome}} if outcome is not None else {}
            text = f"session {k} step {j}: the arm moved the crate {j + 1} times"
            learned.append((await side.service.learn(Principal.robot(robot), text, ctx, session_id=s.id)).memory_id)
    for sid, score in (("s0", 0.4), ("s1", None)):
        await side.repo.transaction(lambda t: t.end_session(sid, score, NOW - DAY / 2, lambda rows: []))  # noqa: B023
    return await _stored(side, learned)


async def test_the_catalogue_answers_alike(sides: tuple[Side, Side]) -> None:
    lite, pg = sides
    ids = await _fill(lite)
    assert await _fill(pg) == ids
    in_sessions = await _sessions(lite)
    assert await _sessions(pg) == in_sessions
    _age(lite, ids + in_sessions)
    _age(pg, ids + in_sessions)
    answers = []
    for side in sides:
        cat: MemoryCatalogue = side.repo  # type: ignore[assignment] # both adapters are catalogues too
        page = await cat.page(Filters(None, success=True), 20, 5)
        failed = await cat.page(Filters(frozenset({"r1"}), success=False, status="all", since=NOW - 90 * DAY), 50, 0)
        answers.append(
            (
                [m.id for m in page[0]],
                page[1],
                failed,
                await cat.counts_by("collection", None),
                await cat.counts_by("category", frozenset({"r1"})),
                await cat.status_counts(None),
                await cat.status_counts(frozenset({"r2"})),
                await cat.per_day(None, NOW - 100 * DAY),
                await cat.robot_days(frozenset({"r1", "r2"}), NOW - 60 * DAY),
                await cat.robot_totals(None),
                await cat.sessions(None, "", "", 10, 0),
                await cat.sessions(frozenset({"r1"}), "default", "r1", 1, 1),
                await cat.session("s0"),
                await cat.timeline("s0", 4),
                await cat.timeline("s2", 10),
                await cat.session_days(None, NOW - 10 * DAY),
                await cat.one((await side.repo.snapshot(lambda s: s.public_ids([ids[6]])))[ids[6]]),
            )
        )
    assert answers[1] == answers[0]
    found = answers[0][-1]
    assert found is not None  # found by its public id
    assert found.id == ids[6]
    assert answers[0][1] > 0
    assert answers[0][2][1] > 0
    sessions, total = answers[0][10]
    assert total == 3
    assert [r.failures for r in sessions] == [2, 2, 2]
