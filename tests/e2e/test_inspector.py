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


@pytest.mark.parametrize("path", ["/sse", "/mcp"], ids=["sse", "streamable-http"])
async def test_inspector_with_a_robot_token_is_scoped_and_without_one_gets_401(
    tmp_path: Path, inspector: Inspector, path: str
) -> None:
    env = {"MEMORY_TOKEN": "admin-token-0123456789", "MEMORY_ROBOT_TOKENS": "rap-1:tok-rap-1-abcdefgh"}
    server = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=env)
    await server.start()
    try:
        url = server.url(path)
        robot = ("--header", "Authorization: Bearer tok-rap-1-abcdefgh")
        admin = ("--header", "Authorization: Bearer admin-token-0123456789")

        listed = (await inspector.run(url, *robot, "--method", "tools/list")).json()
        assert {t["name"] for t in listed["tools"]} >= PROCESS_TOOLS
        # A robot token may not administer the fleet; the admin token may.
        refused = await inspector.run(url, *robot, "--method", "tools/call", "--tool-name", "reindex")
        assert refused.refusal()["error"] == "forbidden"
        assert (
            "indexed"
            in (await inspector.run(url, *admin, "--method", "tools/call", "--tool-name", "reindex")).tool_result()
        )
        # Saved with the robot token, a document naming another robot is refused; one naming no
        # robot is pinned to the token's robot.
        call = ("--method", "tools/call", "--tool-name", "save_process", "--tool-arg")
        foreign = await inspector.run(url, *robot, *call, f"markdown={MAILROOM}")
        assert foreign.refusal()["error"] == "forbidden"
        unnamed = MAILROOM.replace("robot: g1-lab-01\n", "")
        assert (await inspector.run(url, *robot, *call, f"markdown={unnamed}")).tool_result()["robot"] == "rap-1"

        for headers in ((), ("--header", "Authorization: Bearer wrong-token-123")):
            denied = await inspector.run(url, *headers, "--method", "tools/list")
            # The inspector exits 3 on a 401 (it then wants to start an OAuth flow).
            assert denied.returncode == 3, denied
            assert "auth_required" in denied.stderr
    finally:
        await server.stop()
