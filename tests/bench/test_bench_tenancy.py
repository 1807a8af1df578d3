"""The tenancy benchmark runs at a tiny size and reports every call for both stores."""

from __future__ import annotations

import argparse

import pytest
from bench.bench_tenancy import run

from tests.pgcluster import Cluster

pytestmark = pytest.mark.postgres


async def test_the_tenancy_benchmark_runs_at_a_tiny_size(pg_cluster: Cluster) -> None:
    rows = await run(argparse.Namespace(calls=4), pg_cluster)
    pairs = [(what, store) for what, store, _ in rows]
    assert pairs[:2] == [("session lookup", "memory"), ("session lookup", "postgres")]
    assert len(set(pairs)) == len(pairs) == 10
    for _, store, (wall, cpu, server) in rows:
        assert wall >= 0
        assert cpu >= 0
        assert (server is None) == (store == "memory")
