"""The dashboard's markdown renderer runs in linear time on hostile input (found by review: a
199,000-character line of ``" **a"`` took 140 s with lazy ``.+?`` spans, blocking the server).

Rendered in a child process with a generous bound (the linear renderer takes milliseconds, the
quadratic one minutes), so a regression fails instead of stalling the suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

from robot_mcp_memory.surfaces.web import markdown

HOSTILE = [" **a" * 49_750, " *a" * 60_000, " _a" * 60_000, " _a_b" * 50_000, "**" * 100_000, "[x](" * 40_000]

#: Whole documents through `markdown.render`, the dashboard's entry point: the lines above go
#: through `inline` only and never reached the block patterns (a heading's closing ``#`` run
#: took cubic time in a run of spaces: 2,000 of them took 90 s). A link label could hold '[', so
#: each '[' rescanned up to 500 characters: quadratic with a cap, 8 s at the 200,000-character
#: body limit yet well inside a 60 s bound, hence these lines are ten times the body limit.
HOSTILE_DOCUMENTS = [
    "# a" + " " * 199_000 + "b",
    "### x" + " #" * 99_000 + " y",
    "[" * 2_000_000,
    "[a" * 1_000_000,
    "[x](http://" * 180_000,
]


@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_lines_render_without_stalling(index: int) -> None:
    code = (
        "from robot_mcp_memory.surfaces.web import markdown; "
        f"from tests.surfaces.web.test_markdown_linear import HOSTILE; markdown.inline(HOSTILE[{index}])"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


#: CPU seconds one hostile document may take: linear rendering takes well under one, the
#: backtracking patterns these documents were found with take minutes or never finish.
RENDER_CPU_BOUND_S = 20.0


@pytest.mark.parametrize("index", range(len(HOSTILE_DOCUMENTS)))
@pytest.mark.e2e  # starts a child interpreter
def test_hostile_documents_render_without_stalling(index: int) -> None:
    # The child's own CPU time around the render alone: neither its start-up nor a loaded
    # machine's other processes count against the bound.
    code = (
        "import time; from robot_mcp_memory.surfaces.web import markdown; "
        "from tests.surfaces.web.test_markdown_linear import HOSTILE_DOCUMENTS; "
        f"doc = HOSTILE_DOCUMENTS[{index}]; t = time.process_time(); markdown.render(doc); "
        "print(time.process_time() - t)"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True, text=True)
    assert float(done.stdout) < RENDER_CPU_BOUND_S


def test_headings_lose_their_closing_run_and_links_need_a_bracket_free_label() -> None:
    assert markdown.render("## Steps ##  ") == "<h2>Steps</h2>"
    assert markdown.render("# C# tips") == "<h1>C# tips</h1>"
    assert markdown.render("#   ") == "<h1></h1>"
    assert markdown.render("see [a [the manual](https://x.example/m)") == (
        '<p>see [a <a href="https://x.example/m" rel="noopener noreferrer nofollow">the manual</a></p>'
    )


def test_identifiers_keep_their_underscores_inside_emphasis() -> None:
    got = markdown.inline("Set *max_force* to 12 N; _snake_case names_; x_y_z stays")
    assert got == "Set <em>max_force</em> to 12 N; <em>snake_case names</em>; x_y_z stays"


def test_spans_still_render() -> None:
    got = markdown.inline("a **bold** and *em* and _em2_ and **bold *nested* here** x*y*z snake_case_name")
    assert got == (
        "a <strong>bold</strong> and <em>em</em> and <em>em2</em> and <strong>bold <em>nested</em> here</strong>"
        " x*y*z snake_case_name"
    )
