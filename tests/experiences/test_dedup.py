"""Dedup decides on numbers, outcomes and negation; text similarity only proposes."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.dedup import Candidate, facts_hash, facts_of
from robot_mcp_memory.search import segment


def same_facts(a: str, b: str, ca: dict[str, object] | None = None, cb: dict[str, object] | None = None) -> bool:
    return facts_hash(facts_of(a, ca or {})) == facts_hash(facts_of(b, cb or {}))


def test_numbers_are_compared_exactly_after_canonicalisation() -> None:
    assert dedup.numbers("force 12.50 N, angle +030, -0.0 offset, 1,5 m") == ("12.5", "30", "0", "1.5")
    assert same_facts("grip at 12.50 N", "grip at 12.5 N")
    assert not same_facts("grip at 12 N", "grip at 12.1 N")
    assert not same_facts("grip at 12 N", "grip at 15 N")


def test_numbers_count_wherever_they_stand() -> None:
    """Found by review: numbers after a letter (``M12``, ``v2``, Han text) were not numbers, and
    ``1,000`` read as ``1.000``, so these pairs were merged as duplicates."""
    assert dedup.numbers("wait 1,000 ms, then 1,234.5 mm; 1,5 m") == ("1000", "1234.5", "1.5")
    assert dedup.numbers("mode M12, firmware v2, box 10x20, arm ur5-01") == ("12", "2", "10", "20", "5", "1")
    for a, b in [
        ("Wait 1,000 ms after closing the gripper", "Wait 1 ms after closing the gripper"),
        ("Use gripper mode M12 for the wet mug", "Use gripper mode M15 for the wet mug"),
        ("Firmware v2 fixes the gripper stall", "Firmware v3 fixes the gripper stall"),
        ("Box size 10x20 fits the gripper", "Box size 10x30 fits the gripper"),
        ("夹爪力12牛顿可以稳定抓住湿杯子", "夹爪力15牛顿可以稳定抓住湿杯子"),
    ]:
        assert not same_facts(a, b), (a, b)
    assert same_facts("grip at 1,000 mN", "grip at 1000 mN")
    assert dedup.numbers("offsets:x,12,y,15") == ("12", "15")  # after a comma that follows a letter
    assert not same_facts("the gripper slipped at force,12 N", "the gripper slipped at force,15 N")
    assert not same_facts("rotate the wrist minus 5 degrees", "rotate the wrist plus 5 degrees")
    assert same_facts("rotate the wrist plus 5 degrees", "rotate the wrist 5 degrees")


def test_an_outcome_counts_however_it_is_written() -> None:
    t = "grip force on the wet mug"
    for yes, no in [(True, False), (1, 0), ("true", "false"), ("success", "failed")]:
        assert not same_facts(t, t, {"task": {"success": yes}}, {"task": {"success": no}}), (yes, no)
        assert same_facts(t, t, {"task": {"success": yes}}, {"task": {"success": True}}), yes


def test_parameters_outcome_and_source_in_the_context_decide() -> None:
    t = "grasp the mug by the handle"
    assert not same_facts(t, t, {"params": {"force": 12}}, {"params": {"force": 15}})
    assert not same_facts(t, t, {"params": {"mode": "soft"}}, {"params": {"mode": "hard"}})
    assert not same_facts(t, t, {"task": {"success": True}}, {"task": {"success": False}})
    assert not same_facts(t, t, {"env": {"sim_or_real": "real"}}, {"env": {"sim_or_real": "sim"}})
    assert not same_facts(t, t, {"spatial": {"position": [1, 2, 3]}}, {"spatial": {"position": [1, 2, 4]}})
    assert same_facts(t, t, {"params": {"force": 12}, "robot": {"id": "a"}}, {"params": {"force": 12.0}, "robot": {}})


def test_a_negated_instruction_is_not_the_positive_one() -> None:
    assert not same_facts("do not grasp the mug by the rim", "grasp the mug by the rim when it is hot")
    assert not same_facts("don't pour fast", "pour fast")
    assert not same_facts("不要抓杯沿", "抓杯沿")
    assert same_facts("never grasp the rim", "do not grasp the rim")
    assert not same_facts("der Greifer funktioniert gut", "der Greifer funktioniert nie gut")


def test_success_and_failure_words_decide_too() -> None:
    assert not same_facts("the grasp at the handle worked", "the grasp at the handle failed")


def test_judge_proposes_exact_then_lexical_then_semantic() -> None:
    text = "Grasp the mug by its handle."
    exact = [Candidate(1, "grasp the mug by its handle")]
    assert dedup.judge(text, exact, []) == dedup.Duplicate(1, "exact", 1.0)
    lexical = [Candidate(2, "grasp the mug by the handle"), Candidate(3, "open the door")]
    dup = dedup.judge(text, [], lexical)
    assert dup is not None
    assert dup.existing_id == 2
    assert dup.method == "jaccard"
    assert dedup.judge(text, [], [Candidate(3, "open the door")]) is None
    semantic = [Candidate(4, "hold the cup at its grip", similarity=0.95)]
    assert dedup.judge(text, [], [], semantic) == dedup.Duplicate(4, "cosine", 0.95)
    assert dedup.judge(text, [], [], [Candidate(5, "x", similarity=0.5)]) is None


def test_a_repeated_perception_with_new_data_hashes_differently() -> None:
    a = dedup.perception_hash("mug on the table", "visual", {"bbox": [1, 2, 3, 4]}, {})
    b = dedup.perception_hash("mug on the table", "visual", {"bbox": [1, 2, 3, 5]}, {})
    assert a != b
    assert a == dedup.perception_hash("Mug on the  table.", "visual", {"bbox": [1, 2, 3, 4]}, {})


words = st.lists(st.sampled_from([f"w{i}" for i in range(30)]), min_size=1, max_size=12, unique=True)


@given(a=words, b=words)
def test_the_pigeonhole_query_finds_every_text_similar_enough(a: list[str], b: list[str]) -> None:
    """Completeness of the lexical stage: whenever Jaccard(a, b) ≥ the threshold, b matches a's query."""
    expr = dedup.candidate_expression(a)
    assert expr is not None
    c = sqlite3.connect(":memory:")
    c.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content, context)")
    c.execute("INSERT INTO memories_fts(rowid, content, context) VALUES (1, ?, ?)", (" ".join(b), " ".join(a)))
    matched = bool(c.execute("SELECT 1 FROM memories_fts WHERE memories_fts MATCH ?", (expr,)).fetchall())
    if dedup.jaccard(segment.words(" ".join(a)), segment.words(" ".join(b))) >= dedup.JACCARD_DUPLICATE:
        assert matched
