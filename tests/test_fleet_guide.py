"""docs/operations.md "Running a fleet" against what it describes: the HAProxy excerpt is the
shipped ``deploy/haproxy.cfg`` verbatim (its lines, in the file's order), the variables it tells
an operator to set are settings the server reads, and the file's placeholders are the four the
guide, the fleet test and the benchmarks fill in. The file itself runs in
tests/e2e/test_fleet_haproxy.py."""

from __future__ import annotations

import re
from pathlib import Path

from robot_mcp_memory.config import ENV_VARS

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "operations.md"
CONFIG = ROOT / "deploy" / "haproxy.cfg"
#: The placeholders other code fills in (tests/e2e/balancer.py, the replica benchmarks): stable.
PLACEHOLDERS = {"LISTEN", "REPLICA1", "REPLICA2", "REPLICA3"}


def fleet_section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("\n## Running a fleet\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_guides_haproxy_excerpt_is_the_shipped_file_verbatim_and_in_order() -> None:
    blocks = re.findall(r"```haproxy\n(.*?)```", fleet_section(), flags=re.DOTALL)
    assert len(blocks) == 1
    excerpt = [line for line in blocks[0].splitlines() if line.strip()]
    shipped = CONFIG.read_text(encoding="utf-8").splitlines()
    at = 0
    for line in excerpt:
        assert line in shipped[at:], f"not in deploy/haproxy.cfg (or out of order): {line!r}"
        at = shipped.index(line, at) + 1


def test_the_variables_the_guide_says_to_set_on_a_replica_are_settings_the_server_reads() -> None:
    table = fleet_section().split("| variable | on every replica |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`", table))
    assert "MEMORY_DATABASE_URL" in named
    assert named - ENV_VARS.keys() == set()


def test_the_shipped_config_reads_exactly_the_documented_placeholders() -> None:
    used = set(re.findall(r"\$\{([A-Z0-9_]+)\}", CONFIG.read_text(encoding="utf-8")))
    assert used == PLACEHOLDERS
    section = fleet_section()
    assert {name for name in PLACEHOLDERS if f"`{name}`" not in section} == set()
