"""Load: many concurrent SSE or Streamable HTTP clients of several tenants against the real server process.

    python -m bench.load_sse [--transport sse|http] [--corpus realistic|worst] [--clients 50]
                             [--duration 30] [--append docs/benchmarks.md]

What it does, on a fresh data directory in a temporary folder:

1. preloads (in-process, before the server starts) 1,000 synthetic process documents spread over
   the tenants' robots and ``shared``, and 1,000 experience memories, with vectors for the
   configured embedder;
2. starts ``python -m robot_mcp_memory`` with ``MCP_TRANSPORT=sse`` on 127.0.0.1, tokens on: one
   admin token and one token per robot (``robot-1`` … in two groups, the last one ungrouped);
3. opens N sessions (SSE, or Streamable HTTP on ``/mcp`` with ``--transport http``), client *i*
   holding robot *i mod tenants*'s token; each client first waits until find_processes answers
   in hybrid mode (the model loads in the background) and, with the pool, asks each of its
   instructions once, so that the phases' finds are repeats the query-vector cache answers;
   then two phases with client 0 alone (ping, then find_processes: one client's cost per call)
   and three timed phases with all N clients at once, each started once the server is quiet
   (no background work left from before: `_quiet`):
   - **echo**: the MCP protocol ping (``session.send_ping()``), the transport's floor;
   - **find**: ``find_processes`` only, so its throughput can be set against the echo's;
   - **mixed** (``--duration``): find_processes 35 %, recall 25 %, record_outcome 15 % (one in
     five with a note), learn 15 %, save_process 10 %;
4. counts errors (a result with ``"error"``, ``isError`` or an exception), greps the server's stderr
   for "database is locked" and error-level lines, reads dropped hot writes from ``/metrics``, and
   the server's CPU time from ``/proc``;
5. starts a bare FastMCP server with one echo tool (`bench.bare_echo`, no tokens) as a separate
   process on the same transport and pings it with the same clients, one alone and then all N:
   the SDK's own floor, beside our ping.

``--corpus worst`` asks find_processes only instructions made of words every document holds
(`worst_queries`), so every query matches every document; ``realistic`` (the default) asks the
synthetic instructions of bench_processes.

Latencies are client-side round trips. Client and server share the machine: the client's own CPU
share is reported so a saturated client is visible. `run_load` is the importable core;
tests/e2e/test_load_smoke.py runs it with tiny numbers (no timing assertions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from bench.bench_processes import ROOMS, make_documents, make_queries
from bench.experience_corpus import QUERIES as RECALL_QUERIES
from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.tenancy.principal import ADMIN, Principal

HOST = "127.0.0.1"
START_DEADLINE_S = 120.0
ADMIN_TOKEN = "load-admin-token-0123456789abcdef"
#: The mixed phase: (tool, weight).
MIX: tuple[tuple[str, int], ...] = (
    ("find_processes", 35),
    ("recall", 25),
    ("record_outcome", 15),
    ("learn", 15),
    ("save_process", 10),
)
SEED = 20261129


@dataclass(frozen=True)
class LoadConfig:
    clients: int = 50
    tenants: int = 5
    duration_s: float = 30.0
    echo_s: float = 10.0
    find_s: float = 10.0
    warmup_s: float = 3.0
    processes: int = 1000
    memories: int = 1000
    #: MEMORY_EMBEDDER for the server; "" keeps the server's default (the offline USE model)
    embedder: str = ""
    #: a phase ends after its time *and* once every client made at least this many calls
    min_calls: int = 0
    #: "sse" (GET /sse + POST /messages/) or "http" (Streamable HTTP on /mcp)
    transport: str = "sse"
    #: "realistic" (bench_processes' instructions) or "worst" (every query matches every document)
    corpus: str = "realistic"
    #: seconds of each phase client 0 runs alone (ping, then find_processes)
    solo_s: float = 5.0
    #: also ping a bare FastMCP server (`bench.bare_echo`) with the same clients
    bare: bool = True
    #: "pool": each client draws its finds from 50 instructions of its own (they repeat, as a
    #: fleet's do: the server's query cache answers most); "distinct": every find a text not
    #: asked before (a word no document holds appended), so the model embeds each one
    queries: str = "pool"


#: Steps every synthetic document holds (`bench_processes.make_document`): instructions made of
#: these words match every document, the worst case for a search that scores each match.
_WORST_TEMPLATES = (
    "navigate to the {room} and record the outcome once the task is confirmed",
    "navigation to the {room} then record success once confirmed",
    "go to the {room}, confirm the task and record the outcome",
    "record the outcome once the {room} task is confirmed",
)


def worst_queries(n: int, seed: int = SEED) -> list[str]:
    """`n` instructions each of whose words (but the room) every synthetic document holds."""
    rng = random.Random(seed)
    return [rng.choice(_WORST_TEMPLATES).format(room=rng.choice(ROOMS)) for _ in range(n)]


def robots(cfg: LoadConfig) -> list[str]:
    return [f"robot-{n + 1}" for n in range(cfg.tenants)]


def group_of(robot: str, cfg: LoadConfig) -> str | None:
    """robot-1, robot-2 → g-1; robot-3, robot-4 → g-2; …; the last robot is ungrouped."""
    n = int(robot.rsplit("-", 1)[1])
    if n == cfg.tenants and cfg.tenants > 1:
        return None
    return f"g-{(n + 1) // 2}"


def token_of(robot: str) -> str:
    return f"load-token-{robot}-abcdefgh"


# ---------------------------------------------------------------------------- preload
def owners(cfg: LoadConfig) -> list[str]:
    return [*robots(cfg), "shared"]


def preload(data_dir: Path, cfg: LoadConfig) -> dict[str, list[str]]:
    """Fill index.db before the server starts. Returns, per robot, the process ids it may see."""
    env = {"MEMORY_DATA_DIR": str(data_dir)} | ({"MEMORY_EMBEDDER": cfg.embedder} if cfg.embedder else {})
    memory = Memory.open(Settings.from_env(env))
    try:
        if memory.embedder is not None and memory.embedder.mode != "off":
            memory.embedder.wait_ready(START_DEADLINE_S)
        ids_by_owner = asyncio.run(_fill(memory, cfg))
        memory.process_store.backfiller.wait_idle(600)
    finally:
        memory.close()
    visible: dict[str, list[str]] = {}
    for robot in robots(cfg):
        group = group_of(robot, cfg)
        mates = [r for r in robots(cfg) if group is not None and group_of(r, cfg) == group] or [robot]
        visible[robot] = [pid for owner in [*mates, "shared"] for pid in ids_by_owner.get(owner, [])]
    return visible


async def _fill(memory: Memory, cfg: LoadConfig) -> dict[str, list[str]]:
    own = owners(cfg)
    docs = []
    for n, markdown in enumerate(make_documents(cfg.processes, seed=SEED)):
        doc = docmodel.parse(markdown)
        docs.append(doc.model_copy(update={"robot": own[n % len(own)]}))
    for start in range(0, len(docs), 500):
        await memory.process_store.restore(docs[start : start + 500])
    by_owner: dict[str, list[str]] = {}
    for d in docs:
        by_owner.setdefault(d.robot, []).append(d.id)
    items = list(corpus(cfg.memories, seed=SEED))
    rs = robots(cfg)
    for n, robot in enumerate(rs):
        mine = [(it.insight, it.context) for it in items[n :: len(rs)]]
        if mine:
            await memory.experiences.learn_many(Principal.robot(robot), mine)
    # robots and groups exist before the server starts, so every tenant is placed from the first call
    for group in sorted({g for r in rs if (g := group_of(r, cfg)) is not None}):
        await memory.fleet.upsert_group(ADMIN, group, customer="load")
    for robot in rs:
        await memory.fleet.register_robot(ADMIN, robot, group=group_of(robot, cfg) or "")
    return by_owner


# ---------------------------------------------------------------------------- the server process
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    data_dir: Path
    log_path: Path
    cfg: LoadConfig
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "robot_mcp_memory"]

    def healthy(self) -> bool:
        try:
            return httpx.get(self.url("/healthz"), timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_"))}
        env |= {
            "MCP_TRANSPORT": "sse",
            "MCP_HOST": HOST,
            "MCP_PORT": str(self.port),
            "MEMORY_DATA_DIR": str(self.data_dir),
            "MEMORY_TOKEN": ADMIN_TOKEN,
            "MEMORY_ROBOT_TOKENS": ",".join(f"{r}:{token_of(r)}" for r in robots(self.cfg)),
        }
        if self.cfg.embedder:
            env["MEMORY_EMBEDDER"] = self.cfg.embedder
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.command(), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.stderr()}")
            if self.healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"no healthy /healthz within {START_DEADLINE_S} s:\n{self.stderr()}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)

    def cpu_s(self) -> float:
        """The server's CPU time so far (user + system), from /proc; NaN where there is none."""
        assert self.proc is not None
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def runqueue_wait_s(self) -> float:
        """Time the server's threads spent runnable but waiting for a CPU (other work on the
        machine), from /proc/<pid>/task/*/schedstat; NaN where there is none."""
        assert self.proc is not None
        total = 0
        try:
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[1])
                except (OSError, IndexError, ValueError):
                    continue  # a thread that ended meanwhile
        except OSError:
            return math.nan
        return total / 1e9

    def stderr(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def hot_writes_dropped(self) -> float:
        text = httpx.get(self.url("/metrics"), headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).text
        match = re.search(r"^memory_hot_writes_dropped_total\S*\s+(\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else math.nan


class BareServer(Server):
    """The bare FastMCP echo server (`bench.bare_echo`) on the same transport: no tokens, no data."""

    def command(self) -> list[str]:
        transport = "streamable-http" if self.cfg.transport == "http" else "sse"
        return [sys.executable, "-m", "bench.bare_echo", "--transport", transport, "--port", str(self.port)]

    def healthy(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=2):
                return True
        except OSError:
            return False


# ---------------------------------------------------------------------------- clients and phases
@dataclass
class Phase:
    name: str
    seconds: float
    mix: tuple[tuple[str, int], ...]
    #: how many clients take part (the first ones); None: all
    clients: int | None = None
    start: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    #: clients that made their `min_calls` in this phase, and clients done with it
    at_min: int = 0
    min_reached: anyio.Event = field(default_factory=anyio.Event)
    finished: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    samples: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float = 0.0
    server_wait_s: float = 0.0
    client_cpu_s: float = 0.0
    #: seconds waited before the phase for the server to be quiet (`_quiet`)
    quiet_s: float = 0.0

    def participants(self, cfg: LoadConfig) -> int:
        return cfg.clients if self.clients is None else min(self.clients, cfg.clients)

    def calls(self) -> int:
        return sum(len(s) for s in self.samples.values())

    def cpu_ms_per_call(self) -> float:
        n = self.calls()
        return self.server_cpu_s * 1000 / n if n else math.nan


@dataclass
class Run:
    cfg: LoadConfig
    visible: dict[str, list[str]]
    phases: list[Phase]
    ready: int = 0
    all_ready: anyio.Event = field(default_factory=anyio.Event)
    modes: set[str] = field(default_factory=set)


def _parse(result: Any) -> dict[str, Any]:
    if result.isError:
        raise RuntimeError(f"isError: {result.content}")
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = json.loads(block.text)
    return data


class Worker:
    def __init__(self, run: Run, n: int, url: str) -> None:
        self.run, self.n, self.url = run, n, url
        rs = robots(run.cfg)
        self.robot = rs[n % len(rs)]
        self.rng = random.Random(SEED + n)
        make = worst_queries if run.cfg.corpus == "worst" else make_queries
        self.queries = make(50, seed=SEED + n)
        self.items = list(corpus(200, seed=SEED + 1000 + n))
        self.made = 0
        self.finds = 0

    async def main(self) -> None:
        headers = {"Authorization": f"Bearer {token_of(self.robot)}"}
        async with contextlib.AsyncExitStack() as stack:
            if self.run.cfg.transport == "http":
                http = await stack.enter_async_context(
                    httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=600), follow_redirects=True)
                )
                read, write, _ = await stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            else:
                read, write = await stack.enter_async_context(
                    sse_client(self.url, headers=headers, timeout=30, sse_read_timeout=600)
                )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()  # clients list tools once; call_tool checks results against them
            if any(tool == "find_processes" for phase in self.run.phases for tool, _ in phase.mix):
                await self._prime(session)
            self.run.ready += 1
            if self.run.ready == self.run.cfg.clients:
                self.run.all_ready.set()
            for phase in self.run.phases:
                if self.n >= phase.participants(self.run.cfg):
                    continue
                await phase.start.wait()
                await self._phase(session, phase)

    async def _prime(self, session: ClientSession) -> None:
        """Before any phase: wait until find answers in hybrid mode (the server loads its model in
        the background, and a phase that overlapped the load measured the load and keyword
        finds), then, with the pool, ask each of this client's instructions once, so that the
        phases' finds are the repeats the pool stands for (answered by the query-vector cache)
        rather than, over a phase of a few calls per client, mostly first asks."""
        if self.run.cfg.embedder != "none":
            with anyio.fail_after(START_DEADLINE_S):
                while True:
                    found = _parse(await session.call_tool("find_processes", {"query": self.queries[0], "k": 3}))
                    if found["mode"] == "hybrid":
                        break
                    await anyio.sleep(0.2)  # polling the server's readiness (a wait, not a synchronisation)
        if self.run.cfg.queries == "pool":
            for query in dict.fromkeys(self.queries):
                _parse(await session.call_tool("find_processes", {"query": query, "k": 3}))

    async def _phase(self, session: ClientSession, phase: Phase) -> None:
        run = self.run
        calls = 0
        tools = [t for t, _ in phase.mix]
        weights = [w for _, w in phase.mix]
        while not phase.stop.is_set() or calls < run.cfg.min_calls:
            # the first calls go round the mix, so a short phase still reaches every tool
            tool = tools[calls] if calls < len(tools) else self.rng.choices(tools, weights)[0]
            started = time.perf_counter()
            try:
                await self._call(session, tool)
            except Exception as exc:
                phase.errors.append(f"{tool}: {type(exc).__name__}: {exc}"[:300])
            phase.samples.setdefault(tool, []).append(time.perf_counter() - started)
            calls += 1
            if calls == run.cfg.min_calls:
                phase.at_min += 1
                if phase.at_min == phase.participants(run.cfg):
                    phase.min_reached.set()
        phase.finished += 1
        if phase.finished == phase.participants(run.cfg):
            phase.done.set()

    async def _call(self, session: ClientSession, tool: str) -> None:
        if tool == "ping":
            await session.send_ping()
            return
        args = self._args(tool)
        out = _parse(await session.call_tool(tool, args))
        if "error" in out:
            raise RuntimeError(json.dumps(out)[:200])
        if tool == "find_processes":
            self.run.modes.add(str(out.get("mode")))

    def _args(self, tool: str) -> dict[str, Any]:
        rng = self.rng
        if tool == "find_processes":
            query = rng.choice(self.queries)
            if self.run.cfg.queries == "distinct":
                self.finds += 1
                query = f"{query}, ticket q{self.n}x{self.finds}x"
            return {"query": query, "k": 3}
        if tool == "recall":
            return {"query": rng.choice(RECALL_QUERIES), "n": 5}
        if tool == "record_outcome":
            args: dict[str, Any] = {"id": rng.choice(self.run.visible[self.robot]), "success": rng.random() < 0.7}
            if rng.random() < 0.2:
                args["note"] = f"load run: client {self.n} outcome {self.made}"
            return args
        self.made += 1
        if tool == "learn":
            item = self.items[self.made % len(self.items)]
            return {"insight": f"{item.insight} (run {self.n}.{self.made})", "context": item.context}
        markdown = make_documents(1, seed=SEED + 7919 * self.n + self.made)[0]
        markdown = re.sub(r"(?m)^id: .*$", f"id: load-{self.n}-{self.made}", markdown, count=1)
        markdown = re.sub(r"(?m)^robot: .*\n", "", markdown, count=1)  # a robot token saves as its robot
        return {"markdown": markdown}


#: Before a phase, the server is quiet once it spends less than this share of a core over
#: `QUIET_WINDOW_S`; it is waited for at most `QUIET_MAX_S`.
QUIET_SHARE = 0.05
QUIET_WINDOW_S = 0.5
QUIET_MAX_S = 60.0


async def _quiet(server: Server) -> float:
    """Wait until the server's own background work is done (the model loading, the embedding
    of what a phase before wrote, a checkpoint): a phase's CPU per call counts every thread, and
    work left from before, spread over a phase's few calls on a busy machine, was most of a
    one-client phase's figure. Returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < QUIET_MAX_S:
        before = server.cpu_s()
        await anyio.sleep(QUIET_WINDOW_S)  # a measurement window (a duration, not a synchronisation)
        if not server.cpu_s() - before >= QUIET_SHARE * QUIET_WINDOW_S:  # NaN (no /proc): quiet
            break
    return time.perf_counter() - started


async def _drive(run: Run, server: Server) -> None:
    url = server.url("/mcp" if run.cfg.transport == "http" else "/sse")
    async with anyio.create_task_group() as tg:
        for n in range(run.cfg.clients):
            tg.start_soon(Worker(run, n, url).main)
        with anyio.fail_after(START_DEADLINE_S):
            await run.all_ready.wait()
        for phase in run.phases:
            if run.cfg.min_calls == 0:
                phase.min_reached.set()
            phase.quiet_s = await _quiet(server)
            cpu0, wait0, client0 = server.cpu_s(), server.runqueue_wait_s(), time.process_time()
            t0 = time.perf_counter()
            phase.start.set()
            await anyio.sleep(phase.seconds)  # the measurement window (a duration, not a synchronisation)
            with anyio.fail_after(START_DEADLINE_S):
                await phase.min_reached.wait()
            phase.stop.set()
            with anyio.fail_after(START_DEADLINE_S):
                await phase.done.wait()
            phase.wall_s = time.perf_counter() - t0
            phase.server_cpu_s = server.cpu_s() - cpu0
            phase.server_wait_s = server.runqueue_wait_s() - wait0
            phase.client_cpu_s = time.process_time() - client0


# ---------------------------------------------------------------------------- the run and its report
@dataclass(frozen=True)
class Machine:
    platform: str
    nproc: int
    cpu: str
    python: str
    sqlite: str
    load: tuple[float, float, float]

    @classmethod
    def here(cls) -> Machine:
        cpu = platform.processor() or "unknown"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        try:
            nproc = len(os.sched_getaffinity(0))
        except AttributeError:
            nproc = os.cpu_count() or 1
        load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan, math.nan, math.nan)
        return cls(platform.platform(), nproc, cpu, platform.python_version(), sqlite3.sqlite_version, load)


@dataclass
class Report:
    cfg: LoadConfig
    machine: Machine
    started: str
    phases: list[Phase]
    modes: set[str]
    locked_lines: int
    error_lines: int
    hot_dropped: float
    exit_code: int | None
    #: client 0 alone: ping, then find_processes
    solo: list[Phase] = field(default_factory=list)
    #: the bare FastMCP server pinged by one client, then by all
    bare: list[Phase] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(len(p.errors) for p in self.phases)

    def throughput(self, phase: str, tool: str) -> float:
        p = next(p for p in self.phases if p.name == phase)
        return len(p.samples.get(tool, [])) / p.wall_s if p.wall_s else math.nan

    def own_find_cpu_ms(self, alone: bool) -> float:
        """find_processes' server CPU per call above a ping's, for one client or under all."""
        phases = self.solo if alone else self.phases
        by = {p.name.removesuffix("-1"): p for p in phases}
        if "echo" not in by or "find" not in by:
            return math.nan
        return by["find"].cpu_ms_per_call() - by["echo"].cpu_ms_per_call()

    @property
    def find_to_echo(self) -> float:
        echo = self.throughput("echo", "ping")
        return self.throughput("find", "find_processes") / echo if echo else math.nan


def run_load(cfg: LoadConfig, work_dir: Path) -> Report:
    data, log = work_dir / "data", work_dir / "server.stderr"
    visible = preload(data, cfg)
    server = Server(data, log, cfg)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = Machine.here()
    solo = [
        Phase("echo-1", cfg.solo_s, (("ping", 1),), clients=1),
        Phase("find-1", cfg.solo_s, (("find_processes", 1),), clients=1),
    ]
    phases = [
        Phase("warm-up", cfg.warmup_s, MIX),
        *solo,
        Phase("echo", cfg.echo_s, (("ping", 1),)),
        Phase("find", cfg.find_s, (("find_processes", 1),)),
        Phase("mixed", cfg.duration_s, MIX),
    ]
    run = Run(cfg, visible, phases)
    server.start()
    try:
        anyio.run(_drive, run, server)
        dropped = server.hot_writes_dropped()
    finally:
        code = server.stop()
    bare: list[Phase] = []
    if cfg.bare:
        bare = [Phase("echo-1", cfg.solo_s, (("ping", 1),), clients=1), Phase("echo", cfg.echo_s, (("ping", 1),))]
        bare_server = BareServer(data, work_dir / "bare.stderr", cfg)
        bare_server.start()
        try:
            anyio.run(_drive, Run(cfg, visible, bare), bare_server)
        finally:
            bare_server.stop()
    text = server.stderr()
    error_lines = sum(1 for line in text.splitlines() if '"level": "error"' in line or '"level": "critical"' in line)
    return Report(
        cfg=cfg,
        machine=machine,
        started=started,
        phases=[p for p in phases if p.name in ("echo", "find", "mixed")],
        solo=solo,
        bare=bare,
        modes=run.modes,
        locked_lines=text.count("database is locked"),
        error_lines=error_lines,
        hot_dropped=dropped,
        exit_code=code,
    )


def _pct(samples: Sequence[float], p: float) -> float:
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000


def render(report: Report, command: str = "") -> str:
    cfg, m = report.cfg, report.machine
    kind = "Streamable HTTP" if cfg.transport == "http" else "SSE"
    out = [
        f"## Load ({cfg.clients} {kind} clients)",
        "",
        f"`{command or 'python -m bench.load_sse'}` on {report.started}. Machine: {m.nproc} CPUs ({m.cpu}), "
        f"{m.platform}, Python {m.python}, SQLite {m.sqlite}, load average {m.load[0]:.1f} at start.",
        "",
        f"The real server process over {kind} on 127.0.0.1, tokens on: {cfg.clients} clients of {cfg.tenants} robot "
        f"tenants (two per group, the last ungrouped), preloaded with {cfg.processes:,} processes and "
        f"{cfg.memories:,} memories, {cfg.corpus} queries ({cfg.queries}); "
        f"embedder {cfg.embedder or 'default (USE, offline)'}, "
        "find mode "
        f"{', '.join(sorted(report.modes)) or 'n/a'}. Latencies are client-side round trips.",
        "",
        "| phase | tool | calls | calls/s | p50 ms | p95 ms | p99 ms | server CPU ms/call | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {
        "echo": "echo (MCP ping)",
        "find": "find only",
        "echo-1": "one client: echo",
        "find-1": "one client: find",
    }
    for phase in [*report.solo, *report.phases]:
        label = labels.get(phase.name, f"mixed, {phase.seconds:.0f} s")
        errors_by_tool: dict[str, int] = {}
        for e in phase.errors:
            errors_by_tool[e.split(":", 1)[0]] = errors_by_tool.get(e.split(":", 1)[0], 0) + 1
        for row, (tool, samples) in enumerate(sorted(phase.samples.items(), key=lambda kv: -len(kv[1]))):
            rate = len(samples) / phase.wall_s if phase.wall_s else math.nan
            # the server's CPU is known per phase, not per tool: a mixed phase's figure is its average
            cpu = f"{phase.cpu_ms_per_call():.2f}" + (" (all tools)" if len(phase.samples) > 1 else "")
            out.append(
                f"| {label} | `{tool}` | {len(samples):,} | {rate:,.0f} | {_pct(samples, 50):.1f} "
                f"| {_pct(samples, 95):.1f} | {_pct(samples, 99):.1f} | {cpu if row == 0 else ''} "
                f"| {errors_by_tool.get(tool, 0)} |"
            )
    for phase in report.bare:
        samples = phase.samples.get("ping", [])
        rate = len(samples) / phase.wall_s if phase.wall_s else math.nan
        who = "one client" if phase.name == "echo-1" else f"{cfg.clients} clients"
        out.append(
            f"| bare FastMCP, {who}: echo | `ping` | {len(samples):,} | {rate:,.0f} | {_pct(samples, 50):.1f} "
            f"| {_pct(samples, 95):.1f} | {_pct(samples, 99):.1f} | {phase.cpu_ms_per_call():.2f} "
            f"| {len(phase.errors)} |"
        )
    cpu = "; ".join(
        f"{p.name}: server {p.server_cpu_s / p.wall_s:.0%} (and {p.server_wait_s / p.wall_s:.0%} waiting for a CPU), "
        f"client {p.client_cpu_s / p.wall_s:.0%}"
        for p in report.phases
        if p.wall_s
    )
    per_call = ", ".join(
        f"{p.name} {p.server_cpu_s * 1000 / n:.2f} ms"
        for p in report.phases
        if (n := sum(len(s) for s in p.samples.values()))
    )
    bare = {p.name: p.cpu_ms_per_call() for p in report.bare}
    ours = {p.name: p.cpu_ms_per_call() for p in [*report.solo, *report.phases]}
    floor = (
        f"- Ping, server CPU per call, ours ÷ the bare FastMCP server's: one client "
        f"{ours.get('echo-1', math.nan) / bare['echo-1']:.2f}, {cfg.clients} clients "
        f"{ours.get('echo', math.nan) / bare['echo']:.2f}."
        if bare
        else "- No bare FastMCP server this run."
    )
    out += [
        "",
        f"- `find_processes`' own server CPU per call (above a ping's): one client "
        f"**{report.own_find_cpu_ms(alone=True):.2f} ms**, {cfg.clients} clients "
        f"**{report.own_find_cpu_ms(alone=False):.2f} ms**.",
        floor,
        f"- `find_processes` throughput ÷ echo throughput, same {cfg.clients} clients: "
        f"**{report.find_to_echo:.2f}** ({report.throughput('find', 'find_processes'):,.0f} vs "
        f"{report.throughput('echo', 'ping'):,.0f} calls/s).",
        f'- Errors: {report.errors}. "database is locked" in the server\'s stderr: {report.locked_lines}. '
        f"Error-level server log lines: {report.error_lines}. Hot writes dropped: {report.hot_dropped:.0f}. "
        f"Server exit code after SIGTERM: {report.exit_code}.",
        f"- CPU, as a share of one core per phase (threads added up; waiting = runnable while other work held "
        f"the CPUs): {cpu}.",
        f"- Server CPU per call (all its threads; the figure other work on the machine disturbs least): {per_call}.",
        "- Waited before each phase for the server's background work to end (`_quiet`): "
        + ", ".join(f"{p.name} {p.quiet_s:.1f} s" for p in [*report.solo, *report.phases])
        + ".",
    ]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of the mixed phase")
    parser.add_argument("--echo", type=float, default=10.0, help="seconds of the ping phase")
    parser.add_argument("--find", type=float, default=10.0, help="seconds of the find-only phase")
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--embedder", default="", help="MEMORY_EMBEDDER for the server (default: its default)")
    parser.add_argument("--transport", choices=("sse", "http"), default="sse", help="http: Streamable HTTP on /mcp")
    parser.add_argument("--corpus", choices=("realistic", "worst"), default="realistic", help="find's queries")
    parser.add_argument("--solo", type=float, default=5.0, help="seconds of each one-client phase")
    parser.add_argument(
        "--queries", choices=("pool", "distinct"), default="pool", help="distinct: every find a new text"
    )
    parser.add_argument("--no-bare", action="store_true", help="skip the bare FastMCP server")
    parser.add_argument("--append", type=Path, help="append the markdown section to this file")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.tenants < 1 or args.duration <= 0:
        parser.error("--clients and --tenants must be at least 1, --duration positive")
    cfg = LoadConfig(
        clients=args.clients,
        tenants=args.tenants,
        duration_s=args.duration,
        echo_s=args.echo,
        find_s=args.find,
        processes=args.processes,
        memories=args.memories,
        embedder=args.embedder,
        transport=args.transport,
        corpus=args.corpus,
        solo_s=args.solo,
        queries=args.queries,
        bare=not args.no_bare,
    )
    logs.configure("warning")  # the preload's logs go to stderr; stdout carries the report
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        report = run_load(cfg, Path(tmp))
    command = " ".join(["python -m bench.load_sse", *(argv if argv is not None else sys.argv[1:])])
    text = render(report, command.strip())
    print(text)
    if args.append:
        with args.append.open("a", encoding="utf-8") as fh:
            fh.write("\n" + text)
    return 0 if report.errors == 0 and report.locked_lines == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
