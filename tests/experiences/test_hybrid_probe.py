"""Hybrid recall's vector list: the nearest memories of the visible robots, then the filters in
SQL, and, only when too few pass, the nearest among every id in scope (the SQLite adapter holds
no filter masks) — the same answers as ranking over every id in scope, on both paths."""

from __future__ import annotations

from typing import Any

import pytest
from bench.experience_corpus import QUERIES, corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences import recall
from robot_mcp_memory.experiences.sqlite import ranking_repo
from robot_mcp_memory.tenancy.principal import STDIO, Principal

FILTERS: list[dict[str, Any]] = [
    {},
    {"task.success": True},
    {"task.name": "grasp"},
    {"params.grip_force": {"$gte": 30}},
]


async def _answers(memory: Memory, who: Principal) -> list[list[int]]:
    out = []
    for q in QUERIES:
        for f in FILTERS:
            for coll in ("default", "kitchen-lab"):
                found = await memory.experiences.recall(who, q, n=5, collection=coll, context_filter=f)
                assert found.mode == "hybrid"
                out.append([h.memory.id for h in found.hits])
    return out


async def test_probing_first_answers_exactly_what_ranking_every_id_in_scope_answers(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = memory.experiences
    items = list(corpus(600))
    for coll in ("default", "kitchen-lab"):
        mine = [(it.insight, it.context) for it in items if it.collection == coll]
        await svc.learn_many(STDIO, mine, collection=coll)
    await svc.learn_many(Principal.robot("rap-9"), [(it.insight, it.context) for it in items[:200]])

    full_scans: list[int] = []  # reads of every id in scope
    every_id = ranking_repo.ids_in_scope

    def counted(*args: Any, **kwargs: Any) -> list[int]:
        full_scans.append(1)
        return every_id(*args, **kwargs)

    monkeypatch.setattr(ranking_repo, "ids_in_scope", counted)
    shipped = recall.PROBE_FACTORS
    monkeypatch.setattr(recall, "PROBE_FACTORS", (10**6,))  # the probe holds every vector: exact by construction
    exact = await _answers(memory, STDIO)
    exact_robot = await _answers(memory, Principal.robot("rap-9"))
    assert full_scans == []

    for factors in ((4,), (1, 2), shipped):
        monkeypatch.setattr(recall, "PROBE_FACTORS", factors)
        full_scans.clear()
        assert await _answers(memory, STDIO) == exact
        assert await _answers(memory, Principal.robot("rap-9")) == exact_robot
        if factors == (4,):  # both paths ran: probes that sufficed, and fallbacks to every id in scope
            assert 0 < len(full_scans) < len(exact) + len(exact_robot)
