"""`search.agreement`: which slot values a text names, and when a document contradicts a query."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.search import agreement
from robot_mcp_memory.search.segment import tokens


def slots(text: str) -> dict[str, frozenset[str]]:
    return agreement.slots(tokens(text))


def test_colour_direction_position_count_and_switch_words_name_their_slot() -> None:
    assert slots("turn the crimson block right") == {"colour": {"red"}, "side": {"right"}, "shape": {"cube"}}
    assert slots("channel up") == {"amount": {"more"}}
    assert slots("Press channel minus on the TV remote") == {"amount": {"less"}}  # "on" the preposition
    assert slots("switch the fan on") == {"power": {"on"}}
    assert slots("open the lowest drawer")["position"] == {"bottom"}
    assert slots("stack 3 blocks")["number"] == {"3"}


def test_chinese_words_name_the_same_values() -> None:
    assert slots("把红色的方块向右转") == {"colour": {"red"}, "side": {"right"}, "shape": {"cube"}}
    assert slots("换到上一个频道") == {"amount": {"less"}}
    assert slots("坐电梯去三楼") == {"number": {"3"}}
    assert slots("关掉台灯")["power"] == {"off"}


def test_two_words_that_name_one_value_are_read_together() -> None:
    # "counter-clockwise" is two tokens; its second alone says the opposite.
    assert slots("rotate the valve counter-clockwise") == {"rotation": {"ccw"}}
    assert slots("turn the lid anti clockwise") == {"rotation": {"ccw"}}
    assert slots("rotate the valve clockwise") == {"rotation": {"cw"}}
    assert slots("power up the lights") == {"power": {"on"}}  # not "up", an amount
    assert slots("power down the fan") == {"power": {"off"}}
    assert slots("shut down the printer") == {"power": {"off"}}
    assert slots("shut off the lights") == {"power": {"off"}}  # not "shut", a door
    assert slots("turn up the volume") == {"amount": {"more"}}
    assert slots("open the 3rd drawer")["number"] == {"3"}
    q = slots("give the valve a half turn counterclockwise")
    assert agreement.factor(q, slots("Rotate the valve counter-clockwise")) == 1.0
    assert agreement.factor(q, slots("Rotate the valve clockwise")) == agreement.DEMOTION


def test_what_is_handled_is_a_slot_of_its_own() -> None:
    assert slots("put the green ball in the box") == {"colour": {"green"}, "shape": {"ball"}, "containment": {"in"}}
    assert slots("pass the technician a spanner") == {"tool": {"wrench"}}
    assert slots("把扳手递给技术员") == {"tool": {"wrench"}}
    assert slots("把绿色方块放到箱子里") == {"colour": {"green"}, "shape": {"cube"}}
    q = slots("stow the green block inside the carton")
    assert agreement.factor(q, slots("Put the green ball in the box")) == agreement.DEMOTION
    assert agreement.factor(q, slots("Put the green cube in the box")) == 1.0
    tool = slots("the technician needs the wrench")
    assert agreement.factor(tool, slots("把螺丝刀递给技术员")) == agreement.DEMOTION
    assert agreement.factor(tool, slots("把扳手递给技术员")) == 1.0


def test_into_a_container_or_out_of_it_is_a_slot() -> None:
    assert slots("clear the plates into the dishwasher") == {"containment": {"in"}}
    assert slots("Unload the clean dishes from the dishwasher") == {"containment": {"out"}}
    assert slots("take out the trash") == {"containment": {"out"}}
    assert slots("take the rubbish bag out and drop it into the bin") == {"containment": {"in", "out"}}
    assert slots("charge the battery pack") == {}  # no "pack": mostly a thing
    assert slots("put the money in the safe") == {"containment": {"in"}}  # "in" after placing
    assert slots("wait in the kitchen") == {}
    # a particle makes another verb of it, and "the dropped box" is a thing
    for text in ("put on your gloves in the lab", "drop me off in the lobby", "pick up the dropped box in aisle 3"):
        assert "containment" not in slots(text), text
    q = slots("take the money out of the safe")
    assert agreement.factor(q, slots("Put the money in the safe")) == agreement.DEMOTION
    assert "containment" not in slots("drop off the load at dock B")
    assert slots("把脏盘子放进洗碗机") == {"containment": {"in"}}
    assert slots("把书拿出来") == {"containment": {"out"}}
    assert slots("从抽屉里取出钥匙") == {"containment": {"out"}}
    assert slots("取下一个零件") == {"amount": {"more"}}  # the next part: no 取下, and 零件 no zero
    # "out" alone and a loading dock name nothing: the printer out of paper wants paper put in
    assert slots("the printer is out of paper") == {}
    assert "containment" not in slots("Move a pallet from loading dock A to rack 3")
    q = slots("put the cups into the cupboard")
    assert agreement.factor(q, slots("Remove the cups from the cupboard")) == agreement.DEMOTION
    assert agreement.factor(q, slots("Load the cups into the cupboard")) == 1.0


def test_a_verb_and_its_un_verb_contradict_each_other() -> None:
    assert slots("unplug the kettle") == {"reversal:plug": {"undo"}}
    assert slots("plug the kettle in") == {"reversal:plug": {"do"}}
    assert slots("we unstacked the boxes") == {"reversal:stack": {"undo"}}
    assert slots("把前门锁上") == {"reversal:lock": {"do"}}
    assert slots("解锁前门") == {"reversal:lock": {"undo"}}
    assert slots("把插头拔出") == {"reversal:plug": {"undo"}}
    # after an article, a preposition, a form of "be" or a place's -ing word: a thing or a state
    for text in ("loading dock A", "drive from dock B", "open the locked cabinet", "the door is locked"):
        assert not any(slot.startswith("reversal") for slot in slots(text)), text
    # no -ing form: a thing as often as an act
    for text in ("go to the docking station", "a folding chair", "the mounting bracket"):
        assert slots(text) == {}, text
    assert agreement.factor(slots("open the locked cabinet"), slots("Unlock the cabinet and open it")) == 1.0
    # "every evening, lock": the comma is gone from the tokens, and "evening" is no place
    assert slots("Every evening, lock the front door") == {"reversal:lock": {"do"}}
    assert slots("to screw the bin onto the vise") == {"reversal:screw": {"do"}}  # "to": the act
    assert slots("pick the lock") == {}
    assert slots("make a stack of five boxes") == {"number": {"5"}}
    q = slots("undock and begin your rounds")
    assert agreement.factor(q, slots("Dock at the charging station")) == agreement.DEMOTION
    assert agreement.factor(q, slots("Undock from the charging station")) == 1.0
    # each verb is a slot of its own: unlocking says nothing of plugging
    assert agreement.contradictions(slots("unlock the door"), slots("plug in the kettle")) == 0


def test_an_outcome_after_a_negation_is_its_opposite() -> None:
    for text in ("the pick failed", "the pick was not successful", "it didn't succeed", "抓取没成功", "抓取不成功"):
        assert slots(text)["outcome"] == {"failure"}, text
    for text in ("the pick succeeded", "it never failed", "抓取成功"):
        assert slots(text)["outcome"] == {"success"}, text


@pytest.mark.parametrize(
    "text",
    [
        "battery sagged to 11 V", "drew 2 A", "25 °C",  # units
        "Done.\n\nA box fell", "Done.  A box fell", "- A box fell", "Note: A box fell", '"A box"', "(A box)",
        "Q&A", "R&D", "AT&T", "PN_20931_B", "I/O", "J. Smith", "A/B test",  # words and abbreviations
    ],
)  # fmt: skip
def test_no_label_is_read_from_a_unit_an_opening_article_or_an_abbreviation(text: str) -> None:
    assert "label" not in agreement.text_slots(text)
    assert "label" not in agreement.text_slots("report " + text)


def test_a_label_closing_a_line_or_a_title_case_title_is_read() -> None:
    assert agreement.text_slots("stored the pallet at dock B\nNext shift")["label"] == {"b"}
    assert agreement.text_slots("Dock B Delivery")["label"] == {"b"}
    assert ranking.agreement_text_of("Deliver parcels to dock A", "Deliver a parcel", []).count("\n") == 1
    assert agreement.text_slots(ranking.agreement_text_of("Deliver parcels to dock A", "Deliver", []))["label"] == {"a"}


def test_a_negation_reaches_a_few_words_and_other_readings_are_kept_apart() -> None:
    assert slots("why was the grasp not a success")["outcome"] == {"failure"}
    assert slots("it did not really succeed")["outcome"] == {"failure"}
    assert slots("the pick of joint T failed")["outcome"] == {"failure"}  # a T, no n't
    assert slots("不会失败")["outcome"] == {"success"}
    assert "outcome" not in slots("the fail-safe tripped")
    assert slots("turn the power down") == {"amount": {"less"}}  # the power's amount
    assert "shape" not in slots("全球定位系统")
    assert slots("抓起小球")["shape"] == {"ball"}


def test_a_capital_letter_standing_alone_is_a_label() -> None:
    t = agreement.text_slots
    assert t("Move a pallet from loading dock A to rack 3") == {"number": {"3"}, "label": {"a"}}
    assert t("把B口的托盘放到三号货架上")["label"] == {"b"}
    assert t("shift the pallet at bay B onto rack 3")["label"] == {"b"}
    # an article, a pronoun, a title's "A", a letter of an identifier: no label
    for text in (
        "A red block",
        "I lifted it. A box fell",
        "Move A Pallet To Rack 3",
        "PICK UP A CUBE",
        "error E-4471",
        "PN-20931-B",
    ):
        assert "label" not in t(text), text
    q = t("store the pallet from dock A")
    assert agreement.factor(q, t("Move a pallet from loading dock B to rack 3")) == agreement.DEMOTION
    assert agreement.factor(q, t("Move a pallet from loading dock A to rack 3")) == 1.0


def test_a_spelled_number_is_read_every_way_it_may_mean() -> None:
    assert slots("room twenty-one")["number"] == {"20", "1", "21"}
    assert slots("room three oh five")["number"] >= {"305"}


def test_a_document_naming_another_value_is_demoted_and_one_naming_none_a_little() -> None:
    q = slots("turn the red block right")
    assert agreement.factor(q, slots("Turn the red block to the left")) == agreement.DEMOTION
    assert agreement.factor(q, slots("Turn the blue block to the left")) == agreement.DEMOTION**2
    assert agreement.factor(q, slots("Turn the red block to the right")) == 1.0
    # names no colour and no side: no contradiction, but below the one that names them
    generic = agreement.factor(q, slots("Turn the block"))
    assert generic == pytest.approx(agreement.SILENCE**2)
    assert agreement.DEMOTION < generic < 1.0
    assert agreement.factor(q, slots("Move red blocks left or right")) == 1.0  # names the query's too
    assert agreement.factor(q, slots("Move blocks left or right")) == agreement.SILENCE  # no colour
    assert agreement.factor(slots("fetch the parcel"), slots("Turn the red block left")) == 1.0


_WORD_TEXT = (
    "red blue left right up down on off top bottom middle three 3 two the block turn cup 红色 左 三楼"
    " counter clockwise power shut ball wrench 3rd into out take lock unlock locked is loading dock"
)
WORDS = st.sampled_from(_WORD_TEXT.split())


def test_a_document_naming_one_reading_of_a_word_of_two_is_not_silent() -> None:
    q = slots("把厨房的冰箱关上")  # closes a door or switches something off
    assert q == {"power": {"off"}, "door": {"closed"}}
    assert agreement.factor(q, slots("Close the fridge in the kitchen")) == 1.0
    assert agreement.factor(q, slots("Switch off the fridge")) == 1.0
    assert agreement.factor(q, slots("Clean the fridge")) == agreement.SILENCE  # one group, once
    assert agreement.factor(q, slots("Open the fridge")) == agreement.DEMOTION


@settings(derandomize=True, max_examples=200)
@given(st.lists(WORDS, max_size=8), st.lists(WORDS, max_size=8))
def test_the_factor_is_a_product_of_powers_and_agreeing_in_full_is_one(query: list[str], doc: list[str]) -> None:
    q, d = agreement.slots(query), agreement.slots(doc)
    n, quiet = agreement.contradictions(q, d), agreement.silences(q, d)
    assert min(n, quiet) >= 0
    assert n + quiet <= len(q)
    assert agreement.factor(q, d) == pytest.approx(agreement.DEMOTION**n * agreement.SILENCE**quiet)
    # naming the query's values too ("and" between: a phrase or an "on" may not span the two)
    assert agreement.factor(q, agreement.slots([*query, "and", *doc])) == 1.0
    assert agreement.factor(q, q) == 1.0


@settings(derandomize=True, max_examples=300)
@given(st.text(alphabet=st.sampled_from("aAbB I.-!  dock 3rd counter clockwise 没不成功失败红左号"), max_size=40))
def test_any_text_reads_as_slots_without_error_and_labels_are_single_letters(text: str) -> None:
    found = agreement.text_slots(text)
    assert all(values for values in found.values())  # a slot present names a value
    assert all(len(x) == 1 and x.islower() and x.isascii() for x in found.get("label", ()))
    assert agreement.factor(found, found) == 1.0
