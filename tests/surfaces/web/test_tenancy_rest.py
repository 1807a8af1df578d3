"""The §6a tenancy table over REST: admin, a robot of group A, a robot of group B, a wrong token
and no token — every row, in the allowed and the refused direction. Prints the matrix size."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL
from robot_mcp_memory.tenancy.principal import Principal
from tests.surfaces.web.conftest import ADMIN, TOKENS, Connect, doc

Check = Callable[[httpx.Response], bool]


def status(code: int) -> Check:
    return lambda r: r.status_code == code


def ids(key: str, field: str, expected: set[str]) -> Check:
    return lambda r: r.status_code == 200 and {x[field] for x in r.json()[key]} == expected


def includes(key: str, field: str, expected: set[str]) -> Check:
    return lambda r: r.status_code == 200 and expected <= {x[field] for x in r.json()[key]}


def day_total(n: int) -> Check:
    """A per-day chart whose columns add up to `n`."""
    return lambda r: (
        r.status_code == 200 and sum(d["success"] + d["failure"] + d["other"] for d in r.json()["days"]) == n
    )


def field_is(path: tuple[str, ...], value: Any) -> Check:
    def check(r: httpx.Response) -> bool:
        if r.status_code != 200:
            return False
        data: Any = r.json()
        for p in path:
            data = data[p]
        return bool(data == value)

    return check


def fleet_counts(*, shown: bool) -> Check:
    """Whether the embedder detail counts every group's processes (a robot read the fleet's
    process total from it, and watched another group's saves)."""

    def check(r: httpx.Response) -> bool:
        detail = r.json()["embedder"]["detail"] if r.status_code == 200 else {}
        return r.status_code == 200 and ("stored" in detail and "missing" in detail) is shown

    return check


@dataclass(frozen=True)
class Cell:
    who: str
    what: str
    method: str
    path: str
    check: Check
    body: dict[str, Any] | None = None
    params: dict[str, str] | None = None


WHO = {"admin": ADMIN, "a1": TOKENS["a1"], "b1": TOKENS["b1"], "wrong": "not-a-token-9999", "none": None}


async def arrange(secured: Connect) -> None:
    """Group A = {a1, a2}, group B = {b1}; a process each for a1 and b1, and a fleet-wide one."""
    async with secured(ADMIN) as c:
        for g in ("grp-a", "grp-b"):
            assert (await c.put(f"/api/fleet/groups/{g}", json={})).status_code == 200
        for robot, group in (("a1", "grp-a"), ("a2", "grp-a"), ("b1", "grp-b")):
            r = await c.post("/api/fleet/robots", json={"robot_id": robot, "group": group})
            assert r.status_code == 200, r.text
        for pid, robot in (("proc-a", "a1"), ("proc-a2", "a2"), ("proc-b", "b1"), ("proc-shared", "shared")):
            md = doc(pid, f"Fetch parcel {pid}", robot=robot)
            assert (await c.post("/api/processes", json={"markdown": md})).status_code == 200


def cells() -> list[Cell]:
    out: list[Cell] = []
    everyone_401 = [
        ("GET", "/api/processes"),
        ("GET", "/api/processes/proc-a"),
        ("GET", "/api/search/processes?q=parcel"),
        ("POST", "/api/processes"),
        ("DELETE", "/api/processes/proc-a"),
        ("GET", "/api/fleet/robots"),
        ("PUT", "/api/fleet/self-improve"),
        ("GET", "/api/lessons"),
        ("GET", "/api/stats"),
        ("GET", "/api/doctor"),
        ("GET", "/api/session"),
    ]
    for who in ("wrong", "none"):
        for method, path in everyone_401:
            out.append(Cell(who, f"{method} {path} without a valid token", method, path, status(401), body={}))

    # reads: own group + shared; out-of-scope ids read as not_found; `robot` cannot widen the scope
    out += [
        Cell("admin", "list sees everything", "GET", "/api/processes",
             ids("processes", "id", {"proc-a", "proc-a2", "proc-b", "proc-shared"})),
        Cell("a1", "list sees own group + shared", "GET", "/api/processes",
             ids("processes", "id", {"proc-a", "proc-a2", "proc-shared"})),
        Cell("b1", "list sees own group + shared", "GET", "/api/processes",
             ids("processes", "id", {"proc-b", "proc-shared"})),
        Cell("a1", "robot=b1 cannot escape the scope", "GET", "/api/processes",
             ids("processes", "id", {"proc-a", "proc-a2", "proc-shared"}), params={"robot": "b1"}),
        Cell("admin", "robot=b1 shows b1's view", "GET", "/api/processes",
             ids("processes", "id", {"proc-b", "proc-shared"}), params={"robot": "b1"}),
        Cell("a1", "get a group mate's process", "GET", "/api/processes/proc-a2", status(200)),
        Cell("a1", "get a shared process", "GET", "/api/processes/proc-shared", status(200)),
        Cell("a1", "another group's process is not_found", "GET", "/api/processes/proc-b", status(404)),
        Cell("b1", "another group's process is not_found", "GET", "/api/processes/proc-a", status(404)),
        Cell("b1", "another group's outcome history is not_found", "GET", "/api/processes/proc-a/outcomes",
             status(404)),
        Cell("admin", "get any process", "GET", "/api/processes/proc-b", status(200)),
        Cell("a1", "search never returns another group's process", "GET", "/api/search/processes",
             ids("processes", "id", {"proc-a", "proc-a2", "proc-shared"}), params={"q": "fetch parcel", "k": "10"}),
        Cell("b1", "search never returns another group's process", "GET", "/api/search/processes",
             ids("processes", "id", {"proc-b", "proc-shared"}), params={"q": "fetch parcel", "k": "10", "robot": "a1"}),
    ]  # fmt: skip

    # save_process: pinned to the tenant
    out += [
        Cell("a1", "save with robot unknown is pinned to itself", "POST", "/api/processes",
             field_is(("robot",), "a1"), body={"markdown": doc("new-a", "New A")}),
        Cell("a1", "save for a foreign robot is forbidden", "POST", "/api/processes", status(403),
             body={"markdown": doc("new-x", "New X", robot="b1")}),
        Cell("a1", "save a shared document is forbidden", "POST", "/api/processes", status(403),
             body={"markdown": doc("new-s", "New S", robot="shared")}),
        Cell("a1", "saving over another group's id forks instead of overwriting", "POST", "/api/processes",
             field_is(("action",), "forked"), body={"markdown": doc("proc-b", "Hijack", robot="a1")}),
        Cell("admin", "admin saves for any robot", "POST", "/api/processes", field_is(("robot",), "b1"),
             body={"markdown": doc("new-b", "New B", robot="b1")}),
    ]  # fmt: skip

    # record_outcome / delete_process: in scope only; deleting a shared doc is forbidden
    out += [
        Cell("a1", "record an outcome in scope", "POST", "/api/processes/proc-a2/outcomes", status(200),
             body={"success": True}),
        Cell("b1", "record an outcome out of scope is not_found", "POST", "/api/processes/proc-a/outcomes",
             status(404), body={"success": False}),
        Cell("a1", "delete a shared process is forbidden", "DELETE", "/api/processes/proc-shared", status(403)),
        Cell("a1", "delete another group's process is not_found", "DELETE", "/api/processes/proc-b", status(404)),
        Cell("b1", "delete in scope", "DELETE", "/api/processes/proc-b", status(200)),
        Cell("admin", "admin deletes a shared process", "DELETE", "/api/processes/proc-shared", status(200)),
    ]  # fmt: skip

    # fleet: register only itself; list only its own group; administration forbidden
    out += [
        Cell("a1", "register itself", "POST", "/api/fleet/robots", status(200), body={"robot_id": "a1", "name": "A"}),
        Cell("a1", "register another robot is forbidden", "POST", "/api/fleet/robots", status(403),
             body={"robot_id": "b1"}),
        Cell("a1", "register itself into another group is forbidden", "POST", "/api/fleet/robots", status(403),
             body={"robot_id": "a1", "group": "grp-b"}),
        Cell("a1", "robots of its own group only", "GET", "/api/fleet/robots", ids("robots", "robot_id", {"a1", "a2"})),
        Cell("b1", "robots of its own group only", "GET", "/api/fleet/robots", ids("robots", "robot_id", {"b1"})),
        Cell("b1", "asking for another group shows nothing of it", "GET", "/api/fleet/robots",
             ids("robots", "robot_id", set()), params={"group": "grp-a"}),
        Cell("admin", "every robot", "GET", "/api/fleet/robots", ids("robots", "robot_id", {"a1", "a2", "b1"})),
        Cell("a1", "its own group only", "GET", "/api/fleet/groups", ids("groups", "group_id", {"grp-a"})),
        Cell("admin", "every group", "GET", "/api/fleet/groups", ids("groups", "group_id", {"grp-a", "grp-b"})),
        Cell("a1", "the overview counts its own group", "GET", "/api/fleet", field_is(("robots",), 2)),
        Cell("a1", "regroup itself is forbidden", "PUT", "/api/fleet/robots/a1/group", status(403),
             body={"group": "grp-b"}),
        Cell("b1", "regroup another robot is forbidden", "PUT", "/api/fleet/robots/a1/group", status(403),
             body={"group": "grp-b"}),
        Cell("a1", "upsert a group is forbidden", "PUT", "/api/fleet/groups/grp-a", status(403), body={"name": "x"}),
        Cell("a1", "delete a group is forbidden", "DELETE", "/api/fleet/groups/grp-b", status(403)),
        Cell("a1", "the global switch is forbidden", "PUT", "/api/fleet/self-improve", status(403),
             body={"enabled": True}),
        Cell("b1", "a group switch is forbidden", "PUT", "/api/fleet/self-improve", status(403),
             body={"enabled": True, "group": "grp-b"}),
        Cell("a1", "reindex is forbidden", "POST", "/api/reindex", status(403), body={}),
        Cell("admin", "admin flips a group switch", "PUT", "/api/fleet/self-improve",
             field_is(("group", "self_improve"), True), body={"enabled": True, "group": "grp-a"}),
        Cell("admin", "admin moves a robot", "PUT", "/api/fleet/robots/a2/group", field_is(("robot", "group"), "grp-b"),
             body={"group": "grp-b"}),
        Cell("admin", "admin upserts a group", "PUT", "/api/fleet/groups/grp-c", status(200), body={"name": "C"}),
        Cell("admin", "admin reindexes", "POST", "/api/reindex", status(200), body={}),
    ]  # fmt: skip

    # lessons act as the tenant; operator views
    out += [
        Cell("a1", "lessons act as itself whatever robot says", "GET", "/api/lessons", status(200),
             params={"robot": "b1"}),
        Cell("admin", "every scope", "GET", "/api/lessons", status(200)),
        Cell("a1", "doctor is operator information", "GET", "/api/doctor", status(403)),
        Cell("admin", "doctor", "GET", "/api/doctor", status(200)),
        Cell("a1", "stats without per-table counts", "GET", "/api/stats", field_is(("tables",), None)),
        Cell("a1", "stats without the fleet's vector counts", "GET", "/api/stats", fleet_counts(shown=False)),
        Cell("admin", "stats with the fleet's vector counts", "GET", "/api/stats", fleet_counts(shown=True)),
        Cell("a1", "session says who it is", "GET", "/api/session", field_is(("robot_id",), "a1")),
        Cell("b1", "session names its group", "GET", "/api/session", field_is(("group",), "grp-b")),
        Cell("admin", "session is unscoped", "GET", "/api/session", field_is(("can_administer",), True)),
    ]  # fmt: skip
    return out


async def arrange_experiences(memory: Memory) -> dict[str, Any]:
    """Memories and a session of a1, a memory of b1, and one written by the admin (attributed to
    the server's ROBOT_ID, a robot in no group)."""
    exp = memory.experiences
    a1, b1 = Principal.robot("a1"), Principal.robot("b1")
    s = await exp.start_session(a1, "kitchen")
    mem_a = await exp.learn(a1, "mug handle faces left in kitchen A", {"task": {"success": True}}, "kitchen", s.id)
    mem_a2 = await exp.learn(a1, "the drawer sticks when humid", {"task": {"success": False}}, "kitchen")
    mem_b = await exp.learn(b1, "mug handle faces right in lab B", {"task": {"success": False}}, "lab")
    mem_x = await exp.learn(ADMIN_PRINCIPAL, "operator note: recalibrate monthly", None, "ops")
    return {"session": s.id, "a": mem_a.memory_id, "a2": mem_a2.memory_id, "b": mem_b.memory_id, "x": mem_x.memory_id}


def experience_cells(made: dict[str, Any]) -> list[Cell]:
    a, a2, b, x, sid = made["a"], made["a2"], made["b"], made["x"], made["session"]
    out = [
        Cell(who, f"{path} without a valid token", "GET", path, status(401))
        for who in ("wrong", "none")
        for path in ("/api/memories", "/api/sessions", "/api/recent-failures", "/api/robots", "/api/charts/sessions")
    ]
    out += [
        Cell("admin", "every memory", "GET", "/api/memories", ids("memories", "id", {a, a2, b, x})),
        Cell("a1", "own group's memories only", "GET", "/api/memories", ids("memories", "id", {a, a2})),
        Cell("b1", "own group's memories only", "GET", "/api/memories", ids("memories", "id", {b})),
        Cell("a1", "robot=b1 cannot escape the scope", "GET", "/api/memories", ids("memories", "id", set()),
             params={"robot": "b1"}),
        Cell("a1", "get its own memory", "GET", f"/api/memories/{a}", status(200)),
        Cell("b1", "another group's memory is not_found", "GET", f"/api/memories/{a}", status(404)),
        Cell("a1", "the admin's memory is not_found", "GET", f"/api/memories/{x}", status(404)),
        Cell("b1", "recall never returns another group's memory", "GET", "/api/search/memories",
             ids("memories", "id", set()), params={"q": "mug handle faces left", "collection": "kitchen"}),
        Cell("a1", "recall in scope", "GET", "/api/search/memories", ids("memories", "id", {a}),
             params={"q": "mug handle", "collection": "kitchen"}),
        Cell("b1", "update another group's memory is not_found", "PATCH", f"/api/memories/{a}", status(404),
             body={"content": "hijacked"}),
        Cell("b1", "forget another group's memory is not_found", "POST", f"/api/memories/{a}/forget", status(404),
             body={"reason": "spite"}),
        Cell("a1", "forget its own memory", "POST", f"/api/memories/{a2}/forget", status(200),
             body={"reason": "drawer fixed"}),
        Cell("a1", "its own sessions", "GET", "/api/sessions", ids("sessions", "id", {sid})),
        Cell("b1", "no session of another group", "GET", "/api/sessions", ids("sessions", "id", set())),
        Cell("b1", "another group's timeline is not_found", "GET", f"/api/sessions/{sid}/memories", status(404)),
        Cell("admin", "any timeline", "GET", f"/api/sessions/{sid}/memories", status(200)),
        Cell("b1", "recent failures of its own group only", "GET", "/api/recent-failures", ids("memories", "id", {b})),
        Cell("b1", "collections of its own group only", "GET", "/api/collections",
             ids("collections", "name", {"lab"})),
        # by now the fleet cells moved a2 to grp-b: grp-a = {a1}, grp-b = {a2, b1}
        Cell("a1", "the robots report shows its own group's robots", "GET", "/api/robots",
             ids("robots", "robot_id", {"a1"})),
        Cell("b1", "the robots report shows its own group's robots", "GET", "/api/robots",
             ids("robots", "robot_id", {"a2", "b1"})),
        Cell("b1", "the robots report rolls up its own group only", "GET", "/api/robots",
             ids("groups", "group", {"grp-b"})),
        Cell("admin", "the robots report shows every robot", "GET", "/api/robots",
             includes("robots", "robot_id", {"a1", "a2", "b1"})),
        Cell("b1", "sessions per day count no session of another group", "GET", "/api/charts/sessions",
             day_total(0)),
        Cell("a1", "sessions per day count its own group's", "GET", "/api/charts/sessions", day_total(1)),
    ]  # fmt: skip
    return out


async def test_the_tenancy_matrix_over_rest(secured: Connect, secured_memory: Memory) -> None:
    await arrange(secured)
    matrix = cells() + experience_cells(await arrange_experiences(secured_memory))
    failures: list[str] = []
    for n, cell in enumerate(matrix):
        # Each wrong token from its own address: from one, the eleventh would be held (429), which
        # is the throttle's behaviour (tests/web/test_throttle.py), not this table's.
        address = f"10.9.{n // 200}.{n % 200 + 1}" if cell.who == "wrong" else "127.0.0.1"
        async with secured(WHO[cell.who], address=address) as c:
            path, _, query = cell.path.partition("?")
            params = dict(p.split("=", 1) for p in query.split("&") if p) | (cell.params or {})
            body = cell.body if cell.method in ("POST", "PUT", "PATCH") else None
            r = await c.request(cell.method, path, params=params, json=body)
        if not cell.check(r):
            failures.append(f"{cell.who}: {cell.what} ({cell.method} {cell.path}) → {r.status_code} {r.text[:200]}")
    passed = len(matrix) - len(failures)
    print(f"REST tenancy matrix: {len(matrix)} cells tried, {passed} passed")  # noqa: T201 - the issue asks for the size
    assert not failures, "\n".join(failures)
    assert len(matrix) >= 90
