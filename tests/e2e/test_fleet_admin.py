"""The Fleet admin page's calls, over the real process with real tokens: an operator (admin token,
Streamable HTTP) arranges the fleet while robot brains (their own tokens, SSE) register themselves,
learn and see each change at once — and everything is still there after a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.harness import ServerProcess, http_session, robot_tokens, running, sse_session

pytestmark = pytest.mark.e2e

ADMIN = "admin-token-0123456789"
TOKENS = {"rap-1": "rap1-token-0123", "rap-2": "rap2-token-0123", "rap-3": "rap3-token-0123"}


@pytest.fixture
async def fleet_server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    env = {"MEMORY_TOKEN": ADMIN, "MEMORY_ROBOT_TOKENS": robot_tokens(TOKENS)}
    async with running(tmp_path, env) as proc:
        yield proc


async def test_an_operator_arranges_the_fleet_and_every_brain_sees_it_at_once(fleet_server: ServerProcess) -> None:
    server = fleet_server
    lessons_db = server.data_dir / "lessons.db"
    async with (
        http_session(server, token=ADMIN) as admin,
        sse_session(server, token=TOKENS["rap-1"]) as rap1,
        sse_session(server, token=TOKENS["rap-2"]) as rap2,
        sse_session(server, token=TOKENS["rap-3"]) as rap3,
    ):
        # The admin page loads: an empty fleet, self-improvement off.
        assert (await admin.call("list_robots"))["robots"] == []
        assert (await admin.call("list_groups")) == {"groups": [], "global_self_improve": False}

        # Brains register themselves at boot — only themselves.
        for rid, brain in (("rap-1", rap1), ("rap-2", rap2), ("rap-3", rap3)):
            assert (await brain.call("register_robot", robot_id=rid))["action"] == "created"
        assert (await rap1.call("register_robot", robot_id="rap-9"))["error"] == "forbidden"

        # The operator groups two of them; a typo is refused, not turned into a group.
        refused = await admin.call("set_group", robot_id="rap-1", group="acme-line-2")
        assert refused["error"] == "not_found"
        assert "upsert_group" in refused["detail"]
        group = await admin.call("upsert_group", group_id="acme-line-2", name="Line 2", customer="acme", factory="lyon")
        assert group["action"] == "created"
        for rid in ("rap-1", "rap-2"):
            assert (await admin.call("set_group", robot_id=rid, group="acme-line-2"))["group"] == "acme-line-2"
        assert (await rap3.call("set_group", robot_id="rap-3", group="acme-line-2"))["error"] == "forbidden"

        # Each brain sees its own group at once; the loner sees only itself.
        assert [r["robot_id"] for r in (await rap2.call("list_robots"))["robots"]] == ["rap-1", "rap-2"]
        assert [g["group_id"] for g in (await rap1.call("list_groups"))["groups"]] == ["acme-line-2"]
        assert [r["robot_id"] for r in (await rap3.call("list_robots"))["robots"]] == ["rap-3"]

        # A brain re-registering at its next boot does not undo the operator's grouping.
        again = await rap1.call("register_robot", robot_id="rap-1", name="Rap one")
        assert (again["action"], again["group"]) == ("updated", "acme-line-2")

        # Self-improvement is off until the operator switches the group on.
        off = await rap1.call("record_params", robot="rap-1", key="grasp/mug", params={"force": 0.3})
        assert (off["recorded"], off["reason"]) == (False, "self_improve_off")
        assert not lessons_db.exists(), "nobody switched self-improvement on: no lessons file"
        assert (await rap1.call("set_self_improve", enabled=True))["error"] == "forbidden"
        state = await admin.call("set_self_improve", enabled=True, group="acme-line-2")
        assert state["group"]["effective_self_improve"] is True

        # rap-1 learns; its group-mate gets the lesson, the ungrouped robot does not.
        rec = await rap1.call(
            "record_params", robot="", key="grasp/mug", params='{"force": 0.3}', place="table-a", success=True
        )
        assert (rec["recorded"], rec["robot"], rec["scope"]) == (True, "rap-1", "group:acme-line-2")
        assert lessons_db.exists()
        shared = await rap2.call("recall_params", robot="rap-1", key="grasp/mug", place="table-a")
        assert (shared["robot"], [x["params"] for x in shared["lessons"]]) == ("rap-2", [{"force": 0.3}])
        isolated = await rap3.call("recall_params", robot="rap-1", key="grasp/mug", place="table-a")
        assert (isolated["robot"], isolated["self_improve"], isolated["lessons"]) == ("rap-3", False, [])

        robots = {r["robot_id"]: (r["group"], r["self_improve"]) for r in (await admin.call("list_robots"))["robots"]}
        assert robots == {"rap-1": ("acme-line-2", True), "rap-2": ("acme-line-2", True), "rap-3": (None, False)}

    # The service restarts (a deploy); the admin page reconnects and finds the fleet as it was.
    await server.restart()
    async with http_session(server, token=ADMIN) as admin:
        groups = await admin.call("list_groups")
        assert [(g["group_id"], g["self_improve"], g["robots"]) for g in groups["groups"]] == [
            ("acme-line-2", True, ["rap-1", "rap-2"])
        ]
        got = await admin.call("recall_params", robot="rap-2", key="grasp/mug", place="table-a")
        assert [x["success_count"] for x in got["lessons"]] == [1]

        # Deleting the group ungroups its robots and keeps what they learned.
        deleted = await admin.call("delete_group", group_id="acme-line-2")
        assert (deleted["ungrouped_robots"], deleted["lessons_kept"]) == (["rap-1", "rap-2"], True)
        orphans = await admin.call("list_lessons")
        assert [(x["scope"], x["orphaned"]) for x in orphans["lessons"]] == [("group:acme-line-2", True)]
        assert {r["group"] for r in (await admin.call("list_robots"))["robots"]} == {None}
