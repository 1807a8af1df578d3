"""Benchmark: a replica's cold start on PostgreSQL — seconds to its first ``/readyz`` 200, its
RSS and CPU then, and its first calls — on an empty database and on a filled one.

    python -m bench.bench_cold_start [--memories 10000] [--processes 1000] [--runs 3] [--embedder use]

Starts a throwaway PostgreSQL cluster (tests/pgcluster.py: the image's binaries, fsync off), fills
one database through the services (`Memory.open` on it, the same embedder the replicas run:
`experience_corpus.corpus` memories in batches of 100 under 10 robots of one group, and
`bench_processes.make_documents` process documents), then starts ``python -m robot_mcp_memory``
(``MCP_TRANSPORT=sse``, the database URL, stateless HTTP) `--runs` times on it and on an empty
database. For each start it reports the seconds from spawn to the first ``GET /readyz`` 200
(polled every 20 ms), the server's CPU seconds and RSS (``/proc/<pid>/stat``, ``/proc/<pid>/status``)
at that moment and what ``/readyz`` said of the embedder, then the wall time of its first
``recall`` and ``find_processes`` (the first calls build the in-RAM indexes) and its RSS after
them, and last the seconds from spawn until ``/readyz`` no longer says the embedder is loading
(it loads in the background) and the RSS then. Medians over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from tests.e2e.harness import child_env, free_port, http_session
from tests.pgcluster import Cluster

from bench.bench_processes import make_documents
from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.tenancy.principal import ADMIN as OPERATOR
from robot_mcp_memory.tenancy.principal import Principal

TICKS = os.sysconf("SC_CLK_TCK")
ADMIN = "bench-admin-token-0123456789"
ROBOTS = [f"r{i}" for i in range(10)]
TOKENS = {r: f"bench-token-{r}-abcdefgh" for r in ROBOTS}
BATCH = 100
POLL_S = 0.02
START_DEADLINE_S = 300.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def env(url: str, embedder: str, port: int, data: Path) -> dict[str, str]:
    return {
        "MEMORY_DATABASE_URL": url,
        "MEMORY_EMBEDDER": embedder,
        "MEMORY_TOKEN": ADMIN,
        "MEMORY_ROBOT_TOKENS": ",".join(f"{r}:{t}" for r, t in TOKENS.items()),
        "MCP_TRANSPORT": "sse",
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MEMORY_DATA_DIR": str(data),
    }


async def fill(url: str, embedder: str, memories: int, processes: int, data: Path) -> float:
    """Seconds to fill `url` through the services (what a fleet's traffic would have left)."""
    t0 = time.perf_counter()
    memory = Memory.open(Settings.from_env(env(url, embedder, 9103, data)), backfill=False)
    try:
        await memory.fleet.upsert_group(OPERATOR, "bench", customer="bench")
        for robot in ROBOTS:
            await memory.fleet.register_robot(OPERATOR, robot, group="bench")
        items = list(corpus(memories, seed=11))
        for n, start in enumerate(range(0, len(items), BATCH)):
            author = Principal.robot(ROBOTS[n % len(ROBOTS)])
            batch = [(it.insight, it.context, it.collection, None) for it in items[start : start + BATCH]]
            await memory.experiences.learn_batch(author, batch, report=True)
        for markdown in make_documents(processes):
            await memory.processes.save(OPERATOR, markdown)  # each document names its robot
    finally:
        memory.close()
    return time.perf_counter() - t0


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


async def one_start(url: str, embedder: str, work: Path) -> dict[str, Any]:
    port = free_port()
    data = work / f"data-{port}"
    err = (work / f"server-{port}.stderr").open("wb")
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "robot_mcp_memory",
        env=child_env(**env(url, embedder, port, data)),
        stdin=subprocess.DEVNULL,
        stdout=err,
        stderr=err,
    )
    try:
        ready_s, embedder_then = await _until_ready(proc, port, t0)
        out: dict[str, Any] = {
            "ready_s": ready_s,
            "cpu_s": cpu_seconds(proc.pid),
            "rss_ready": rss_mib(proc.pid),
            "embedder": embedder_then,
        }
        async with http_session(_Port(port), token=TOKENS[ROBOTS[0]]) as client:  # type: ignore[arg-type]  # only .url is used
            t = time.perf_counter()
            await client.call("recall", query="grasp the red mug", n=10)
            out["recall_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await client.call("find_processes", query="open the door")
            out["find_ms"] = (time.perf_counter() - t) * 1000
        out["rss_after"] = rss_mib(proc.pid)
        out["embedder_s"], out["embedder_final"] = await _until_embedder(port, t0)
        out["rss_embedder"] = rss_mib(proc.pid)
        return out
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        err.close()


async def _until_ready(proc: asyncio.subprocess.Process, port: int, t0: float) -> tuple[float, str]:
    """Seconds from spawn to the first /readyz 200, and what that answer said of the embedder."""
    async with httpx.AsyncClient(timeout=5.0) as http:
        while time.perf_counter() - t0 < START_DEADLINE_S:
            if proc.returncode is not None:
                raise RuntimeError(f"the server exited with {proc.returncode} before it was ready")
            try:
                response = await http.get(f"http://127.0.0.1:{port}/readyz")
            except httpx.TransportError:
                pass
            else:
                if response.status_code == 200:
                    checks = {c["name"]: c["detail"] for c in response.json()["checks"]}
                    return time.perf_counter() - t0, str(checks.get("embedder", "?"))
            await asyncio.sleep(POLL_S)
    raise RuntimeError(f"no /readyz 200 within {START_DEADLINE_S} s")


async def _until_embedder(port: int, t0: float) -> tuple[float, str]:
    """Seconds from spawn until /readyz no longer says the embedder is loading (it loads in the
    background after the store is ready), and what it says then."""
    detail = "?"
    async with httpx.AsyncClient(timeout=5.0) as http:
        while time.perf_counter() - t0 < START_DEADLINE_S:
            checks = {
                c["name"]: c["detail"] for c in (await http.get(f"http://127.0.0.1:{port}/readyz")).json()["checks"]
            }
            detail = str(checks.get("embedder", "?"))
            if detail != "loading":
                break
            await asyncio.sleep(POLL_S)
    return time.perf_counter() - t0, detail


def median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def spread(rows: list[dict[str, Any]], key: str, fmt: str) -> str:
    """``median (min–max)`` of one column."""
    values = [float(r[key]) for r in rows]
    return f"{median(rows, key):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


async def run(args: argparse.Namespace, cluster: Cluster, work: Path) -> list[str]:
    empty, filled = cluster.new_database("cold"), cluster.new_database("cold")
    await one_start(empty, args.embedder, work)  # migrates the empty database; not counted
    fill_s = await fill(filled, args.embedder, args.memories, args.processes, work / "fill")
    lines = [
        f"filled {args.memories:,} memories + {args.processes:,} processes in {fill_s:.0f} s "
        f"(embedder {args.embedder}); medians of {args.runs} starts each (min–max)",
        "",
        "| database | to /readyz 200 s | server CPU s then | RSS then MiB | first recall ms | first find ms "
        "| RSS after MiB | embedder at /readyz | embedder loaded s | RSS then MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for label, url in (("empty", empty), (f"{args.memories:,} memories + {args.processes:,} processes", filled)):
        rows: list[dict[str, Any]] = [await one_start(url, args.embedder, work) for _ in range(args.runs)]
        lines.append(
            f"| {label} | {spread(rows, 'ready_s', '.2f')} | {spread(rows, 'cpu_s', '.2f')} | "
            f"{median(rows, 'rss_ready'):.0f} | {median(rows, 'recall_ms'):.0f} | {median(rows, 'find_ms'):.0f} | "
            f"{median(rows, 'rss_after'):.0f} | {', '.join(sorted({r['embedder'] for r in rows}))} | "
            f"{spread(rows, 'embedder_s', '.1f')}, {', '.join(sorted({r['embedder_final'] for r in rows}))} | "
            f"{median(rows, 'rss_embedder'):.0f} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedder", default="use")
    args = parser.parse_args(argv)
    logs.configure("warning")
    with Cluster.running() as cluster, tempfile.TemporaryDirectory() as tmp:
        lines = asyncio.run(run(args, cluster, Path(tmp)))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
