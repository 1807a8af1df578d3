"""The SSE load benchmark still runs end to end, with tiny numbers: the real server process, tokens
on, several tenants, every phase and every tool of the mix. No timing is asserted: the figures are
measured by ``python -m bench.load_sse`` and written up in docs/benchmarks.md."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from bench.bench_processes import ROOMS, make_documents
from bench.load_sse import MIX, LoadConfig, render, run_load, worst_queries

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
    bare=False,
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


def test_the_streamable_http_load_benchmark_runs_beside_a_bare_fastmcp_server(tmp_path: Path) -> None:
    cfg = dataclasses.replace(TINY, transport="http", corpus="worst", solo_s=0.2, bare=True)
    report = run_load(cfg, tmp_path)

    assert [p.errors for p in [*report.solo, *report.phases, *report.bare]] == [[]] * 7
    assert report.locked_lines == 0
    assert report.error_lines == 0
    assert report.exit_code == 0
    assert [p.name for p in report.solo] == ["echo-1", "find-1"]
    assert len(report.solo[1].samples["find_processes"]) >= cfg.min_calls
    assert [p.name for p in report.bare] == ["echo-1", "echo"]
    assert len(report.bare[1].samples["ping"]) >= cfg.clients * cfg.min_calls
    assert all(math.isfinite(p.cpu_ms_per_call()) for p in [*report.solo, *report.bare])
    assert math.isfinite(report.own_find_cpu_ms(alone=True))

    text = render(report)
    assert text.startswith("## Load (6 Streamable HTTP clients)\n")
    assert "| one client: find | `find_processes` |" in text
    assert "| bare FastMCP, 6 clients: echo | `ping` |" in text


def test_most_words_of_a_worst_case_query_are_in_every_synthetic_document() -> None:
    docs = [set(re.findall(r"[a-z]+", d.lower())) for d in make_documents(200, seed=3)]
    place = {w for room in ROOMS for w in room.lower().split()}
    for query in worst_queries(20, seed=4):
        words = set(re.findall(r"[a-z]+", query.lower())) - place
        everywhere = words.intersection(*docs)
        assert len(everywhere) >= 0.75 * len(words), (query, words - everywhere)
