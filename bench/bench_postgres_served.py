"""Benchmark: the real server on PostgreSQL beside SQLite, per tool call over stateless Streamable HTTP.

    python -m bench.bench_postgres_served [--sizes 10000,100000] [--calls 100] [--max-processes N]

For each size and backend: a store is filled in this process through the composition root
(`Memory.open` on the settings the server will get, fast bulk paths — `learn_many` in batches
of 1,000 with the hashing embedder, the process documents by `operations.restore` (``load``'s
transaction) and their vectors by ``reembed``); the fill is not measured. Then the real server
(``python -m robot_mcp_memory``, ``MCP_TRANSPORT=sse``, ``MCP_STATELESS_HTTP=true`` on both
backends) is started twice on that store, and driven with the official ``mcp`` client over
``/mcp``:

1. ``MEMORY_EMBEDDER=none``: ``recall`` keyword-only;
2. ``MEMORY_EMBEDDER=hashing`` (256 d, no model to load): ``recall`` hybrid, ``find_processes``
   hybrid (k = 3), ``learn`` (new memories), ``save_process`` (new documents).

Each kind is `calls` calls after 5 to warm up; per kind it reports wall p50 / p95 (the machine is
shared: read the CPU columns), the server's CPU per call (utime + stime of its process from
``/proc/<pid>/stat``), on PostgreSQL the cluster's CPU per call (the postmaster and every child of
it: backends, checkpointer, walwriter, autovacuum) and this client's CPU per call (the stock SDK
client, which validates each result against the tool's output schema).

PostgreSQL is a throwaway cluster this benchmark starts (tests/pgcluster.py: the image's binaries,
loopback, ``fsync``, ``synchronous_commit`` and ``full_page_writes`` off), one database per size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from tests.pgcluster import Cluster

from bench.bench_postgres import server_cpu
from bench.bench_processes import make_documents, make_queries
from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.tenancy.principal import ADMIN

HOST = "127.0.0.1"
TICKS = os.sysconf("SC_CLK_TCK")
ROBOT = "bench-01"
WARMUP = 5
#: A bound on waiting for a start (a shared 2-core machine can take tens of seconds), not a figure.
START_DEADLINE_S = 180.0
#: learn_many's batch: one transaction each (the service's ceiling is 10,000).
FILL_BATCH = 1000
BACKENDS = ("sqlite", "postgres")
#: The kinds in the order they run and are printed; the embedder each server phase runs with.
KEYWORD_KINDS = ("recall, keyword",)
HYBRID_KINDS = ("recall, hybrid", "find_processes, hybrid, k=3", "learn", "save_process")


@dataclass(frozen=True)
class Figure:
    """One kind of call on one backend at one size."""

    size: int
    processes: int
    backend: str
    kind: str
    n: int
    p50_ms: float
    p95_ms: float
    server_ms: float  # the server process's CPU per call
    cluster_ms: float | None  # PostgreSQL's processes' CPU per call (None on SQLite)
    client_ms: float  # this process's CPU per call
    mode: str  # what the answers said ran ("keyword", "hybrid", "created" …)
    errors: int


@dataclass
class Backend:
    """Where one backend's store is, and the environment its server and fill get."""

    name: str
    env: dict[str, str]
    cluster: Cluster | None = None

    def settings(self, embedder: str) -> Settings:
        return Settings.from_env({**self.env, "MEMORY_EMBEDDER": embedder})


# ---------------------------------------------------------------------------- CPU from /proc
def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) of process `pid` so far, from ``/proc/<pid>/stat``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # state is field 3: utime, stime are 14, 15
    return (int(fields[11]) + int(fields[12])) / TICKS


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (ms) of `samples` (seconds)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000


# ---------------------------------------------------------------------------- the fill
def process_documents(n: int, extra: int) -> tuple[list[str], list[str]]:
    """`n` documents to fill with and `extra` others (ids of their own) for ``save_process``."""
    docs = make_documents(n + extra)
    return docs[:n], docs[n:]


async def fill(backend: Backend, size: int, documents: Sequence[str]) -> None:
    """`size` memories and `documents` into a fresh store, with hashing vectors for both."""
    memory = Memory.open(backend.settings("hashing"), backfill=False)
    try:
        items = list(corpus(size))
        for coll in ("default", "kitchen-lab"):
            mine = [(it.insight, it.context) for it in items if it.collection == coll]
            for i in range(0, len(mine), FILL_BATCH):
                await memory.experiences.learn_many(ADMIN, mine[i : i + FILL_BATCH], collection=coll)

        def parsed() -> Iterator[docmodel.ProcessDoc]:
            for text in documents:  # the fixed corpus carries its dates: loaded as it is
                yield docmodel.parse(text)

        await memory.operations.restore(parsed(), None, source=Path("bench"), interrupt=lambda: None)
        assert memory.embedder is not None
        await asyncio.to_thread(memory.embedder.wait_ready, 60.0)
        await memory.process_repo.reembed()
    finally:
        memory.close()


# ---------------------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def server_env(backend: Backend, embedder: str, port: int) -> dict[str, str]:
    """This environment without any setting of ours, plus the server's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_", "ROBOT_"))}
    return {
        **base,
        **backend.env,
        "MCP_TRANSPORT": "sse",
        "MCP_HOST": HOST,
        "MCP_PORT": str(port),
        "MCP_STATELESS_HTTP": "true",
        "MEMORY_EMBEDDER": embedder,
        "MEMORY_LOG_LEVEL": "warning",
    }


@contextlib.asynccontextmanager
async def serving(backend: Backend, embedder: str, log: Path) -> AsyncIterator[tuple[str, int]]:
    """A real server on `backend`'s store: (its /mcp URL, its pid); stopped (SIGTERM, then
    SIGKILL after 20 s) on leaving."""
    port = free_port()
    with log.open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "robot_mcp_memory",
            env=server_env(backend, embedder, port),
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                if proc.returncode is not None:
                    raise RuntimeError(f"the server exited with {proc.returncode}; see {log}")
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get(f"http://{HOST}:{port}/healthz")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no healthy /healthz within {START_DEADLINE_S} s; see {log}")
                await asyncio.sleep(0.1)
        yield f"http://{HOST}:{port}/mcp", proc.pid
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def answer(result: CallToolResult) -> dict[str, Any]:
    """The JSON object a tool answered with, or ``{"error": …}``."""
    block = result.content[0] if result.content else None
    if not isinstance(block, TextContent):
        return {"error": "no text block"}
    try:
        data = json.loads(block.text)
    except ValueError:
        return {"error": block.text[:200]}
    return data if isinstance(data, dict) else {"error": "not an object"}


def mode_of(kind: str, got: dict[str, Any]) -> str:
    if kind.startswith(("recall", "find_processes")):
        return str(got.get("mode", "?"))
    if kind == "learn":
        return str(got.get("status", got.get("action", "?")))
    return str(got.get("action", "?"))


@dataclass
class Workload:
    """The arguments of every call, fixed by the seeds, so both backends get the same ones."""

    recall_queries: list[str]
    find_queries: list[str]
    learns: list[dict[str, Any]]
    saves: list[str]
    used: dict[str, int] = field(default_factory=dict)

    def args(self, kind: str) -> tuple[str, dict[str, Any]]:
        i = self.used.get(kind, 0)
        self.used[kind] = i + 1
        if kind.startswith("recall"):
            return "recall", {"query": self.recall_queries[i % len(self.recall_queries)], "n": 10}
        if kind.startswith("find_processes"):
            return "find_processes", {"query": self.find_queries[i % len(self.find_queries)], "k": 3}
        if kind == "learn":
            return "learn", self.learns[i]
        return "save_process", {"markdown": self.saves[i]}


def workload(size: int, calls: int, saves: Sequence[str]) -> Workload:
    items = list(corpus(size + (WARMUP + calls)))
    fresh = items[size:]  # new memories for learn, never seen by the fill
    return Workload(
        recall_queries=[it.insight.split(":")[0][:48] for it in items[: max(calls, 20)]],
        find_queries=make_queries(max(calls, 20)),
        learns=[
            {"insight": f"{it.insight} (run {n})", "context": json.dumps(it.context), "collection": it.collection}
            for n, it in enumerate(fresh)
        ],
        saves=list(saves),
    )


async def measure(
    url: str, pid: int, backend: Backend, kinds: Sequence[str], work: Workload, calls: int, size: int, processes: int
) -> list[Figure]:
    out: list[Figure] = []
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()  # the output schemas, once, as a client does before calling
        if any("hybrid" in k for k in kinds):  # the hashing embedder is ready at once; be sure
            for _ in range(100):
                got = answer(await session.call_tool("recall", {"query": "grip force", "n": 5}))
                if got.get("mode") == "hybrid":
                    break
                await asyncio.sleep(0.2)
        for kind in kinds:
            for _ in range(WARMUP):
                name, args = work.args(kind)
                await session.call_tool(name, args)
            walls: list[float] = []
            modes: dict[str, int] = {}
            errors = 0
            planned = [work.args(kind) for _ in range(calls)]
            srv0 = process_cpu_s(pid)
            pg0 = server_cpu(backend.cluster) if backend.cluster else 0.0
            cpu0 = time.process_time()
            for name, args in planned:
                t = time.perf_counter()
                result = await session.call_tool(name, args)
                walls.append(time.perf_counter() - t)
                got = answer(result)
                errors += "error" in got or bool(result.isError)
                mode = mode_of(kind, got)
                modes[mode] = modes.get(mode, 0) + 1
            client = (time.process_time() - cpu0) / calls * 1000
            server = (process_cpu_s(pid) - srv0) / calls * 1000
            cluster = (server_cpu(backend.cluster) - pg0) / calls * 1000 if backend.cluster else None
            out.append(
                Figure(
                    size=size,
                    processes=processes,
                    backend=backend.name,
                    kind=kind,
                    n=calls,
                    p50_ms=statistics.median(walls) * 1000,
                    p95_ms=percentile(walls, 0.95),
                    server_ms=server,
                    cluster_ms=cluster,
                    client_ms=client,
                    mode="/".join(f"{m}" if c == calls else f"{m}×{c}" for m, c in sorted(modes.items())),
                    errors=errors,
                )
            )
    return out


# ---------------------------------------------------------------------------- one run


async def run(
    sizes: Sequence[int], calls: int, cluster: Cluster, work: Path, max_processes: int | None = None
) -> list[Figure]:
    """Every size on both backends: fill, serve keyword-only, serve hybrid; the figures in order."""
    figures: list[Figure] = []
    for size in sizes:
        n_docs = size if max_processes is None else min(size, max_processes)
        documents, saves = process_documents(n_docs, WARMUP + calls)
        for name in BACKENDS:
            data = work / f"{name}-{size}"
            data.mkdir(parents=True)
            env = {"MEMORY_DATA_DIR": str(data), "ROBOT_ID": ROBOT}
            backend = Backend(name, env)
            if name == "postgres":
                backend.env["MEMORY_DATABASE_URL"] = cluster.new_database(f"bench_{size}")
                backend.cluster = cluster
            t = time.perf_counter()
            await fill(backend, size, documents)
            print(f"# filled {name} to {size:,} memories + {n_docs:,} processes in {time.perf_counter() - t:.0f} s")
            load = workload(size, calls, saves)
            log = work / f"{name}-{size}.server.log"
            for embedder, kinds in (("none", KEYWORD_KINDS), ("hashing", HYBRID_KINDS)):
                async with serving(backend, embedder, log) as (url, pid):
                    figures += await measure(url, pid, backend, kinds, load, calls, size, n_docs)
    return figures


def render(figures: Sequence[Figure]) -> str:
    lines = [
        "| memories / processes | backend | call | n | wall p50 ms | wall p95 ms | server CPU ms/call "
        "| cluster CPU ms/call | client CPU ms/call | answered |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for f in figures:
        cluster = "—" if f.cluster_ms is None else f"{f.cluster_ms:.2f}"
        answered = f.mode + (f", {f.errors} errors" if f.errors else "")
        lines.append(
            f"| {f.size:,} / {f.processes:,} | {f.backend} | {f.kind} | {f.n} | {f.p50_ms:.2f} | {f.p95_ms:.2f} "
            f"| {f.server_ms:.2f} | {cluster} | {f.client_ms:.2f} | {answered} |"
        )
    return "\n".join(lines)


def machine() -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return f"{rev.stdout.strip() or '?'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {model}, load {load}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="memories (and processes) per run, comma-separated")
    parser.add_argument("--calls", type=int, default=100, help="measured calls per kind (after 5 to warm up)")
    parser.add_argument("--max-processes", type=int, default=None, help="fill at most this many processes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    logs.configure("warning")
    print(f"# {' '.join(['python -m bench.bench_postgres_served', *(argv or sys.argv[1:])])}")
    print(f"# start: {machine()}")
    with Cluster.running() as cluster, tempfile.TemporaryDirectory(prefix="bench-pg-served-") as tmp:
        figures = asyncio.run(run(sizes, args.calls, cluster, Path(tmp), args.max_processes))
    print(f"# end: {machine()}")
    print(render(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
