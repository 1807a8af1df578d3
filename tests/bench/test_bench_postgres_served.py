"""bench/bench_postgres_served.py runs end to end at a tiny size on both backends: the real server,
filled, driven over stateless Streamable HTTP. No timing is asserted (docs/benchmarks.md has them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_postgres_served as served
from tests.pgcluster import Cluster

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.e2e,  # starts the real server, four times
]


async def test_the_served_benchmark_prints_a_figure_for_every_call_on_both_backends(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    figures = await served.run([30], 3, pg_cluster, tmp_path)

    kinds = [*served.KEYWORD_KINDS, *served.HYBRID_KINDS]
    assert [(f.backend, f.kind) for f in figures] == [(b, k) for b in served.BACKENDS for k in kinds]
    for f in figures:
        assert (f.size, f.processes, f.n, f.errors) == (30, 30, 3, 0), f
        assert f.p50_ms > 0
        assert f.p95_ms >= f.p50_ms
        assert f.server_ms >= 0
        assert f.client_ms >= 0
        assert (f.cluster_ms is None) == (f.backend == "sqlite")
    answered = {(f.backend, f.kind): f.mode for f in figures}
    for backend in served.BACKENDS:  # what ran is what the row says ran
        assert answered[(backend, "recall, keyword")] == "keyword"
        assert answered[(backend, "recall, hybrid")] == "hybrid"
        assert answered[(backend, "find_processes, hybrid, k=3")] == "hybrid"
        assert answered[(backend, "learn")] == answered[(backend, "save_process")] == "created"
    table = served.render(figures).splitlines()
    assert len(table) == 2 + len(figures)
    assert "| 30 / 30 | postgres | find_processes, hybrid, k=3 | 3 |" in table[-3]


def test_server_cpu_is_read_from_proc_and_grows_with_its_work() -> None:
    import os
    import time

    before = served.process_cpu_s(os.getpid())
    start = time.process_time()
    while time.process_time() - start < 0.05:  # bounded: 50 ms of this process's CPU
        pass
    assert 0 < before < served.process_cpu_s(os.getpid())


def test_the_percentile_is_nearest_rank() -> None:
    samples = [i / 1000 for i in range(1, 101)]  # 1 … 100 ms
    assert served.percentile(samples, 0.95) == pytest.approx(95.0)
    assert served.percentile(samples, 0.5) == pytest.approx(50.0)
    assert served.percentile([0.002], 0.95) == pytest.approx(2.0)
