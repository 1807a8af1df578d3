"""Queries written differently from the stored text they should find, against real FTS5 tables:
a kanji-only word against a run mixing kanji and kana (stored as bigrams), and text in decomposed
Unicode (NFD: ``e`` + U+0301, Hangul as conjoining jamo, ``か`` + U+3099) against composed text."""

from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.processes.sqlite import store as process_store
from robot_mcp_memory.search import fts, segment
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.storage.sqlite import index_db as db

TOKENIZE = "porter unicode61 remove_diacritics 2"  # what memories_fts uses
JAPANESE = {
    1: "研究所でロボットがカップを落とした",
    2: "会議室のドアは自動で開く",
    3: "実験室の棚からボトルを取った",
}
OTHERS = {
    10: "机器人在研究所抓取杯子时应该用力十二牛顿",
    11: "la tasse mouillée a glissé près de l'évier",
    12: "로봇이 젖은 컵을 잡다가 미끄러졌다",
    13: "ロボットがグラスを運んだ",
    14: "ọkọ̀ ayọ́kẹ́lẹ́ náà dúró",  # Yoruba: NFC leaves a combining mark on "ọ́" and "ẹ́"
}
#: Chinese text (jieba words in the index) sharing characters and words with the queries below.
CHINESE = [
    f"{who}在{place}{verb}{thing}{tail}"
    for who in ("机器人", "清洁机器人", "机械臂")
    for place in ("厨房", "实验室", "会议室", "收发室", "研究所", "停车场")
    for verb in ("抓取", "搬运", "检查")
    for thing in ("杯子", "灭火器", "笔记本电脑", "包裹")
    for tail in ("", "时滑了一下")
]
CHINESE_QUERIES = (
    "抓取杯子",
    "实验室",
    "会议室的灭火器",
    "收发室包裹",
    "清洁机器人在停车场",
    "笔记本电脑",
    "机械臂抓取红色的杯子",
    "研究所",
)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def _table(docs: dict[int, str]) -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, tokenize='{TOKENIZE}')")
    c.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", [(k, segment.index_text(v)) for k, v in docs.items()])
    return c


@pytest.fixture(scope="module")
def memories() -> Iterator[sqlite3.Connection]:
    c = _table(JAPANESE | OTHERS)
    yield c
    c.close()


@pytest.fixture(scope="module")
def processes() -> Iterator[sqlite3.Connection]:
    """index.db's process tables in memory, one process per text above (title = the text)."""
    c = sqlite3.connect(":memory:", isolation_level=None)
    for step in db.MIGRATIONS:
        step(c)
    for k, text in (JAPANESE | OTHERS).items():
        process_store.upsert(c, ProcessDoc(id=f"p-{k}", title=text, robot="r1"))
    yield c
    c.close()


def hits(c: sqlite3.Connection, phrases: list[str]) -> set[int]:
    assert phrases
    return {r[0] for r in c.execute("SELECT rowid FROM f WHERE f MATCH ?", (" OR ".join(phrases),))}


def found(c: sqlite3.Connection, query: str) -> set[int]:
    return hits(c, segment.match_phrases(query))


def found_processes(c: sqlite3.Connection, query: str) -> set[int]:
    """What find_processes' keyword search (both of its paths) returns for `query`, as text keys."""
    ranked = {h.doc.id for h in keyword_sql.search(c, tuple(fts.phrases(query)), 10, None)}
    candidates = {pid for pid, _ in keyword_sql.keyword_candidates(c, Query.parse(query).phrases, 10, None)}
    assert ranked == candidates, query
    return {int(pid.removeprefix("p-")) for pid in ranked}


# ---------------------------------------------------------------------------- kanji-only words


@pytest.mark.parametrize(("query", "doc"), [("研究所", 1), ("会議室", 2), ("実験室", 3), ("研究所 会議室", 2)])
def test_a_kanji_only_word_finds_a_run_mixing_kanji_and_kana(
    memories: sqlite3.Connection, processes: sqlite3.Connection, query: str, doc: int
) -> None:
    """The mixed run is stored as bigrams; jieba kept the query word whole, which no bigram is."""
    assert doc in found(memories, query)
    assert doc in found_processes(processes, query)


def test_a_kanji_only_word_does_not_find_japanese_text_without_it(
    memories: sqlite3.Connection, processes: sqlite3.Connection
) -> None:
    assert found(memories, "会議室") == {2}
    assert found_processes(processes, "会議室") == {2}
    assert found(memories, "研究所") == {1, 10}  # and the Chinese text holding the word


def test_a_han_run_is_offered_as_its_bigrams_in_a_row() -> None:
    assert segment.han_run_phrases("研究所") == ["研究 究所"]
    assert segment.han_run_phrases("研究所会議室") == ["研究 究所 所会 会議 議室", "研究 究所", "会議 議室"]
    assert segment.han_run_phrases("研究所で") == []  # a mixed run: bigrams already
    assert segment.han_run_phrases("杯 grasp") == []
    assert segment.match_phrases("研究所") == ['"研究所"', '"研究 究所"']
    assert segment.match_phrases("杯子") == ['"杯子"']  # a two-character word is its own bigram
    assert fts.phrases("研究所") == ["研究所", "研究 究所"]


def test_kanji_phrases_let_no_chinese_text_in_that_the_words_did_not() -> None:
    """Chinese text is stored as jieba words, which hold a query's bigrams in a row only where
    they hold its words: the same texts match, in the same order (no bigram soup)."""
    c = _table(dict(enumerate(CHINESE)))
    try:
        for q in CHINESE_QUERIES:
            with_phrases = segment.match_phrases(q)
            extra = {segment.quote(p) for p in segment.han_run_phrases(q)}
            words_only = [p for p in with_phrases if p not in extra]
            assert len(words_only) < len(with_phrases), q
            assert hits(c, with_phrases) == hits(c, words_only), q
            top = "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f), rowid LIMIT 10"
            assert (
                c.execute(top, (" OR ".join(with_phrases),)).fetchall()
                == c.execute(top, (" OR ".join(words_only),)).fetchall()
            ), q
    finally:
        c.close()


# ---------------------------------------------------------------------------- decomposed text


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        pytest.param("évier", 11, id="accented latin"),
        pytest.param("mouillée", 11, id="accented latin, stemmed"),
        pytest.param("미끄러졌다", 12, id="hangul"),
        pytest.param("ロボットが", 13, id="kana with a voiced mark"),
        pytest.param("グラス", 13, id="katakana with a voiced mark"),
        pytest.param("ayọ́kẹ́lẹ́", 14, id="a mark NFC leaves"),
    ],
)
def test_a_decomposed_query_finds_composed_text(
    memories: sqlite3.Connection, processes: sqlite3.Connection, query: str, doc: int
) -> None:
    assert nfd(query) != query
    assert doc in found(memories, nfd(query))
    assert doc in found_processes(processes, nfd(query))


def test_a_decomposed_query_has_the_words_of_the_composed_one() -> None:
    for text in ("la tasse mouillée près de l'évier", "미끄러졌다", "ロボットがグラスを運んだ", "ayọ́kẹ́lẹ́"):
        assert segment.words(nfd(text)) == segment.words(text)
        assert fts.terms(nfd(text)) == fts.terms(text)
    assert segment.words("ayọ́kẹ́lẹ́ náà") == ["ayọ́kẹ́lẹ́", "náà"]  # the mark NFC leaves is part of the word


@pytest.mark.parametrize("text", [OTHERS[11], OTHERS[12], OTHERS[13], JAPANESE[1]])
def test_decomposed_text_is_stored_as_its_composed_form(text: str) -> None:
    assert segment.index_text(nfd(text)) == segment.index_text(text)
    c = _table({1: nfd(text)})
    try:
        assert hits(c, segment.match_phrases(text)) == {1}
    finally:
        c.close()


def test_only_text_not_in_nfc_needs_its_index_entry_rebuilt() -> None:
    assert segment.is_nfc(OTHERS[12])
    assert not segment.is_nfc(nfd(OTHERS[12]))
    assert segment.is_nfc(None)  # a NULL column
    assert segment.nfc(nfd(OTHERS[11])) == OTHERS[11]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_searches_alike_decomposed_and_composed(text: str) -> None:
    composed = unicodedata.normalize("NFC", text)
    assert segment.match_phrases(nfd(text)) == segment.match_phrases(composed)
    assert segment.index_text(nfd(text)) == segment.index_text(composed)
    assert fts.phrases(nfd(text)) == fts.phrases(composed)
