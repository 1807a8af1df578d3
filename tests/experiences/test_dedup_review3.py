"""Regression tests for the third dedup review (F1-F4, F6, F8): what the lexical key and the
cosine stage's substitution veto merged though the texts say different things, what they kept
apart though they say the same, and the key lookup's index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.dedup import Candidate
from robot_mcp_memory.tenancy.principal import STDIO

#: F2: where a number stands is part of what the text says.
NUMBER_PLACES = [
    ("Pick box 3 from the shelf", "Pick the box from shelf 3"),
    ("Give 2 pills to the patient", "Give the pills to patient 2"),
    ("Put 4 bolts in the bin", "Put the bolts in bin 4"),
    ("Give two pills to the patient", "Give the pills to patient two"),
    ("Half the boxes are wet", "The boxes are half wet"),
    ("箱子3在架子上", "箱子在架子3上"),
]
#: F3: a symbol can be all that tells two experiences apart.
SYMBOLS = [
    ("Stop the arm if the temperature > 50 C", "Stop the arm if the temperature < 50 C"),
    ("Stop when force >= 12 N", "Stop when force <= 12 N"),
    ("Alarm if x != 0", "Alarm if x = 0"),
    ("Joint offset + 5 deg", "Joint offset - 5 deg"),
    ("Service is due 10/30", "Service is due 10:30"),
    ("Grasp the mug by the handle ✅", "Grasp the mug by the handle ❌"),
    ("Gripper 👍", "Gripper 👎"),
    ("Drawer 🔒", "Drawer 🔓"),
    ("Move the tray →", "Move the tray ←"),
]
#: F3/F4: an exponent is part of its number (the facts tell these apart).
EXPONENTS = [
    ("Set the tolerance to 1e-4", "Set the tolerance to 1e+4"),
    ("Set the learning rate to 1e-3", "Set the learning rate to 1e3"),
    ("Set the tolerance to 2.5e-3 m", "Set the tolerance to 2.5e3 m"),
]
#: F4: a letter before or after the digits, an exponent, a dash against a digit.
GLUED = [
    ("Deliver the parcel to room B12", "Deliver the parcel to room 12B"),
    ("Park the cart at bay C4", "Park the cart at bay 4C"),
    ("Put the crate on pallet P7", "Put the crate on pallet 7P"),
    ("Move the arm to x-5", "Move the arm to x5"),
    ("Target pose z-0.2", "Target pose z0.2"),
]
#: F1: one word that begins like another is no form of it; the USE model scores these 0.93-0.99.
PREFIX_VARIANTS = [
    (
        "Use the wired controller to drive the robot in the lab",
        "Use the wireless controller to drive the robot in the lab",
    ),
    ("Put the clean plates in the cup after washing", "Put the clean plates in the cupboard after washing"),
    ("Load the boxes onto the car parked in the garage", "Load the boxes onto the cart parked in the garage"),
    ("Pick up the pen from the desk", "Pick up the pencil from the desk"),
    ("Check the left hand for damage", "Check the left handle for damage"),
    ("Use the small gripper for the glass vials", "Use the smallest gripper for the glass vials"),
    ("The battery is charged", "The battery is charging"),
    ("Charge the battery before the next mission", "Charged the battery before the next mission"),
    ("Lock the storage room door before leaving", "Locked the storage room door before leaving"),
    ("Wipe the casing of the robot arm", "Wipe the case of the robot arm"),
]
#: F8: contractions and "&" are the same words.
SAME_WORDS = [
    ("Do not grasp the mug by the rim", "Don't grasp the mug by the rim"),
    ("The gripper cannot hold wet glasses", "The gripper can't hold wet glasses"),
    ("The gripper can not hold wet glasses", "The gripper can\u2019t hold wet glasses"),
    ("The door isn't locked at night", "The door is not locked at night"),
    ("It's safer to approach the shelf slowly", "It is safer to approach the shelf slowly"),
    ("We're done with the shelf", "We are done with the shelf"),
    ("Pick and place the box on the shelf", "Pick & place the box on the shelf"),
    ("Use the wi-fi network to upload logs", "Use the wifi network to upload logs"),
]


@pytest.mark.parametrize(("a", "b"), NUMBER_PLACES + SYMBOLS + GLUED + EXPONENTS)
async def test_learn_keeps_texts_whose_numbers_or_symbols_differ_in_place_or_kind(
    memory: Memory, a: str, b: str
) -> None:
    first = await memory.experiences.learn(STDIO, a)
    second = await memory.experiences.learn(STDIO, b)
    assert (first.status, second.status) == ("created", "created")


@pytest.mark.parametrize(("a", "b"), NUMBER_PLACES + SYMBOLS + GLUED + PREFIX_VARIANTS)
def test_a_close_vector_does_not_merge_a_word_or_symbol_or_number_place_changed(a: str, b: str) -> None:
    assert dedup.substituted(dedup.content_sequence(a), dedup.content_sequence(b))
    assert dedup.judge(a, [], [], [Candidate(1, b, similarity=0.99)]) is None


@pytest.mark.parametrize(("a", "b"), SAME_WORDS)
async def test_a_contraction_or_ampersand_is_a_lexical_duplicate(memory: Memory, a: str, b: str) -> None:
    first = await memory.experiences.learn(STDIO, a)
    second = await memory.experiences.learn(STDIO, b)
    assert (first.status, second.status, second.method) == ("created", "duplicate", "jaccard")


def test_units_still_key_the_same_where_the_number_stands() -> None:
    assert dedup.content_sequence("grip at 12 N") == dedup.content_sequence("grip at 12N") == ("grip", "at", "#")
    assert dedup.content_sequence("grip at twelve newtons") == ("grip", "at", "#")
    assert dedup.numbers("to 1e-3") == ("1e-3",)
    assert dedup.numbers("to 1E+03") == ("1e3",)
    assert dedup.numbers("calibrate ur5e-01") == ("5", "1")  # a name, not 5·10⁻¹


def test_ordinary_punctuation_and_hyphens_inside_words_are_no_words() -> None:
    assert dedup.content_sequence("- Grasp the mug, gently!") == dedup.content_sequence("Grasp the mug gently")
    assert dedup.content_sequence("a pick-up point") == ("pick", "up", "point")


def test_the_duplicate_lookup_is_bounded_by_robot_collection_and_facts(tmp_path: Path) -> None:
    """F6: one template text learned per episode (its numbers in the context) gives every row one
    lexical key; the lookup must not walk the rows of other facts, robots or collections."""
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        mem.learn("the episode finished", {"task": {"reward": 1}})
    conn = sqlite3.connect(tmp_path / "index.db")
    try:
        plan = " ".join(
            str(r[3])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT m.id, m.content FROM memories m INDEXED BY idx_memories_hash "
                "WHERE m.content_hash = ? AND m.robot = ? AND m.collection = ? AND m.type = ? "
                "AND m.status = 'active' AND m.facts_hash = ? ORDER BY m.id LIMIT ?",
                ["k", "r", "c", "fact", "f", 20],
            )
        )
    finally:
        conn.close()
    assert "facts_hash=? AND robot=? AND collection=? AND content_hash=?" in plan, plan
