"""`search.query.Query`: a find's query parsed once, where the find starts; the ranking and the
adapters read its fields and never the text again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.search import fts, query
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import MAILROOM, doc
from tests.search.test_hybrid import DISTRACTORS, save_all


def test_a_query_holds_its_content_words_phrases_and_slots() -> None:
    q = Query.parse("Turn the red block left")
    assert q.text == "Turn the red block left"
    assert q.content == ("Turn", "red", "block", "left")
    assert q.phrases == ("Turn", "red", "block", "left", "Turnred", "redblock", "blockleft")
    assert q.slots == {"colour": frozenset({"red"}), "side": frozenset({"left"}), "shape": frozenset({"cube"})}
    assert q.searchable


def test_function_words_name_slots_but_are_not_searched() -> None:
    q = Query.parse("switch the lamp off")
    assert "off" not in q.content  # a function word to bm25
    assert q.slots["power"] == frozenset({"off"})


def test_a_number_with_its_unit_is_searched_both_ways() -> None:
    assert Query.parse("press with 12.5 N").phrases == ("press", "12.5", "N", "12.5n")


def test_a_query_of_function_words_only_searches_them() -> None:
    assert Query.parse("the of").content == ("the", "of")


@pytest.mark.parametrize("text", ["?!", "", "--- *"])
def test_a_query_without_words_is_not_searchable(text: str) -> None:
    q = Query.parse(text)
    assert (q.content, q.phrases, q.searchable) == ((), (), False)


def _counting(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> dict[str, int]:
    calls = dict.fromkeys(names, 0)
    for name in names:
        inner: Callable[..., Any] = getattr(fts, name)

        def counted(*args: Any, _inner: Callable[..., Any] = inner, _name: str = name, **kw: Any) -> Any:
            calls[_name] += 1
            return _inner(*args, **kw)

        monkeypatch.setattr(fts, name, counted)
    return calls


@pytest.mark.parametrize("embedder", ["hashing", "none"])
async def test_a_find_parses_its_query_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: str) -> None:
    """In hybrid and in keyword mode, with a slot that makes the keyword agreement pool search
    more than once: the text is split into content words and phrases once, by `Query.parse`."""
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_EMBEDDER": embedder}))
    try:
        await save_all(memory, MAILROOM, *DISTRACTORS, doc("blue-mail", "Fetch the blue package from the mailroom"))
        if embedder != "none":
            memory.process_store.backfill_blocking()
        query._parse.cache_clear()  # a text parsed before (the other mode's run) is not parsed again
        calls = _counting(monkeypatch, ("content_terms", "phrases", "terms"))
        found = await memory.processes.find(STDIO, "fetch the red package from the mailroom", k=2)
        assert found.mode == ("keyword" if embedder == "none" else "hybrid")
        assert found.hits
        # content_terms once; phrases once (of the content words); terms by those two alone.
        assert calls == {"content_terms": 1, "phrases": 1, "terms": 2}
    finally:
        memory.close()


def test_a_text_asked_again_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet repeats its instructions: the second parse of a text is the first one's."""
    query._parse.cache_clear()
    calls = _counting(monkeypatch, ("content_terms", "phrases", "terms"))
    first = Query.parse("fetch the red package from the mailroom")
    again = Query.parse("fetch the red package from the mailroom")
    assert again is first
    assert calls["content_terms"] == 1
