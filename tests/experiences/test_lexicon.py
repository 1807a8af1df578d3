"""The cue index: words remembered once looked up, forgotten when the index changes."""

from __future__ import annotations

import pytest

from robot_mcp_memory.experiences import lexicon
from robot_mcp_memory.experiences.lexicon import Analysis


def test_a_cue_declared_after_a_word_was_looked_up_is_found_in_it() -> None:
    before = Analysis("the zorbleflux jammed")  # "zorbleflux" looked up, remembered as hitting nothing
    late = lexicon.cue("zorble-test", prefixes="zorbl")
    assert not before.hit(late)
    assert Analysis("the zorbleflux jammed").hit(late)


def test_remembered_words_give_the_hits_a_fresh_lookup_gives() -> None:
    text = "do not grasp the slippery mug faster than 0.3 m/s because it failed and maybe slipped"
    first = Analysis(text).hits
    lexicon._INDEX.known.clear()
    assert Analysis(text).hits == first
    assert {"constraint", "failure"} <= first  # cues a learn's category and tags read


def test_the_memory_of_words_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexicon, "MAX_KNOWN_WORDS", 3)
    Analysis("alpha bravo charlie delta echo foxtrot")
    assert len(lexicon._INDEX.known) <= 3
