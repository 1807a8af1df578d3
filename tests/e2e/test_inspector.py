"""A client nobody here wrote: the MCP Inspector CLI (npm) against the real server, over SSE,
Streamable HTTP and stdio (see /work/shared/notes/real-clients.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import MAILROOM
from tests.e2e.harness import PROCESS_TOOLS, Inspector, ServerProcess

pytestmark = pytest.mark.e2e

QUERY = "bring me the parcel from the mail room"
MAILROOM_ID = "fetch-package-mailroom"


@pytest.mark.parametrize("path", ["/sse", "/mcp"], ids=["sse", "streamable-http"])
async def test_inspector_lists_the_process_tools_and_finds_what_it_saved(
    server: ServerProcess, inspector: Inspector, path: str
) -> None:
    url = server.url(path)

    listed = (await inspector.run(url, "--method", "tools/list")).json()
    assert {t["name"] for t in listed["tools"]} >= PROCESS_TOOLS

    saved = await inspector.run(
        url, "--method", "tools/call", "--tool-name", "save_process", "--tool-arg", f"markdown={MAILROOM}"
    )
    assert saved.tool_result()["id"] == MAILROOM_ID

    found = await inspector.run(
        url, "--method", "tools/call", "--tool-name", "find_processes", "--tool-arg", f"query={QUERY}"
    )
    first = found.tool_result()["processes"][0]
    assert first["id"] == MAILROOM_ID
    assert "## Pitfalls & fixes" in first["markdown"]


async def test_inspector_over_stdio_lists_the_process_tools(tmp_path: Path, inspector: Inspector) -> None:
    server = ["-e", f"MEMORY_DATA_DIR={tmp_path / 'data'}", sys.executable, "-m", "robot_mcp_memory"]
    listed = (await inspector.run(*server, "--method", "tools/list")).json()
    assert {t["name"] for t in listed["tools"]} >= PROCESS_TOOLS
    assert (tmp_path / "data" / "index.db").exists()  # it really was our server, on that data directory
