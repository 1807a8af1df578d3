"""Memory vectors on PostgreSQL held per replica (`PostgresMemoryVectors`' `VectorCache`, patched
from the ``vectors`` feed): two replicas — two stores, adapters and caches on one schema — where
what one writes (a learn, an edit, a forget, a vector dropped) is in the other's next recall; the
cache reads the table once and then only the feed's new rows; the backfill embeds what lacks a
vector; a hand-over re-files vectors under the new robot; and the step that moved the former
``memory_vectors`` rows into the shared table."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.ports import Embedded
from robot_mcp_memory.experiences.postgres import tables
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories, View
from robot_mcp_memory.experiences.postgres.vectors import DOMAIN, PostgresMemoryVectors
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.operations.postgres.store import PostgresOperations
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.vectors import encode
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import Principal
from tests.conftest import eventually

pytestmark = pytest.mark.postgres

R1, R2 = Principal.robot("r1"), Principal.robot("r2")
TEXTS = (
    "the gripper slipped on the wet mug",
    "the door in wing B opens inwards",
    "dock at the charger before the battery falls under 20 percent",
    "pour water slowly into the narrow glass",
)


@dataclass
class Replica:
    """One server process's part: its pool, repository, vector adapter (and cache), service."""

    db: PostgresStore
    repo: PostgresMemories
    vectors: PostgresMemoryVectors
    svc: ExperienceService

    @classmethod
    def open(cls, url: str, schema: str, embedder: ResilientEmbedder | None) -> Replica:
        db = PostgresStore.open(url, schema=schema, max_size=2)
        repo = PostgresMemories(db)
        vectors = PostgresMemoryVectors(db, embedder)
        svc = ExperienceService(repo, Policy(SoloMembership()), default_robot="tester", vectors=vectors)
        return cls(db, repo, vectors, svc)

    def close(self) -> None:
        self.vectors.close()
        self.repo.close()
        self.db.close()

    def query(self, text: str) -> Embedded:
        (q,) = self.vectors.embed([text])
        assert q is not None
        return q

    async def nearest(self, text: str, k: int = 10, robots: frozenset[str] | None = None) -> dict[int, float]:
        """(public memory id → cosine) of the `k` nearest to `text`, as this replica's cache ranks them."""
        q = self.query(text)

        def read(s: View) -> dict[int, float]:
            near = dict(self.vectors.nearest_any(s, q, k, robots) or [])
            shown = s.public_ids(near)
            return {shown[m]: cos for m, cos in near.items()}

        return await self.repo.snapshot(read)

    async def recalled(self, principal: Principal, text: str) -> list[int]:
        found = await self.svc.recall(principal, text, n=10)
        assert found.mode == "hybrid"
        return [h.memory.id for h in found.hits]


@pytest.fixture
def embedder(memory: Memory) -> ResilientEmbedder:
    emb = memory.embedder
    assert emb is not None
    assert emb.wait_settled(10)
    return emb


@pytest.fixture
def replicas(pg_url: str, pg_store: PostgresStore, embedder: ResilientEmbedder) -> Iterator[tuple[Replica, Replica]]:
    a = Replica.open(pg_url, pg_store.schema, embedder)
    b = Replica.open(pg_url, pg_store.schema, embedder)
    yield a, b
    a.close()
    b.close()


def _same(cos: float | None) -> bool:
    return cos is not None and cos > 0.999


async def test_a_learn_on_one_replica_is_in_the_other_replicas_next_recall(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    first = await a.svc.learn(R1, TEXTS[0])
    assert _same((await b.nearest(TEXTS[0])).get(first.memory_id))
    assert (b.vectors.cache.loads, b.vectors.cache.applied) == (1, 0)
    later = [(await a.svc.learn(R1, t)).memory_id for t in TEXTS[1:]]
    for mid, text in zip(later, TEXTS[1:], strict=True):
        assert _same((await b.nearest(text)).get(mid)), text
        assert mid in await b.recalled(R1, text)
    # One full read, then the three new rows from the feed, each applied once.
    assert (b.vectors.cache.loads, b.vectors.cache.applied) == (1, 3)


async def test_a_forgotten_memory_never_comes_back_on_any_replica(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    ids = [(await a.svc.learn(R1, t)).memory_id for t in TEXTS]
    assert ids[0] in await b.recalled(R1, TEXTS[0])  # b's cache holds it
    await a.svc.forget(R1, ids[0], "fixed")
    assert ids[0] not in await b.nearest(TEXTS[0], k=len(TEXTS))
    assert ids[0] not in await b.recalled(R1, TEXTS[0])
    assert ids[0] not in await a.recalled(R1, TEXTS[0])
    # The backfill embeds active memories only: the forgotten one stays without a vector.
    assert b.vectors.backfill_blocking() == 0
    assert ids[0] not in await b.nearest(TEXTS[0], k=len(TEXTS))
    assert b.vectors.cache.loads == 1


async def test_an_edited_memory_is_ranked_by_its_new_vector_on_the_other_replica(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    ids = [(await a.svc.learn(R1, t)).memory_id for t in TEXTS]
    assert _same((await b.nearest(TEXTS[1])).get(ids[1]))
    edited = "the lift in wing C stops at every floor"
    await a.svc.update(R1, ids[1], edited)
    near = await b.nearest(edited)
    assert _same(near.get(ids[1]))
    assert not _same((await b.nearest(TEXTS[1])).get(ids[1]))  # the old text's vector is gone
    assert b.vectors.cache.loads == 1


async def test_a_vector_dropped_by_a_replica_without_embedder_leaves_every_cache_and_the_backfill_remakes_it(
    pg_url: str, pg_store: PostgresStore, replicas: tuple[Replica, Replica]
) -> None:
    """An edit on a replica whose embedder gave nothing deletes the stale vector (a tombstone the
    feed carries); the other replica's backfill embeds the new text, and both caches hear of it."""
    a, b = replicas
    ids = [(await a.svc.learn(R1, t)).memory_id for t in TEXTS]
    assert _same((await b.nearest(TEXTS[2])).get(ids[2]))
    assert _same((await a.nearest(TEXTS[2])).get(ids[2]))
    # a's first learn (its dedup) found no vector yet, and looks again until there is one.
    loads = (a.vectors.cache.loads, b.vectors.cache.loads)
    blind = Replica.open(pg_url, pg_store.schema, None)
    try:
        edited = "charge at dock 3 whenever the battery is low"
        await blind.svc.update(R1, ids[2], edited)
    finally:
        blind.close()
    assert ids[2] not in await b.nearest(TEXTS[2], k=len(TEXTS))
    assert ids[2] not in await a.nearest(edited, k=len(TEXTS))
    assert b.vectors.backfill_blocking() == 1
    assert _same((await a.nearest(edited)).get(ids[2]))
    assert _same((await b.nearest(edited)).get(ids[2]))
    assert (a.vectors.cache.loads, b.vectors.cache.loads) == loads == (2, 1)


async def test_memories_learned_without_a_vector_are_embedded_in_the_background(
    pg_url: str, pg_store: PostgresStore, replicas: tuple[Replica, Replica]
) -> None:
    """Learned while no embedder was there (as after ``copy-to-postgres``): keyword-only, until the
    background backfill (kicked as the server's embedder becomes ready) embeds them."""
    a, _b = replicas
    blind = Replica.open(pg_url, pg_store.schema, None)
    try:
        ids = [(await blind.svc.learn(R1, t)).memory_id for t in TEXTS]
    finally:
        blind.close()
    assert await a.nearest(TEXTS[0]) == {}
    a.vectors.kick_backfill()
    assert eventually(lambda: a.db.read_blocking(lambda c: vectorstore.counts(c, DOMAIN)).get(a.query("")[0], 0) == 4)
    near = await a.nearest(TEXTS[3])
    assert _same(near.get(ids[3]))
    assert set(near) == set(ids)


async def test_recall_keeps_to_the_robots_a_principal_sees(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    mine = (await a.svc.learn(R1, TEXTS[0])).memory_id
    theirs = (await a.svc.learn(R2, TEXTS[0] + " again")).memory_id
    assert set(await b.nearest(TEXTS[0])) == {mine, theirs}
    assert set(await b.nearest(TEXTS[0], robots=frozenset({"r1"}))) == {mine}
    assert theirs not in await b.recalled(R1, TEXTS[0])
    assert mine not in await b.recalled(R2, TEXTS[0])


async def test_a_hand_over_refiles_the_vectors_under_the_new_robot(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    PostgresProcesses(a.db).close()  # a hand-over moves processes too: their tables
    unknown = Principal.robot("unknown")
    mid = (await a.svc.learn(unknown, TEXTS[1])).memory_id
    assert mid in await b.nearest(TEXTS[1], robots=frozenset({"unknown"}))
    moved = await PostgresOperations(a.db).hand_over_unknown("r9")
    assert moved["memories"] == 1
    assert mid in await b.nearest(TEXTS[1], robots=frozenset({"r9"}))
    assert mid not in await b.nearest(TEXTS[1], robots=frozenset({"unknown"}))
    assert mid in await b.recalled(Principal.robot("r9"), TEXTS[1])


def test_the_former_memory_vectors_rows_move_into_the_shared_table(
    pg_store: PostgresStore, embedder: ResilientEmbedder
) -> None:
    """A schema at experience step 2 (``memory_vectors``): step 3 carries the active memories'
    vectors into domain ``'memory'`` under their robot, leaves a forgotten one's behind, and drops
    the old table."""
    pg_store.migrate(tables.COMPONENT, tables.MIGRATIONS[:2])
    vec = embedder.embed(["a"])
    model_id = embedder.model_id
    assert vec is not None
    assert model_id is not None

    def old(conn: Connection) -> None:
        for mid, robot, status in ((1, "r1", "active"), (2, "r2", "active"), (3, "r1", "forgotten")):
            conn.execute(
                "INSERT INTO memories(id, robot, type, content, confidence, status, content_hash, created_at, "
                "updated_at) VALUES (%s, %s, 'fact', 'a', 0.9, %s, 'h', 0, 0)",
                (mid, robot, status),
            )
            conn.execute(
                "INSERT INTO memory_vectors(memory_id, model_id, dim, vec) VALUES (%s, %s, %s, %s)",
                (mid, model_id, int(vec.shape[1]), encode(vec[0])),
            )

    pg_store.write_blocking(old)
    repo = PostgresMemories(pg_store)  # migrates the shared table, then step 3
    try:
        rows = pg_store.read_blocking(
            lambda c: c.execute(
                "SELECT ref, part, model_id FROM vectors WHERE domain = 'memory' AND vec IS NOT NULL ORDER BY ref"
            ).fetchall()
        )
        assert rows == [("1", "r1", model_id), ("2", "r2", model_id)]
        gone = pg_store.read_blocking(lambda c: c.execute("SELECT to_regclass('memory_vectors')").fetchone())
        assert gone == (None,)
    finally:
        repo.close()


async def test_nearest_ranks_only_among_the_ids_it_is_given_on_a_warm_cache(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    ids = [(await a.svc.learn(R1, t)).memory_id for t in TEXTS]
    assert set(await b.nearest(TEXTS[0])) == set(ids)  # warm: every vector held
    q = b.query(TEXTS[0])

    def read(s: View) -> list[tuple[int, float]] | None:
        within = [e.id for e in (s.select_public(ids[1]), s.select_public(ids[3])) if e is not None]
        assert len(within) == 2
        return b.vectors.nearest(s, q, 10, within)  # the stored ids, which the vectors are filed by

    found = await b.repo.snapshot(read)
    assert found is not None
    shown = await b.repo.snapshot(lambda s: s.public_ids([m for m, _ in found]))
    assert set(shown.values()) == {ids[1], ids[3]}


async def test_learns_on_both_replicas_at_once_are_all_in_each_replicas_next_recall(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    seed = (await a.svc.learn(R1, "the first memory of the day")).memory_id
    loads = []
    for replica in replicas:  # both caches loaded, then patched from the feed while both write
        assert seed in await replica.nearest(TEXTS[0])
        loads.append(replica.vectors.cache.loads)
    texts = [f"{t} (shift {k})" for k in range(6) for t in TEXTS]
    learned = await asyncio.gather(*((a if i % 2 else b).svc.learn(R1, t) for i, t in enumerate(texts)))
    ids = {r.memory_id for r in learned} | {seed}
    assert len(ids) == len(texts) + 1
    for replica, loaded in zip(replicas, loads, strict=True):
        assert set(await replica.nearest(TEXTS[0], k=len(ids))) == ids
        assert replica.vectors.cache.loads == loaded
