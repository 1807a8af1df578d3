"""tests/spawn_guard.py fails a test that starts a process without the ``e2e`` marker, and only
that test: run for real, on a test file of its own, in a child pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A child pytest with the guard and none of this repository's configuration or conftest.
PYTEST = (sys.executable, "-m", "pytest", "-p", "tests.spawn_guard", "-p", "no:cacheprovider", "-p", "no:randomly")

INNER = """
import os
import subprocess
import sys

import pytest

from tests import spawn_guard


def test_unmarked_in_process():
    assert sum(range(3)) == 3


def test_unmarked_runs_a_child_interpreter():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_runs_a_shell():
    os.system("true")


@pytest.mark.e2e
def test_marked_runs_a_child_interpreter():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_starting_a_shared_service():
    with spawn_guard.infrastructure():
        subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


@pytest.mark.e2e  # starts a child pytest, whose tests start processes
def test_a_test_that_starts_a_process_without_the_e2e_marker_fails_and_names_the_command(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    done = subprocess.run(
        [*PYTEST, "-c", "/dev/null", "--rootdir", str(tmp_path), "-q", "-rA", str(tmp_path / "test_inner.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    outcomes = {
        line.split("::")[1].split(" ")[0]: line.split(" ")[0]
        for line in out.splitlines()
        if line.startswith(("PASSED ", "FAILED ")) and "::" in line
    }
    assert outcomes == {
        "test_unmarked_in_process": "PASSED",
        "test_unmarked_runs_a_child_interpreter": "FAILED",
        "test_unmarked_runs_a_shell": "FAILED",
        "test_marked_runs_a_child_interpreter": "PASSED",
        "test_unmarked_starting_a_shared_service": "PASSED",
    }, out
    assert "without the `e2e` marker" in out, out
    assert sys.executable in out, out  # names the command it ran
