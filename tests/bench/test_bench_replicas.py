"""The replicas benchmark runs end to end at a tiny size — real PostgreSQL, real server replicas,
real HAProxy, the official client — and reports one row per replica count with no error. No timing
is asserted: speed is measured by bench/ and written up in docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.bench_replicas import HAPROXY, HAPROXY_MISSING, MIX, Config, render, run

from tests.pgcluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def test_the_replicas_benchmark_prints_a_row_per_replica_count_with_no_error(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    if not Path(HAPROXY).is_file():
        pytest.fail(HAPROXY_MISSING, pytrace=False)  # a missing tool is a failure naming the remedy
    cfg = Config(replicas=(1, 2), clients=2, duration_s=1.0, warmup_s=0.5, processes=12, memories=40)
    rows = run(cfg, pg_cluster, tmp_path)

    assert [r.replicas for r in rows] == [1, 2]
    for row in rows:
        assert row.errors == []
        assert row.calls > 0
        assert len(row.replica_cpu_s) == row.replicas
        assert all(cpu > 0 for cpu in row.replica_cpu_s)  # round-robin reached every replica
        assert row.postgres_cpu_s > 0
    table = render(rows).splitlines()
    assert [line.split("|")[1].strip() for line in table[2:4]] == ["1", "2"]
    assert [line.split("|")[7].strip() for line in table[2:4]] == ["0", "0"]  # the errors column
    assert all(tool in table[5] for tool, _ in MIX)
