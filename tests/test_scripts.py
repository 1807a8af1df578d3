"""scripts/bootstrap, which scripts/serve runs first: it says what it is doing while it installs
(the first run showed nothing for over a minute), on stderr only — under MCP_TRANSPORT=stdio the
stdout of scripts/serve is the MCP wire — and says nothing once installed.

The script runs for real, in a copy of the repository's top level; `.venv/bin/python` there is a
stand-in that records the pip commands it is given instead of installing (installing is pip's
job, tested by pip; this test is about the script)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.e2e  # runs scripts/bootstrap under bash


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "bootstrap", tmp_path / "scripts" / "bootstrap")
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy2(ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/pip-calls"\necho "pip says this on stdout"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _bootstrap(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(checkout)}
    return subprocess.run(
        ["bash", str(checkout / "scripts" / "bootstrap"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )


def test_the_first_bootstrap_says_it_is_installing_on_stderr_and_keeps_stdout_clean(checkout: Path) -> None:
    done = _bootstrap(checkout, "dev")
    assert done.stdout == ""
    assert "installing robot-mcp-memory[dev]" in done.stderr
    assert "installed in" in done.stderr
    calls = (checkout / ".venv" / "bin" / "pip-calls").read_text().splitlines()
    assert any("-c constraints.txt -e .[dev]" in call for call in calls), calls
    assert (checkout / ".venv" / ".installed-dev").exists()


def test_a_bootstrap_with_nothing_to_install_says_nothing(checkout: Path) -> None:
    _bootstrap(checkout)
    again = _bootstrap(checkout)
    assert again.stdout == again.stderr == ""
