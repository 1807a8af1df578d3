"""The experience benchmark runs end to end at a tiny size (speed is measured in bench/, never asserted)."""

from __future__ import annotations

from pathlib import Path

from bench.experience_eval import FAMILIES

from bench import bench_experiences, eval_recall


def test_the_benchmark_runs_and_reports_every_measure() -> None:
    results = bench_experiences.run_benchmark([40, 80], queries=4)
    assert [r.size for r in results] == [40, 80]
    text = bench_experiences.report(results, "now")
    assert text.startswith("## Experiences")
    for name in ("keyword", "keyword + filter", "filter only", "keyword + spatial", "keyword (async service)"):
        assert f"| 80 | {name} |" in text


async def test_the_recall_evaluation_runs_and_reports_every_family(tmp_path: Path) -> None:
    text = await eval_recall.run(tmp_path, 80, 2, seed=5, embedder="hashing")
    for family in (*FAMILIES, "all"):
        assert f"| {family} | " in text
