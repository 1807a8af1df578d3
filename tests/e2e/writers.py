"""Mixed writers against the real server, and a ledger of every write it acknowledged.

A `Writer` is one MCP client of one tenant (the admin or a robot token) that cycles through the
write tools a fleet uses — ``save_process``, ``record_outcome`` with and without a note, ``learn``
(a context with params and ``task.success``), ``save_perception``, ``record_params`` and (admin)
``register_robot`` — and records each result that is not an error in a shared `Ledger`. After a
crash, `verify` asks a fresh admin session whether every acknowledged write is there.

Every write carries a unique marker (the writer's ``tag`` and a sequence number), so a recall
filtered on the marker finds exactly the memories of one writer in one round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio

from tests.conftest import Client, doc
from tests.e2e.harness import ServerProcess, http_session, robot_tokens, sse_session

ADMIN = "fault-admin-token-0123456789"
ROBOT_TOKENS = {
    "rap-1": "fault-rap-1-token-abcdefgh",
    "rap-2": "fault-rap-2-token-abcdefgh",
    "rap-3": "fault-rap-3-token-abcdefgh",
    "rap-4": "fault-rap-4-token-abcdefgh",
}
#: rap-1 and rap-2 share a group, rap-3 has its own, rap-4 is ungrouped (solo lessons).
GROUPS = {"rap-1": "g-a", "rap-2": "g-a", "rap-3": "g-b"}
#: The hashing embedder writes every row, FTS entry and vector together from the first request
#: (the default model loads in the background for a few seconds).
FLEET_ENV = {
    "MEMORY_TOKEN": ADMIN,
    "MEMORY_ROBOT_TOKENS": robot_tokens(ROBOT_TOKENS),
    "MEMORY_EMBEDDER": "hashing",
}
#: (tenant, transport) of each writer: several tenants, both HTTP transports, two clients of rap-1.
WRITERS: tuple[tuple[str, str], ...] = (
    ("admin", "sse"),
    ("rap-1", "http"),
    ("rap-2", "sse"),
    ("rap-3", "http"),
    ("rap-4", "sse"),
    ("rap-1", "sse"),
)
OPS = ("save", "outcome", "learn", "note", "perception", "params", "register")
MAX_OPS_PER_WRITER = 400

Session = Callable[..., AbstractAsyncContextManager[Client]]


def token_of(tenant: str) -> str:
    return ADMIN if tenant == "admin" else ROBOT_TOKENS[tenant]


def session(server: ServerProcess, tenant: str, transport: str) -> AbstractAsyncContextManager[Client]:
    if transport == "sse":
        return sse_session(server, token=token_of(tenant))
    return http_session(server, token=token_of(tenant), terminate_on_close=False)


async def set_up_fleet(server: ServerProcess) -> None:
    """Groups, robots, and self-improvement on (record_params writes nothing while it is off)."""
    async with http_session(server, token=ADMIN) as admin:
        for group in sorted(set(GROUPS.values())):
            assert "error" not in await admin.call("upsert_group", group_id=group, customer="acme")
        for robot in ROBOT_TOKENS:
            assert "error" not in await admin.call("register_robot", robot_id=robot, group=GROUPS.get(robot, ""))
        assert "error" not in await admin.call("set_self_improve", enabled=True)


@dataclass
class Ledger:
    """What the server acknowledged (a result without ``"error"``)."""

    processes: set[str] = field(default_factory=set)
    #: process id → outcomes acknowledged without a note (hot writes the server awaited)
    outcomes: Counter[str] = field(default_factory=Counter)
    #: process id → markers of notes acknowledged in its outcome log
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: writer tag → memory ids acknowledged by learn / save_perception
    memories: dict[str, set[int]] = field(default_factory=dict)
    #: (robot, key, params) acknowledged by record_params
    lessons: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    robots: set[str] = field(default_factory=set)
    #: results with an error, and exceptions, seen while the server was meant to be up
    failures: list[str] = field(default_factory=list)
    acks: int = 0
    in_flight: int = 0
    #: set before the server is killed: from then on every failure is expected
    killed: bool = False
    enough: anyio.Event = field(default_factory=anyio.Event)
    enough_at: int = 0

    def ack(self) -> None:
        self.acks += 1
        if self.enough_at and self.acks >= self.enough_at:
            self.enough.set()

    def snapshot(self) -> Ledger:
        """A copy of what was acknowledged so far (the copy does not follow later writes)."""
        return Ledger(
            processes=set(self.processes),
            outcomes=Counter(self.outcomes),
            notes={pid: list(m) for pid, m in self.notes.items()},
            memories={tag: set(ids) for tag, ids in self.memories.items()},
            lessons=list(self.lessons),
            robots=set(self.robots),
            acks=self.acks,
        )


@dataclass
class Writer:
    ledger: Ledger
    tag: str
    tenant: str
    transport: str
    #: a number unique to this writer (its insights carry it)
    serial: int = 0
    offset: int = 0

    @property
    def robot(self) -> str:
        return "rap-4" if self.tenant == "admin" else self.tenant

    async def run(self, server: ServerProcess, stop: anyio.Event | None = None) -> None:
        """Write until `stop`, MAX_OPS_PER_WRITER, or the server dies (expected once killed)."""
        try:
            async with session(server, self.tenant, self.transport) as client:
                anchor = await self._save(client, f"{self.tag}-anchor")
                for i in range(MAX_OPS_PER_WRITER):
                    if stop is not None and stop.is_set():
                        return
                    await self._one(client, OPS[(i + self.offset) % len(OPS)], i, anchor)
        except Exception as exc:
            if not self.ledger.killed:
                self.ledger.failures.append(f"{self.tag}: {type(exc).__name__}: {exc}")

    async def _call(self, client: Client, tool: str, **args: Any) -> dict[str, Any] | None:
        self.ledger.in_flight += 1
        try:
            result = await client.call(tool, **args)
        finally:
            self.ledger.in_flight -= 1
        if "error" in result:
            if not self.ledger.killed:
                self.ledger.failures.append(f"{self.tag} {tool}: {result}")
            return None
        return result

    async def _save(self, client: Client, pid: str) -> str | None:
        markdown = doc(pid, f"Carry crate {pid}", f"## Steps\n1. carry crate {pid} to its bay\n", tags="[storm]")
        result = await self._call(client, "save_process", markdown=markdown)
        if result is None:
            return None
        assert result["id"] == pid, result
        self.ledger.processes.add(pid)
        self.ledger.ack()
        return pid

    async def _one(self, client: Client, op: str, i: int, anchor: str | None) -> None:
        ledger, mark = self.ledger, f"{self.tag}-{i}"
        if op == "save":
            await self._save(client, mark)
        elif op == "outcome" and anchor is not None:
            if await self._call(client, "record_outcome", id=anchor, success=i % 3 != 0) is not None:
                ledger.outcomes[anchor] += 1
                ledger.ack()
        elif op == "note" and anchor is not None:
            note = f"note {mark}: the crate was heavier than listed"
            if await self._call(client, "record_outcome", id=anchor, success=True, note=note) is not None:
                ledger.notes.setdefault(anchor, []).append(f"note {mark}:")
                ledger.ack()
        elif op == "learn":
            # A number of its own in every insight: dedup lets numbers decide, so none is a duplicate.
            force = self.serial + i / 1000
            result = await self._call(
                client,
                "learn",
                insight=f"crate {mark} slipped at grip force {force:.3f} N",
                context={"params": {"grip_force": force}, "task": {"success": i % 2 == 0}, "storm": self.tag},
            )
            if result is not None:
                assert result["status"] == "created", result
                self._memory(result["memory_id"])
        elif op == "perception":
            result = await self._call(
                client,
                "save_perception",
                description=f"crate {mark} seen on shelf {self.serial}.{i}",
                data={"bbox": [i, 1, 10, 10]},
                metadata={"storm": self.tag, "seq": i},
            )
            if result is not None:
                self._memory(result["memory_id"])
        elif op == "params":
            key, params = f"storm/{mark}", {"grip_force": i, "mark": mark}
            result = await self._call(client, "record_params", robot=self.robot, key=key, params=params, success=True)
            if result is not None:
                assert result["recorded"] is True, result
                ledger.lessons.append((self.robot, key, params))
                ledger.ack()
        elif op == "register" and self.tenant == "admin":
            robot_id = f"robot-{mark}"
            if await self._call(client, "register_robot", robot_id=robot_id) is not None:
                ledger.robots.add(robot_id)
                ledger.ack()

    def _memory(self, memory_id: int) -> None:
        self.ledger.memories.setdefault(self.tag, set()).add(memory_id)
        self.ledger.ack()


def writers(ledger: Ledger, round_: int) -> list[Writer]:
    """One writer per WRITERS entry for one round; tags and serials are unique across rounds."""
    return [
        Writer(ledger, f"r{round_}-w{n}", tenant, transport, serial=(round_ + 1) * 100 + n, offset=n)
        for n, (tenant, transport) in enumerate(WRITERS)
    ]


async def _all_pages(admin: Client, tool: str, key: str, **args: Any) -> AsyncIterator[dict[str, Any]]:
    offset = 0
    while True:
        page = await admin.call(tool, limit=500, offset=offset, **args)
        assert "error" not in page, page
        yield page
        offset += len(page[key])
        if not page[key] or offset >= page["total"]:
            return


async def missing(server: ServerProcess, ledger: Ledger) -> list[str]:
    """Every acknowledged write that a fresh admin session cannot find (empty: nothing lost)."""
    lost: list[str] = []
    async with http_session(server, token=ADMIN) as admin:
        summaries: dict[str, dict[str, Any]] = {}
        async for page in _all_pages(admin, "list_processes", "processes"):
            summaries.update({p["id"]: p for p in page["processes"]})
        lost += [f"process {pid}" for pid in sorted(ledger.processes - summaries.keys())]
        for pid, n in sorted(ledger.outcomes.items()):
            s = summaries.get(pid)
            counted = 0 if s is None else s["success_count"] + s["failure_count"]
            if counted < n:
                lost.append(f"outcomes of {pid}: {counted} counted < {n} acknowledged")
        for pid, markers in sorted(ledger.notes.items()):
            got = await admin.call("get_process", id=pid)
            markdown = got.get("markdown", "")
            lost += [f"note {m!r} in {pid}" for m in markers if m not in markdown]
        for tag, ids in sorted(ledger.memories.items()):
            assert len(ids) <= 100, "one recall page (n=100) must hold a writer's memories"
            found = await admin.call("recall", query="", context_filter={"storm": tag}, n=100, min_confidence=0.0)
            assert "error" not in found, found
            lost += [f"memory {i} of {tag}" for i in sorted(ids - {m["id"] for m in found["memories"]})]
        for robot, key, params in ledger.lessons:
            got = await admin.call("recall_params", robot=robot, key=key)
            if not any(lesson["params"] == params for lesson in got.get("lessons", [])):
                lost.append(f"lesson {robot}/{key}")
        listed = await admin.call("list_robots")
        lost += [f"robot {r}" for r in sorted(ledger.robots - {r["robot_id"] for r in listed["robots"]})]
    return lost
