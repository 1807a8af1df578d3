"""`stdio.number_problem`: the numbers mcp would quietly change are caught, nothing else is, and
the byte search stays linear on hostile lines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from robot_mcp_memory.surfaces.mcp.stdio import number_problem


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"n": NaN}', "NaN"),
        (b'{"n": -Infinity}', "NaN"),
        (b'{"n": 1e400}', "out of range"),
        (b'{"n": 1E+309}', "out of range"),
        (b'{"n": ' + b"9" * 5000 + b"}", "out of range"),
        (b'{"n": 1' + b"0" * 400 + b".0}", "out of range"),  # a plain decimal past a double
        (b'{"n": 1' + b"0" * 300 + b"e99}", "out of range"),  # a long mantissa, a short exponent
    ],
)
def test_numbers_mcp_would_change_are_named(body: bytes, problem: str) -> None:
    found = number_problem(body)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": 1.5e300, "m": -2e-308}',  # large and tiny, but doubles
        b'{"text": "NaN is not a number, Infinity is far, model e100"}',  # the words inside strings
        b'{"digits": "' + b"9" * 5000 + b'"}',  # a long digit string is text
        b"not json at all",  # left to mcp's own parser
        b'{"insight": "sensor read NaN after caf\xe9 spill"}',  # one bad byte: mcp reads it with a replacement
        b'{"n": 1e-10, "m": 2.5E+10}',
    ],
)
def test_everything_else_passes(body: bytes) -> None:
    assert number_problem(body) is None


@pytest.mark.e2e  # starts a child interpreter
def test_a_hostile_line_of_digit_runs_is_searched_in_linear_time() -> None:
    """Runs of 3,999 digits: without the run-start anchor the search tried 4,000 digits at every
    position. Run in a child with a generous bound (milliseconds now, minutes before)."""
    code = (
        "from robot_mcp_memory.surfaces.mcp.stdio import number_problem; "
        "assert number_problem((b'9' * 3999 + b',') * 1000) is None"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
