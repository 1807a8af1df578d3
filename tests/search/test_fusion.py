from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robot_mcp_memory.search.fusion import (
    best_possible,
    holds_every_term,
    holds_identifiers,
    identifiers,
    promoted,
    ranked,
    rrf,
    standout,
)


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


def test_a_match_far_above_the_next_stands_out() -> None:
    assert standout([("a", 9.0), ("b", 20.0), ("c", 10.0)], gap=1.25, up_to=3) == ["b"]
    # two memories naming one code stand out together; a gradual fall is no cut
    assert standout([("a", 19.0), ("b", 20.0), ("c", 10.0)], gap=1.25, up_to=3) == ["b", "a"]
    assert standout([("a", 10.0), ("b", 9.5), ("c", 9.0), ("d", 8.5), ("e", 1.0)], 1.25, 3) == []
    assert standout([("a", 3.0)], 1.25, 3) == ["a"]  # the only match
    assert standout([("a", 0.0)], 1.25, 3) == []
    assert standout([], 1.25, 3) == []


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0.0, 50.0)), max_size=8, unique_by=lambda x: x[0]))
def test_what_stands_out_is_a_head_by_relevance_above_the_gap(pairs: list[tuple[str, float]]) -> None:
    head = standout(pairs, 1.25, 3)
    assert len(head) <= 3
    rel = dict(pairs)
    rest = [r for ref, r in pairs if ref not in head]
    if head:
        assert all(rel[h] >= x * 1.25 for h in head for x in rest)


def test_holding_every_term_is_literal_and_ignores_function_words() -> None:
    text = "Push the red cube to the fixture succeeded at 0.37 m/s; lab tag qwkzjvb"
    assert holds_every_term("push red cube fixture qwkzjvb", text)
    assert holds_every_term("the QWKZJVB", text)  # folded as the index folds it
    assert not holds_every_term("push red cube fixture qwkzjvx", text)
    assert not holds_every_term("pushed red cube", text)  # no stemming
    assert holds_every_term("E-4471", "the drive stopped with E-4471 twice")
    assert not holds_every_term("E-4471", "the drive stopped with E-4470")
    assert not holds_every_term("", text)


def test_promoted_ids_rank_first_in_their_own_order() -> None:
    scores = {"a": 0.03, "b": 0.01, "c": 0.02, "d": 0.005}
    out = promoted(scores, ["d", "b", "zz"], top=0.033)
    assert [r for r, _ in ranked(out)] == ["b", "d", "a", "c"]
    assert scores["b"] == 0.01  # the input is left as it was


def test_identifiers_are_words_of_letters_and_digits_but_not_values() -> None:
    assert identifiers("what went wrong with E-4471?") == ["E-4471"]
    assert identifiers("part PN-20931-B, serial SN-7QK2118 on ur5-01") == ["PN-20931-B", "SN-7QK2118", "ur5-01"]
    assert identifiers("grip 12.5N at 3mm, version 1.2.10, lab tag qwkzjvb") == []


def test_an_identifier_is_held_whole_not_in_pieces() -> None:
    assert holds_identifiers(["E-4471"], "the drive failed; error code e-4471")
    assert not holds_identifiers(["E-4471"], "E-1001 at 4471 mm")  # its pieces, apart
    assert holds_identifiers(["E-4471", "SN-7QK2118"], "E-4471 on serial SN-7QK2118")
    assert not holds_identifiers(["E-4471", "SN-7QK2118"], "E-4471 on serial SN-7QK2119")
    assert not holds_identifiers([], "E-4471")
