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
    c = _indexed(DOCS)
    yield c
    c.close()


def _indexed(docs: dict[int, str]) -> sqlite3.Connection:
    """An in-memory FTS5 table ``f`` holding `docs` as the store indexes text."""
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, tokenize='{TOKENIZE}')")
    c.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", [(k, segment.index_text(v)) for k, v in docs.items()])
    return c


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


def test_a_dotted_number_is_one_phrase_not_its_digits() -> None:
    """Found by review: "12.5" was searched as "12" OR "5" (any memory with a 12 and a 5)."""
    assert segment.match_phrases("grip force 12.5 N") == ['"grip"', '"force"', '"12.5"', '"n"', '"12.5n"']
    assert segment.match_expression("firmware 1.2.10") == '"firmware" OR "1.2.10"'
    assert segment.query_terms("ping 192.168.0.1 from v1.2rc1") == ["ping", "192.168.0.1", "from", "v1.2rc1"]
    # Next to a letter of another script, sqlite's tables may cut the word elsewhere: the pieces
    # stay separate terms, as before.
    assert segment.query_terms("é1.2") == ["é1", "2"]
    assert segment.query_terms("end 1.2. x.3 3.x") == ["end", "1.2", "x", "3"]
    assert segment.words("12.5 N") == ["12", "5", "n"]  # the token set for word overlap is unchanged


def test_a_unit_is_searched_against_the_number_and_apart() -> None:
    text = "12.5 N, 12.5mm, 0.3 m/s, 1.2.10 crash, 4.5 at, v1.2rc1, 1.2beta"
    assert segment.number_variants(text) == [("12.5", "12.5n"), ("12.5mm", "12.5"), ("0.3", "0.3m")]


@pytest.fixture(scope="module")
def numbers() -> Iterator[sqlite3.Connection]:
    docs = {
        1: "grip force 19.5 N at 0.12 m/s",
        2: "grip force 12.5 N at 0.3 m/s",
        3: "grip force 12.50 N",
        4: "grip_force=12.5N",
        5: "firmware 1.10.2",
        6: "firmware 1.2.10",
        7: "grip force 12 N over 5 tries",
    }
    c = _indexed(docs)
    yield c
    c.close()


def ranked(c: sqlite3.Connection, query: str) -> list[int]:
    expr = segment.match_expression(query)
    assert expr is not None
    return [r[0] for r in c.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f), rowid", (expr,))]


def test_a_number_finds_itself_with_its_unit_written_either_way(numbers: sqlite3.Connection) -> None:
    assert ranked(numbers, "12.5") == [2]  # not 19.5 at 0.12, not "12 N over 5 tries"; "12.50" is another writing
    assert ranked(numbers, "1.2.10") == [6]
    assert sorted(ranked(numbers, "12.5N")) == [2, 4]
    assert sorted(ranked(numbers, "12.5 N")[:2]) == [2, 4]  # then whatever holds "n"


#: Digits, dots, letters and the characters around numbers where Python's and sqlite's tables
#: could disagree (another script, a combining mark, "_", the Kelvin sign, a CJK run).
number_text = st.lists(
    st.sampled_from([*"0123456789....aKn _-/é\u0301\u0903\u212a\u00b2", "用力", "İ"]), max_size=30
).map("".join)


@given(number_text)
def test_a_query_of_a_memorys_own_text_finds_it(text: str) -> None:
    c = _indexed({1: text})
    expr = segment.match_expression(text)
    if expr is not None:
        assert c.execute("SELECT count(*) FROM f WHERE f MATCH ?", (expr,)).fetchone()[0] == 1, expr


@given(st.text(max_size=200))
def test_any_text_gives_a_match_expression_fts5_accepts(text: str) -> None:
    c = _indexed({1: text})
    expr = segment.match_expression(text)
    if expr is not None:
        c.execute("SELECT rowid FROM f WHERE f MATCH ?", (expr,)).fetchall()


# Every character class the two paths could read differently: ASCII letters, digits, "_", every
# other printable ASCII character and ASCII control and space characters; and, for the general
# path's side, text outside ASCII (which must still take it).
_ASCII = st.text(st.characters(max_codepoint=0x7F), max_size=120)


@given(_ASCII)
def test_ascii_text_is_tokenised_as_the_general_path_tokenises_it(text: str) -> None:
    """`tokens` reads ASCII text through a byte table (letters lower-cased, digits kept, the rest
    spaces; a learn tokenises its text three times); the tokens must be those of the Unicode word
    pattern that serves every other text."""
    general = segment._WORD.findall(segment._lower(segment.nfc(text)))
    assert segment.tokens(text) == general
    assert segment.tokens(text + " é") == [*general, "é"]  # not ASCII: the general path, same tokens
