"""Segmentation for FTS5, at index and query time, checked against a real FTS5 table."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robot_mcp_memory.search import segment

TOKENIZE = "porter unicode61 remove_diacritics 2"  # what memories_fts uses
DOCS = {
    1: "机器人抓取杯子时应该用力十二牛顿",
    2: "Захват кружки за ручку работает лучше",
    3: "Le café crème est renversé près de la fenêtre",
    4: "マグカップを取っ手でつかむ",
    5: "컵을 손잡이로 잡으세요",
    6: "grasp the mug by the handle with grip_force 12.5 N",
    7: "İstanbul depo kapısı ağır",
}


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, tokenize='{TOKENIZE}')")
    c.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", [(k, segment.index_text(v)) for k, v in DOCS.items()])
    yield c
    c.close()


def hits(c: sqlite3.Connection, query: str) -> set[int]:
    expr = segment.match_expression(query)
    assert expr is not None
    return {r[0] for r in c.execute("SELECT rowid FROM f WHERE f MATCH ?", (expr,))}


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        ("抓取杯子", 1),  # Chinese, segmented by jieba on both sides
        ("杯子", 1),
        ("杯", 1),  # one character: a prefix query
        ("кружки", 2),  # Cyrillic
        ("Захват", 2),
        ("cafe", 3),  # accents folded
        ("crème", 3),
        ("renverse", 3),
        ("マグカップ", 4),  # katakana: bigrams
        ("取っ手", 4),  # mixed kana and kanji
        ("손잡이", 5),  # Hangul: bigrams
        ("컵", 5),
        ("grip force", 6),
        ("grasping mugs", 6),  # porter stems both sides
        ("İstanbul", 7),  # Turkish dotted capital I, as stored
        ("istanbul kapısı", 7),
    ],
)
def test_every_script_is_recallable(fts: sqlite3.Connection, query: str, doc: int) -> None:
    assert doc in hits(fts, query)


def test_queries_do_not_match_unrelated_scripts(fts: sqlite3.Connection) -> None:
    assert hits(fts, "кружки") == {2}
    assert hits(fts, "マグカップ") == {4}


def test_stopwords_are_dropped_unless_nothing_else_remains() -> None:
    assert segment.match_expression("how to grasp the mug") == '"grasp" OR "mug"'
    assert segment.match_expression("the") == '"the"'
    assert segment.match_expression("do not grasp") == '"not" OR "grasp"'  # negations stay


def test_punctuation_only_has_nothing_to_search() -> None:
    assert segment.match_expression("?! -- ()") is None


def test_words_split_underscores_like_fts5() -> None:
    assert segment.words("grip_force=12.5N") == ["grip", "force", "12", "5n"]


@given(st.text(max_size=200))
def test_any_text_gives_a_match_expression_fts5_accepts(text: str) -> None:
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, tokenize='{TOKENIZE}')")
    c.execute("INSERT INTO f(content) VALUES (?)", (segment.index_text(text),))
    expr = segment.match_expression(text)
    if expr is not None:
        c.execute("SELECT rowid FROM f WHERE f MATCH ?", (expr,)).fetchall()
