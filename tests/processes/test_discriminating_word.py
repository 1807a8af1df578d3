"""find_processes between near-identical documents: the word that differs decides (issue 28).

Each case is two documents that differ in one slot — direction, polarity (plus/minus), switch
state, count, into or out of, a verb or its un-verb — where the wrong one is the more reliable,
so relevance × reliability alone ranked it first. Through the MCP tool, with the keyword path
(no embedder) and the hybrid path (the hashing embedder, whose cosines cannot tell the two
apart either). Documents and queries are written for this test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import Client, doc

#: (query, the document it means, its hard negative (more reliable)): (id, title, pattern).
CASES = [
    (
        "turn the red block right",
        ("turn-red-block-right", "Turn the red block to the right", "rotate red block right"),
        ("turn-red-block-left", "Turn the red block to the left", "rotate red block left"),
    ),
    (
        "channel up",
        ("tv-channel-plus", "Press channel plus on the TV remote", "next channel"),
        ("tv-channel-minus", "Press channel minus on the TV remote", "previous channel"),
    ),
    (
        "switch the desk lamp off",
        ("desk-lamp-off", "Switch off the desk lamp", "turn off desk lamp"),
        ("desk-lamp-on", "Switch on the desk lamp", "turn on desk lamp"),
    ),
    (
        "build a tower of three cubes",
        ("stack-three-blocks", "Stack 3 blocks into a tower", "stack three blocks"),
        ("stack-two-blocks", "Stack 2 blocks into a tower", "stack two blocks"),
    ),
    (
        "clear the plates into the dishwasher and run it",
        ("load-dishwasher", "Load the dirty plates into the dishwasher", "load dishwasher"),
        ("unload-dishwasher", "Unload the clean plates from the dishwasher", "unload dishwasher"),
    ),
    (
        "unplug the kettle before we leave",
        ("unplug-kettle", "Unplug the kettle", "unplug kettle from socket"),
        ("plug-in-kettle", "Plug in the kettle", "plug kettle into socket"),
    ),
]


@pytest.fixture(params=["none", "hashing"], ids=["keyword", "hybrid"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, Client]]:
    env = {"MEMORY_DATA_DIR": str(tmp_path / "data"), "ROBOT_ID": "tester", "MEMORY_EMBEDDER": request.param}
    memory = Memory.open(Settings.from_env(env))
    try:
        async with create_connected_server_and_client_session(build_server(memory)) as session:
            yield memory, Client(session)
    finally:
        memory.close()


@pytest.mark.parametrize(("query", "target", "negative"), CASES, ids=[c[0] for c in CASES])
async def test_the_document_naming_the_query_s_value_ranks_above_a_more_reliable_one_naming_another(
    served: tuple[Memory, Client], query: str, target: tuple[str, str, str], negative: tuple[str, str, str]
) -> None:
    memory, client = served
    for pid, title, pattern in (target, negative):
        await memory.processes.save(STDIO, doc(pid, title, "## Steps\n1. do it", task_pattern=pattern))
    for _ in range(6):
        await memory.processes.record_outcome(STDIO, negative[0], True)
    await memory.processes.record_outcome(STDIO, target[0], False)
    found = await client.call("find_processes", query=query, k=2)
    assert [p["id"] for p in found["processes"]] == [target[0], negative[0]]
    expected_mode = "keyword" if memory.embedder is None or memory.embedder.mode == "off" else "hybrid"
    assert found.get("mode", expected_mode) == expected_mode


async def test_reliability_still_orders_documents_that_agree_alike(served: tuple[Memory, Client]) -> None:
    memory, client = served
    for pid in ("route-a", "route-b"):
        await memory.processes.save(STDIO, doc(pid, "Turn the red block to the right", "## Steps\n1. turn"))
    for _ in range(4):
        await memory.processes.record_outcome(STDIO, "route-b", True)
    await memory.processes.record_outcome(STDIO, "route-a", False)
    found = await client.call("find_processes", query="turn the red block right", k=2)
    assert [p["id"] for p in found["processes"]] == ["route-b", "route-a"]


async def test_a_document_naming_the_query_s_value_ranks_above_one_naming_none(served: tuple[Memory, Client]) -> None:
    # The keyword leg reads neither "A" nor "from" (function words): both documents hold every
    # word it reads, equally often, and are equally reliable; the one naming no dock would be
    # first by its id.
    memory, client = served
    await memory.processes.save(STDIO, doc("a-any-dock", "Move the pallet from the dock", "## Steps\n1. lift"))
    await memory.processes.save(STDIO, doc("b-dock-a", "Move the pallet from dock A", "## Steps\n1. lift"))
    found = await client.call("find_processes", query="move the pallet from dock A", k=2)
    assert [p["id"] for p in found["processes"]] == ["b-dock-a", "a-any-dock"]
