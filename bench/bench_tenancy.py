"""Benchmark: the tenancy stores per call — browser sessions and the token throttle — in this
process (`SessionStore`, `AuthThrottle`) and on PostgreSQL (`PostgresSessions`, `PostgresThrottle`),
with the server's CPU from /proc.

    python -m bench.bench_tenancy [--calls 500]

Starts a throwaway PostgreSQL cluster (tests/pgcluster.py: the image's binaries, fsync off) and times,
through each store's port (no HTTP): a session lookup (what every cookie request costs), a login's
`create`, a bearer success by a token in steady use (every MCP request over HTTP), a counted failure
(each from a fresh address, so none is held) and a failure at a held address (a guesser's flood).
Reports wall p50 (the machine is shared: read the CPU columns), this process's CPU per call (worker
threads included) and, for PostgreSQL, the CPU the cluster's server processes spent per call.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from tests.pgcluster import Cluster

from bench.bench_postgres import timed
from robot_mcp_memory import logs
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle
from robot_mcp_memory.tenancy.principal import Principal
from robot_mcp_memory.tenancy.sessions import SessionStore
from robot_mcp_memory.tenancy.throttle import AuthThrottle

Row = tuple[str, str, tuple[float, float, float | None]]


async def measure(name: str, sessions: Sessions, throttle: Throttle, calls: int, cluster: Cluster | None) -> list[Row]:
    out: list[Row] = []

    def each(make: Callable[[int], Awaitable[object]]) -> list[Callable[[], Awaitable[object]]]:
        return [partial(make, n) for n in range(calls)]

    sids = [(await sessions.create(Principal.robot(f"r{n % 50}")))[0] for n in range(50)]
    out.append(("session lookup", name, await timed(each(lambda n: sessions.lookup(sids[n % 50])), cluster)))
    out.append(
        ("session create (login)", name, await timed(each(lambda n: sessions.create(Principal("admin"))), cluster))
    )
    await throttle.attempt("10.8.0.1", "admin")
    steady = each(lambda n: throttle.attempt("10.8.0.1", "admin"))
    out.append(("bearer success, token in steady use", name, await timed(steady, cluster)))
    fresh = each(lambda n: throttle.attempt(f"10.7.{n // 250}.{n % 250}", None))
    out.append(("failure, counted", name, await timed(fresh, cluster)))
    for _ in range(10):
        await throttle.attempt("10.8.0.2", None)
    held = each(lambda n: throttle.attempt("10.8.0.2", None))
    out.append(("failure at a held address", name, await timed(held, cluster)))
    return out


async def run(args: argparse.Namespace, cluster: Cluster) -> list[Row]:
    db = PostgresStore.open(cluster.url(), schema=f"bench_{uuid.uuid4().hex[:8]}", max_size=2)
    try:
        rows = await measure("memory", SessionStore(), AuthThrottle(), args.calls, None)
        rows += await measure("postgres", PostgresSessions(db), PostgresThrottle(db), args.calls, cluster)
    finally:
        db.close()
    calls = list(dict.fromkeys(what for what, _, _ in rows))
    return sorted(rows, key=lambda row: calls.index(row[0]))  # each call's stores side by side


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args(argv)
    logs.configure("warning")
    with Cluster.running() as cluster:
        rows = asyncio.run(run(args, cluster))
    print("| call | store | wall p50 ms (shared machine) | client CPU ms/call | server CPU ms/call |")
    print("|---|---|---:|---:|---:|")
    for what, store, (wall, cpu, srv) in rows:
        print(f"| {what} | {store} | {wall:.3f} | {cpu:.3f} | {'—' if srv is None else f'{srv:.3f}'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
