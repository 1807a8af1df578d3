"""The keyword cache and the vector matrix answer exactly as the plain adapter, through the port.

`ExperienceStore` is built with its keyword cache or without it; without, SQL (FTS5's bm25)
ranks every keyword list. Both adapters, on one database, are asked the same `RecallIndex`
questions (`rank`, `weighed`) in a snapshot (`SqliteMemories.snapshot`) — never a private
function — and must return the same memories, in the same order, with the same relevance and
score to the last bit; recall through the service returns the same hits. `MemoryVectorIndex` holds
each model's vectors in memory or reads them from the table for every search: hybrid recall is
the same either way."""

from __future__ import annotations

import time
from typing import Any

from bench.experience_corpus import QUERIES, corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.filters import parse_filter
from robot_mcp_memory.experiences.ports import Scope, Snapshot
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite.repository import SqliteMemories
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.search import segment
from robot_mcp_memory.tenancy.principal import STDIO, Principal

FILTERS: tuple[dict[str, Any] | None, ...] = (None, {"task.success": True}, {"params.grip_force": {"$lt": 10}})
Answer = tuple[list[tuple[int, float, float]], list[tuple[int, float, float]]]


async def _filled(memory: Memory) -> None:
    """400 memories of the bench corpus, and a second robot's copies of 100 of them."""
    items = list(corpus(400, seed=5))
    await memory.experiences.learn_many(STDIO, [(it.insight, it.context) for it in items])
    await memory.experiences.learn_many(Principal.robot("rap-9"), [(it.insight, it.context) for it in items[:100]])


def _plain(memory: Memory) -> SqliteMemories:
    return SqliteMemories(ExperienceStore(memory.index, keyword_cache=False))


def _ask(scope: Scope, match: list[str], n: int) -> Any:
    def asked(s: Snapshot) -> Answer:
        ranked = s.rank(scope, match, "score", n)
        weighed = s.weighed(scope, match, n)
        return [(r.memory.id, r.relevance, r.score) for r in ranked], [(w.id, w.relevance, w.weight) for w in weighed]

    return asked


async def test_the_keyword_cache_ranks_exactly_as_the_plain_adapter(memory: Memory) -> None:
    await _filled(memory)
    cached = SqliteMemories(ExperienceStore(memory.index, keyword_cache=True))
    plain = _plain(memory)
    now = time.time()
    compared = 0
    for visible in (None, frozenset({"rap-9"})):
        for spec in FILTERS:
            scope = Scope(visible, "default", 0.3, now, context_filter=parse_filter(spec))
            for q in (*QUERIES[:6], "grip force approach angle", "zebra"):
                for n in (1, 10):
                    want = await plain.snapshot(_ask(scope, segment.match_phrases(q), n))
                    got = await cached.snapshot(_ask(scope, segment.match_phrases(q), n))
                    assert got == want, (visible, spec, q, n)
                    compared += bool(want[0])
    assert compared > 40
    cache = cached.store.keywords
    assert cache is not None  # and it answers for itself (not by falling back to SQL):
    assert memory.index.read_blocking(lambda c: cache.scores(c, segment.match_phrases(QUERIES[0]))) is not None


async def test_recall_through_the_service_is_the_same_with_or_without_the_keyword_cache(memory: Memory) -> None:
    await _filled(memory)
    svc = memory.experiences
    plain = ExperienceService(_plain(memory), svc.policy, default_robot="tester", vectors=svc.vectors)
    for spec in FILTERS:
        for q in QUERIES[:6]:
            got = await svc.recall(STDIO, q, n=10, context_filter=spec)
            want = await plain.recall(STDIO, q, n=10, context_filter=spec)
            assert [(h.memory.id, h.score) for h in got.hits] == [(h.memory.id, h.score) for h in want.hits]
            assert got.mode == want.mode


async def test_hybrid_recall_is_the_same_with_the_vector_matrix_or_reading_every_vector(memory: Memory) -> None:
    await _filled(memory)
    svc = memory.experiences
    read_each_time = MemoryVectorIndex(memory.index, memory.embedder, matrix=False)
    plain = ExperienceService(svc.store, svc.policy, default_robot="tester", vectors=read_each_time)
    for spec in FILTERS:
        for q in QUERIES[:6]:
            got = await svc.recall(STDIO, q, n=10, context_filter=spec)
            want = await plain.recall(STDIO, q, n=10, context_filter=spec)
            assert want.mode == got.mode == "hybrid"
            assert [(h.memory.id, h.score) for h in got.hits] == [(h.memory.id, h.score) for h in want.hits]
