"""Scores a planner can trust (issue 28): relevance in [0, 1] on the same scale in keyword and
hybrid mode, `min_score` and an explicit "nothing relevant", and reliability that weighs
relevant documents without lifting unrelated ones above them. Hybrid mode runs the real
default model (loaded once per test process and shared: `USEEmbedder._shared`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.processes.service import MODE_REASONS
from robot_mcp_memory.search.relevance import NOTHING_RELEVANT
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import Client, doc

MOP_RELIABLE = doc("mop-hall-a", "Mop the floor in the hall", "## Steps\n1. fill the bucket", success_count=5)
MOP_FLAKY = doc("mop-hall-b", "Mop the floor in the hall", "## Steps\n1. fill the bucket", failure_count=5)
COFFEE = doc("deliver-coffee", "Deliver coffee to the office", "## Steps\n1. take the cup", success_count=5)
DOCK = doc("charge-at-dock", "Charge at the dock", "## Steps\n1. drive to the dock", success_count=3)
DOOR = doc("open-door", "Open the door", "## Steps\n1. push the handle", success_count=1)
MODES = ["keyword", "hybrid"]


def open_memory(tmp_path: Path, mode: str) -> Memory:
    env = {"MEMORY_DATA_DIR": str(tmp_path / "data"), "ROBOT_ID": "tester"}
    if mode == "keyword":
        env["MEMORY_EMBEDDER"] = "none"  # what a stdio start serves while the model loads, or an outage
    memory = Memory.open(Settings.from_env(env))
    if mode == "hybrid":
        assert memory.embedder is not None
        assert memory.embedder.wait_ready(120), memory.embedder.status()
    return memory


@pytest.fixture(params=MODES)
async def memory_in(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    memory = open_memory(tmp_path, request.param)
    try:
        yield memory
    finally:
        memory.close()


async def saved(memory: Memory, *docs: str) -> Memory:
    for d in docs:
        await memory.processes.save(STDIO, d)
    return memory


@pytest.mark.parametrize("mode", MODES)
async def test_an_exact_match_scores_high_in_either_mode(tmp_path: Path, mode: str) -> None:
    """Keyword mode scored an exact match ~4e-06 in a small store, hybrid mode 1.0."""
    memory = open_memory(tmp_path, mode)
    try:
        await saved(memory, MOP_RELIABLE, COFFEE, DOCK, DOOR)
        for query, expect in [("Mop the floor in the hall", "mop-hall-a"), ("open the door", "open-door")]:
            found = await memory.processes.find(STDIO, query, k=5)
            assert found.mode == mode
            top, *rest = found.hits
            assert top.doc.id == expect
            assert 0.75 <= top.relevance <= 1.0, (query, top.relevance)
            assert top.score == pytest.approx(top.relevance * top.doc.reliability)
            assert all(h.relevance < 0.25 for h in rest), [(h.doc.id, h.relevance) for h in rest]
    finally:
        memory.close()


async def test_an_unreliable_but_relevant_document_ranks_above_an_unrelated_one(memory_in: Memory) -> None:
    """Two identical mop documents at 5/0 and 0/5: "Deliver coffee to the office" ranked between
    them (keyword mode: "the" weighed as much as "mop" in a three-document store; hybrid mode:
    an unrelated cosine, weighted by its reliability)."""
    memory = await saved(memory_in, MOP_RELIABLE, MOP_FLAKY, COFFEE)
    found = await memory.processes.find(STDIO, "mop the hall floor", k=3)
    ids = [h.doc.id for h in found.hits]
    assert ids[:2] == ["mop-hall-a", "mop-hall-b"]
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)
    flaky = found.hits[1]
    assert flaky.relevance == pytest.approx(found.hits[0].relevance)  # the same text: reliability alone parts them
    assert all(h.relevance < 0.25 for h in found.hits[2:])


async def test_an_unrelated_query_returns_nothing_with_min_score_and_says_so(memory_in: Memory) -> None:
    memory = await saved(memory_in, MOP_RELIABLE, MOP_FLAKY, COFFEE, DOCK, DOOR)
    found = await memory.processes.find(STDIO, "calibrate the arm's torque sensor", k=5, min_score=0.5)
    assert found.hits == []
    assert found.note == NOTHING_RELEVANT
    kept = await memory.processes.find(STDIO, "mop the hall floor", k=5, min_score=0.5)
    assert [h.doc.id for h in kept.hits] == ["mop-hall-a", "mop-hall-b"]
    assert kept.note is None


async def test_hybrid_mode_does_not_pad_an_answer_with_high_scoring_noise(tmp_path: Path) -> None:
    """'open the door' → 'charge at dock' at ~0.48: whatever came second in one list."""
    memory = await saved(open_memory(tmp_path, "hybrid"), MOP_RELIABLE, COFFEE, DOCK, DOOR)
    try:
        found = await memory.processes.find(STDIO, "open the door", k=5)
        assert found.mode == "hybrid"
        assert found.hits[0].doc.id == "open-door"
        assert all(h.relevance < 0.25 for h in found.hits[1:]), [(h.doc.id, h.relevance) for h in found.hits]
    finally:
        memory.close()


async def test_min_score_outside_0_1_is_refused(memory_in: Memory) -> None:
    with pytest.raises(InvalidInput):
        await memory_in.processes.find(STDIO, "mop", min_score=1.5)


async def test_the_mcp_result_gives_mode_its_reason_relevance_and_the_note(memory_in: Memory) -> None:
    await saved(memory_in, MOP_RELIABLE, COFFEE)
    async with create_connected_server_and_client_session(build_server(memory_in)) as session:
        client = Client(session)
        found = await client.call("find_processes", query="Mop the floor in the hall", k=3)
        assert found["mode_reason"] == MODE_REASONS[found["mode"]]
        assert found["note"] is None
        top = found["processes"][0]
        assert top["id"] == "mop-hall-a"
        assert top["relevance"] >= 0.75
        assert top["score"] == pytest.approx(top["relevance"] * top["reliability"], rel=1e-3)
        none = await client.call("find_processes", query="calibrate the torque sensor", min_score=0.5)
        assert none["processes"] == []
        assert none["note"] == NOTHING_RELEVANT
        assert none["mode_reason"] == MODE_REASONS[none["mode"]]
        bad = await client.call("find_processes", query="mop", min_score=2)
        assert bad["error"] == "invalid"
