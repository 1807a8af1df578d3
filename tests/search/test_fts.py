"""FTS5 query sanitising, checked against a real FTS5 table (``porter unicode61``, as index.db).
Text is stored as the process index stores it (`segment.index_text`: CJK runs as words)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.search import fts
from robot_mcp_memory.search.segment import index_text

EXAMPLES = settings(max_examples=200, deadline=None)

# Everything FTS5's query grammar gives a meaning to, plus scripts robotmem used to strip.
SYNTAX = ['"', "*", "(", ")", "NEAR", "NEAR(", "NEAR/3", "AND", "OR", "NOT", "-", ":", "^", "{", "}", "+", ",", "'"]
SYNTAX += ["title:", "{title body}:", "a*", "^start", '""', "\\", "\x00", "é", "привет", "カナ", "한글", "中文"]
query_text = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(SYNTAX), st.text(max_size=8)), max_size=12).map(" ".join),
    st.lists(st.one_of(st.sampled_from(SYNTAX), st.text(max_size=4)), max_size=12).map("".join),
)


def _letters(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.characters(min_codepoint=lo, max_codepoint=hi, categories=("L", "M", "N", "P", "S", "Zs"))


#: Scripts assigned by Unicode 6.1, the tables sqlite's unicode61 tokenizer knows.
script_text = st.text(
    st.one_of(
        _letters(0x20, 0x24F),  # ASCII, Latin-1, Latin Extended-A/B
        _letters(0x370, 0x3FF),  # Greek
        _letters(0x400, 0x4FF),  # Cyrillic
        _letters(0x5D0, 0x5EA),  # Hebrew
        _letters(0x900, 0x97F),  # Devanagari
        _letters(0x3040, 0x30FF),  # kana
        _letters(0x4E00, 0x4FFF),  # CJK
        _letters(0xAC00, 0xACFF),  # Hangul
    ),
    min_size=1,
    max_size=30,
)


@pytest.fixture(scope="module")
def fts5() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter unicode61')")
    conn.executemany(
        "INSERT INTO docs(title, body) VALUES (?, ?)",
        [
            (title, index_text(body))
            for title, body in [
                ("Fetch a package from the mailroom", "navigate to the mail room, find the parcel"),
                ("Near the door", "NEAR AND OR NOT are ordinary words here"),
                ("Доставка посылки", "café crème brûlée, ひらがな カタカナ, 한국어 문장, Ελληνικά λέξη"),
            ]
        ],
    )
    yield conn
    conn.close()


def _matches(conn: sqlite3.Connection, expr: str) -> list[str]:
    rows = conn.execute("SELECT title FROM docs WHERE docs MATCH ? ORDER BY bm25(docs)", (expr,))
    return [r[0] for r in rows]


@EXAMPLES
@given(query_text)
def test_a_sanitised_query_never_raises_in_a_real_fts5_match(fts5: sqlite3.Connection, text: str) -> None:
    expr = fts.match_expression(text)
    if expr is None:
        assert fts.terms(text) == []
        return
    _matches(fts5, expr)  # raises sqlite3.OperationalError on a syntax error


@EXAMPLES
@given(script_text)
def test_a_query_built_from_a_documents_own_text_finds_it(text: str) -> None:
    expr = fts.match_expression(text)
    if expr is None:
        return
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='porter unicode61')")
        conn.execute("INSERT INTO docs(body) VALUES (?)", (index_text(text),))
        assert conn.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (expr,)).fetchone()[0] == 1
    finally:
        conn.close()


@pytest.mark.parametrize(
    "query",
    ["robot OR", "NEAR(", '"unbalanced', "title:", "a AND", "NOT", "*", "-mailroom", "^", "{", "(x))"],
)
def test_fts_operators_in_a_query_are_plain_words_or_dropped(fts5: sqlite3.Connection, query: str) -> None:
    expr = fts.match_expression(query)
    if expr is not None:
        _matches(fts5, expr)


def test_operator_words_are_quoted_so_they_match_as_words(fts5: sqlite3.Connection) -> None:
    expr = fts.match_expression("NEAR AND")
    assert expr is not None
    assert _matches(fts5, expr)[0] == "Near the door"


def test_text_without_words_gives_no_expression() -> None:
    assert fts.match_expression("") is None
    assert fts.match_expression(' "* () -- : ^ {} ') is None
    assert fts.match_expression("___") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Доставка посылки", ["Доставка", "посылки"], id="cyrillic"),
        pytest.param("café crème brûlée", ["café", "crème", "brûlée"], id="accents"),
        pytest.param("ひらがな カタカナ", ["ひら", "らが", "がな", "カタ", "タカ", "カナ"], id="kana"),  # bigrams
        pytest.param("한국어 문장", ["한국", "국어", "문장"], id="hangul"),
        pytest.param("Ελληνικά λέξη", ["Ελληνικά", "λέξη"], id="greek"),
    ],
)
def test_non_latin_and_accented_words_survive_terms(fts5: sqlite3.Connection, text: str, expected: list[str]) -> None:
    assert fts.terms(text) == expected
    expr = fts.match_expression(text)
    assert expr is not None
    assert _matches(fts5, expr) == ["Доставка посылки"]


def test_terms_are_distinct_case_insensitively_and_keep_their_order() -> None:
    assert fts.terms("Robot robot ROBOT arm Arm") == ["Robot", "arm"]


def test_terms_of_a_text_asked_again_are_the_same_and_a_list_of_the_callers_own() -> None:
    first = fts.terms("fetch the parcel from the mailroom")
    first.append("changed by the caller")
    again = fts.terms("fetch the parcel from the mailroom")
    assert again == ["fetch", "the", "parcel", "from", "mailroom"]
    assert again is not fts.terms("fetch the parcel from the mailroom")
    assert fts.terms("Fetch the parcel from the mailroom")[0] == "Fetch"  # another text, its own terms


def test_terms_are_capped() -> None:
    words = [f"w{i}" for i in range(fts.MAX_TERMS + 10)]
    assert fts.terms(" ".join(words)) == words[: fts.MAX_TERMS]


def test_function_words_do_not_use_up_the_cap_before_the_last_content_words(fts5: sqlite3.Connection) -> None:
    """31 function words then "fetch the parcel": "parcel" was cut, and keyword find_processes
    ranked another process first. Each kind has its own cap, so the query stays bounded."""
    filler = "the a an of to in on at by for from and or is are be been it this that then so if as than"
    filler += " about again also any being can could did do does each had has have"
    text = f"{filler} {filler.upper()} fetch the parcel"
    assert len(set(filler.split())) > fts.MAX_TERMS
    assert fts.terms(text)[-2:] == ["fetch", "parcel"]
    assert "parcel" in fts.content_terms(text)
    many = " ".join(f"w{i}" for i in range(100)) + " " + filler
    assert len(fts.terms(many)) <= 2 * fts.MAX_TERMS
    expr = fts.match_expression(text)
    assert expr is not None
    assert _matches(fts5, expr)[0] == "Fetch a package from the mailroom"


def test_a_lone_cjk_character_matches_the_words_it_starts(fts5: sqlite3.Connection) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter unicode61')")
    conn.execute("INSERT INTO docs(title, body) VALUES (?, '')", (index_text("把包裹从收发室取来"),))
    expr = fts.match_expression("包")
    assert expr is not None
    assert len(_matches(conn, expr)) == 1


def test_adjacent_words_are_also_offered_joined(fts5: sqlite3.Connection) -> None:
    expr = fts.match_expression("mail room")
    assert expr == '"mail" OR "room" OR "mailroom"'
    assert _matches(fts5, expr)[0] == "Fetch a package from the mailroom"


@EXAMPLES
@given(query_text, query_text)
def test_a_restricted_expression_never_raises_in_a_real_fts5_match(fts5: sqlite3.Connection, a: str, b: str) -> None:
    essential, rest = fts.phrases(a), fts.phrases(b)
    if essential and rest:
        _matches(fts5, fts.restricted_expression(essential, rest))


def test_a_restricted_expression_matches_only_what_holds_an_essential_phrase(fts5: sqlite3.Connection) -> None:
    assert _matches(fts5, fts.restricted_expression(["parcel"], ["the", "NEAR"])) == [
        "Fetch a package from the mailroom"
    ]


def test_a_restricted_expression_scores_exactly_twice_the_plain_one(fts5: sqlite3.Connection) -> None:
    def scores(expr: str) -> dict[str, float]:
        rows = fts5.execute("SELECT title, bm25(docs, 3.0, 1.0) FROM docs WHERE docs MATCH ?", (expr,))
        return {r[0]: r[1] for r in rows}

    plain = scores('"the" OR "mail" OR "door"')
    restricted = scores(fts.restricted_expression(["mail", "door"], ["the"]))
    assert restricted.keys() == plain.keys()  # every document here holds "mail" or "door"
    assert all(restricted[t] == pytest.approx(2 * plain[t], rel=1e-12) for t in plain)


def test_content_terms_drop_function_words_in_any_case_unless_nothing_else_is_left() -> None:
    assert fts.content_terms("I need THE red cup") == ["need", "red", "cup"]
    assert fts.content_terms("the THE") == ["the"]


def test_phrases_are_the_terms_then_their_joined_pairs() -> None:
    assert fts.phrases("mail room 3") == ["mail", "room", "3", "mailroom"]
    assert fts.match_expression("mail room") == '"mail" OR "room" OR "mailroom"'


def test_a_dotted_number_is_one_phrase(fts5: sqlite3.Connection) -> None:
    """Found by review: firmware "1.2.10" was searched as "1" OR "2" OR "10", so "1.10.2" matched
    as well as itself."""
    assert fts.terms("Firmware V1.2.10 on 12.5N") == ["Firmware", "V1.2.10", "on", "12.5N"]
    assert fts.phrases("firmware 1.2.10") == ["firmware", "1.2.10"]
    assert fts.match_expression("firmware 1.2.10") == '"firmware" OR "1.2.10"'
    assert fts.phrases(" ".join(fts.content_terms("the 12.5N"))) == ["12.5N", "12.5"]
    assert fts.phrases("12.5 mm") == ["12.5", "mm", "12.5mm"]
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter unicode61')")
    for title in ("Flash firmware 1.10.2", "Flash firmware 1.2.10", "Flash firmware 1.2.100"):
        conn.execute("INSERT INTO docs(title, body) VALUES (?, '')", (title,))
    expr = fts.match_expression("1.2.10")
    assert expr is not None
    assert _matches(conn, expr) == ["Flash firmware 1.2.10"]


def test_most_added_is_bm25s_ceiling_for_a_phrase() -> None:
    assert fts.most_added(10, 1000) == pytest.approx(math.log(990.5 / 10.5) * 2.2)
    assert fts.most_added(600, 1000) == pytest.approx(2.2e-6)  # FTS5 clamps a negative idf
    assert fts.most_added(0, 0) == pytest.approx(2.2e-6)


@pytest.mark.parametrize(
    ("docs", "expected"),
    [
        pytest.param([100, 1000, 10], ["reception", "cup"], id="a rare word outweighs two"),
        pytest.param([100, 1000, 900], ["reception", "2"], id="two common words"),
        pytest.param([100, 120, 90], ["reception"], id="the commonest of three"),
        pytest.param([100, 100, 100], [], id="words alike"),
        pytest.param([0, 1000, 0], [], id="one word found"),
        pytest.param([1000, 1000, 1000], [], id="every word in every document"),
    ],
)
def test_skippable_takes_the_commonest_words_while_they_add_less_than_the_rarest(
    docs: list[int], expected: list[str]
) -> None:
    rest, bound = fts.skippable(["cup", "reception", "2"], docs, 1000)
    assert rest == expected
    counts = dict(zip(["cup", "reception", "2"], docs, strict=True))
    assert bound >= sum(fts.most_added(counts[w], 1000) for w in rest)
