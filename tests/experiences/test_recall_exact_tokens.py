"""A unique token or the exact text of a stored memory finds that memory first in the default
hybrid mode, with the real default embedder, among 1,200 robot-experience memories
(`bench/experience_eval.py`: error codes, part numbers, serials and lab tags; six memories of
the same task beside each token's; a third of the memories real-world, which weigh more), and a
question naming an error code, part number or serial among other words finds it first in
either mode; a question describing a task that failed finds its memory above the same task with
another colour, another object or a success.

Reciprocal-rank fusion counted a decisive keyword match as one rank ahead: a sibling memory
second by keyword and first by weighted cosine outranked it, and a real-world near-duplicate
outranked a simulated memory's exact text. Marked e2e: loading the model and embedding the
corpus take seconds (one load, one `learn_many`, for every test here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.experience_eval import Family, generate
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.service import ExperienceService, run_sync
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import Client

pytestmark = pytest.mark.e2e

EVAL = generate(1200, 20, seed=20261202)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, dict[str, int]]]:
    data = Path(tmp_path_factory.mktemp("exact-tokens"))
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "ROBOT_ID": "cell-arm-1"}))
    try:
        emb = memory.embedder
        assert emb is not None, "the default settings have an embedder"
        assert emb.wait_ready(300), "the default model did not load"
        svc = memory.experiences
        done = run_sync(svc.blocking().learn_many(STDIO, [(it.insight, it.context) for it in EVAL.items]))
        assert all(d.status == "created" for d in done)  # no item of the corpus is another's duplicate
        yield memory, {it.insight: d.memory_id for it, d in zip(EVAL.items, done, strict=True)}
    finally:
        memory.close()


def firsts(svc: ExperienceService, ids: dict[str, int], family: Family, mode: str, served: bool = False) -> int:
    """How many of the family's cases recall their memory first (`served`: through the async
    service, as the server runs it, the query embedded while the keyword list is read)."""
    count = 0
    for case in EVAL.of(family):
        call = svc.recall(STDIO, case.query, n=5)
        found = asyncio.run(call) if served else run_sync(call)
        assert found.mode == mode
        count += bool(found.hits) and found.hits[0].memory.id == ids[case.target]
    return count


@pytest.mark.parametrize("served", [False, True], ids=["blocking", "served"])
@pytest.mark.parametrize("family", ["token", "code", "exact"])
def test_hybrid_recall_puts_the_memory_a_unique_token_or_its_exact_text_names_first(
    filled: tuple[Memory, dict[str, int]], family: Family, served: bool
) -> None:
    memory, ids = filled
    cases = len(EVAL.of(family))
    assert cases == (15 if family == "code" else 20)
    svc = memory.experiences if served else memory.experiences.blocking()
    assert firsts(svc, ids, family, "hybrid", served) >= cases - 1


@pytest.mark.parametrize("served", [False, True], ids=["blocking", "served"])
def test_hybrid_recall_puts_the_memory_a_question_describes_above_its_hard_negatives(
    filled: tuple[Memory, dict[str, int]], served: bool
) -> None:
    """Beside each target, the same task with another colour, another object, or that succeeded
    (one source for all four). Fusion by ranks alone let the vector list's first — another
    verb or object, the same colour — pass the keyword list's first (11 of 20): the keyword
    list's share now scales with how much of the query each match holds."""
    memory, ids = filled
    svc = memory.experiences if served else memory.experiences.blocking()
    assert firsts(svc, ids, "hard", "hybrid", served) >= len(EVAL.of("hard")) - 1


def keyword_service(memory: Memory) -> ExperienceService:
    svc = memory.experiences
    return ExperienceService(svc.store, svc.policy, default_robot="cell-arm-1").blocking()


@pytest.mark.parametrize("family", ["token", "code", "exact"])
def test_keyword_recall_puts_the_memory_a_unique_token_or_its_exact_text_names_first(
    filled: tuple[Memory, dict[str, int]], family: Family
) -> None:
    memory, ids = filled
    assert firsts(keyword_service(memory), ids, family, "keyword") >= len(EVAL.of(family)) - 1


def test_keyword_recall_demotes_the_hard_negatives_that_name_another_colour_or_outcome(
    filled: tuple[Memory, dict[str, int]],
) -> None:
    """Keyword-only (before the model is ready, or in an outage) has no cosine: a memory
    naming another colour, or a success for a question about a failure, weighed as much as
    the target (11 of 20 first); `search.agreement` demotes them. Another object is left to
    bm25."""
    memory, ids = filled
    assert firsts(keyword_service(memory), ids, "hard", "keyword") >= 17


async def test_over_mcp_the_recall_tool_puts_them_first_too(filled: tuple[Memory, dict[str, int]]) -> None:
    """As the issue measured it: through the MCP tool, in-process."""
    memory, ids = filled
    async with create_connected_server_and_client_session(build_server(memory)) as session:
        client = Client(session)
        for family in ("token", "code", "exact"):
            first = 0
            for case in EVAL.of(family):
                found = await client.call("recall", query=case.query, n=5)
                assert found["mode"] == "hybrid"
                first += bool(found["memories"]) and found["memories"][0]["id"] == ids[case.target]
            assert first >= len(EVAL.of(family)) - 1, family
