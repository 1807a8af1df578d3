"""Benchmark: ``robot-mcp-memory copy-to-postgres`` — a SQLite data directory moved into a fresh database.

    python -m bench.bench_copy [--memories 5000 10000]

For each size: a new data directory filled through the Python API (`RobotMemory.learn_many`, the
synthetic memories of `experience_corpus.corpus`, one session per 100 memories) and the process
service (one document per 20 memories), then the real command run as a subprocess against a
throwaway cluster (tests/pgcluster.py: fsync off) into a database of its own. It prints the wall
time, memories per second, and the command's own CPU (user + system, from its rusage: the
PostgreSQL backends it used have exited by then, so the cluster's share is not in it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import doc
from tests.pgcluster import Cluster

from bench.experience_corpus import corpus
from robot_mcp_memory import logs
from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.tenancy.principal import ADMIN


def fill(data: Path, n: int) -> None:
    with RobotMemory(data, robot_id="bench") as api:
        items = list(corpus(n))
        for start in range(0, n, 100):
            session = api.start_session()
            api.learn_many([(i.insight, i.context) for i in items[start : start + 100]], session_id=session)
            api.end_session(session, outcome_score=1.0)
        processes = api.memory.processes

        async def save() -> None:
            for k in range(n // 20):
                await processes.save(ADMIN, doc(f"task-{k}", f"Task {k} at the dock", "## Steps\n1. go\n2. come back"))

        asyncio.run(save())


def copy(data: Path, url: str) -> tuple[float, float, str]:
    """(wall seconds, the command's CPU seconds, its stdout)."""
    command = [str(Path(sys.executable).with_name("robot-mcp-memory")), "copy-to-postgres", "--data-dir", str(data)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "MCP_"))}
    started = time.perf_counter()
    proc = subprocess.Popen([*command, "--to", url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"copy-to-postgres failed:\n{out}")
    return wall, usage.ru_utime + usage.ru_stime, out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, nargs="+", default=[5000, 10000])
    args = parser.parse_args(argv)
    logs.configure("warning")
    with Cluster.running() as cluster, tempfile.TemporaryDirectory() as tmp:
        for n in args.memories:
            data = Path(tmp) / f"data-{n}"
            fill(data, n)
            wall, cpu, out = copy(data, cluster.new_database("copy"))
            verified = sum(1 for line in out.splitlines() if line.startswith("  "))
            sys.stdout.write(
                f"{n} memories + {n // 20} documents: {wall:.2f} s wall, {n / wall:,.0f} memories/s, "
                f"command CPU {cpu:.2f} s, {verified} tables verified\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
