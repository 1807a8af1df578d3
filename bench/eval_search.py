"""Evaluate find_processes ranking: hit@1, hit@3 and MRR per method, family, language and size.

    python bench/eval_search.py                       # quick: the 40-document set
    python bench/eval_search.py --sizes 40,500,5000 --processes-yaml --grid --json eval/last.json
    python bench/eval_search.py --sizes 40 --compare eval/baseline.json   # hit@1 deltas per family

Corpora: the hard-negative sets of `eval/generate.py` at each `--sizes` (40 core documents in six
families — colour, direction, position, count, object, paraphrase — plus seeded distractors from
the same templates; English and Chinese queries against English and Chinese documents), and with
`--processes-yaml` the hand-written `eval/processes.yaml` (57 documents, 144 queries).

For every query it collects, once, what each method proposes through the production code
(`ranking.hybrid_candidates`: `store.keyword_candidates` and the vector index; `ProcessStore.find`
for keyword-only), then ranks those candidates several ways: keyword-only (the production keyword
path, ``-bm25 × reliability``), vector-only (``cosine × reliability``), the production hybrid
(`ranking.rank_hybrid` with the default `Fusion`), naive RRF of the bare bm25 and cosine lists (no
reliability), and with `--grid` hybrid under other fusion settings. It runs with neutral counts
(every process 0/0, so reliability cannot help or hurt) and with seeded random counts, where
many queries have a hard negative more reliable than their target. It checks that the served
path (`ProcessService.find`) agrees with the harness for the default setting.

The sets are ours (eval/processes.yaml, eval/generate.py); no public robot-instruction dataset
is used.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import json
import random
import sqlite3
import sys
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
from robot_mcp_memory.processes import docmodel, ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Hit
from robot_mcp_memory.processes.ranking import Candidates, Fusion
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.processes.sqlite import store
from robot_mcp_memory.search import fusion
from robot_mcp_memory.search.query import Query as SearchQuery
from robot_mcp_memory.search.sqlite.vectorstore import VectorCache
from robot_mcp_memory.search.vectors import Vector
from robot_mcp_memory.tenancy.principal import ADMIN

EVAL_DIR = Path(__file__).resolve().parents[1] / "eval"
EVAL = EVAL_DIR / "processes.yaml"
DEV = EVAL_DIR / "processes_dev.yaml"
SEED = 61
TOP = 10
REGIMES = ("neutral", "random")


def _generator() -> Any:
    """eval/generate.py (a script beside its data, not a package), loaded once."""
    if "eval_generate" not in sys.modules:
        spec = importlib.util.spec_from_file_location("eval_generate", EVAL_DIR / "generate.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["eval_generate"] = module
        spec.loader.exec_module(module)
    return sys.modules["eval_generate"]


@dataclass(frozen=True)
class Query:
    text: str
    expect: str
    lang: str
    family: str
    doc_lang: str = "en"

    @property
    def langs(self) -> str:
        """Query language → document language, e.g. ``zh→en``."""
        return f"{self.lang}→{self.doc_lang}"


@dataclass(frozen=True)
class EvalSet:
    name: str  # "40", "500", "5000" or "processes.yaml"
    docs: list[ProcessDoc]
    queries: list[Query]


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
            self.rr += 1.0 / (list(ranked).index(expect) + 1)

    @property
    def hit1(self) -> float:
        return self.hits1 / self.n if self.n else 0.0

    @property
    def hit3(self) -> float:
        return self.hits3 / self.n if self.n else 0.0

    @property
    def mrr(self) -> float:
        return self.rr / self.n if self.n else 0.0

    def row(self) -> str:
        return f"{self.hit1:.3f} | {self.hit3:.3f} | {self.mrr:.3f}"


@dataclass(frozen=True)
class Proposals:
    """What a method may rank for one query: the production candidates, the production
    keyword-only result, the query itself and every document id of the corpus."""

    candidates: Candidates
    keyword: list[Hit]
    query: Query
    ids: Sequence[str]


@dataclass
class Method:
    name: str
    rank: Callable[[Proposals], list[str]]
    #: (set, regime, family or "all", language pair or "all") → score
    scores: dict[tuple[str, str, str, str], Score] = field(default_factory=dict)

    def add(self, set_name: str, regime: str, q: Query, ranked: Sequence[str]) -> None:
        for fam in ("all", q.family):
            for langs in ("all", q.langs):
                self.scores.setdefault((set_name, regime, fam, langs), Score()).add(ranked, q.expect)


def _steps_doc(d_id: str, title: str, pattern: str, tags: Sequence[str], steps: Sequence[str]) -> ProcessDoc:
    body = "## Steps\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    front = {"id": d_id, "title": title, "task_pattern": pattern, "tags": list(tags)}
    return docmodel.from_frontmatter(front, body, default_robot="shared")


def load_set(path: Path = EVAL) -> tuple[list[ProcessDoc], list[Query]]:
    data = yaml.safe_load(path.read_text())
    docs: list[ProcessDoc] = []
    queries: list[Query] = []
    for fam in data["families"]:
        for d in fam["docs"]:
            docs.append(_steps_doc(d["id"], d["title"], d["pattern"], d["tags"], d["steps"]))
        for q in fam["queries"]:
            queries.append(Query(q["q"], q["expect"], q.get("lang", "en"), fam["family"]))
    return docs, queries


def generated_set(size: int) -> EvalSet:
    """The hard-negative corpus of `size` documents from eval/generate.py."""
    gen_docs, gen_queries = _generator().corpus(size)
    lang_of = {d.id: d.lang for d in gen_docs}
    docs = [_steps_doc(d.id, d.title, d.pattern, d.tags, d.steps) for d in gen_docs]
    queries = [Query(q.text, q.expect, q.lang, q.family, lang_of[q.expect]) for q in gen_queries]
    return EvalSet(str(size), docs, queries)


def with_counts(docs: list[ProcessDoc], regime: str) -> list[ProcessDoc]:
    rng = random.Random(SEED)
    out = []
    for d in docs:
        s, f = (0, 0) if regime == "neutral" else (rng.randint(0, 20), rng.randint(0, 10))
        out.append(d.model_copy(update={"success_count": s, "failure_count": f, "created": "2026-06-01T00:00:00Z"}))
    return out


PRODUCTION = "hybrid (production default)"

GRID: dict[str, Fusion] = {
    "hybrid calibrated, no agreement": Fusion((1.0, 1.0), 60, agreement=False),
    "hybrid 1:1 rel-within k60, no agreement, no coverage": Fusion(
        (1.0, 1.0), 60, agreement=False, coverage=False, order="rrf"
    ),
    "hybrid 1:1 rel-within k60, coverage and agreement": Fusion((1.0, 1.0), 60, order="rrf"),
    "hybrid 2:1 rel-within k60, closeness": Fusion((2.0, 1.0), 60, closeness=True, order="rrf"),
    "hybrid calibrated 1:1.5, evidence, keyword relevance not corroborated by the vectors": Fusion(
        (1.0, 1.5), 60, corroborate=False
    ),
    "hybrid calibrated 1:1.5, evidence, no cross-script guard": Fusion((1.0, 1.5), 60, cross_script=0.0),
    "hybrid calibrated 1:1.5, evidence, cross-script guard below 0.5": Fusion((1.0, 1.5), 60, cross_script=0.5),
    "hybrid calibrated 1:1.5, evidence, cross-script guard below 0.7": Fusion((1.0, 1.5), 60, cross_script=0.7),
    "hybrid calibrated 1:1.5, evidence, cross-script guard below 0.9": Fusion((1.0, 1.5), 60, cross_script=0.9),
    "hybrid calibrated 1:1 (experience recall's weights)": Fusion((1.0, 1.0), 60),
    "hybrid calibrated 1:1, weights not scaled by evidence": Fusion((1.0, 1.0), 60, evidence=False),
    "hybrid 1:2 calibrated × reliability": Fusion((1.0, 2.0), 60, order="score"),
    "hybrid calibrated 1:2, weights not scaled by evidence": Fusion((1.0, 2.0), 60, evidence=False),
    "hybrid calibrated 1:1.5, weights not scaled by evidence": Fusion((1.0, 1.5), 60, evidence=False),
    "hybrid 1:2 rel-within k60": Fusion((1.0, 2.0), 60, reliability="within", order="rrf"),
    "hybrid 1:3 rel-within k60": Fusion((1.0, 3.0), 60, reliability="within", order="rrf"),
    "hybrid 2:1 rel-within k60": Fusion((2.0, 1.0), 60, reliability="within", order="rrf"),
    "hybrid 1:1 rel-within k10": Fusion((1.0, 1.0), 10, reliability="within", order="rrf"),
    "hybrid 1:2 rel-within k10": Fusion((1.0, 2.0), 10, reliability="within", order="rrf"),
    "hybrid 1:2 rel-within k20": Fusion((1.0, 2.0), 20, reliability="within", order="rrf"),
    "hybrid 1:1 rel-after k60": Fusion((1.0, 1.0), 60, reliability="after", order="rrf"),
    "hybrid 1:2 rel-after k60": Fusion((1.0, 2.0), 60, reliability="after", order="rrf"),
}


def methods(default: Fusion, *, grid: bool = False) -> list[Method]:
    """Keyword only, vector only, the production hybrid and naive RRF; with `grid` the other
    fusion settings too."""

    def keyword(p: Proposals) -> list[str]:
        return [h.doc.id for h in p.keyword]

    def vector(p: Proposals) -> list[str]:
        rel = p.candidates.reliability
        pairs = [(r, max(v, 0.0) * rel[r]) for r, v in p.candidates.vector if r in rel]
        return [r for r, _ in sorted(pairs, key=lambda x: (-x[1], x[0]))]

    def naive_rrf(p: Proposals) -> list[str]:
        lists = [[r for r, _ in p.candidates.keyword], [r for r, _ in p.candidates.vector]]
        return [r for r, _ in fusion.ranked(fusion.rrf(lists, (1.0, 1.0), fusion.DEFAULT_K))][:TOP]

    out = [
        Method("keyword only (bm25 × reliability)", keyword),
        Method("vector only (cosine × reliability)", vector),
        Method(PRODUCTION, functools.partial(_fused, fuse=default)),
        Method("naive RRF (bm25, cosine; k60)", naive_rrf),
    ]
    if grid:
        out += [Method(name, functools.partial(_fused, fuse=fuse)) for name, fuse in GRID.items()]
    return out


def _candidates(
    conn: sqlite3.Connection, query: SearchQuery, qvec: Vector, model_id: str, cache: VectorCache
) -> Candidates | None:
    """What the production hybrid ranks for `query` (`ranking.hybrid_candidates`), unscoped."""
    return ranking.hybrid_candidates(keyword_sql.Snapshot(conn, cache), query, qvec, model_id, None)


def _fused(p: Proposals, fuse: Fusion) -> list[str]:
    return [h.ref for h in ranking.rank_hybrid(p.candidates, fuse, TOP)]


@dataclass
class Run:
    set_name: str
    regime: str
    docs: int
    queries: int
    stronger_sibling: int
    served_disagreements: int
    model_id: str
    seconds: float


async def run_regime(eval_set: EvalSet, regime: str, embedder: str, data_dir: Path, ms: list[Method]) -> Run:
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data_dir), "MEMORY_EMBEDDER": embedder})
    memory = Memory.open(settings)
    try:
        assert memory.embedder is not None
        if not memory.embedder.wait_ready(120):
            raise SystemExit(f"the {embedder} embedder did not load: {memory.embedder.status()}")
        ps = memory.process_store
        corpus = with_counts(eval_set.docs, regime)
        await ps.restore(corpus)
        ps.backfiller.wait_idle(600)
        status = await ps.vector_status()
        assert status["missing"] == 0, status
        by_id = {d.id: d for d in corpus}
        ids = [d.id for d in corpus]
        siblings: dict[str, list[str]] = {}
        for q in eval_set.queries:
            siblings.setdefault(q.family, [])
            if q.expect not in siblings[q.family]:
                siblings[q.family].append(q.expect)
        default = Fusion(settings.process_fusion_weights, settings.fusion_k)
        stronger_sibling = disagreements = 0
        began = time.perf_counter()
        for q in eval_set.queries:
            emb = ps._embed(q.text)
            assert emb is not None
            model_id, qvec = emb
            parsed = SearchQuery.parse(q.text)
            snapshot = functools.partial(_candidates, query=parsed, qvec=qvec, model_id=model_id, cache=ps.vectors)
            cands = ps.db.read_blocking(snapshot)
            assert cands is not None
            proposals = Proposals(cands, await ps.find(parsed, TOP, None), q, ids)
            for m in ms:
                m.add(eval_set.name, regime, q, m.rank(proposals))
            target = by_id[q.expect]
            if any(by_id[s].reliability > target.reliability for s in siblings[q.family] if s != q.expect):
                stronger_sibling += 1
            served = await memory.processes.find(ADMIN, q.text, TOP)
            expected = [h.ref for h in ranking.rank_hybrid(cands, default, TOP)]
            if served.mode != "hybrid" or [h.doc.id for h in served.hits] != expected:
                disagreements += 1
        return Run(
            eval_set.name,
            regime,
            len(corpus),
            len(eval_set.queries),
            stronger_sibling,
            disagreements,
            memory.embedder.model_id or "?",
            round(time.perf_counter() - began, 2),
        )
    finally:
        memory.close()


async def evaluate(
    sets: Sequence[EvalSet], ms: list[Method], *, embedder: str, regimes: Sequence[str], data_dir: Path
) -> list[Run]:
    """Every method on every set under every regime; the scores land in each `Method`."""
    runs = []
    for s in sets:
        for regime in regimes:
            runs.append(await run_regime(s, regime, embedder, data_dir / f"{s.name}-{regime}", ms))
    return runs


def _families(ms: list[Method], set_name: str, regime: str) -> list[str]:
    fams = {k[2] for m in ms for k in m.scores if k[:2] == (set_name, regime) and k[2] != "all"}
    return sorted(fams)


def _langs(ms: list[Method], set_name: str, regime: str) -> list[str]:
    langs = {k[3] for m in ms for k in m.scores if k[:2] == (set_name, regime) and k[3] != "all"}
    return sorted(langs)


def report(ms: list[Method], runs: list[Run], command: str) -> str:
    """Markdown: per set and regime, each method overall (hit@1/hit@3/MRR) and hit@1 per
    language pair, then hit@1 / MRR per family and method."""
    lines = [f"`{command}` — embedder `{runs[0].model_id}`; metrics over the top {TOP}.", "", summary(ms, runs)]
    for run in runs:
        key = (run.set_name, run.regime)
        langs = _langs(ms, *key)
        extra = (
            ""
            if run.regime == "neutral"
            else f"; {run.stronger_sibling}/{run.queries} queries have a same-family document more reliable "
            "than their target"
        )
        lines += [
            f"### {run.set_name} documents ({run.docs}), {run.queries} queries, counts {run.regime}{extra}",
            "",
            "| method | hit@1 | hit@3 | MRR | " + " | ".join(f"{x} hit@1" for x in langs) + " |",
            "|---|---|---|---|" + "---|" * len(langs),
        ]
        for m in ms:
            a = m.scores[(*key, "all", "all")]
            per = " | ".join(f"{m.scores[(*key, 'all', x)].hit1:.3f}" for x in langs)
            lines.append(f"| {m.name} | {a.row()} | {per} |")
        fams = _families(ms, *key)
        lines += [
            "",
            "hit@1 / MRR per family:",
            "",
            "| family (queries) | " + " | ".join(m.name for m in ms) + " |",
            "|---|" + "---|" * len(ms),
        ]
        for fam in fams:
            n = ms[0].scores[(*key, fam, "all")].n
            cells = " | ".join(
                f"{m.scores[(*key, fam, 'all')].hit1:.3f} / {m.scores[(*key, fam, 'all')].mrr:.3f}" for m in ms
            )
            lines.append(f"| {fam} ({n}) | {cells} |")
        lines += [
            "",
            f"Served path (`ProcessService.find`, default fusion) disagreed with the harness on "
            f"{run.served_disagreements} of {run.queries} queries ({run.seconds} s).",
            "",
        ]
    return "\n".join(lines)


SUMMARY = (
    "keyword only (bm25 × reliability)",
    "vector only (cosine × reliability)",
    PRODUCTION,
    "naive RRF (bm25, cosine; k60)",
)


def summary(ms: list[Method], runs: list[Run]) -> str:
    """hit@1 per family and language pair (rows) and generated set (columns), one table per
    regime, each cell keyword / vector / production hybrid / naive RRF (the table in
    docs/search.md). Naive RRF ignores reliability: shown with neutral counts only."""
    by_name = {m.name: m for m in ms}
    shown = [by_name[n] for n in SUMMARY if n in by_name]
    sets = list(dict.fromkeys(r.set_name for r in runs if r.set_name.isdigit()))
    lines: list[str] = []
    for regime in dict.fromkeys(r.regime for r in runs):
        cols = shown if regime == "neutral" else [m for m in shown if not m.name.startswith("naive")]
        if not sets or not cols:
            continue
        rows = [(f, "all") for f in _families(cols, sets[0], regime)]
        rows += [("all", x) for x in _langs(cols, sets[0], regime)] + [("all", "all")]
        lines += [
            f"hit@1, counts {regime} — " + " / ".join(m.name.split(" (")[0] for m in cols),
            "",
            "| family (queries) | " + " | ".join(f"{x} docs" for x in sets) + " |",
            "|---|" + "---|" * len(sets),
        ]
        for fam, langs in rows:
            n = cols[0].scores[(sets[0], regime, fam, langs)].n
            name = "**all**" if (fam, langs) == ("all", "all") else (fam if langs == "all" else langs)
            cells = [" / ".join(f"{m.scores[(x, regime, fam, langs)].hit1:.2f}" for m in cols) for x in sets]
            lines.append(f"| {name} ({n}) | " + " | ".join(cells) + " |")
        mrr = [" / ".join(f"{m.scores[(x, regime, 'all', 'all')].mrr:.2f}" for m in cols) for x in sets]
        lines += ["| MRR, all | " + " | ".join(mrr) + " |", ""]
    return "\n".join(lines)


def as_json(ms: list[Method], runs: list[Run]) -> dict[str, Any]:
    """The scores per family (all languages) and per language pair (all families), for
    `--compare` on a later run."""
    return {
        "runs": [vars(r) for r in runs],
        "scores": [
            {
                "method": m.name,
                "set": k[0],
                "regime": k[1],
                "family": k[2],
                "langs": k[3],
                "n": s.n,
                "hit1": s.hit1,
                "hit3": s.hit3,
                "mrr": s.mrr,
            }
            for m in ms
            for k, s in sorted(m.scores.items())
            if "all" in k[2:]
        ],
    }


def compare(ms: list[Method], baseline: dict[str, Any]) -> str:
    """hit@1 and MRR now against a saved run, per set, regime, method and family (all
    languages), for every cell both runs have: a family that got worse shows a negative delta."""
    before = {(r["method"], r["set"], r["regime"], r["family"]): r for r in baseline["scores"] if r["langs"] == "all"}
    lines = [
        "| set | counts | method | family | hit@1 before → now | MRR before → now |",
        "|---|---|---|---|---|---|",
    ]
    worse = 0
    for m in ms:
        for (set_name, regime, fam, langs), s in sorted(m.scores.items()):
            b = before.get((m.name, set_name, regime, fam))
            if langs != "all" or b is None:
                continue
            d1 = s.hit1 - b["hit1"]
            mark = " ▼" if d1 < -1e-9 else (" ▲" if d1 > 1e-9 else "")
            worse += d1 < -1e-9
            lines.append(
                f"| {set_name} | {regime} | {m.name} | {fam} | {b['hit1']:.3f} → {s.hit1:.3f}{mark} | "
                f"{b['mrr']:.3f} → {s.mrr:.3f} |"
            )
    lines += ["", f"{worse} cells with a lower hit@1 than the baseline."]
    return "\n".join(lines)


def dumps(saved: dict[str, Any]) -> str:
    """JSON with one score per line, so a saved baseline diffs line by line."""
    rows = ",\n".join(" " + json.dumps(r, ensure_ascii=False) for r in saved["scores"])
    return f'{{"runs": {json.dumps(saved["runs"], ensure_ascii=False)},\n"scores": [\n{rows}\n]}}\n'


async def main_async(args: argparse.Namespace, command: str) -> tuple[str, list[Method], list[Run]]:
    if args.embed_text == "full":
        store.embed_text = lambda d: ". ".join(  # type: ignore[assignment]  # an experiment switch
            p for p in (d.title, d.task_pattern, " ".join(d.tags), d.body) if p
        )
    sets = [generated_set(int(x)) for x in args.sizes.split(",") if x.strip()]
    if args.processes_yaml:
        sets.append(EvalSet("processes.yaml", *load_set()))
    if args.dev_yaml:
        sets.append(EvalSet("processes_dev.yaml", *load_set(DEV)))
    defaults = Settings.from_env({})
    ms = methods(Fusion(defaults.process_fusion_weights, defaults.fusion_k), grid=args.grid)
    with tempfile.TemporaryDirectory() as tmp:
        runs = await evaluate(sets, ms, embedder=args.embedder, regimes=args.regimes.split(","), data_dir=Path(tmp))
    return report(ms, runs, command), ms, runs


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", default="40", help="generated corpus sizes, comma-separated (default 40: quick)")
    p.add_argument("--quick", action="store_true", help="the default: --sizes 40 (overrides --sizes)")
    p.add_argument("--processes-yaml", action="store_true", help="also evaluate the hand-written eval/processes.yaml")
    p.add_argument(
        "--dev-yaml", action="store_true", help="also evaluate eval/processes_dev.yaml (issue 28's failure families)"
    )
    p.add_argument("--grid", action="store_true", help="also rank by the other fusion settings (weights, k)")
    p.add_argument("--regimes", default=",".join(REGIMES), help="count regimes: neutral,random (default both)")
    p.add_argument("--embedder", default="use", help="MEMORY_EMBEDDER to evaluate (default use)")
    p.add_argument("--embed-text", choices=["meta", "full"], default="meta", help="what a process is embedded as")
    p.add_argument("--out", help="also write the markdown report to this file")
    p.add_argument("--json", help="also write every score as JSON to this file (for --compare)")
    p.add_argument("--compare", help="a --json file of an earlier run: print hit@1 and MRR before → now")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.quick:
        args.sizes = "40"
    for regime in args.regimes.split(","):
        if regime not in REGIMES:
            raise SystemExit(f"--regimes takes {', '.join(REGIMES)}, got {regime!r}")
    logs.configure("warning")
    command = "python bench/eval_search.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text, ms, runs = asyncio.run(main_async(args, command.strip()))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(dumps(as_json(ms, runs)))
    if args.compare:
        print()
        print(compare(ms, json.loads(Path(args.compare).read_text())))


if __name__ == "__main__":
    main()
