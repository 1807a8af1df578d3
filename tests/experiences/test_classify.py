"""Rule-based classification: category, tags, confidence, scope."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from robot_mcp_memory.experiences import classify


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Watch out: the mug handle is slippery when wet", "gotcha"),
        ("Never grasp the mug by the rim", "constraint"),
        ("Do not exceed 20 N on glass", "constraint"),
        ("The bottle slipped and dropped", "postmortem"),
        ("It slipped because the pads were worn", "postmortem"),  # failure outranks cause
        ("The grasp held because the pads were new", "root_cause"),
        ("Decided to use the suction cup instead of the gripper", "decision"),
        ("A top grasp works best for boxes", "preference"),
        ("The mug is on the second shelf", "observation"),
        ("因为桌面湿滑，抓取需要更大的力", "root_cause"),
        ("必须先打开门再进入", "constraint"),
    ],
)
def test_the_first_matching_rule_names_the_category(text: str, category: str) -> None:
    assert classify.category_of(text, {}) == category


def test_a_failed_task_without_other_cues_is_a_postmortem() -> None:
    assert classify.category_of("approached from the left", {"task": {"success": False}}) == "postmortem"


def test_tags_come_from_the_text_and_the_context() -> None:
    c = classify.classify("grip force 12 N on the mug near the door", {"tags": ["Kitchen Lab", "kitchen lab", 3]})
    assert {"grasp", "force", "navigation"} <= set(c.tags)
    assert c.user_tags == ("kitchen_lab",)
    assert all(t in classify.DIMENSION_OF for t in c.tags)


def test_confidence_rewards_numbers_causes_and_outcomes_and_penalises_hedging() -> None:
    base = classify.confidence_of("the mug sits on the shelf", {})
    assert base == 0.8
    assert (
        classify.confidence_of("grip_force=12.5N works because it was calibrated", {"task": {"success": True}}) == 0.95
    )
    assert classify.confidence_of("maybe the mug sits on the shelf", {}) < base
    assert 0.3 <= classify.confidence_of("maybe", {}) <= 0.95


def test_scope_names_identifiers_and_files() -> None:
    scope = classify.scope_of("grip_force=12 and GraspPlanner in config/grasp.yaml; speed: 0.3")
    assert {"grip_force", "GraspPlanner", "speed"} <= set(scope["entities"])
    assert scope["files"] == ["config/grasp.yaml"]


@pytest.mark.parametrize(
    ("text", "entities", "files"),
    [
        ("the GraspPlanner drops the mug", ["GraspPlanner"], []),  # no underscore, no '=', no ':'
        ("call graspPlanner2 again", ["graspPlanner2"], []),
        ("speed: 0.3 worked", ["speed"], []),
        ("force=12 worked", ["force"], []),
        ("see maps/lab3/floor.pgm first", [], ["maps/lab3/floor.pgm"]),
        ("the planner drops the mug at 12 N", [], []),
        ("Grasp the mug. Then Place it", [], []),  # capitals, but no identifier
    ],
)
def test_scope_finds_each_kind_of_name_on_its_own(text: str, entities: list[str], files: list[str]) -> None:
    scope = classify.scope_of(text)
    assert scope.get("entities", []) == entities
    assert scope.get("files", []) == files


@given(st.text(st.sampled_from("ab1_-./ :=\n"), max_size=40))
@example("a/b.c")  # the shortest path: its "." two after the "/"
@example("speed 2 m/s, see a/b.c")
def test_scope_finds_the_files_a_scan_of_the_whole_text_finds(text: str) -> None:
    """A text is only scanned for paths when it holds a "." after a "/": no path is missed."""
    scanned = list(dict.fromkeys(m.group(1) for m in classify._PATH.finditer(text)))[:10]
    assert classify.scope_of(text).get("files", []) == scanned
