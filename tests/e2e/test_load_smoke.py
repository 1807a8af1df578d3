"""The SSE load benchmark still runs end to end, with tiny numbers: the real server process, tokens
on, several tenants, every phase and every tool of the mix. No timing is asserted: the figures are
measured by ``python -m bench.load_sse`` and written up in docs/benchmarks.md."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench.load_sse import MIX, LoadConfig, render, run_load

pytestmark = pytest.mark.e2e

TINY = LoadConfig(
    clients=6,
    tenants=3,
    duration_s=0.3,
    echo_s=0.2,
    find_s=0.2,
    warmup_s=0.0,
    processes=30,
    memories=30,
    embedder="hashing",
    min_calls=len(MIX),  # every client goes round the whole mix at least once, however slow the machine
)


def test_the_sse_load_benchmark_runs_with_tiny_numbers_without_errors_or_lock_waits(tmp_path: Path) -> None:
    report = run_load(TINY, tmp_path)

    assert [p.errors for p in report.phases] == [[], [], []]
    assert report.locked_lines == 0
    assert report.error_lines == 0
    assert report.hot_dropped == 0
    assert report.exit_code == 0
    echo, find, mixed = report.phases
    assert len(echo.samples["ping"]) >= TINY.clients * TINY.min_calls
    assert len(find.samples["find_processes"]) >= TINY.clients * TINY.min_calls
    assert {tool for tool, _ in MIX} == set(mixed.samples)
    assert all(len(s) >= TINY.clients for s in mixed.samples.values())
    assert report.modes == {"hybrid"}
    assert math.isfinite(report.find_to_echo)
    assert report.find_to_echo > 0

    text = render(report)
    assert text.startswith("## Load (6 SSE clients)\n")
    assert "| echo (MCP ping) | `ping` |" in text
    assert "| find only | `find_processes` |" in text
