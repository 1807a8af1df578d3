"""Evaluate find_processes ranking on eval/processes.yaml: hit@1, hit@3 and MRR per method.

    python bench/eval_search.py [--set FILE] [--embedder use] [--embed-text meta|full] [--out FILE]

For every query it collects, once, what each method proposes through the production code
(`store.hybrid_candidates`: keyword list, vector list, reliability, agreement, the keyword
bound), then ranks those candidates several ways: keyword-only (the production keyword path,
``-bm25 × agreement × reliability``, beside `store.search` without agreement), vector-only
(``cosine × reliability``), a naive RRF of the plain lists (no reliability), and hybrid under
several fusion settings (`store.rank_hybrid`), before and after agreement and coverage. Besides
the totals it prints hit@1 / MRR per family for the main methods (`FAMILY_METHODS`), so a change
that helps one family and hurts another shows. ``--set`` picks the file (eval/processes_dev.yaml
holds issue 28's failure families). It runs twice: with neutral counts (every process 0/0, so reliability
cannot help or hurt) and with seeded random success/failure counts, where about half the
queries have a hard negative more reliable than their target. Finally it checks that the
served path (`ProcessService.find`) agrees with the harness for the default setting.

The set is ours (see eval/processes.yaml); no public robot-instruction dataset is used.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Hit
from robot_mcp_memory.processes.sqlite import store
from robot_mcp_memory.processes.sqlite.store import Candidates, Fusion
from robot_mcp_memory.search import fusion
from robot_mcp_memory.tenancy.principal import ADMIN

EVAL = Path(__file__).resolve().parents[1] / "eval" / "processes.yaml"
SEED = 61
TOP = 10


@dataclass(frozen=True)
class Query:
    text: str
    expect: str
    lang: str
    family: str


@dataclass
class Score:
    hits1: int = 0
    hits3: int = 0
    rr: float = 0.0
    n: int = 0

    def add(self, ranked: Sequence[str], expect: str) -> None:
        self.n += 1
        if expect in ranked[:1]:
            self.hits1 += 1
        if expect in ranked[:3]:
            self.hits3 += 1
        if expect in ranked[:TOP]:
            self.rr += 1.0 / (ranked.index(expect) + 1)

    def row(self) -> str:
        n = max(self.n, 1)
        return f"{self.hits1 / n:.3f} | {self.hits3 / n:.3f} | {self.rr / n:.3f}"


@dataclass
class Method:
    name: str
    rank: Callable[[Candidates, list[Hit]], list[str]]
    scores: dict[str, Score] = field(default_factory=dict)


def load_set(path: Path = EVAL) -> tuple[list[ProcessDoc], list[Query]]:
    data = yaml.safe_load(path.read_text())
    docs: list[ProcessDoc] = []
    queries: list[Query] = []
    for fam in data["families"]:
        for d in fam["docs"]:
            body = "## Steps\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(d["steps"], 1))
            front = {"id": d["id"], "title": d["title"], "task_pattern": d["pattern"], "tags": d["tags"]}
            docs.append(docmodel.from_frontmatter(front, body, default_robot="shared"))
        for q in fam["queries"]:
            queries.append(Query(q["q"], q["expect"], q.get("lang", "en"), fam["family"]))
    return docs, queries


def with_counts(docs: list[ProcessDoc], regime: str) -> list[ProcessDoc]:
    rng = random.Random(SEED)
    out = []
    for d in docs:
        s, f = (0, 0) if regime == "neutral" else (rng.randint(0, 20), rng.randint(0, 10))
        out.append(d.model_copy(update={"success_count": s, "failure_count": f, "created": "2026-06-01T00:00:00Z"}))
    return out


FUSIONS: dict[str, Fusion] = {
    "hybrid 1:1 rel-within k60, no agreement, no coverage": Fusion((1.0, 1.0), 60, agreement=False, coverage=False),
    "hybrid 1:1 rel-within k60, no coverage": Fusion((1.0, 1.0), 60, coverage=False),
    "hybrid 2:1 rel-within k60, closeness": Fusion((2.0, 1.0), 60, closeness=True),
    "hybrid 1:1 rel-within k60": Fusion((1.0, 1.0), 60, reliability="within"),
    "hybrid 1:2 rel-within k60": Fusion((1.0, 2.0), 60, reliability="within"),
    "hybrid 1:3 rel-within k60": Fusion((1.0, 3.0), 60, reliability="within"),
    "hybrid 2:1 rel-within k60": Fusion((2.0, 1.0), 60, reliability="within"),
    "hybrid 1:1 rel-within k10": Fusion((1.0, 1.0), 10, reliability="within"),
    "hybrid 1:2 rel-within k10": Fusion((1.0, 2.0), 10, reliability="within"),
    "hybrid 1:2 rel-within k20": Fusion((1.0, 2.0), 20, reliability="within"),
    "hybrid 1:1 rel-after k60": Fusion((1.0, 1.0), 60, reliability="after"),
    "hybrid 1:2 rel-after k60": Fusion((1.0, 2.0), 60, reliability="after"),
}

#: The fusions the per-family table shows beside keyword-only and vector-only.
FAMILY_METHODS = (
    "naive RRF (bm25, cosine; no reliability)",
    "hybrid 1:1 rel-within k60, no agreement, no coverage",
    "hybrid 1:1 rel-within k60, no coverage",
    "hybrid 1:1 rel-within k60",
    "hybrid 2:1 rel-within k60, closeness",
)


def methods() -> list[Method]:
    def keyword(_c: Candidates, kw: list[Hit]) -> list[str]:
        return [h.doc.id for h in kw]

    def keyword_plain(c: Candidates, _kw: list[Hit]) -> list[str]:
        return [h.doc.id for h in c.plain_keyword] if isinstance(c, _WithPlain) else []

    def vector(c: Candidates, _kw: list[Hit]) -> list[str]:
        pairs = [(r, max(v, 0.0) * c.reliability[r]) for r, v in c.vector if r in c.reliability]
        return [r for r, _ in sorted(pairs, key=lambda p: (-p[1], p[0]))]

    def naive_rrf(c: Candidates, _kw: list[Hit]) -> list[str]:
        fused = fusion.rrf([[r for r, _ in c.keyword], [r for r, _ in c.vector]])
        return [r for r, _ in fusion.ranked(fused)][:TOP]

    out = [
        Method("keyword only (bm25 × reliability), no agreement", keyword_plain),
        Method("keyword only (bm25 × agreement × reliability)", keyword),
        Method("vector only (cosine × reliability)", vector),
        Method("naive RRF (bm25, cosine; no reliability)", naive_rrf),
    ]
    for name, fuse in FUSIONS.items():
        out.append(Method(name, functools.partial(_fused, fuse=fuse)))
    return out


@dataclass(frozen=True)
class _WithPlain(Candidates):
    """The candidates with what keyword-only `store.search` (no agreement) returned."""

    plain_keyword: list[Hit] = field(default_factory=list)


def _fused(c: Candidates, _kw: list[Hit], fuse: Fusion) -> list[str]:
    return [h.ref for h in store.rank_hybrid(c, fuse, TOP)]


async def run_regime(
    docs: list[ProcessDoc], queries: list[Query], regime: str, embedder: str, data_dir: Path, ms: list[Method]
) -> dict[str, Any]:
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data_dir), "MEMORY_EMBEDDER": embedder})
    memory = Memory.open(settings)
    try:
        assert memory.embedder is not None
        if not memory.embedder.wait_ready(120):
            raise SystemExit(f"the {embedder} embedder did not load: {memory.embedder.status()}")
        ps = memory.process_store
        corpus = with_counts(docs, regime)
        await ps.restore(corpus)
        ps.backfiller.wait_idle(600)
        status = await ps.vector_status()
        assert status["missing"] == 0, status
        stronger_sibling = 0
        by_id = {d.id: d for d in corpus}
        fam_of = {q.expect: q.family for q in queries}
        default = Fusion(settings.fusion_weights, settings.fusion_k)
        disagreements = 0
        began = time.perf_counter()
        for q in queries:
            emb = ps._embed(q.text)
            assert emb is not None
            model_id, qvec = emb
            cands = ps.db.read_blocking(
                functools.partial(
                    store.hybrid_candidates, query=q.text, qvec=qvec, model_id=model_id, visible=None, cache=ps.vectors
                )
            )
            assert cands is not None
            kw = await ps.find(q.text, TOP, None)
            plain = ps.db.read_blocking(functools.partial(store.search, query=q.text, k=TOP, visible=None))
            cands = _WithPlain(
                cands.keyword, cands.vector, cands.reliability, cands.agreement, cands.keyword_bound, plain
            )
            for m in ms:
                ranked = m.rank(cands, kw)
                for key in (f"{regime}/all", f"{regime}/{q.lang}", f"{regime}/family/{q.family}"):
                    m.scores.setdefault(key, Score()).add(ranked, q.expect)
            target = by_id[q.expect]
            if any(
                d.reliability > target.reliability for d in corpus if fam_of.get(d.id) == q.family and d.id != q.expect
            ):
                stronger_sibling += 1
            served = await memory.processes.find(ADMIN, q.text, TOP)
            expected = [h.ref for h in store.rank_hybrid(cands, default, TOP)]
            if served.mode != "hybrid" or [h.doc.id for h in served.hits] != expected:
                disagreements += 1
        elapsed = time.perf_counter() - began
        return {
            "regime": regime,
            "queries": len(queries),
            "stronger_sibling": stronger_sibling,
            "served_disagreements": disagreements,
            "model_id": memory.embedder.model_id,
            "seconds": round(elapsed, 2),
        }
    finally:
        memory.close()


def report(ms: list[Method], runs: list[dict[str, Any]], args: argparse.Namespace, n_docs: int, n_q: int) -> str:
    lines = [
        f"Embedder `{runs[0]['model_id']}`, embedded text `{args.embed_text}`; {n_docs} documents, {n_q} queries "
        f"(English and Chinese); metrics over the top {TOP}.",
        "",
    ]
    for run in runs:
        regime = run["regime"]
        extra = (
            ""
            if regime == "neutral"
            else f" — {run['stronger_sibling']}/{run['queries']} queries have a hard negative more reliable "
            "than their target"
        )
        lines += [
            f"### Counts: {regime}{extra}",
            "",
            "| method | hit@1 | hit@3 | MRR | en hit@1 | zh hit@1 |",
            "|---|---|---|---|---|---|",
        ]
        for m in ms:
            a, en, zh = (m.scores[f"{regime}/{x}"] for x in ("all", "en", "zh"))
            lines.append(f"| {m.name} | {a.row()} | {en.hits1 / en.n:.3f} | {zh.hits1 / zh.n:.3f} |")
        families = sorted({key.split("/", 2)[2] for key in ms[0].scores if key.startswith(f"{regime}/family/")})
        shown = [m for m in ms if m.name in FAMILY_METHODS or m.name.startswith(("keyword", "vector"))]
        lines += ["", "hit@1 / MRR per family:", "", "| family | " + " | ".join(m.name for m in shown) + " |"]
        lines.append("|---" * (len(shown) + 1) + "|")
        for fam in families:
            cells = []
            for m in shown:
                sc = m.scores[f"{regime}/family/{fam}"]
                cells.append(f"{sc.hits1 / sc.n:.2f} / {sc.rr / sc.n:.2f}")
            lines.append(f"| {fam} ({ms[0].scores[f'{regime}/family/{fam}'].n}) | " + " | ".join(cells) + " |")
        lines += [
            "",
            f"Served path (`ProcessService.find`, default fusion) disagreed with the harness on "
            f"{run['served_disagreements']} of {run['queries']} queries.",
            "",
        ]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> str:
    docs, queries = load_set(Path(args.set))
    if args.embed_text == "full":
        store.embed_text = lambda d: ". ".join(  # type: ignore[assignment]  # an experiment switch
            p for p in (d.title, d.task_pattern, " ".join(d.tags), d.body) if p
        )
    ms = methods()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for regime in ("neutral", "random"):
            runs.append(await run_regime(docs, queries, regime, args.embedder, Path(tmp) / regime, ms))
    return report(ms, runs, args, len(docs), len(queries))


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--set", default=str(EVAL), help="the evaluation set (default eval/processes.yaml)")
    p.add_argument("--embedder", default="use", help="MEMORY_EMBEDDER to evaluate (default use)")
    p.add_argument("--embed-text", choices=["meta", "full"], default="meta", help="what a process is embedded as")
    p.add_argument("--out", help="also write the markdown report to this file")
    args = p.parse_args(argv)
    logs.configure("warning")
    text = asyncio.run(main_async(args))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
