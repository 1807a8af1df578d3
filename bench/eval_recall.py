"""Experience-recall evaluation: hit@1 / hit@5 / MRR per family, keyword-only beside hybrid.

    python -m bench.eval_recall [--size 1200] [--cases 20] [--seed 20261202] [--embedder use]

Fills a fresh ``index.db`` (temporary directory) with the corpus of `bench/experience_eval.py`
through ``learn_many`` with the default embedder (USE, offline), then recalls every case through
``ExperienceService.recall`` (the served path, n = 10) twice: in the default hybrid mode and
keyword-only (the same store, no vectors). Prints one Markdown table; the figures in
docs/search.md ("Exact tokens and hard negatives") come from it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.experience_eval import FAMILIES, Case, Eval, generate, metrics
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.tenancy.principal import LOCAL

N = 10


async def fill(memory: Memory, ev: Eval) -> dict[str, int]:
    """Learns every item; the id of each text (a text the dedup merged maps to its survivor's)."""
    svc = memory.experiences
    done = await svc.learn_many(LOCAL, [(it.insight, it.context) for it in ev.items])
    return {it.insight: d.memory_id for it, d in zip(ev.items, done, strict=True)}


async def ranks(
    svc: ExperienceService, cases: Sequence[Case], ids: dict[str, int]
) -> tuple[list[int | None], set[str]]:
    out: list[int | None] = []
    modes: set[str] = set()
    for case in cases:
        got = await svc.recall(LOCAL, case.query, n=N)
        modes.add(got.mode)
        order = [h.memory.id for h in got.hits]
        target = ids[case.target]
        out.append(order.index(target) + 1 if target in order else None)
    return out, modes


async def run(data: Path, size: int, per_family: int, seed: int, embedder: str = "use") -> str:
    ev = generate(size, per_family, seed)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), "ROBOT_ID": "eval-01", "MEMORY_EMBEDDER": embedder})
    memory = Memory.open(settings)
    try:
        emb = memory.embedder
        assert emb is not None, "no embedder configured"
        assert emb.wait_ready(300), "the default embedder did not load"
        ids = await fill(memory, ev)
        svc = memory.experiences
        keyword_only = ExperienceService(svc.store, svc.policy, default_robot="eval-01")
        lines = [
            f"{len(set(ids.values())):,} memories (seed {seed}), {len(ev.cases)} cases, n = {N}, "
            f"embedder {emb.model_id}.",
            "",
            "| family | cases | keyword hit@1 / hit@5 / MRR | hybrid hit@1 / hit@5 / MRR | hybrid first |",
            "|---|---:|---:|---:|---:|",
        ]
        groups: list[tuple[str, list[Case]]] = [(f, ev.of(f)) for f in FAMILIES]
        for family, cases in [*groups, ("all", ev.cases)]:
            kw, _ = await ranks(keyword_only, cases, ids)
            hy, modes = await ranks(svc, cases, ids)
            assert modes == {"hybrid"}, modes
            k1, k5, kr = metrics(kw)
            h1, h5, hr = metrics(hy)
            first = sum(r == 1 for r in hy)
            lines.append(
                f"| {family} | {len(cases)} | {k1:.2f} / {k5:.2f} / {kr:.3f} | {h1:.2f} / {h5:.2f} / {hr:.3f} "
                f"| {first}/{len(cases)} |"
            )
        return "\n".join(lines)
    finally:
        memory.close()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="experience recall: exact tokens, exact text, hard negatives, paraphrases")
    p.add_argument("--size", type=int, default=1200)
    p.add_argument("--cases", type=int, default=20, help="cases per family (paraphrases: at most 16)")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--embedder", default="use", help="MEMORY_EMBEDDER for the run (default: the default model)")
    args = p.parse_args(argv)
    logs.configure("warning")
    with tempfile.TemporaryDirectory() as tmp:
        table = asyncio.run(run(Path(tmp), args.size, args.cases, args.seed, args.embedder))
    print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
