"""The dashboard's markdown renderer runs in linear time on hostile input (found by review: a
199,000-character line of ``" **a"`` took 140 s with lazy ``.+?`` spans, blocking the server).

Rendered in a child process with a generous bound (the linear renderer takes milliseconds, the
quadratic one minutes), so a regression fails instead of stalling the suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

from robot_mcp_memory.web import markdown

HOSTILE = [" **a" * 49_750, " *a" * 60_000, " _a" * 60_000, " _a_b" * 50_000, "**" * 100_000, "[x](" * 40_000]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_lines_render_without_stalling(index: int) -> None:
    code = (
        "from robot_mcp_memory.web import markdown; "
        f"from tests.web.test_markdown_linear import HOSTILE; markdown.inline(HOSTILE[{index}])"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_identifiers_keep_their_underscores_inside_emphasis() -> None:
    got = markdown.inline("Set *max_force* to 12 N; _snake_case names_; x_y_z stays")
    assert got == "Set <em>max_force</em> to 12 N; <em>snake_case names</em>; x_y_z stays"


def test_spans_still_render() -> None:
    got = markdown.inline("a **bold** and *em* and _em2_ and **bold *nested* here** x*y*z snake_case_name")
    assert got == (
        "a <strong>bold</strong> and <em>em</em> and <em>em2</em> and <strong>bold <em>nested</em> here</strong>"
        " x*y*z snake_case_name"
    )
