"""Hybrid recall and semantic dedup on PostgreSQL (`PostgresMemoryVectors`) beside SQLite's
(`MemoryVectorIndex`), with the test fixture's hashing embedder on both: the same learns decide
alike, the same recalls fuse the same lists (ids, order, mode; scores equal but for the decay of
the few milliseconds between the two calls), and a forgotten or edited memory's vector goes with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bench.experience_corpus import corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.postgres.vectors import PostgresMemoryVectors
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.principal import Principal
from tests.experiences import test_hybrid_recall as hybrid

pytestmark = pytest.mark.postgres

R1 = Principal.robot("r1")
QUERIES = (
    "gripper slipped",
    "the mug fell out of the hand",
    "grasp the silver spatula",
    "door would not open",
    "dock at the charger",
    "pour water carefully",
)


@pytest.fixture
def services(memory: Memory, pg_store: PostgresStore) -> Iterator[tuple[ExperienceService, ExperienceService]]:
    lite = memory.experiences
    assert lite.vectors is not None
    pg = PostgresMemories(pg_store)
    vectors = PostgresMemoryVectors(pg_store, memory.embedder, lite.vectors.weights, lite.vectors.k)
    yield (
        ExperienceService(lite.store, lite.policy, default_robot="tester", vectors=lite.vectors),
        ExperienceService(pg, lite.policy, default_robot="tester", vectors=vectors),
    )
    vectors.close()
    pg.close()


async def test_hybrid_recall_fuses_the_same_lists_on_both_backends(
    services: tuple[ExperienceService, ExperienceService],
) -> None:
    items = list(corpus(150, seed=5))
    learned = []
    for svc in services:
        learned.append([(await svc.learn(R1, it.insight, it.context)).memory_id for it in items])
        await svc.learn(R1, "gripper slipped", {"task": {"success": False}})
    assert learned[1] == learned[0]
    await _same_recalls(services)
    # PostgreSQL's cache is patched from its feed, SQLite's after each commit: edits and forgets
    # of memories both caches already hold leave the same rankings.
    for svc in services:
        for mid in learned[0][:40:4]:
            await svc.forget(R1, mid, "obsolete")
        for k, mid in enumerate(learned[0][1:40:4]):
            await svc.update(R1, mid, f"{QUERIES[k % len(QUERIES)]} after the gripper was replaced")
    await _same_recalls(services)


async def _same_recalls(services: tuple[ExperienceService, ExperienceService]) -> None:
    for query in QUERIES:
        for spec in (None, {"task.success": True}):
            lite = await services[0].recall(R1, query, n=10, context_filter=spec)
            pg = await services[1].recall(R1, query, n=10, context_filter=spec)
            assert pg.mode == lite.mode == "hybrid", query
            assert [h.memory.id for h in pg.hits] == [h.memory.id for h in lite.hits], (query, spec)
            assert [h.score for h in pg.hits] == pytest.approx([h.score for h in lite.hits], rel=1e-9)


async def test_semantic_dedup_decides_alike_on_both_backends(
    services: tuple[ExperienceService, ExperienceService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the cosine the hashing embedder gives a paraphrase (`test_hybrid_recall`), the semantic
    stage decides — among same-facts memories only — and decides alike."""
    monkeypatch.setattr(dedup, "COSINE_DUPLICATE", hybrid.HASHING_DUPLICATE)
    texts = (
        hybrid.BASE,
        *(hybrid.PARAPHRASE.replace("12", str(force)) for force in range(13, 16)),
        hybrid.PARAPHRASE,
        hybrid.PARAPHRASE + ", and it failed",
    )
    decided: list[list[tuple[str, int, str | None]]] = []
    for svc in services:
        decided.append([])
        for t in texts:
            r = await svc.learn(R1, t)
            decided[-1].append((r.status, r.memory_id, r.method))
    assert decided[1] == decided[0]
    assert decided[0][4] == ("duplicate", decided[0][0][1], "cosine")
    keyword_only = ExperienceService(services[1].store, services[1].policy, default_robot="tester")
    await keyword_only.learn(R1, hybrid.BASE, collection="plain")
    assert (await keyword_only.learn(R1, hybrid.PARAPHRASE, collection="plain")).status == "created"  # cosine decided


async def test_a_forgotten_or_edited_memory_leaves_the_vector_ranking(
    services: tuple[ExperienceService, ExperienceService],
) -> None:
    pg = services[1]
    slipped = await pg.learn(R1, "gripper slipped", {"task": {"success": False}})
    other = await pg.learn(R1, "the door opened easily")
    assert slipped.memory_id in [h.memory.id for h in (await pg.recall(R1, "the gripper slips")).hits]
    await pg.update(R1, other.memory_id, "the gripper slips on wet mugs")
    await pg.forget(R1, slipped.memory_id, "fixed")
    found = await pg.recall(R1, "gripper slipped")
    assert [h.memory.id for h in found.hits] == [other.memory_id]
    assert found.mode == "hybrid"
