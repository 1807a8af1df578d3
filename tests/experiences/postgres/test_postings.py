"""The PostgreSQL memories' posting cache (`experiences.postgres.postings`) answers a recall's
keyword relevance exactly as the SQL path (`keywords.relevance` without a cache) does — the same
memories, the very same doubles — through learns, updates, forgets and deletes on two replicas,
or it does not answer and SQL ranks: a snapshot older than the cache's, a mirror broken by hand.
A feed pruned past a replica's cursor reads everything again. The ranking numbers' mirror
(`experiences.postgres.numbers`) ranks the matches as `ranking._passing`'s SQL does: the same
rows, order and doubles, whatever the scope."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterator
from datetime import timedelta

import pytest

from robot_mcp_memory.experiences.ports import Order, Scope
from robot_mcp_memory.experiences.postgres import keywords, postings, ranking, records
from robot_mcp_memory.experiences.postgres.numbers import MemoryNumbers
from robot_mcp_memory.experiences.postgres.postings import FEED, memory_postings
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.service import ExperienceService, run_sync
from robot_mcp_memory.search import segment
from robot_mcp_memory.search.postgres.postings import PostingCache
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import Principal

pytestmark = pytest.mark.postgres

ROBOTS = (Principal.robot("r1"), Principal.robot("r2"))
WORDS = [
    "red",
    "blue",
    "green",
    "cube",
    "cup",
    "mug",
    "shelf",
    "dock",
    "door",
    "left",
    "right",
    "gripper",
    "force",
    "12",
    "N",
    "40",
    "cm",
    "slow",
    "fast",
    "kitchen",
    "hall",
    "lift",
    "wing",
    "floor",
    "error",
    "E-42",
    "part",
    "PN-7731",
    "serial",
    "qwkzjvb",
    "收发室",
    "取包裹",
    "抓取",
    "杯子",
]
QUERIES = (
    "red cube",
    "the left door",
    "gripper force 12 N",
    "error E-42",
    "qwkzjvb",
    "收发室 取包裹",
    "zebra",
    "kitchen kitchen hall",
    "slide the mug to the right",
)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))


@pytest.fixture
def replicas(pg_store: PostgresStore) -> Iterator[tuple[PostgresMemories, PostgresMemories]]:
    a = PostgresMemories(pg_store)
    b = PostgresMemories(pg_store, migrate=False)
    yield a, b
    a.close()
    b.close()


def service(repo: PostgresMemories) -> ExperienceService:
    return ExperienceService(repo, Policy(SoloMembership()), default_robot="tester")


def assert_cache_answers_as_sql(store: PostgresStore, cache: PostingCache) -> None:
    """In one snapshot: the cache answers every query, and exactly what SQL answers."""

    def check(c: Connection) -> None:
        for query in QUERIES:
            match = segment.match_phrases(query)
            wanted = keywords.phrases(match)
            if any(p.prefix for p in wanted):
                continue  # a prefix phrase is ranked in SQL
            assert cache.score(c, [p.tokens for p in wanted]) is not None, query
            assert keywords.relevance(c, match, cache) == keywords.relevance(c, match), query

    store.read_blocking(check)


def _delete(c: Connection, mid: int) -> None:
    """Delete the memory shown as `mid` by hand."""
    assert c.execute("DELETE FROM memories WHERE id = %s", (records.stored_id(c, mid),)).rowcount == 1


async def write_round(
    svcs: tuple[ExperienceService, ExperienceService],
    store: PostgresStore,
    rng: random.Random,
    owners: dict[int, Principal],
) -> None:
    """Random writes of every kind, each through one of the two replicas: learns, updates (new
    content, new context), forgets (no postings change), deletes by hand. `owners`: the active
    memories and their robots."""
    for _ in range(rng.randint(4, 16)):
        svc, kind = rng.choice(svcs), rng.random()
        if kind < 0.45 or not owners:
            who = rng.choice(ROBOTS)
            got = await svc.learn(who, sentence(rng) + f" {rng.randrange(10**6)}", context={"note": sentence(rng)})
            if got.memory_id is not None:
                owners.setdefault(got.memory_id, who)
        elif kind < 0.7:
            mid = rng.choice(sorted(owners))
            context = {"tags": [rng.choice(WORDS)]} if rng.random() < 0.5 else None
            await svc.update(owners[mid], mid, sentence(rng), context)
        elif kind < 0.85:
            mid = rng.choice(sorted(owners))
            await svc.forget(owners.pop(mid), mid, "stale")  # stays in the index, out of recall
        else:
            mid = rng.choice(sorted(owners))
            del owners[mid]
            store.write_blocking(functools.partial(_delete, mid=mid))


async def test_the_cache_answers_as_sql_through_random_writes_on_two_replicas(
    replicas: tuple[PostgresMemories, PostgresMemories],
) -> None:
    a, b = replicas
    svcs = (service(a), service(b))
    rng, owners = random.Random(2026), dict[int, Principal]()
    for _ in range(12):
        await write_round(svcs, a.db, rng, owners)
        assert_cache_answers_as_sql(a.db, a.postings)
        assert_cache_answers_as_sql(a.db, b.postings)
        # The recall a robot makes, through either replica, ranks from the cache the same.
        first, second = await asyncio.gather(
            svcs[0].recall(ROBOTS[0], "red cube left door", n=10), svcs[1].recall(ROBOTS[0], "red cube left door", n=10)
        )
        assert [(h.memory.id, h.score) for h in first.hits] == [(h.memory.id, h.score) for h in second.hits]
    assert (a.postings.loads, b.postings.loads) == (1, 1)  # patched from the feed, never read again
    assert min(a.postings.patched, b.postings.patched) > 0


async def test_a_recall_ranks_from_the_cache_not_from_sql(replicas: tuple[PostgresMemories, PostgresMemories]) -> None:
    a, _ = replicas
    svc = service(a)
    planted = await svc.learn(ROBOTS[0], "push red cube fixture qwkzjvb")
    for k in range(20):
        await svc.learn(ROBOTS[0], f"push the red cube {k} cm to the left")
    found = await svc.recall(ROBOTS[0], "qwkzjvb", n=3)
    assert [h.memory.id for h in found.hits] == [planted.memory_id]
    assert a.postings.loads == 1
    before = a.postings.patched
    await svc.learn(ROBOTS[0], "the dock door qwkzjvb sticks")
    found = await svc.recall(ROBOTS[0], "qwkzjvb", n=3)
    assert len(found.hits) == 2
    assert a.postings.patched > before
    assert a.postings.loads == 1


def test_a_snapshot_older_than_the_cache_is_answered_in_sql(
    replicas: tuple[PostgresMemories, PostgresMemories],
) -> None:
    a, b = replicas
    store, svc = a.db, service(a).blocking()
    run_sync(svc.learn(ROBOTS[0], "the red cube is on the left shelf"))
    cache = memory_postings()
    match = segment.match_phrases("red cube")
    wanted = [p.tokens for p in keywords.phrases(match)]
    with store.pool.connection() as old, old.transaction():
        old.execute(store._begin_read)
        before = keywords.relevance(old, match)  # the old snapshot starts here
        run_sync(svc.learn(ROBOTS[1], "a red cube fell behind the dock"))
        assert store.read_blocking(lambda c: cache.score(c, wanted)) is not None  # the cache moves on
        assert cache.score(old, wanted) is None  # and cannot answer for the older snapshot
        assert keywords.relevance(old, match, cache) == before  # SQL, in the old snapshot
        assert len(before) == 1
    assert cache.loads == 1
    assert b.postings.loads == 0  # the other replica read nothing it was not asked for


def test_a_mirror_broken_by_hand_is_left_to_sql_until_the_next_change(
    replicas: tuple[PostgresMemories, PostgresMemories],
) -> None:
    a, _ = replicas
    svc = service(a).blocking()
    m = run_sync(svc.learn(ROBOTS[0], "the left door of the lift is slow"))
    match = segment.match_phrases("left door")
    wanted = [p.tokens for p in keywords.phrases(match)]
    cache = memory_postings()
    assert a.db.read_blocking(lambda c: cache.score(c, wanted)) is not None
    a.db.write_blocking(
        lambda c: c.execute(
            "UPDATE memories SET doclen = doclen + 1 WHERE id = %s", (records.stored_id(c, m.memory_id),)
        )
    )
    assert a.db.read_blocking(lambda c: cache.score(c, wanted)) is None  # the lengths disagree: SQL ranks
    assert a.db.read_blocking(lambda c: keywords.relevance(c, match, cache) == keywords.relevance(c, match))
    run_sync(svc.update(ROBOTS[0], m.memory_id, "the left door of the lift is fast"))  # rewrites the postings
    assert a.db.read_blocking(lambda c: cache.score(c, wanted)) is not None


def test_a_feed_pruned_past_the_cursor_reads_everything_again(
    replicas: tuple[PostgresMemories, PostgresMemories],
) -> None:
    a, _ = replicas
    svc = service(a).blocking()
    run_sync(svc.learn(ROBOTS[0], "the red cube is on the left shelf"))
    cache = memory_postings()
    match = segment.match_phrases("red cube shelf")
    wanted = [p.tokens for p in keywords.phrases(match)]
    a.db.read_blocking(lambda c: cache.score(c, wanted))
    assert cache.loads == 1
    run_sync(svc.learn(ROBOTS[0], "a red cube on the right shelf"))
    a.db.write_blocking(lambda c: FEED.prune(c, horizon=timedelta(0)))
    assert a.db.read_blocking(lambda c: keywords.relevance(c, match, cache) == keywords.relevance(c, match))
    assert cache.loads == 2


def test_writes_prune_the_feed_when_due_and_a_cache_behind_it_reads_everything_again(
    replicas: tuple[PostgresMemories, PostgresMemories], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = replicas
    svc = service(a).blocking()
    run_sync(svc.learn(ROBOTS[0], "the red cube is on the left shelf"))
    assert [h.memory.content for h in run_sync(svc.recall(ROBOTS[0], "red cube")).hits]
    assert a.postings.loads == 1
    monkeypatch.setattr(postings, "FEED_HORIZON", timedelta(0))
    monkeypatch.setattr(postings, "PRUNE_EVERY_S", 0.0)
    run_sync(svc.learn(ROBOTS[0], "a red cube sits on the right shelf"))  # prunes every entry, its own too

    def entries(c: Connection) -> int:
        row = c.execute("SELECT count(*) FROM change_log WHERE component = %s", (FEED.component,)).fetchone()
        return int(row[0]) if row else 0

    assert a.db.read_blocking(entries) == 0
    assert len(run_sync(svc.recall(ROBOTS[0], "red cube")).hits) == 2
    assert a.postings.loads == 2


def _hand_edits(c: Connection, rng: random.Random) -> None:
    """Changes only a hand (or a later release) makes: sessions, confidences, weights, a
    collection — each a column the numbers' mirror holds, so each must reach it by the feed."""
    ids = [int(r[0]) for r in c.execute("SELECT id FROM memories").fetchall()]
    for mid in rng.sample(ids, min(len(ids), 8)):
        c.execute(
            "UPDATE memories SET session_id = %s, confidence = %s, source_weight = %s, collection = %s WHERE id = %s",
            (
                rng.choice((None, "s-1", "s-2")),
                rng.choice((0.05, 0.5, 0.9, 1.0)),
                rng.choice((0.5, 1.0, 2.0, 9.0)),
                rng.choice(("default", "default", "lab")),
                mid,
            ),
        )
    # Ties: the same age, confidence and weight for a quarter of the memories (the twins learned
    # by both robots then tie on score too, and their ids decide).
    c.execute("UPDATE memories SET updated_at = 1.8e9, confidence = 1.0, source_weight = 1.0 WHERE id % 4 = 0")


def assert_numbers_rank_as_sql(store: PostgresStore, cache: PostingCache, numbers: MemoryNumbers) -> None:
    with_numbers, sql = ranking.Caches(cache, numbers), ranking.Caches(cache, None)
    now = 1.9e9
    scopes = [
        Scope(visible, collection, min_conf, now, session, exclude)
        for visible in (None, frozenset({"r1"}), frozenset({"r2", "nobody"}), frozenset())
        for collection in ("default", "lab", "absent")
        for min_conf, session, exclude in ((0.0, None, None), (0.3, "s-1", None), (0.0, None, "s-2"))
    ]
    orders: tuple[Order, ...] = ("score", "relevance")

    def check(c: Connection) -> None:
        for query in QUERIES[:5]:
            match = segment.match_phrases(query)
            for scope in scopes:
                cond = ranking.compiled(scope)
                for order in orders:
                    for limit in (1, 10, 10_000):
                        got = ranking._numbers(c, scope, cond, match, order, limit, None, with_numbers)
                        want = ranking._numbers(c, scope, cond, match, order, limit, None, sql)
                        assert got == want, (query, scope, order, limit)

    store.read_blocking(check)


async def test_the_numbers_mirror_ranks_as_sql_through_writes_and_hand_edits(
    replicas: tuple[PostgresMemories, PostgresMemories],
) -> None:
    a, b = replicas
    svcs = (service(a), service(b))
    rng, owners = random.Random(7), dict[int, Principal]()
    for k in range(6):
        await write_round(svcs, a.db, rng, owners)
        for who in ROBOTS:  # the same text for both robots: the same relevance
            await svcs[0].learn(who, f"the red cube twin {k} sits left of the door")
        a.db.write_blocking(functools.partial(_hand_edits, rng=rng))
        assert_numbers_rank_as_sql(a.db, a.postings, b.numbers)
    assert b.numbers.loads == 1
    assert b.numbers.patched > 0


async def test_a_recall_ranks_its_matches_from_the_mirror(replicas: tuple[PostgresMemories, PostgresMemories]) -> None:
    a, _ = replicas
    svc = service(a)
    for k in range(30):
        await svc.learn(ROBOTS[k % 2], f"push the red cube {k} cm to the left")
    found = await svc.recall(ROBOTS[0], "red cube", n=5)
    assert len(found.hits) == 5
    assert {h.memory.robot for h in found.hits} == {"r1"}
    assert a.numbers.loads == 1
    filtered = await svc.recall(ROBOTS[0], "red cube", n=5, context_filter={"task.success": True})
    assert filtered.hits == []  # a context filter is read in SQL, as before
