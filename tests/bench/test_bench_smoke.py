"""The processes benchmark still runs end to end, at a tiny size. No timing is asserted: speed is
measured by bench/ and written up in docs/benchmarks.md."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from bench.bench_processes import make_documents, make_queries, render, run_benchmark

from robot_mcp_memory.processes import docmodel


def test_the_synthetic_corpus_is_valid_and_fixed_by_its_seed() -> None:
    docs = make_documents(30, seed=1)
    assert docs == make_documents(30, seed=1)
    parsed = [docmodel.parse(d) for d in docs]
    assert len({p.id for p in parsed}) == 30
    assert all("## Steps" in p.body and "## Pitfalls & fixes" in p.body for p in parsed)
    assert make_queries(5, seed=1) == make_queries(5, seed=1)


@pytest.mark.e2e  # its report runs git (the revision) and uname -p (platform.processor)
async def test_the_processes_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    report = await run_benchmark(tmp_path / "data", sizes=(10, 30), n_queries=5, outcomes=4, mcp_saves=3)

    assert [r.size for r in report.sizes] == [10, 30]
    for r in report.sizes:
        assert r.find.n == 5
        assert r.outcome.n == 4
        assert r.find_modes == ("keyword",)
        assert r.db_bytes > 0
    assert report.sizes[0].saves.n == 10
    assert report.sizes[1].saves.n == 20
    assert (report.mcp.find.n, report.mcp.baseline.n, report.mcp.save.n) == (5, 5, 3)
    text = render(report, "python bench/bench_processes.py --sizes 10,30")
    assert "| 30 |" in text
    assert "find_processes" in text


async def test_the_hybrid_recall_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    from bench.bench_recall_hybrid import FILTERS, report, run_size

    configs = [frozenset(), frozenset({"keyword-cache"}), frozenset({"vector-matrix"})]
    results = await run_size(300, 100, 5, tmp_path, configs)
    assert [r.accelerators for r in results] == ["all on", "no keyword cache", "no vector matrix"]
    for r in results:  # the same database each time, opened with the accelerator off
        assert (r.size, r.real) == (300, 100)
        assert r.modes == ("hybrid",)  # the vectors were found: every recall ran hybrid
        assert set(r.hybrid) == set(r.keyword) == set(FILTERS)
        assert all(t.p50 > 0 and t.cpu > 0 for t in r.hybrid.values())
    text = report(results, 5, "python -m bench.bench_recall_hybrid")
    assert "| 300 | all on | 100 + 200 | none |" in text
    assert "| 300 | no vector matrix | 100 + 200 | task.success |" in text


class _Recording:
    """A side of the robotmem comparison that only records the chunks it is asked to learn."""

    def __init__(self, name: str, calls: list[tuple[str, int, int]]) -> None:
        self.name, self.calls = name, calls
        self.insights: list[str] = []

    def learn(self, items: Sequence[Any]) -> dict[str, Any]:
        self.calls.append((self.name, len(self.insights), len(items)))
        self.insights += [insight for insight, _, _ in items]
        return {"n": len(items), "wall_s": 0.001, "cpu_s": 0.0, "created": len(items), "duplicates": 0, "errors": 0}

    def recall(self, queries: Sequence[str], count: int, context_filter: Any) -> dict[str, Any]:
        return {"walls": [0.001] * count, "cpu_s": 0.0, "empty": 0, "errors": 0}

    def count(self) -> int:
        return len(self.insights)


def _compare_with_recorders(sizes: list[int]) -> tuple[list[Any], list[tuple[str, int, int]], list[_Recording]]:
    from bench import bench_robotmem_compare as compare

    calls: list[tuple[str, int, int]] = []
    sides = [_Recording("robotmem", calls), _Recording("ours", calls)]
    items: list[tuple[str, dict[str, Any], str]] = [(str(i), {}, "default") for i in range(max(sizes))]
    results = compare.in_process(sides, sizes, 2, items, batch=0)  # type: ignore[arg-type]
    return results, calls, sides


def test_the_robotmem_comparison_learns_the_last_tenth_in_small_chunks_taking_turns() -> None:
    """Learn *at* the size (the fill's last tenth, where the targets are read) goes in chunks a
    tenth as large as the fill's, and the sides take turns to go first, so each side's rate
    there is measured over the same seconds as the other's."""
    (result,), calls, sides = _compare_with_recorders([200])

    fill = [(name, start, n) for name, start, n in calls if start < 180]
    assert {n for _, _, n in fill} == {20}  # a tenth of the size
    at_size = [(name, start, n) for name, start, n in calls if start >= 180]
    assert {n for _, _, n in at_size} == {2}
    assert len(at_size) == 2 * 10
    firsts = [at_size[i][0] for i in range(0, len(at_size), 2)]
    assert len(set(firsts[0::2])) == len(set(firsts[1::2])) == 1
    assert firsts[0] != firsts[1]
    assert result.learn["ours"].at_n == result.learn["robotmem"].at_n == 20
    for side in sides:  # every item once, in order
        assert side.insights == [str(i) for i in range(200)]


def test_each_size_learns_only_its_new_items_and_times_its_own_last_tenth() -> None:
    """Several sizes, one of them starting past the next one's 90 % mark (95 → 100): each side
    learns every item exactly once, in order, and *at size* counts only the learns from the
    later of the previous size and the 90 % mark."""
    sizes = [95, 100, 200, 1000]
    results, _, sides = _compare_with_recorders(sizes)

    for side in sides:
        assert side.insights == [str(i) for i in range(1000)]
    previous = 0
    for r in results:
        for learned in r.learn.values():
            assert learned.n == r.size - previous
            assert learned.at_n == r.size - max(previous, r.size - r.size // 10)
        previous = r.size


def test_a_process_cpu_time_is_read_from_proc_and_grows_with_its_work() -> None:
    from bench import bench_robotmem_compare as compare

    before = compare.tree_cpu_s(os.getpid())
    start = time.process_time()
    while time.process_time() - start < 0.05:  # bounded: 50 ms of this process's CPU
        pass
    after = compare.tree_cpu_s(os.getpid())
    assert 0 < before < after  # /proc counts in clock ticks: at least one more has passed
    assert compare.tree_cpu_s(2**22 + 1) == 0.0  # no such process: nothing to count
