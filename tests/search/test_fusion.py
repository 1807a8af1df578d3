from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robot_mcp_memory.search.fusion import best_possible, ranked, rrf


def test_rrf_sums_reciprocal_ranks() -> None:
    scores = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["d"] == pytest.approx(1 / 62)
    assert [r for r, _ in ranked(scores)] == ["b", "a", "d", "c"]


def test_weights_scale_each_list() -> None:
    scores = rrf([["a"], ["b"]], weights=[1.0, 2.0], k=10)
    assert scores == {"a": pytest.approx(1 / 11), "b": pytest.approx(2 / 11)}
    assert rrf([["a"], ["b"]], weights=[0.0, 1.0]) == {"b": pytest.approx(1 / 61)}


def test_a_duplicate_counts_once_at_its_best_rank() -> None:
    assert rrf([["a", "a", "b"]], k=1) == {"a": pytest.approx(1 / 2), "b": pytest.approx(1 / 4)}


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="weights"):
        rrf([["a"]], weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="k must"):
        rrf([["a"]], k=0)


def test_ties_are_broken_by_id() -> None:
    assert ranked({"b": 1.0, "a": 1.0, "c": 2.0}) == [("c", 2.0), ("a", 1.0), ("b", 1.0)]


ids = st.lists(st.sampled_from("abcdefghij"), max_size=10)


@given(st.lists(ids, min_size=1, max_size=4), st.integers(1, 100))
def test_no_fused_score_exceeds_the_best_possible(lists: list[list[str]], k: int) -> None:
    weights = [1.0 + i for i in range(len(lists))]
    scores = rrf(lists, weights, k)
    top = best_possible(weights, k)
    assert all(0 < s <= top + 1e-12 for s in scores.values())
    if all(lst and lst[0] == lists[0][0] for lst in lists):
        assert scores[lists[0][0]] == pytest.approx(top)


@given(st.lists(st.sampled_from("abcdef"), min_size=2, max_size=6, unique=True))
def test_a_single_list_keeps_its_order(order: list[str]) -> None:
    assert [r for r, _ in ranked(rrf([order]))] == order
