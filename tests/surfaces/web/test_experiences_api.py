"""The experience memory over REST: list with filters, search, get, update, forget, sessions and
their timelines, collections, categories, recent failures, per-day counts — and their tenancy."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.principal import Principal
from tests.surfaces.web.conftest import ADMIN, TOKENS, Connect

A1 = Principal.robot("a1")
B1 = Principal.robot("b1")


async def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def arrange(secured: Connect, memory: Memory) -> dict[str, Any]:
    async with secured(ADMIN) as c:
        for g in ("grp-a", "grp-b"):
            await ok(await c.put(f"/api/fleet/groups/{g}", json={}))
        for robot, group in (("a1", "grp-a"), ("b1", "grp-b")):
            await ok(await c.post("/api/fleet/robots", json={"robot_id": robot, "group": group}))
    exp = memory.experiences
    session = await exp.start_session(A1, "kitchen", {"task": {"name": "grasp mug"}})
    ok_mem = await exp.learn(
        A1,
        "grip_force=12.5N works for the blue mug",
        {"params": {"grip_force": 12.5}, "task": {"name": "grasp mug", "success": True}},
        "kitchen",
        session.id,
    )
    failed = await exp.learn(
        A1,
        "the mug slipped at grip_force=5N <script>window.__x=1</script>",
        {"params": {"grip_force": 5}, "task": {"name": "grasp mug", "success": False}, "spatial": {"xyz": [1, 2, 3]}},
        "kitchen",
        session.id,
    )
    other = await exp.learn(B1, "the shelf in lab B is 1.2 m high", {"task": {"success": True}}, "lab")
    return {"session": session.id, "ok": ok_mem.memory_id, "failed": failed.memory_id, "other": other.memory_id}


async def test_memories_can_be_listed_filtered_searched_read_updated_and_forgotten(
    secured: Connect, secured_memory: Memory
) -> None:
    ids = await arrange(secured, secured_memory)
    async with secured(ADMIN) as c:
        every = await ok(await c.get("/api/memories"))
        assert every["total"] == 3
        kitchen = await ok(await c.get("/api/memories", params={"collection": "kitchen"}))
        assert {m["id"] for m in kitchen["memories"]} == {ids["ok"], ids["failed"]}
        failures = await ok(await c.get("/api/memories", params={"success": "false"}))
        assert [m["id"] for m in failures["memories"]] == [ids["failed"]]
        by_robot = await ok(await c.get("/api/memories", params={"robot": "b1"}))
        assert [m["id"] for m in by_robot["memories"]] == [ids["other"]]
        future = await ok(await c.get("/api/memories", params={"since": "2999-01-01"}))
        assert future["total"] == 0
        past = await ok(await c.get("/api/memories", params={"until": "2000-01-01T00:00:00Z"}))
        assert past["total"] == 0
        paged = await ok(await c.get("/api/memories", params={"limit": 1, "offset": 1}))
        assert (len(paged["memories"]), paged["total"]) == (1, 3)
        found = await ok(await c.get("/api/search/memories", params={"q": "grip force mug", "collection": "kitchen"}))
        assert found["mode"]
        assert {m["id"] for m in found["memories"]} <= {ids["ok"], ids["failed"]}
        assert found["memories"][0]["score"] == 1.0
        one = await ok(await c.get(f"/api/memories/{ids['failed']}"))
        assert one["task"]["success"] is False
        assert one["params"] == {"grip_force": 5}
        assert one["spatial"] == {"xyz": [1, 2, 3]}
        assert "<script>" in one["content"]  # raw in JSON; the dashboard shows it as text
        r = await c.patch(f"/api/memories/{ids['ok']}", json={"content": "grip_force=12N works for the blue mug"})
        updated = await ok(r)
        assert updated["status"] == "updated"
        assert updated["memory"]["content"].startswith("grip_force=12N")
        gone = await ok(await c.post(f"/api/memories/{ids['other']}/forget", json={"reason": "wrong shelf"}))
        assert gone == {"status": "forgotten", "memory_id": ids["other"], "reason": "wrong shelf"}
        assert (await ok(await c.get("/api/memories")))["total"] == 2
        assert (await ok(await c.get("/api/memories", params={"status": "forgotten"})))["total"] == 1


async def test_sessions_timelines_and_the_overview_lists(secured: Connect, secured_memory: Memory) -> None:
    ids = await arrange(secured, secured_memory)
    async with secured(ADMIN) as c:
        sessions = await ok(await c.get("/api/sessions"))
        assert sessions["total"] == 1
        s = sessions["sessions"][0]
        assert (s["id"], s["robot"], s["memories"], s["failures"]) == (ids["session"], "a1", 2, 1)
        timeline = await ok(await c.get(f"/api/sessions/{ids['session']}/memories"))
        assert [m["id"] for m in timeline["memories"]] == [ids["ok"], ids["failed"]]
        collections = await ok(await c.get("/api/collections"))
        assert {x["name"]: x["count"] for x in collections["collections"]} == {"kitchen": 2, "lab": 1}
        categories = await ok(await c.get("/api/categories"))
        assert sum(x["count"] for x in categories["categories"]) == 3
        recent = await ok(await c.get("/api/recent-failures"))
        assert [m["id"] for m in recent["memories"]] == [ids["failed"]]
        days = await ok(await c.get("/api/charts/memories", params={"days": 7}))
        assert sum(d["success"] for d in days["days"]) == 2
        assert sum(d["failure"] for d in days["days"]) == 1
        stats = await ok(await c.get("/api/stats"))
        assert stats["experiences"]["active"] == 3
        who = await ok(await c.get("/api/session"))
        assert "experiences" in who["features"]


async def test_a_robot_token_sees_only_its_groups_memories_and_sessions(
    secured: Connect, secured_memory: Memory
) -> None:
    ids = await arrange(secured, secured_memory)
    async with secured(TOKENS["b1"]) as c:
        mine = await ok(await c.get("/api/memories"))
        assert [m["id"] for m in mine["memories"]] == [ids["other"]]
        assert (await ok(await c.get("/api/memories", params={"robot": "a1"})))["total"] == 0
        assert (await c.get(f"/api/memories/{ids['failed']}")).status_code == 404
        assert (await c.get(f"/api/sessions/{ids['session']}/memories")).status_code == 404
        assert (await ok(await c.get("/api/sessions")))["total"] == 0
        assert (await ok(await c.get("/api/recent-failures")))["total"] == 0
        found = await ok(await c.get("/api/search/memories", params={"q": "mug", "collection": "kitchen"}))
        assert found["memories"] == []
        r = await c.patch(f"/api/memories/{ids['ok']}", json={"content": "hijacked"})
        assert r.status_code == 404
        r = await c.post(f"/api/memories/{ids['ok']}/forget", json={"reason": "spite"})
        assert r.status_code == 404
        assert {x["name"] for x in (await ok(await c.get("/api/collections")))["collections"]} == {"lab"}
    async with secured(TOKENS["a1"]) as c:
        assert (await ok(await c.get("/api/memories")))["total"] == 2
        assert (await c.get(f"/api/sessions/{ids['session']}/memories")).status_code == 200


async def test_bad_experience_arguments_are_400(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        for params in ({"since": "yesterday"}, {"since": "2026-13-45"}, {"success": "maybe"}, {"status": "gone"}):
            r = await c.get("/api/memories", params=params)
            assert r.status_code == 400, params
            assert r.json()["error"] == "invalid"
        assert (await c.get("/api/memories/0")).status_code == 400
        assert (await c.get("/api/memories/999")).status_code == 404


async def test_a_timeline_counts_as_the_list_does_and_opens_imported_session_ids(
    secured: Connect, secured_memory: Memory, monkeypatch: Any
) -> None:
    """The list counted task.success 0 as a failure and the timeline did not; the timeline's
    counts were those of its first 2,000 rows, with no sign of the rest; an id robotmem gave
    ("ep 1", "runs/2024/ep 2", kept by the import) could not be opened (400, 404); forget echoed
    the reason unstripped."""
    from robot_mcp_memory.experiences import browse
    from robot_mcp_memory.experiences.model import Session
    from robot_mcp_memory.experiences.sqlite import storage

    await arrange(secured, secured_memory)
    exp = secured_memory.experiences
    monkeypatch.setattr(browse, "MAX_TIMELINE", 2)
    await secured_memory.experience_store.write(
        lambda c: storage.insert_session(c, Session("ep 1", "a1", "kitchen", {}, 1.0))
    )
    for n in range(3):
        await exp.learn(A1, f"the door sticks on try {n}", {"task": {"success": 0}}, "kitchen", "ep 1")
    await secured_memory.experience_store.write(
        lambda c: storage.insert_session(c, Session("runs/2024/ep 2", "a1", "kitchen", {}, 1.0))
    )
    await exp.learn(A1, "the gripper slips", {}, "kitchen", "runs/2024/ep 2")
    async with secured(ADMIN) as c:
        listed = {s["id"]: s for s in (await ok(await c.get("/api/sessions")))["sessions"]}
        assert (listed["ep 1"]["memories"], listed["ep 1"]["failures"]) == (3, 3)
        timeline = await ok(await c.get("/api/sessions/ep%201/memories"))
        assert (timeline["session"]["memories"], timeline["session"]["failures"]) == (3, 3)
        slashed = await ok(await c.get("/api/sessions/runs%2F2024%2Fep%202/memories"))
        assert slashed["session"]["id"] == "runs/2024/ep 2"
        assert [m["content"] for m in slashed["memories"]] == ["the gripper slips"]
        assert (await c.get("/api/sessions/runs%2F2024/memories")).status_code == 404
        spec = await ok(await c.get("/api/openapi.json"))
        assert "/api/sessions/{id}/memories" in spec["paths"]
        assert len(timeline["memories"]) == 2
        assert timeline["truncated"] is True
        mid = timeline["memories"][0]["id"]
        gone = await ok(await c.post(f"/api/memories/{mid}/forget", json={"reason": "   padded reason   "}))
        assert gone["reason"] == "padded reason"


async def test_a_robot_is_not_shown_when_other_groups_recall_a_fleet_wide_memory(
    secured: Connect, secured_memory: Memory
) -> None:
    """A shared memory's counters sum every group's recalls: a1 watched them go 0 → 5, with the
    time, while b1 (another group) recalled it (review)."""
    ids = await arrange(secured, secured_memory)
    exp = secured_memory.experiences
    shared = (await exp.learn(Principal("stdio"), "the hydraulic press on line 7 needs 2 s to settle")).memory_id
    await secured_memory.experience_store.write(
        lambda c: c.execute(
            "UPDATE memories SET robot = 'shared' WHERE id = (SELECT id FROM memory_public WHERE public_id = ?)",
            (shared,),
        )
    )
    for _ in range(3):
        found = await exp.recall(B1, "hydraulic press line 7")
        assert [h.memory.id for h in found.hits] == [shared]
        assert found.hits[0].memory.access_count is None
    own = await exp.recall(A1, "blue mug", collection="kitchen")
    assert own.hits[0].memory.access_count is not None  # its own group's memory: shown
    pending = secured_memory.experience_store.access.flush()
    assert pending is not None
    await asyncio.wrap_future(pending)
    async with secured(TOKENS["a1"]) as c:
        seen = await ok(await c.get(f"/api/memories/{shared}"))
        assert (seen["access_count"], seen["last_accessed"]) == (None, None)
        mine = await ok(await c.get(f"/api/memories/{ids['ok']}"))
        assert isinstance(mine["access_count"], int)
    async with secured(ADMIN) as c:
        full = await ok(await c.get(f"/api/memories/{shared}"))
        assert full["access_count"] == 3
        assert full["last_accessed"] is not None


def test_the_dashboards_times_before_year_1000_are_iso_8601() -> None:
    """strftime's %Y wrote year 1 as "1": an imported row from year 1 showed an unparseable date."""
    import datetime as dt

    from robot_mcp_memory.surfaces.web.api.experience_models import iso

    assert iso(-62135596800.0) == "0001-01-01T00:00:00Z"
    assert dt.datetime.fromisoformat(str(iso(-62135596800.0)).replace("Z", "+00:00")).year == 1
