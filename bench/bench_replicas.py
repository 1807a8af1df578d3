"""Benchmark: throughput with 1, 2 and 3 server replicas on one PostgreSQL, behind HAProxy round-robin.

    python -m bench.bench_replicas [--replicas 1,2,3] [--workers 1] [--clients 20] [--duration 30] [--warmup 5]
                                   [--processes 1000] [--memories 10000] [--embedder hashing]

What it does:

1. starts a throwaway PostgreSQL cluster (tests/pgcluster.py: the image's binaries, loopback,
   fsync off) and creates a database of its own in it;
2. fills it once, in this process and before any server starts, through the adapters
   (`Memory.open`): four robots in two groups, ``--processes`` synthetic documents
   (`bench_processes.make_documents`) spread over the robots and ``shared``, their vectors, and
   ``--memories`` experience memories (`experience_corpus.corpus`) by `learn_many`. The fill is
   not measured;
3. for each R of ``--replicas``: starts R real servers (``python -m robot_mcp_memory serve``,
   ``MCP_TRANSPORT=sse`` on its own loopback port, ``MEMORY_DATABASE_URL``: stateless Streamable
   HTTP is the default there, tokens on; ``MEMORY_WORKERS=--workers`` worker processes each, whose
   CPU is counted with their replica's), and HAProxy (``/usr/sbin/haproxy``, a minimal
   ``mode http`` config made in a temporary folder, ``balance roundrobin``: each request goes to
   the next replica, keep-alive or not), waits until every replica is quiet, then runs C official
   SDK clients (``streamable_http_client`` + ``ClientSession``, client *i* holding robot
   *i mod 4*'s bearer token) through HAProxy with a mixed load — find_processes 30 %, recall 30 %,
   get_process 25 %, learn 15 % — for ``--warmup`` seconds unmeasured and then ``--duration``
   seconds measured; then stops them all;
4. reports per R: calls/s and p50 / p99 of the calls that started and ended in the measured
   window, errors (an exception, ``isError`` or a result with ``"error"``), and the CPU per call
   (user + system from ``/proc/<pid>/stat``) of the replicas (summed, with each one's share), of
   the PostgreSQL cluster's processes, of HAProxy and of this process (the clients).

Everything shares the machine, so read the CPU columns: on 2 cores the throughput can only grow
with R while a core is left idle. `run` is the importable core; tests/bench/test_bench_replicas.py
runs it at a tiny size (no timing asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import socket
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
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from tests.pgcluster import Cluster

from bench.bench_postgres import server_cpu
from bench.bench_processes import make_documents, make_queries
from bench.experience_corpus import QUERIES as RECALL_QUERIES
from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.model import MAX_BATCH
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.tenancy.principal import ADMIN, Principal

HOST = "127.0.0.1"
HAPROXY = "/usr/sbin/haproxy"
HAPROXY_MISSING = f"HAProxy is missing (looked for {HAPROXY}): `apt-get install -y haproxy` (scripts/check does this)"
#: A bound on waiting for a replica or HAProxy to answer, not a speed figure.
START_DEADLINE_S = 120.0
ADMIN_TOKEN = "replicas-admin-token-0123456789"
ROBOTS = ("robot-1", "robot-2", "robot-3", "robot-4")
#: The mixed load: (tool, weight).
MIX: tuple[tuple[str, int], ...] = (("find_processes", 30), ("recall", 30), ("get_process", 25), ("learn", 15))
SEED = 20261202
TICKS = os.sysconf("SC_CLK_TCK")
#: Before a measurement the replicas are quiet once together they spend less than this share of
#: a core over `QUIET_WINDOW_S` (the fill left nothing to embed; this waits out start-up work).
QUIET_SHARE = 0.05
QUIET_WINDOW_S = 0.5
QUIET_MAX_S = 60.0


@dataclass(frozen=True)
class Config:
    replicas: tuple[int, ...] = (1, 2, 3)
    clients: int = 20
    duration_s: float = 30.0
    warmup_s: float = 5.0
    processes: int = 1000
    memories: int = 10_000
    #: MEMORY_EMBEDDER for the fill and the servers
    embedder: str = "hashing"
    #: MEMORY_WORKERS of each replica
    workers: int = 1


def group_of(robot: str) -> str:
    """robot-1, robot-2 → g-1; robot-3, robot-4 → g-2."""
    return f"g-{(int(robot.rsplit('-', 1)[1]) + 1) // 2}"


def token_of(robot: str) -> str:
    return f"replicas-token-{robot}-abcdefgh"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


# ---------------------------------------------------------------------------- /proc
def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of `root` and every process below it, from /proc (its
    threads are in its own line); 0.0 for a process that is gone."""
    parent: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parent[int(entry)] = int(fields[1])
        spent[int(entry)] = (int(fields[11]) + int(fields[12])) / TICKS
    total = 0.0
    for pid, cpu in spent.items():
        up = pid
        while up > 1 and up != root:
            up = parent.get(up, 0)
        if up == root:
            total += cpu
    return total


# ---------------------------------------------------------------------------- the fill


def fill(url: str, cfg: Config) -> dict[str, list[str]]:
    """Fill the database through the adapters; per robot, the process ids it may read."""
    env = {"MEMORY_DATABASE_URL": url, "MEMORY_EMBEDDER": cfg.embedder}
    memory = Memory.open(Settings.from_env(env), backfill=False)
    try:
        if memory.embedder is not None and memory.embedder.mode != "off":
            memory.embedder.wait_ready(START_DEADLINE_S)
        return asyncio.run(_fill(memory, cfg))
    finally:
        memory.close()


async def _fill(memory: Memory, cfg: Config) -> dict[str, list[str]]:
    for group in sorted({group_of(r) for r in ROBOTS}):
        await memory.fleet.upsert_group(ADMIN, group, customer="bench")
    for robot in ROBOTS:
        await memory.fleet.register_robot(ADMIN, robot, group=group_of(robot))
    owners = [*ROBOTS, "shared"]
    by_owner: dict[str, list[str]] = {}
    for n, markdown in enumerate(make_documents(cfg.processes, seed=SEED)):
        doc = docmodel.parse(markdown).model_copy(update={"robot": owners[n % len(owners)]})
        await memory.process_repo.save(doc)
        by_owner.setdefault(doc.robot, []).append(doc.id)
    await memory.process_repo.reembed()  # the servers find every vector made: no backfill at start
    items = list(corpus(cfg.memories, seed=SEED))
    for n, robot in enumerate(ROBOTS):
        mine = [(it.insight, it.context) for it in items[n :: len(ROBOTS)]]
        for start in range(0, len(mine), MAX_BATCH):
            await memory.experiences.learn_many(Principal.robot(robot), mine[start : start + MAX_BATCH])
    return {
        robot: [pid for owner in ROBOTS if group_of(owner) == group_of(robot) for pid in by_owner.get(owner, [])]
        + by_owner.get("shared", [])
        for robot in ROBOTS
    }


# ---------------------------------------------------------------------------- the processes
@dataclass
class Child:
    """A process of the benchmark's (a replica or HAProxy), its output in `log`."""

    name: str
    command: list[str]
    log: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not running"
        return self.proc.pid

    def wait_until(self, answers: Any) -> None:
        """Poll `answers()` (bounded) until it holds; the process dying first is an error."""
        assert self.proc is not None
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.output()[-2000:]}")
            if answers():
                return
            time.sleep(0.05)  # polling a start (a wait, not a synchronisation)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {START_DEADLINE_S} s:\n{self.output()[-2000:]}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        proc.terminate()
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(30)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def replica(n: int, url: str, cfg: Config, work: Path) -> tuple[Child, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_")) and k != "ROBOT_ID"}
    env |= {
        "MCP_TRANSPORT": "sse",
        "MCP_HOST": HOST,
        "MCP_PORT": str(port),
        "MEMORY_DATA_DIR": str(work / f"replica-{n}"),  # nothing is written there with a database URL
        "MEMORY_DATABASE_URL": url,
        "MEMORY_EMBEDDER": cfg.embedder,
        "MEMORY_WORKERS": str(cfg.workers),
        "MEMORY_TOKEN": ADMIN_TOKEN,
        "MEMORY_ROBOT_TOKENS": ",".join(f"{r}:{token_of(r)}" for r in ROBOTS),
    }
    command = [sys.executable, "-m", "robot_mcp_memory", "serve"]
    return Child(f"replica {n}", command, work / f"replica-{n}.log", env), port


def haproxy_config(listen: int, ports: Sequence[int]) -> str:
    """A minimal HAProxy config: HTTP mode, every request to the next replica in turn."""
    servers = "\n".join(f"    server r{n + 1} {HOST}:{port}" for n, port in enumerate(ports))
    return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s

frontend mcp
    bind {HOST}:{listen}
    default_backend replicas

backend replicas
    balance roundrobin
{servers}
"""


def healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# ---------------------------------------------------------------------------- the clients
@dataclass
class Window:
    """The measured window: calls that started and ended inside it count."""

    clients: int
    start: float = math.inf
    end: float = math.inf
    stop: anyio.Event = field(default_factory=anyio.Event)
    samples: dict[str, list[float]] = field(default_factory=dict)
    #: every failed call of the run, the warm-up's included
    errors: list[str] = field(default_factory=list)
    ready: int = 0
    all_ready: anyio.Event = field(default_factory=anyio.Event)


def _parse(result: Any) -> dict[str, Any]:
    if result.isError:
        raise RuntimeError(f"isError: {str(result.content)[:200]}")
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = json.loads(block.text)
    if "error" in data:
        raise RuntimeError(json.dumps(data)[:200])
    return data


class Client:
    def __init__(self, n: int, url: str, visible: dict[str, list[str]], window: Window) -> None:
        self.n, self.url, self.window = n, url, window
        self.robot = ROBOTS[n % len(ROBOTS)]
        self.ids = visible[self.robot]
        self.rng = random.Random(SEED + n)
        self.queries = make_queries(50, seed=SEED + n)
        self.items = list(corpus(100, seed=SEED + 1000 + n))
        self.learned = 0

    async def main(self) -> None:
        headers = {"Authorization": f"Bearer {token_of(self.robot)}"}
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(
                httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300))
            )
            read, write, _ = await stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()  # clients list tools once; call_tool checks results against them
            self.window.ready += 1
            if self.window.ready == self.window.clients:
                self.window.all_ready.set()
            tools, weights = [t for t, _ in MIX], [w for _, w in MIX]
            while not self.window.stop.is_set():
                tool = self.rng.choices(tools, weights)[0]
                started = time.perf_counter()
                failed = ""
                try:
                    _parse(await session.call_tool(tool, self._args(tool)))
                except Exception as exc:
                    failed = f"{tool}: {type(exc).__name__}: {exc}"[:300]
                ended = time.perf_counter()
                if failed:  # any call of the run, warm-up included
                    self.window.errors.append(failed)
                if self.window.start <= started and ended <= self.window.end:
                    self.window.samples.setdefault(tool, []).append(ended - started)

    def _args(self, tool: str) -> dict[str, Any]:
        rng = self.rng
        if tool == "find_processes":
            return {"query": rng.choice(self.queries), "k": 3}
        if tool == "recall":
            return {"query": rng.choice(RECALL_QUERIES), "n": 5}
        if tool == "get_process":
            return {"id": rng.choice(self.ids)}
        self.learned += 1
        item = self.items[self.learned % len(self.items)]
        return {"insight": f"{item.insight} (client {self.n}, run {self.learned})", "context": item.context}


# ---------------------------------------------------------------------------- one R
@dataclass
class Row:
    replicas: int
    clients: int
    seconds: float
    samples: dict[str, list[float]]
    errors: list[str]
    #: CPU seconds over the window: each replica's, the cluster's, HAProxy's, this process's
    replica_cpu_s: list[float]
    postgres_cpu_s: float
    haproxy_cpu_s: float
    client_cpu_s: float
    workers: int = 1

    @property
    def calls(self) -> int:
        return sum(len(s) for s in self.samples.values())

    def per_call_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.calls if self.calls else math.nan

    def percentile_ms(self, p: float) -> float:
        walls = sorted(w for s in self.samples.values() for w in s)
        if not walls:
            return math.nan
        return walls[min(len(walls) - 1, math.ceil(p / 100 * len(walls)) - 1)] * 1000


def _quiet(pids: Sequence[int]) -> None:
    """Wait (bounded) until the replicas spend less than QUIET_SHARE of a core together."""
    started = time.monotonic()
    while time.monotonic() - started < QUIET_MAX_S:
        before = sum(tree_cpu_s(p) for p in pids)
        time.sleep(QUIET_WINDOW_S)  # a measurement window (a duration, not a synchronisation)
        if sum(tree_cpu_s(p) for p in pids) - before < QUIET_SHARE * QUIET_WINDOW_S:
            return


async def _drive(cfg: Config, url: str, visible: dict[str, list[str]], counters: Any) -> tuple[Window, Any, Any]:
    window = Window(clients=cfg.clients)
    async with anyio.create_task_group() as tg:
        for n in range(cfg.clients):
            tg.start_soon(Client(n, url, visible, window).main)
        with anyio.fail_after(START_DEADLINE_S):
            await window.all_ready.wait()
        await anyio.sleep(cfg.warmup_s)  # the unmeasured warm-up (a duration)
        before = counters()
        window.start = time.perf_counter()
        await anyio.sleep(cfg.duration_s)  # the measured window (a duration, not a synchronisation)
        window.end = time.perf_counter()
        after = counters()
        window.stop.set()
    return window, before, after


def measure(cfg: Config, r: int, url: str, visible: dict[str, list[str]], cluster: Cluster, work: Path) -> Row:
    """Start `r` replicas and HAProxy, drive the clients through it, stop everything."""
    children: list[Child] = []
    try:
        ports = []
        for n in range(1, r + 1):
            child, port = replica(n, url, cfg, work)
            child.start()
            children.append(child)
            ports.append(port)
        for child, port in zip(children, ports, strict=True):
            child.wait_until(lambda port=port: healthy(f"http://{HOST}:{port}/healthz"))
        listen = free_port()
        conf = work / f"haproxy-{r}.cfg"
        conf.write_text(haproxy_config(listen, ports))
        proxy = Child("haproxy", [HAPROXY, "-db", "-f", str(conf)], work / f"haproxy-{r}.log")
        proxy.start()
        children.append(proxy)
        proxy.wait_until(lambda: healthy(f"http://{HOST}:{listen}/healthz"))
        servers = [c.pid for c in children[:r]]
        _quiet(servers)

        def counters() -> tuple[list[float], float, float, float]:
            return [tree_cpu_s(p) for p in servers], server_cpu(cluster), tree_cpu_s(proxy.pid), time.process_time()

        window, (rep0, pg0, ha0, cl0), (rep1, pg1, ha1, cl1) = anyio.run(
            _drive, cfg, f"http://{HOST}:{listen}/mcp", visible, counters
        )
    finally:
        for child in reversed(children):
            child.stop()
    return Row(
        replicas=r,
        clients=cfg.clients,
        seconds=window.end - window.start,
        samples=window.samples,
        errors=window.errors,
        replica_cpu_s=[b - a for a, b in zip(rep0, rep1, strict=True)],
        postgres_cpu_s=pg1 - pg0,
        haproxy_cpu_s=ha1 - ha0,
        client_cpu_s=cl1 - cl0,
        workers=cfg.workers,
    )


def run(cfg: Config, cluster: Cluster, work: Path) -> list[Row]:
    """Fill a fresh database of `cluster` once, then one `Row` per R of `cfg.replicas`."""
    if not Path(HAPROXY).is_file():
        raise RuntimeError(HAPROXY_MISSING)
    url = cluster.new_database("bench_replicas")
    visible = fill(url, cfg)
    return [measure(cfg, r, url, visible, cluster, work) for r in cfg.replicas]


# ---------------------------------------------------------------------------- the report
HEADER = (
    "| replicas | clients | calls | calls/s | p50 ms | p99 ms | errors "
    "| CPU ms/call: replicas (each one's share) | PostgreSQL | HAProxy | clients | all |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
)


def _servers(row: Row) -> str:
    return str(row.replicas) if row.workers == 1 else f"{row.replicas} ({row.workers} workers each)"


def render(rows: Sequence[Row]) -> str:
    lines = [HEADER]
    for row in rows:
        spent = sum(row.replica_cpu_s)
        shares = " / ".join(f"{c / spent:.0%}" if spent else "—" for c in row.replica_cpu_s)
        everything = spent + row.postgres_cpu_s + row.haproxy_cpu_s + row.client_cpu_s
        lines.append(
            f"| {_servers(row)} | {row.clients} | {row.calls} | {row.calls / row.seconds:.1f} "
            f"| {row.percentile_ms(50):.0f} | {row.percentile_ms(99):.0f} | {len(row.errors)} "
            f"| {row.per_call_ms(spent):.1f} ({shares}) | {row.per_call_ms(row.postgres_cpu_s):.1f} "
            f"| {row.per_call_ms(row.haproxy_cpu_s):.2f} | {row.per_call_ms(row.client_cpu_s):.1f} "
            f"| {row.per_call_ms(everything):.1f} |"
        )
    tools = [t for t, _ in MIX]
    lines += ["", "| replicas | " + " | ".join(f"{t} n, p50 ms" for t in tools) + " |"]
    lines.append("|---:|" + "---:|" * len(tools))
    for row in rows:
        cells = []
        for tool in tools:
            walls = sorted(row.samples.get(tool, []))
            cells.append(f"{len(walls)}, {walls[len(walls) // 2] * 1000:.0f}" if walls else "0, —")
        lines.append(f"| {_servers(row)} | " + " | ".join(cells) + " |")
    errors = [e for row in rows for e in row.errors]
    if errors:
        lines += ["", "First errors:", *(f"- {e}" for e in list(dict.fromkeys(errors))[:10])]
    return "\n".join(lines)


def _replicas(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in re.split(r"[,\s]+", text.strip()) if v)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("--replicas takes counts of 1 or more, e.g. 1,2,3")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=_replicas, default=Config.replicas, help="counts to run, e.g. 1,2,3")
    parser.add_argument("--clients", type=int, default=Config.clients, help="concurrent MCP clients (C)")
    parser.add_argument("--duration", type=float, default=Config.duration_s, help="measured seconds per R")
    parser.add_argument("--warmup", type=float, default=Config.warmup_s, help="unmeasured seconds per R first")
    parser.add_argument("--processes", type=int, default=Config.processes)
    parser.add_argument("--memories", type=int, default=Config.memories)
    parser.add_argument("--workers", type=int, default=Config.workers, help="MEMORY_WORKERS of each replica")
    parser.add_argument("--embedder", default=Config.embedder, help="MEMORY_EMBEDDER of the fill and the servers")
    args = parser.parse_args(argv)
    cfg = Config(
        replicas=args.replicas,
        clients=args.clients,
        duration_s=args.duration,
        warmup_s=args.warmup,
        processes=args.processes,
        memories=args.memories,
        embedder=args.embedder,
        workers=args.workers,
    )
    logs.configure("warning")
    with (
        Cluster.running() as cluster,
        tempfile.TemporaryDirectory(prefix="bench-replicas-", ignore_cleanup_errors=True) as work,
    ):
        rows = run(cfg, cluster, Path(work))
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
