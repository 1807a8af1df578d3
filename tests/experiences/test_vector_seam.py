"""The seam for embedding search, exercised with a stub index: hybrid recall fuses keyword and
vector ranks (RRF) within the filters, and dedup's semantic stage proposes paraphrases — which
numbers and outcomes still decide."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.search.resilient import Offload
from robot_mcp_memory.search.sqlite.vectorstore import Embedded
from robot_mcp_memory.search.vectors import KeyFilter
from robot_mcp_memory.tenancy.principal import STDIO
from tests.experiences.conftest import stored_id


class StubVectors:
    """Cosine by hand: `pairs` maps (query text, memory content) to a similarity. A stub "vector"
    carries its text in the model-id slot, so `nearest` can look the pair up."""

    weights = (1.0, 1.0)
    k = 60

    def __init__(self, memory: Memory, pairs: dict[tuple[str, str], float]) -> None:
        self.memory = memory
        self.pairs = pairs
        self.contents: dict[int, str] = {}
        self.searches: list[Sequence[int] | None] = []

    def would_embed(self) -> bool:
        return True

    def embed(self, texts: Sequence[str]) -> list[Embedded | None]:
        return [(t, np.zeros(1, np.float32)) for t in texts]

    async def query_vector(self, text: str, offload: Offload) -> Embedded | None:
        return await offload(lambda: self.embed([text])[0])  # never cached

    def nearest(self, conn: Any, query: Embedded, k: int, within: Sequence[int]) -> list[tuple[int, float]] | None:
        self.searches.append(within)
        scored = [(mid, self.pairs.get((query[0], self.contents.get(mid, "")), 0.0)) for mid in within]
        return sorted((x for x in scored if x[1] > 0), key=lambda x: -x[1])[:k]

    def nearest_any(
        self, conn: Any, query: Embedded, k: int, robots: Collection[str] | None, ids: KeyFilter | None = None
    ) -> list[tuple[int, float]] | None:
        allowed = set(self.contents)
        if ids is not None:
            known = np.fromiter(self.contents, dtype=np.int64)
            allowed = set(known[ids(known)].tolist())
        scored = [(mid, self.pairs.get((query[0], text), 0.0)) for mid, text in self.contents.items() if mid in allowed]
        return sorted((x for x in scored if x[1] > 0), key=lambda x: -x[1])[:k]

    def write(self, conn: Any, memory_id: int, embedded: Embedded | None) -> None:
        if embedded is not None:
            self.contents[memory_id] = embedded[0]

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None:
        return None


def with_vectors(memory: Memory, pairs: dict[tuple[str, str], float]) -> tuple[ExperienceService, StubVectors]:
    stub = StubVectors(memory, pairs)
    svc = memory.experiences
    return ExperienceService(svc.store, svc.policy, default_robot="tester", vectors=stub), stub


async def test_hybrid_recall_fuses_a_semantic_match_that_shares_no_word(memory: Memory) -> None:
    query, paraphrase = "hold the cup firmly", "grip the mug tightly"
    svc, stub = with_vectors(memory, {(query, "grip the mug tightly"): 0.9, (query, "grip the mug loosely"): 0.8})
    a = await svc.learn(STDIO, paraphrase, context={"task": {"success": True}})
    b = await svc.learn(STDIO, "grip the mug loosely", context={"task": {"success": False}})
    c = await svc.learn(STDIO, "hold the door open", context={"task": {"success": True}})
    found = await svc.recall(STDIO, query, n=5)
    assert found.mode == "hybrid"
    assert {h.memory.id for h in found.hits} == {a.memory_id, b.memory_id, c.memory_id}
    assert found.hits[0].score == 1.0
    filtered = await svc.recall(STDIO, query, n=5, context_filter={"task.success": True})
    assert {h.memory.id for h in filtered.hits} == {a.memory_id, c.memory_id}
    searched = stub.searches[-1] or []  # stored ids, as the vector index files them
    assert searched  # the vector search ranked only within the filter:
    assert stored_id(memory, b.memory_id) not in searched
    assert stored_id(memory, a.memory_id) in searched


async def test_semantic_dedup_proposes_and_numbers_decide(memory: Memory) -> None:
    first = "grip the mug with 12 N"
    svc, _ = with_vectors(
        memory,
        {("hold the cup at 12 N", first): 0.95, ("hold the cup at 15 N", first): 0.95, ("open the door", first): 0.3},
    )
    a = await svc.learn(STDIO, first)
    same = await svc.learn(STDIO, "hold the cup at 12 N")
    other = await svc.learn(STDIO, "hold the cup at 15 N")
    assert same.status == "duplicate"
    assert same.method == "cosine"
    assert same.memory_id == a.memory_id
    assert other.status == "created"


class SlowFirstPatch(StubVectors):
    """Records the text of each vector stored (in commit order) and each one patched into the
    in-memory index (in patch order); the first patch is slow, as a preempted thread's can be."""

    def __init__(self, memory: Memory) -> None:
        super().__init__(memory, {})
        self.stored: list[str] = []
        self.patched: list[str] = []
        self.first_patch = threading.Event()

    def write(self, conn: Any, memory_id: int, embedded: Embedded | None) -> None:
        super().write(conn, memory_id, embedded)
        self.stored.append(embedded[0] if embedded else "")

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None:
        if not self.first_patch.is_set():
            self.first_patch.set()
            time.sleep(0.3)  # another update commits meanwhile, unless patches are in commit order
        self.patched.extend(e[0] if e else "" for _m, _r, e in changes)


async def test_concurrent_updates_patch_the_vector_index_in_commit_order(memory: Memory) -> None:
    """Two updates of one memory: the index was patched after each write returned, in whichever
    order the threads got there, so a memory could stay findable by its older text until a
    restart (review: 6 stale texts in 40 rounds of 10 concurrent updaters)."""
    stub = SlowFirstPatch(memory)
    base = memory.experiences
    svc = ExperienceService(base.store, base.policy, default_robot="tester", vectors=stub)
    mid = (await svc.learn(STDIO, "the shelf is 40 cm deep")).memory_id
    stub.first_patch.clear()
    stub.stored.clear()
    stub.patched.clear()
    first = asyncio.create_task(svc.update(STDIO, mid, "the shelf is 45 cm deep"))
    assert await asyncio.to_thread(stub.first_patch.wait, 10)
    await svc.update(STDIO, mid, "the shelf is 50 cm deep")
    await first
    assert stub.stored == ["the shelf is 45 cm deep", "the shelf is 50 cm deep"]
    assert stub.patched == stub.stored
