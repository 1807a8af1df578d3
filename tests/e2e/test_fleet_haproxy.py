"""Issue 27 item 5: three real replicas on one PostgreSQL database behind HAProxy running the
shipped ``deploy/haproxy.cfg``; four official-SDK MCP clients (stateless Streamable HTTP, robot
tokens of two groups) save, learn, record outcomes and search through the proxy while one replica
is killed with SIGKILL and started again.

What must hold:

- the only calls that fail are those in flight while the replica died (started before it was
  reaped, not answered before the signal); every call started after that is answered — HAProxy
  sends a connection the dead replica refuses to another one, and never re-sends a request;
- every acknowledged write (a saved process, a learned memory, a recorded outcome) is read back
  afterwards through the proxy and through each replica directly, the restarted one included;
- the restarted replica takes its share of the traffic again;
- tenancy holds on every path: a group never sees the other group's processes or memories.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import Client, doc
from tests.e2e.balancer import Balancer, BalancerUnavailable
from tests.e2e.harness import ServerProcess, http_session, json_lines, robot_tokens
from tests.pgcluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.serial]

ADMIN = "admin-token-0123456789"
GROUPS = {"g-a": ("rap-a1", "rap-a2"), "g-b": ("rap-b1", "rap-b2")}
TOKENS = {robot: f"tok-{robot}-abcdefgh" for robots in GROUPS.values() for robot in robots}
GROUP_OF = {robot: group for group, robots in GROUPS.items() for robot in robots}
ENV = {
    "MEMORY_TOKEN": ADMIN,
    "MEMORY_ROBOT_TOKENS": robot_tokens(TOKENS),
    "MEMORY_EMBEDDER": "hashing",
    "MEMORY_TRUSTED_PROXIES": "127.0.0.1",
}
#: Bounds on waiting, not speed figures: the whole test, one call, and each phase of traffic.
DEADLINE_S = 150.0
CALL_DEADLINE_S = 30.0
SERVE_DEADLINE_S = 60.0
#: Calls answered before the kill, and after it before the restart (all four clients together).
BEFORE_KILL = 60
AFTER_KILL = 60
#: Calls the restarted replica must answer through the proxy before the traffic stops.
SERVED_AFTER_RESTART = 5
#: Learns are numbered by the client's step; a recall window of this many steps holds < 100.
WINDOW = 400


@pytest.fixture
def database_url(pg_cluster: Cluster) -> Iterator[str]:
    """A database of this test's own in the session's cluster (the replicas migrate it themselves)."""
    with pg_cluster.database("fleet") as url:
        yield url


@dataclass
class Call:
    robot: str
    tool: str
    args: dict[str, Any]
    start: float
    end: float = math.inf
    result: dict[str, Any] | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.result is not None and "error" not in self.result

    def overlaps(self, since: float, until: float) -> bool:
        """In flight at some moment of [since, until]."""
        return self.start <= until and self.end >= since


@dataclass
class Traffic:
    """Every call the clients made, and a way to wait for a number of answered ones."""

    calls: list[Call] = field(default_factory=list)
    answered: int = 0
    _waiters: list[tuple[int, anyio.Event]] = field(default_factory=list)

    def done(self, call: Call) -> None:
        if call.ok:
            self.answered += 1
            for target, event in self._waiters:
                if self.answered >= target:
                    event.set()

    async def answered_more(self, n: int) -> None:
        event = anyio.Event()
        self._waiters.append((self.answered + n, event))
        await event.wait()

    def acked(self, robot: str, tool: str) -> list[Call]:
        return [c for c in self.calls if c.robot == robot and c.tool == tool and c.ok]


@asynccontextmanager
async def proxied_session(balancer: Balancer, token: str) -> AsyncIterator[Client]:
    """An SDK client session through the proxy: `http_session` wants a server, and the proxy is one."""
    target = ServerProcess(data_dir=Path("/nonexistent"), log_dir=Path("/nonexistent"), port=balancer.port)
    async with http_session(target, token=token, terminate_on_close=False) as client:
        yield client


async def robot_loop(robot: str, balancer: Balancer, traffic: Traffic, stop: anyio.Event) -> None:
    """One robot's brain: a cycle of save / learn / outcome / find / recall through the proxy. A
    failed call ends the SDK session (its transport raises); the robot opens a new one and goes on,
    as a brain reconnecting would."""
    step = 0
    latest: str | None = None
    while not stop.is_set():
        opening = Call(robot, "initialize", {}, anyio.current_time())
        traffic.calls.append(opening)
        current: Call | None = opening
        try:
            async with proxied_session(balancer, TOKENS[robot]) as client:
                opening.end, opening.result = anyio.current_time(), {}
                traffic.done(opening)
                while not stop.is_set():
                    step += 1
                    tool, args = next_call(robot, step, latest)
                    current = Call(robot, tool, args, anyio.current_time())
                    traffic.calls.append(current)
                    with anyio.fail_after(CALL_DEADLINE_S):
                        current.result = await client.call(tool, **args)
                    current.end = anyio.current_time()
                    traffic.done(current)
                    if tool == "save_process" and current.ok:
                        latest = current.result["id"]
                    current = None
        except Exception as exc:  # the transport's task group: HTTP 502, a reset, a timeout
            if current is not None:
                current.end, current.error = anyio.current_time(), repr(exc)[:300]


def next_call(robot: str, step: int, latest: str | None) -> tuple[str, dict[str, Any]]:
    kind = step % 5
    if kind == 0:
        return "save_process", {
            "markdown": doc(f"{robot}-p{step}", f"{robot} stacks crate {step}", "Lift it with both arms.")
        }
    if kind == 1:
        return "learn", {
            "insight": f"{robot} run {step}: a grip force of {step}.5 N held crate {step}",
            "context": {"params": {"force": step + 0.5, "run": step}, "task": {"success": True}},
            "collection": robot,
        }
    if kind == 2 and latest is not None:
        return "record_outcome", {"id": latest, "success": step % 4 == 2, "note": f"step {step}"}
    if kind == 3:
        return "find_processes", {"query": "stack the crate with both arms"}
    return "recall", {"query": "grip force held the crate", "collection": robot, "n": 5}


async def read_back(client: Client, robot: str, last_step: int) -> tuple[dict[str, dict[str, Any]], set[int]]:
    """Every process `robot`'s token lists (id → summary) and every memory it recalls in its own
    collection, one window of learn steps at a time (`recall` returns at most 100)."""
    processes: dict[str, dict[str, Any]] = {}
    while True:
        page = await client.call("list_processes", limit=500, offset=len(processes))
        processes.update({p["id"]: p for p in page["processes"]})
        if not page["processes"] or len(processes) >= page["total"]:
            break
    memories: set[int] = set()
    for low in range(0, last_step + 1, WINDOW):
        found = await client.call(
            "recall",
            query="",
            collection=robot,
            n=100,
            min_confidence=0.0,
            context_filter={"params.run": {"$gte": low, "$lt": low + WINDOW}},
        )
        assert len(found["memories"]) < 100, "a recall window filled up: make WINDOW smaller"
        memories.update(m["id"] for m in found["memories"])
    return processes, memories


def requested_id(call: Call) -> str:
    """The id a `save_process` call's document asked for (its second line: ``id: …``)."""
    line: str = call.args["markdown"].split("\n")[1]
    return line.removeprefix("id: ")


def tool_calls(server: ServerProcess) -> int:
    return sum(1 for line in json_lines(server.stderr()) if line.get("event") == "tool.call")


async def until_served(server: ServerProcess, traffic: Traffic) -> None:
    """Returns once `server`'s latest run has logged SERVED_AFTER_RESTART tool calls; looks again
    after every few calls the clients get answered (no sleeping)."""
    while tool_calls(server) < SERVED_AFTER_RESTART:
        await traffic.answered_more(len(TOKENS))


async def test_a_replica_killed_mid_traffic_fails_only_the_calls_in_flight_and_loses_no_acknowledged_write(
    tmp_path: Path, database_url: str
) -> None:
    replicas = [
        ServerProcess(
            data_dir=tmp_path / name / "data",
            log_dir=tmp_path / name,
            env={**ENV, "MEMORY_DATABASE_URL": database_url},
        )
        for name in ("r1", "r2", "r3")
    ]
    for server in replicas:
        server.log_dir.mkdir(parents=True)
    first, victim, third = replicas
    balancer = Balancer(replicas=[s.port for s in replicas], log_path=tmp_path / "haproxy.log")
    traffic = Traffic()
    stop = anyio.Event()

    started = anyio.current_time()
    with anyio.fail_after(DEADLINE_S):
        await first.start()
        try:
            # The fleet is registered before the other replicas start, so each of them reads it
            # at start (a running replica picks up another's fleet writes within 2 s).
            async with http_session(first, token=ADMIN) as admin:
                for group, robots in GROUPS.items():
                    await admin.call("upsert_group", group_id=group, customer=group)
                    for robot in robots:
                        await admin.call("register_robot", robot_id=robot, group=group)
            async with anyio.create_task_group() as starting:
                starting.start_soon(victim.start)
                starting.start_soon(third.start)
            try:
                await balancer.start()
            except BalancerUnavailable as exc:
                pytest.fail(str(exc), pytrace=False)

            async with anyio.create_task_group() as clients:
                for robot in TOKENS:
                    clients.start_soon(robot_loop, robot, balancer, traffic, stop)
                await traffic.answered_more(BEFORE_KILL)
                killed_at = anyio.current_time()
                await victim.kill()
                reaped_at = anyio.current_time()
                await traffic.answered_more(AFTER_KILL)
                await victim.start()  # same port; HAProxy brings it back after two good checks
                restarted_at = anyio.current_time()
                with anyio.move_on_after(SERVE_DEADLINE_S):
                    await until_served(victim, traffic)
                served = tool_calls(victim) >= SERVED_AFTER_RESTART
                stop.set()

            read: dict[str, list[tuple[dict[str, dict[str, Any]], set[int]]]] = {r: [] for r in TOKENS}
            foreign_gets: list[dict[str, Any]] = []
            foreign_recalls: list[dict[str, Any]] = []
            for robot, token in TOKENS.items():
                last_step = max(
                    c.args["context"]["params"]["run"] for c in traffic.calls if c.robot == robot and c.tool == "learn"
                )
                async with proxied_session(balancer, token) as client:
                    read[robot].append(await read_back(client, robot, last_step))
                    for other in TOKENS:
                        if GROUP_OF[other] == GROUP_OF[robot]:
                            continue
                        for c in traffic.acked(other, "save_process")[:3]:
                            foreign_gets.append(await client.call("get_process", id=requested_id(c)))
                        foreign_recalls.append(
                            await client.call("recall", query="", collection=other, n=100, min_confidence=0.0)
                        )
                for server in replicas:
                    async with http_session(server, token=token) as client:
                        read[robot].append(await read_back(client, robot, last_step))
        finally:
            stop.set()
            await balancer.stop()
            for server in replicas:
                await server.stop()

    failed = [c for c in traffic.calls if not c.ok]
    in_flight = [c for c in traffic.calls if c.overlaps(killed_at, reaped_at)]
    late = [c for c in failed if not c.overlaps(killed_at, reaped_at)]
    summary = {  # for whoever reads a failure (and the operations guide's figures)
        "calls": len(traffic.calls),
        "answered": traffic.answered,
        "in_flight_at_kill": len(in_flight),
        "failed": [(c.robot, c.tool, c.error) for c in failed],
        "after_restart": sum(1 for c in traffic.calls if c.start >= restarted_at),
        "served_by_restarted": tool_calls(victim),
        "seconds": round(anyio.current_time() - started, 1),
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    assert late == [], f"calls failed outside the kill window: {late}\n{balancer.output()[-3000:]}"
    assert len(failed) <= len(in_flight)
    assert served, f"the restarted replica answered {tool_calls(victim)} calls through the proxy"
    after_restart = [c for c in traffic.calls if c.start >= restarted_at]
    assert after_restart
    assert all(c.ok for c in after_restart)

    for robot in TOKENS:
        saved = {c.result["id"] for c in traffic.acked(robot, "save_process") if c.result is not None}
        learned = {c.result["memory_id"] for c in traffic.acked(robot, "learn") if c.result is not None}
        assert saved, robot
        assert learned, robot
        own_group = {
            c.result["id"]
            for other in GROUPS[GROUP_OF[robot]]
            for c in traffic.acked(other, "save_process")
            if c.result is not None
        }
        other_group = {  # every id the other group asked for, answered or not
            requested_id(c) for c in traffic.calls if c.tool == "save_process" and GROUP_OF[c.robot] != GROUP_OF[robot]
        }
        outcomes = outcome_bounds(traffic, robot)
        for where, (processes, memories) in zip(("proxy", "r1", "r2", "r3"), read[robot], strict=True):
            assert own_group <= processes.keys(), (where, robot, own_group - processes.keys())
            assert learned <= memories, (where, robot, learned - memories)
            assert not (other_group & processes.keys()), (where, robot)  # tenancy: nothing of the other group
            for pid, (low, high) in outcomes.items():
                counted = processes[pid]["success_count"] + processes[pid]["failure_count"]
                assert low <= counted <= high, (where, robot, pid, low, counted, high)
        assert saved <= own_group
    # Tenancy through the proxy: another group's documents are not found, its memories not recalled.
    assert foreign_gets
    assert all(f.get("error") == "not_found" for f in foreign_gets), foreign_gets
    assert foreign_recalls
    assert all(f["memories"] == [] for f in foreign_recalls), foreign_recalls


def outcome_bounds(traffic: Traffic, robot: str) -> dict[str, tuple[int, int]]:
    """Per process: (acknowledged outcomes, acknowledged + unanswered ones) — an unanswered call may
    or may not have been applied before its replica died."""
    bounds: dict[str, tuple[int, int]] = {}
    for c in traffic.calls:
        if c.robot != robot or c.tool != "record_outcome":
            continue
        low, high = bounds.get(c.args["id"], (0, 0))
        bounds[c.args["id"]] = (low + c.ok, high + 1)
    return bounds
