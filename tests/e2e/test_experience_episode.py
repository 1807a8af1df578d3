"""A scripted robot episode against the real server process over MCP stdio.

Start a session, learn with parameters, save perceptions, recall with a filter and a spatial sort,
update, forget, end the session — then start the process again and find everything as it was.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import Client
from tests.e2e.harness import child_env, json_lines

pytestmark = pytest.mark.e2e

EPISODE_DEADLINE_S = 90.0


@asynccontextmanager
async def memory_over_stdio(data_dir: Path, errlog_path: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "robot_mcp_memory"],
        env=child_env(MEMORY_DATA_DIR=str(data_dir), ROBOT_ID="ur5-e2e", MEMORY_EMBEDDER="none"),
    )
    with errlog_path.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield Client(session)


def ids(result: dict[str, Any]) -> list[int]:
    return [m["id"] for m in result["memories"]]


async def test_a_scripted_episode_over_stdio_survives_a_restart(tmp_path: Path) -> None:
    data, errlog = tmp_path / "data", tmp_path / "stderr.log"
    with anyio.fail_after(EPISODE_DEADLINE_S):
        async with memory_over_stdio(data, errlog) as mem:
            tools = {t.name for t in (await mem.session.list_tools()).tools}
            assert tools >= {"learn", "recall", "save_perception", "forget", "update", "start_session", "end_session"}

            s = await mem.call("start_session", collection="kitchen", context={"task": {"name": "grasp_mug"}})
            sid = s["session_id"]
            slip = await mem.call(
                "learn",
                insight="grip force 8 N let the wet mug slip",
                context='{"params": {"grip_force": 8}, "task": {"success": false}}',  # a JSON string works too
                collection="kitchen",
                session_id=sid,
            )
            held = await mem.call(
                "learn",
                insight="grip force 12.5 N held the wet mug",
                context={"params": {"grip_force": 12.5}, "task": {"success": True}, "env": {"sim_or_real": "real"}},
                collection="kitchen",
                session_id=sid,
            )
            assert slip["status"] == held["status"] == "created"
            assert held["robot"] == "ur5-e2e"
            rack = await mem.call(
                "save_perception",
                description="mug on the drying rack",
                data={"bbox": [120, 80, 210, 190]},
                metadata={"spatial": {"position": [0.42, 0.10, 0.91]}},
                collection="kitchen",
                session_id=sid,
            )
            sink = await mem.call(
                "save_perception",
                description="mug in the sink",
                perception_type="visual",
                metadata='{"spatial": {"position": [1.6, -0.4, 0.85]}}',
                collection="kitchen",
                session_id=sid,
            )

            best = await mem.call(
                "recall",
                query="grasp the wet mug",
                collection="kitchen",
                context_filter={"task.success": True, "params.grip_force": {"$gte": 10}},
            )
            assert ids(best) == [held["memory_id"]]
            assert best["memories"][0]["params"] == {"grip_force": 12.5}
            near = await mem.call(
                "recall",
                query="mug",
                collection="kitchen",
                spatial_sort={"field": "spatial.position", "target": [0.4, 0.1, 0.9], "max_distance": 0.5},
            )
            assert ids(near) == [rack["memory_id"]]
            assert near["memories"][0]["data"] is None
            unfiltered = await mem.call(
                "recall", query="mug", collection="kitchen", spatial_sort={"target": [1.5, -0.4, 0.85]}, n=10
            )
            assert ids(unfiltered)[0] == sink["memory_id"]
            assert len(ids(unfiltered)) == 4

            up = await mem.call(
                "update", memory_id=held["memory_id"], new_content="grip force 12.5 N held the wet mug firmly"
            )
            assert up["status"] == "updated"
            gone = await mem.call("forget", memory_id=sink["memory_id"], reason="the sink was empty after all")
            assert gone["status"] == "forgotten"
            ended = await mem.call("end_session", session_id=sid, outcome_score=0.8)
            assert ended["status"] == "ended"
            assert ended["summary"]["memories"] == 2
            assert ended["summary"]["perceptions"] == 1  # the forgotten one no longer counts

        async with memory_over_stdio(data, errlog) as mem:  # a new process, the same file
            after = await mem.call("recall", query="mug", collection="kitchen", n=10)
            assert sorted(ids(after)) == sorted([slip["memory_id"], held["memory_id"], rack["memory_id"]])
            firm = await mem.call("recall", query="firmly", collection="kitchen")
            assert ids(firm) == [held["memory_id"]]
            again = await mem.call("end_session", session_id=sid)
            assert again["error"] == "conflict"

    assert "store_ready" in [line.get("event") for line in json_lines(errlog.read_text())]
