"""The README's limits table says what the code enforces: each figure below, read from the code
(constants, and the input schemas the tools publish), must appear in its row of the table. A
limit changed in the code and not in the README fails here; so does a table that lost a row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.experiences import model
from robot_mcp_memory.lessons import service as lessons
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.surfaces.mcp import server as mcp_server
from robot_mcp_memory.surfaces.mcp import stdio
from robot_mcp_memory.surfaces.mcp.server import MemoryMCP
from robot_mcp_memory.surfaces.web import routing
from robot_mcp_memory.tenancy import sessions, tokens

README = Path(__file__).resolve().parents[1] / "README.md"


def _limits_table() -> dict[str, str]:
    """The rows of the README's ``## Limits`` table: first cell → second cell."""
    text = README.read_text(encoding="utf-8")
    assert "\n## Limits\n" in text, "the README has no '## Limits' section"
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].removeprefix("| "): cells[1] for cells in rows[1:]}


def _row(table: dict[str, str], starts: str) -> str:
    found = [v for k, v in table.items() if k.startswith(starts)]
    assert len(found) == 1, f"no single README limits row starting {starts!r}: {sorted(table)}"
    return found[0]


def _mentions(cell: str, n: int) -> bool:
    """Whether `cell` states the number `n` as a whole figure (``2,097,152``, not part of another)."""
    return re.search(rf"(?<!\d)(?<!\d,){re.escape(f'{n:,}')}(?!,?\d)", cell) is not None


async def test_the_readme_limits_table_holds_the_limits_the_code_enforces(server: MemoryMCP) -> None:
    table = _limits_table()
    schemas: dict[str, dict[str, Any]] = {t.name: t.inputSchema["properties"] for t in await server.list_tools()}
    expected: list[tuple[str, int]] = [
        ("MCP request body", mcp_server.MAX_REQUEST_BODY),
        ("MCP over stdio", stdio.MAX_LINE),
        ("REST API request body", routing.MAX_BODY),
        ("process document", docmodel.MAX_DOCUMENT),
        ("process document", operations.MAX_DOCUMENT_BYTES),
        ("process document", schemas["save_process"]["markdown"]["maxLength"]),
        ("`find_processes`", schemas["find_processes"]["query"]["maxLength"]),
        ("`find_processes`", schemas["find_processes"]["k"]["maximum"]),
        ("`list_processes`", schemas["list_processes"]["limit"]["maximum"]),
        ("`list_processes`", schemas["list_lessons"]["limit"]["maximum"]),
        ("`record_outcome`", schemas["record_outcome"]["note"]["maxLength"]),
        ("ids", schemas["get_process"]["id"]["maxLength"]),
        ("ids", schemas["register_robot"]["robot_id"]["maxLength"]),
        ("ids", lessons.MAX_KEY),
        ("ids", lessons.MAX_PLACE),
        ("lesson `params`", lessons.MAX_PARAMS_BYTES),
        ("`learn`", model.MAX_INSIGHT),
        ("`learn`", schemas["update"]["new_content"]["maxLength"]),
        ("`recall`", model.MAX_QUERY),
        ("`recall`", model.MAX_N),
        ("`recall`", model.MAX_FILTER_BYTES),
        ("experience JSON", model.MAX_CONTEXT_BYTES),
        ("experience JSON", model.MAX_METADATA_BYTES),
        ("experience JSON", model.MAX_DATA_BYTES),
        ("experience JSON", jsonvalue.MAX_DEPTH),
        ("`forget`", model.MAX_REASON),
        ("open Streamable HTTP sessions", mcp_server.MAX_SESSIONS),
        ("open Streamable HTTP sessions", mcp_server.SESSION_IDLE_TIMEOUT_S // 60),
        ("open SSE streams", mcp_server.MAX_SSE_STREAMS),
        ("per robot token", mcp_server.MAX_PER_ROBOT),
        ("per robot token", sessions.MAX_PER_ROBOT),
        ("dashboard logins", sessions.MAX_SESSIONS),
        ("tokens", tokens.MIN_TOKEN),
    ]
    missing = [(row, n) for row, n in expected if not _mentions(_row(table, row), n)]
    assert missing == [], f"README limits table lacks these figures (row, value): {missing}"
