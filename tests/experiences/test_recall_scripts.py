"""Recall through the public API when the query is written differently from the memory: a
kanji-only word against Japanese text mixing kanji and kana, and decomposed Unicode (NFD) against
composed text, either way round."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.experiences.sqlite import index_repo
from robot_mcp_memory.search import segment
from tests.experiences.conftest import stored_id

FRENCH = "la tasse mouillée a glissé près de l'évier"
KOREAN = "로봇이 젖은 컵을 잡다가 미끄러졌다"
JAPANESE = "研究所でロボットがカップを落とした"


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def contents(mem: RobotMemory, query: str) -> list[str]:
    return [h["content"] for h in mem.recall(query, min_confidence=0)]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[RobotMemory]:
    with RobotMemory(tmp_path, robot_id="r1") as m:
        yield m


def test_a_kanji_only_word_recalls_japanese_memories(mem: RobotMemory) -> None:
    mem.learn(JAPANESE)
    mem.learn("会議室のドアは自動で開く")
    assert contents(mem, "研究所") == [JAPANESE]
    assert contents(mem, "会議室") == ["会議室のドアは自動で開く"]
    assert contents(mem, "研究所で") == [JAPANESE]


@pytest.mark.parametrize(("query", "memory"), [("évier", FRENCH), ("mouillée", FRENCH), ("미끄러졌다", KOREAN)])
def test_a_decomposed_query_recalls_composed_memories(mem: RobotMemory, query: str, memory: str) -> None:
    mem.learn(FRENCH)
    mem.learn(KOREAN)
    assert contents(mem, nfd(query)) == [memory]


@pytest.mark.parametrize(("query", "memory"), [("évier", FRENCH), ("미끄러졌다", KOREAN), ("研究所", JAPANESE)])
def test_a_memory_learned_decomposed_is_recalled_by_a_composed_query(mem: RobotMemory, query: str, memory: str) -> None:
    mem.learn(nfd(memory))
    assert contents(mem, query) == [nfd(memory)]  # the memory keeps the text as given


def test_an_entry_indexed_before_normalisation_is_found_once_the_index_is_rebuilt(mem: RobotMemory) -> None:
    """What a store written before this fix holds for decomposed Hangul: jamo bigrams, which no
    composed query shares. Rebuilding the index (as a migration would, for the rows that are not
    NFC) makes the entry as a learn makes it today."""
    mid = stored_id(mem.memory, mem.learn(nfd(KOREAN))["memory_id"])

    def old_entry(text: str) -> str:
        return segment._CJK_RUN.sub(
            lambda m: " " + " ".join(segment.cjk_tokens(m.group(0), for_index=True)) + " ", text
        )

    index = mem.memory.index
    index.write_blocking(lambda c: c.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,)))
    index.write_blocking(
        lambda c: c.execute(
            "INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, '')", (mid, old_entry(nfd(KOREAN)))
        )
    )
    assert contents(mem, "미끄러졌다") == []
    stale = index.read_blocking(lambda c: [r[0] for r in c.execute("SELECT content FROM memories")])
    assert [segment.is_nfc(t) for t in stale] == [False]

    index.write_blocking(index_repo.rebuild_memory_index)
    assert contents(mem, "미끄러졌다") == [nfd(KOREAN)]


def test_a_version_9_store_with_decomposed_text_is_reindexed_when_opened(tmp_path: Path) -> None:
    """Migration 10 rebuilds the entries an older version made from text stored decomposed: the
    store found the memory again after its upgrade, with no command to run."""
    import sqlite3

    with RobotMemory(tmp_path, robot_id="r1") as m:
        mid = m.learn(nfd(KOREAN))["memory_id"]
        m.learn(FRENCH)
    old = segment._CJK_RUN.sub(
        lambda g: " " + " ".join(segment.cjk_tokens(g.group(0), for_index=True)) + " ", nfd(KOREAN)
    )
    conn = sqlite3.connect(tmp_path / "index.db")
    with conn:
        (stored,) = conn.execute("SELECT id FROM memory_public WHERE public_id = ?", (mid,)).fetchone()
        conn.execute("DROP TABLE memory_public")  # version 9 had no public ids (migration 26)
        assert conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (stored,)).rowcount == 1
        conn.execute("INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, '')", (stored, old))
        conn.execute("UPDATE store_meta SET value = '9' WHERE key = 'schema_version'")
    conn.close()
    with RobotMemory(tmp_path, robot_id="r1") as m:
        assert contents(m, "미끄러졌다") == [nfd(KOREAN)]
        assert contents(m, "évier") == [FRENCH]
