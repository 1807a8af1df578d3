"""The Robots report (GET /api/robots) and sessions per day (GET /api/charts/sessions): what each
robot and group did, derived from stored memories, sessions, processes and lessons, in the
caller's scope; and which processes are getting worse by their dated outcome log."""

from __future__ import annotations

from typing import Any

from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL
from robot_mcp_memory.tenancy.principal import Principal
from tests.surfaces.web.conftest import ADMIN, TOKENS, Connect, doc


async def seed(memory: Memory) -> None:
    """Group g-a holds a1 and a2, group g-b holds b1; a1 writes two successes and a failure in a
    session scored 0.2, b1 one success; a process of a1 goes from two successes to two failures."""
    fleet, exp = memory.fleet, memory.experiences
    await fleet.upsert_group(ADMIN_PRINCIPAL, "g-a", "Group A", "", "", None)
    await fleet.upsert_group(ADMIN_PRINCIPAL, "g-b", "Group B", "", "", None)
    for rid, gid in (("a1", "g-a"), ("a2", "g-a"), ("b1", "g-b")):
        await fleet.register_robot(ADMIN_PRINCIPAL, rid, f"robot {rid}", gid)
    await fleet.set_self_improve(ADMIN_PRINCIPAL, True, "")
    a1, b1 = Principal.robot("a1"), Principal.robot("b1")
    session = await exp.start_session(a1, "kitchen")
    for text, ok in (("grip 12 N held the mug", True), ("grip 5 N dropped the mug", False), ("door opened", True)):
        await exp.learn(a1, text, {"task": {"success": ok}}, "kitchen", session.id)
    await exp.learn(a1, "the lamp is blue", None, "kitchen", session.id)
    await exp.end_session(a1, session.id, 0.2)
    await exp.learn(b1, "the shelf is 1.2 m high", {"task": {"success": True}}, "lab")
    await memory.processes.save(a1, doc("fetch-mail", "Fetch the mail", "a1"))
    await memory.processes.save(b1, doc("restock", "Restock the shelf", "b1"))
    for ok in (True, True, False, False):
        await memory.processes.record_outcome(ADMIN_PRINCIPAL, "fetch-mail", ok, "run")
    await memory.lessons.record(a1, "a1", "grip_force", {"newton": 12}, success=True)


def by(key: str, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r[key]: r for r in rows}


async def test_the_report_counts_what_each_robot_wrote_and_rolls_it_up_per_group(
    secured: Connect, secured_memory: Memory
) -> None:
    await seed(secured_memory)
    async with secured(ADMIN) as c:
        r = await c.get("/api/robots", params={"days": 7})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["processes_scanned"] == 2
    robots = by("robot_id", report["robots"])
    a1 = robots["a1"]
    assert (a1["memories"], a1["successes"], a1["failures"], a1["sessions"]) == (4, 2, 1, 1)
    assert a1["failure_rate"] == round(1 / 3, 4)
    assert (a1["processes"], a1["lessons_recorded"], a1["lessons_readable"]) == (1, 1, 1)
    assert (a1["group"], a1["registered"]) == ("g-a", True)
    assert a1["last_seen"]
    assert len(report["first_day"]) == 10
    assert len(a1["days"]) == 1  # the days with activity only: today
    today = a1["days"][-1]
    assert today["day"] > report["first_day"]
    assert (today["success"], today["failure"], today["other"]) == (2, 1, 1)
    a2 = robots["a2"]
    assert (a2["memories"], a2["failure_rate"], a2["processes"], a2["days"]) == (0, None, 0, [])
    groups = by("group", report["groups"])
    assert groups["g-a"]["robots"] == ["a1", "a2"]
    assert (groups["g-a"]["memories"], groups["g-a"]["failures"], groups["g-a"]["processes"]) == (4, 1, 1)
    assert (groups["g-b"]["memories"], groups["g-b"]["failure_rate"]) == (1, 0.0)
    assert groups["g-a"]["days"][-1]["success"] == 2


async def test_a_process_whose_newer_outcomes_fail_is_reported_as_getting_worse(
    secured: Connect, secured_memory: Memory
) -> None:
    await seed(secured_memory)
    async with secured(ADMIN) as c:
        trends = (await c.get("/api/robots")).json()["trends"]
    assert [t["id"] for t in trends] == ["fetch-mail"]  # restock has no dated outcome
    t = trends[0]
    assert (t["earlier_rate"], t["recent_rate"], t["change"], t["dated_outcomes"]) == (1.0, 0.0, -1.0, 4)


async def test_a_robot_token_sees_only_its_own_groups_robots_and_data(secured: Connect, secured_memory: Memory) -> None:
    await seed(secured_memory)
    async with secured(TOKENS["a2"]) as c:
        report = (await c.get("/api/robots")).json()
    assert {r["robot_id"] for r in report["robots"]} == {"a1", "a2"}
    assert {g["group"] for g in report["groups"]} == {"g-a"}
    robots = by("robot_id", report["robots"])
    assert robots["a1"]["memories"] == 4
    assert robots["a1"]["lessons_readable"] is None  # another robot's reads are not a2's to see
    assert robots["a2"]["lessons_readable"] == 1  # a1's lesson is in their group's scope
    assert report["trends"][0]["id"] == "fetch-mail"
    async with secured(TOKENS["b1"]) as c:
        report = (await c.get("/api/robots")).json()
    assert {r["robot_id"] for r in report["robots"]} == {"b1"}
    assert report["trends"] == []


async def test_an_operator_sees_owners_of_data_that_never_registered(secured: Connect, secured_memory: Memory) -> None:
    await secured_memory.experiences.learn(Principal.robot("ghost-7"), "left the dock", None, "default")
    async with secured(ADMIN) as c:
        robots = by("robot_id", (await c.get("/api/robots")).json()["robots"])
    assert robots["ghost-7"]["registered"] is False
    assert robots["ghost-7"]["memories"] == 1
    assert robots["ghost-7"]["lessons_readable"] is None


async def test_the_report_refuses_a_range_outside_one_year(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        r = await c.get("/api/robots", params={"days": 400})
    assert r.status_code == 400
    assert r.json()["error"] == "invalid"


async def test_sessions_per_day_split_by_outcome_score(secured: Connect, secured_memory: Memory) -> None:
    await seed(secured_memory)
    exp = secured_memory.experiences
    b1 = Principal.robot("b1")
    await exp.end_session(b1, (await exp.start_session(b1, "lab")).id, 0.9)
    await exp.start_session(b1, "lab")  # still open: no score
    async with secured(ADMIN) as c:
        days = (await c.get("/api/charts/sessions", params={"days": 3})).json()["days"]
    assert len(days) == 3
    assert (days[-1]["success"], days[-1]["failure"], days[-1]["other"]) == (1, 1, 1)
    async with secured(TOKENS["b1"]) as c:
        mine = (await c.get("/api/charts/sessions", params={"days": 3})).json()["days"]
    assert (mine[-1]["success"], mine[-1]["failure"], mine[-1]["other"]) == (1, 0, 1)


async def test_a_robot_token_that_never_registered_gets_an_empty_report_not_an_error(
    secured: Connect, secured_memory: Memory
) -> None:
    """A robot token whose robot never called register_robot reads no lessons (the lesson
    service refuses an unregistered robot): the report still answers, for what it can see."""
    await secured_memory.experiences.learn(Principal.robot("a1"), "the lamp is blue", None, "default")
    async with secured(TOKENS["a1"]) as c:
        r = await c.get("/api/robots")
    assert r.status_code == 200, r.text
    assert r.json()["robots"] == []


async def test_each_robot_lists_the_processes_it_used_from_the_outcomes_it_recorded(
    secured: Connect, secured_memory: Memory
) -> None:
    await seed(secured_memory)
    a1, a2 = Principal.robot("a1"), Principal.robot("a2")
    for ok in (True, False, True):
        await secured_memory.processes.record_outcome(a1, "fetch-mail", ok)
    await secured_memory.processes.record_outcome(a2, "fetch-mail", True)
    async with secured(ADMIN) as c:
        robots = by("robot_id", (await c.get("/api/robots")).json()["robots"])
    assert robots["a1"]["used"] == [{"id": "fetch-mail", "title": "Fetch the mail", "outcomes": 3, "successes": 2}]
    assert [u["outcomes"] for u in robots["a2"]["used"]] == [1]
    assert robots["b1"]["used"] == []  # its own process, but it recorded no outcome on one
    async with secured(TOKENS["b1"]) as c:  # another group's robot: a1's process is not in its view
        robots = by("robot_id", (await c.get("/api/robots")).json()["robots"])
    assert set(robots) == {"b1"}
    assert robots["b1"]["used"] == []
