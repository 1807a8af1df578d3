"""The find_processes evaluation: its generated corpora keep their promises (deterministic, one
right answer per query, paraphrases without the document's words), and the harness computes what
its report says — a planted perfect method scores 1.0 everywhere, a reversed one 0. No ranking
quality is asserted: that is measured by bench/eval_search.py and written up in docs/search.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench.eval_search import (
    PRODUCTION,
    Method,
    Proposals,
    as_json,
    compare,
    dumps,
    evaluate,
    generated_set,
    methods,
    report,
)

from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes.ranking import Fusion
from robot_mcp_memory.search.segment import STOPWORDS


@pytest.fixture(scope="module")
def gen() -> Any:
    from bench.eval_search import _generator

    return _generator()


FAMILIES = {"colour", "direction", "position", "count", "object", "paraphrase"}


def test_the_core_set_has_forty_documents_in_six_families_and_both_languages(gen: Any) -> None:
    docs, queries = gen.corpus(40)
    assert len(docs) == 40
    assert len({d.id for d in docs}) == 40
    assert {d.family for d in docs} == FAMILIES
    assert {d.lang for d in docs} == {"en", "zh"}
    ids = {d.id for d in docs}
    assert all(q.expect in ids for q in queries)
    assert {(q.lang, d.lang) for q in queries for d in docs if d.id == q.expect} == {
        ("en", "en"),
        ("zh", "en"),
        ("en", "zh"),
        ("zh", "zh"),
    }
    for fam in FAMILIES:
        assert {q.lang for q in queries if q.family == fam} == {"en", "zh"}, fam


def test_larger_corpora_are_fixed_by_their_seed_and_keep_the_core_and_its_queries(gen: Any) -> None:
    core, queries = gen.corpus(40)
    big, big_queries = gen.corpus(500)
    assert (big, big_queries) == gen.corpus(500)
    assert big != gen.corpus(500, seed=7)[0]
    assert len(big) == len({d.id for d in big}) == 500
    assert big[:40] == core
    assert big_queries == queries
    assert gen.capacity() >= 5000


def test_every_templated_query_names_every_slot_of_its_target_so_distractors_cannot_answer_it(gen: Any) -> None:
    """A distractor is another tuple of some template: it differs from each target of its
    template in a slot, and every query names every slot (through one of the words a query may
    use, or the Chinese word), so the target stays the only right answer."""
    docs, queries = gen.corpus(500)
    by_id = {d.id: d for d in docs}
    tuples = [(d.template, d.values) for d in docs if d.template]
    assert len(tuples) == len(set(tuples))  # no two documents of one template and the same words
    for q in queries:
        target = by_id[q.expect]
        if not target.template:
            continue
        slots = gen.TEMPLATES[target.template].slots
        for slot, word in zip(slots, target.values, strict=True):
            value = next(v for v in gen.VOCAB[slot] if v.en == word)
            said = (value.zh,) if q.lang == "zh" else value.said
            assert any(s.lower() in q.text.lower() for s in said), (q.text, slot, said)


def test_paraphrase_queries_share_no_content_word_with_their_document(gen: Any) -> None:
    docs, queries = gen.corpus(40)
    by_id = {d.id: d for d in docs}

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS}

    paraphrases = [q for q in queries if q.family == "paraphrase"]
    assert len(paraphrases) >= 12
    for q in paraphrases:
        d = by_id[q.expect]
        assert not words(q.text) & words(" ".join([d.title, d.pattern, *d.tags])), q.text


def _planted() -> list[Method]:
    def perfect(p: Proposals) -> list[str]:
        return [p.query.expect, *(i for i in p.ids if i != p.query.expect)]

    def reversed_(p: Proposals) -> list[str]:
        return perfect(p)[::-1]

    return [Method("perfect", perfect), Method("reversed", reversed_)]


async def test_the_harness_scores_a_planted_perfect_method_one_and_a_reversed_one_zero(tmp_path: Path) -> None:
    eval_set = generated_set(40)
    eval_set = type(eval_set)(eval_set.name, eval_set.docs, eval_set.queries[::3])  # every family, fewer queries
    settings = Settings.from_env({})
    ms = [*methods(Fusion(settings.fusion_weights, settings.fusion_k)), *_planted()]
    runs = await evaluate([eval_set], ms, embedder="hashing", regimes=("neutral",), data_dir=tmp_path)

    assert [(r.set_name, r.regime, r.docs, r.queries) for r in runs] == [("40", "neutral", 40, len(eval_set.queries))]
    assert runs[0].served_disagreements == 0
    perfect, worst = ms[-2], ms[-1]
    families = {q.family for q in eval_set.queries}
    assert families == FAMILIES
    for m in ms:
        keys = {k for k in m.scores if k[:2] == ("40", "neutral")}
        assert {k[2] for k in keys} == {"all", *FAMILIES}
        assert {k[3] for k in keys} == {"all", "en→en", "zh→en", "en→zh", "zh→zh"}
        assert m.scores[("40", "neutral", "all", "all")].n == len(eval_set.queries)
    for s in perfect.scores.values():
        assert (s.hit1, s.hit3, s.mrr) == (1.0, 1.0, 1.0)
    for s in worst.scores.values():  # the target last of 40, outside the top 10
        assert (s.hit1, s.hit3, s.mrr) == (0.0, 0.0, 0.0)
    production = next(m for m in ms if m.name == PRODUCTION).scores[("40", "neutral", "all", "all")]
    assert 0.0 < production.hit1 <= production.hit3 <= 1.0
    assert production.hit1 <= production.mrr <= production.hit3

    text = report(ms, runs, "python bench/eval_search.py")
    for fam in FAMILIES:
        assert re.search(rf"^\| {fam} \(\d+\) \|", text, re.M), fam
    assert "| perfect | 1.000 | 1.000 | 1.000 |" in text
    assert "| reversed | 0.000 | 0.000 | 0.000 |" in text
    assert "| **all** (" in text  # the summary table

    saved = json.loads(dumps(as_json(ms, runs)))
    assert saved == as_json(ms, runs)
    assert compare(ms, saved).endswith("0 cells with a lower hit@1 than the baseline.")
    for row in saved["scores"]:
        if row["method"] == "reversed":
            row["hit1"] = 1.0
    assert compare(ms, saved).endswith(f"{len(FAMILIES) + 1} cells with a lower hit@1 than the baseline.")
