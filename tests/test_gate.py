"""The gate's own promises, written down where a developer looks: the command that runs the
property tests on fresh examples (the gate's draw the same ones every run) is in the README and
the architecture notes, and names a profile that exists and draws unseeded."""

from __future__ import annotations

from pathlib import Path

import hypothesis

ROOT = Path(__file__).resolve().parents[1]
EXPLORE = "--hypothesis-profile=explore"


def test_the_exploration_profile_draws_unseeded_examples_and_its_command_is_documented() -> None:
    explore = hypothesis.settings.get_profile("explore")
    assert explore.derandomize is False
    assert hypothesis.settings.get_profile("robot-mcp-memory").derandomize is True
    for doc in ("README.md", "docs/architecture.md"):
        assert EXPLORE in (ROOT / doc).read_text(encoding="utf-8"), doc
