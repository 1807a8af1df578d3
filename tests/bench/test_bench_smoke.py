"""The processes benchmark still runs end to end, at a tiny size. No timing is asserted: speed is
measured by bench/ and written up in docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

from bench.bench_processes import make_documents, make_queries, render, run_benchmark

from robot_mcp_memory import docmodel


def test_the_synthetic_corpus_is_valid_and_fixed_by_its_seed() -> None:
    docs = make_documents(30, seed=1)
    assert docs == make_documents(30, seed=1)
    parsed = [docmodel.parse(d) for d in docs]
    assert len({p.id for p in parsed}) == 30
    assert all("## Steps" in p.body and "## Pitfalls & fixes" in p.body for p in parsed)
    assert make_queries(5, seed=1) == make_queries(5, seed=1)


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

    r = await run_size(300, 100, 5, tmp_path)
    assert (r.size, r.real) == (300, 100)
    assert r.modes == ("hybrid",)  # the vectors were found: every recall ran hybrid
    assert set(r.hybrid) == set(r.keyword) == set(FILTERS)
    assert all(t.p50 > 0 and t.cpu > 0 for t in r.hybrid.values())
    assert "| 300 | 100 + 200 | none |" in report([r], 5, "python -m bench.bench_recall_hybrid")
