"""`search.relevance`: keyword and vector relevance calibrated to [0, 1]."""

from __future__ import annotations

import math

import pytest

from robot_mcp_memory.search import relevance
from robot_mcp_memory.search.fts import BM25_K1
from robot_mcp_memory.search.fusion import MIN_COSINE


def test_idf_is_fts5s_clamped_to_a_millionth_from_half_the_documents() -> None:
    assert relevance.idf(1, 100) == math.log(99.5 / 1.5)
    assert relevance.idf(50, 100) == 1e-6
    assert relevance.idf(3, 3) == 1e-6


def test_the_bound_is_the_most_any_document_can_score_so_relevance_stays_in_0_1() -> None:
    bound = relevance.keyword_bound([("mop", 2), ("hall", 2), ("floor", 2)], 3, ["mop", "hall", "floor"])
    assert bound.most == pytest.approx(3 * 1e-6 * (BM25_K1 + 1))
    assert bound.coverage == 1.0
    assert bound.relevance(bound.most * 0.8) == pytest.approx(0.8)
    assert bound.relevance(bound.most * 3) == 1.0
    assert bound.relevance(0.0) == 0.0
    assert relevance.NO_MATCH.relevance(5.0) == 0.0


def test_a_word_no_document_holds_lowers_every_relevance_by_its_share() -> None:
    """ "mop hall floor" against a store that knows only "floor": the floor document is a third
    of the query, not a perfect match."""
    bound = relevance.keyword_bound([("floor", 4), ("mop", 0), ("hall", 0)], 10, ["mop", "hall", "floor"])
    assert bound.coverage == pytest.approx(1 / 3)
    assert bound.relevance(bound.most) == pytest.approx(1 / 3)


def test_a_joined_pair_or_a_han_bigram_covers_the_words_it_is_made_of() -> None:
    joined = relevance.keyword_bound([("mailroom", 1), ("mail", 0), ("room", 0)], 10, ["mail", "room"])
    assert joined.coverage == 1.0
    bigram = relevance.keyword_bound([("研究", 1)], 10, ["研究所"])
    assert bigram.coverage == 1.0
    # A held word inside another word does not cover it ("the" is not "theatre").
    assert relevance.keyword_bound([("the", 5)], 10, ["the", "theatre"]).coverage == 0.5


def test_cosine_maps_from_the_noise_floor_to_one() -> None:
    assert relevance.vector(MIN_COSINE) == 0.0
    assert relevance.vector(0.0) == 0.0
    assert relevance.vector(1.0) == 1.0
    assert relevance.vector(0.6) == pytest.approx(0.5)


def test_hybrid_relevance_averages_with_the_fusion_weights() -> None:
    assert relevance.hybrid(0.8, 0.6) == pytest.approx(0.7)
    assert relevance.hybrid(0.8, 0.0, (1.0, 3.0)) == pytest.approx(0.2)
    assert relevance.hybrid(0.8, 0.6, (1.0, 0.0)) == pytest.approx(0.8)
    assert relevance.hybrid(0.8, 0.6, (0.0, 0.0)) == 0.0
