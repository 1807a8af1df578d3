"""Comments and docstrings under ``src/`` state invariants and reasons; measurements and history
live in the docs (docs/search.md and docs/experiences.md, "Why these constants"; docs/benchmarks.md)
and in commit messages.

This walks every module's comments (`tokenize`) and string statements (docstrings, attribute
docstrings: `ast`) and refuses a time figure ("~2 µs", "0.20 against 0.32 ms", "tens of
microseconds") or review history ("found by review", "measured: …"). Sizes, counts, the seconds
of a timeout and a pointer to where a figure is are not measurements and pass ("in milliseconds",
"60 s", "5_000", "measured in docs/search.md").
`FIGURE_DEBT` lists the modules that still hold such comments; it may only shrink, to nothing.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "robot_mcp_memory"

#: A time figure or review history in prose.
FIGURE = re.compile(
    r"""\d\s?(?:ms|µs|μs|ns)\b                                    # 0.3 ms, ~2 µs
      | \d\s?(?:milli|micro|nano)seconds?\b                       # 5 milliseconds
      | \b(?:tens|hundreds|a\ few)\ of\ (?:milli|micro|nano)seconds\b
      | \bmeasured\s?:                                            # (measured: a loss at 50)
      | \breview\b                                                # found by review, (review, at …)
    """,
    re.IGNORECASE | re.VERBOSE,
)

#: Modules whose comments may still hold figures: none. A module put here while it is being
#: cleaned must come off once it is clean (a test says when).
FIGURE_DEBT: frozenset[str] = frozenset()


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every string statement (docstrings) in `source`."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for i, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + i, line


def figures(source: str) -> list[str]:
    """``line: text`` of each comment or docstring line of `source` holding a figure."""
    if not FIGURE.search(source):  # most modules: no need to tokenize them
        return []
    found = []
    for line, text in prose(source):
        match = FIGURE.search(text)
        if match:
            found.append(f"{line}: {match.group(0).strip()}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


@cache
def _figures_by_module() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        hits = figures(path.read_text(encoding="utf-8"))
        if hits:
            found[path.relative_to(SRC).as_posix()] = hits
    return found


def test_comments_and_docstrings_hold_no_time_figures_or_review_history() -> None:
    offenders = {rel: hits for rel, hits in _figures_by_module().items() if rel not in FIGURE_DEBT}
    assert offenders == {}, (
        "state the rule in the comment; put the figure in docs/search.md or docs/experiences.md "
        "('Why these constants') and the history in the commit message"
    )


def test_the_figure_debt_list_only_shrinks() -> None:
    assert sorted(FIGURE_DEBT - set(_figures_by_module())) == [], "remove these from FIGURE_DEBT: they are clean"


@pytest.mark.parametrize(
    "source",
    [
        "x = 1  # ~2 µs a row\n",
        "#: queries cost more than they save (0.20 against 0.32 ms at 1,000)\nX = 1\n",
        'def f() -> None:\n    """Two thread wake-ups (~65 µs of a ~320 µs `learn`)."""\n',
        '"""Module.\n\nA recall takes tens of microseconds.\n"""\n',
        "# a checkpoint costs 5 milliseconds\n",
        "#: the best of 1, 2 and 4 (measured: a loss at 50)\nN = 20\n",
        "# (review, at 10,000 memories: more)\n",
        'class C:\n    """Answering under it ended the session, found by review."""\n',
    ],
)
def test_the_figure_detector_flags_timings_and_history(source: str) -> None:
    assert figures(source)


@pytest.mark.parametrize(
    "source",
    [
        "#: How long one attempt waits (its busy handler), in milliseconds.\nBUSY_TIMEOUT_MS = 5_000\n",
        '"""Unavailable for 60 s, then 120, 240, and 300 s at most."""\n',
        '"""Each number with its unit ("5 s" ≠ "5 min", "0.3 m/s", "30 mm")."""\n',
        'def f() -> str:\n    """Epoch seconds as UTC ISO-8601 with milliseconds."""\n    return "12 ms"\n',
        "measured = Measured.of(text)  # the text's numbers\n",
        "# the plan matters (measured in docs/benchmarks.md)\n",
        '"""(Measured from its oldest entry, not by the new entry\'s number.)"""\n',
    ],
)
def test_the_figure_detector_passes_sizes_units_and_code(source: str) -> None:
    assert figures(source) == []
