"""bench/bench_robotmem_compare.py runs end to end at a tiny size, when robotmem's own virtualenv
is installed (speed is measured in bench/, never asserted here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import bench_robotmem_compare as compare
from tests.conftest import ROBOTMEM_MISSING

pytestmark = [
    pytest.mark.e2e,  # runs both servers and a TypeScript client as processes
    pytest.mark.skipif(not compare.DEFAULT_ROBOTMEM_PYTHON.exists(), reason=ROBOTMEM_MISSING),
]


def test_the_comparison_runs_both_sides_and_reports_ratios(tmp_path: Path) -> None:
    report = compare.run(
        [30, 60], 3, 2, compare.DEFAULT_ROBOTMEM_PYTHON, hybrid=False, work_dir=tmp_path, cpu_calls=5, ablate=True
    )
    assert [r.size for r in report.sizes] == [30, 60]
    for r in report.sizes:
        assert set(r.learn) == {"robotmem", "ours"}
        assert r.learn["robotmem"].n == r.learn["ours"].n == 30
        # learning *at* the size: the fill's last tenth, timed on its own
        assert r.learn["robotmem"].at_n == r.learn["ours"].at_n == r.size // 10
        assert 0 < r.learn["ours"].at_wall_s < r.learn["ours"].wall_s
        assert r.stored["ours"] == r.size
        assert {side for side, _ in r.recall} == {"robotmem", "ours"}
    assert set(report.sizes[-1].batch) == {"robotmem", "ours"}
    assert [m.server for m in report.mcp] == ["robotmem 0.1.3", "ours, MEMORY_EMBEDDER=none"]
    assert all(m.learn["stock"].n == 2 and m.recall["compiled"].n == 2 for m in report.mcp)
    assert report.robotmem_version == "0.1.3"
    text = compare.render(report)
    assert text.startswith("## Side by side with robotmem 0.1.3")
    assert "| 60 | keyword + range filter |" in text
    assert "| memories | at size, learn/s: robotmem / ours | ratio | whole fill" in text
    assert "| robotmem 0.1.3 | bm25_only |" in text
    # The MCP targets are set at 10,000 memories: a run whose MCP part ran elsewhere says so
    # instead of judging it.
    assert "MCP stdio recall p50" not in text
    assert "this run's MCP part ran at 60" in text
    # Each server's own CPU per call, read from /proc, and ours again without the keyword cache.
    servers = [c.server for c in report.cpu]
    assert servers == ["robotmem 0.1.3", "ours, MEMORY_EMBEDDER=none", "ours, MEMORY_EMBEDDER=none, no keyword cache"]
    assert all(c.calls["recall"] == 5 and c.cpu_ms["recall"] >= 0 for c in report.cpu)
    assert not any(c.errors["learn"] or c.errors["recall"] for c in report.cpu)
    assert "**Server CPU per call over MCP stdio, from `/proc/<pid>/stat`**" in text


@pytest.mark.skipif(
    not (shutil.which("node") and shutil.which("npm")),
    reason="node and npm are missing: install Node.js 20 or newer (with npm) for the TypeScript SDK client",
)
def test_the_typescript_sdk_client_makes_the_same_calls_and_its_rows_are_reported(tmp_path: Path) -> None:
    report = compare.run([40], 3, 3, compare.DEFAULT_ROBOTMEM_PYTHON, hybrid=False, work_dir=tmp_path, ts_client=True)

    assert [m.server for m in report.mcp_ts] == ["robotmem 0.1.3", "ours, MEMORY_EMBEDDER=none"]
    for m in report.mcp_ts:
        assert m.learn[compare.TS_MODE].n == m.recall[compare.TS_MODE].n == m.floor.n == 3
        assert m.learn[compare.TS_MODE].errors == 0, f"{m.server} answered a learn or recall with an error"
        assert m.recall[compare.TS_MODE].empty == 0, f"{m.server} recalled nothing"
    assert report.mcp_ts[1].mode == "keyword"
    assert report.node_version.startswith("v")
    text = compare.render(report)
    assert "**Over MCP stdio from the TypeScript SDK client**" in text
    assert "| ours, MEMORY_EMBEDDER=none | keyword |" in text.split("TypeScript SDK client")[1]
