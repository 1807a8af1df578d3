"""The spec's acceptance demo against the real process, over stdio, SSE and Streamable HTTP:
save the mailroom document, then "bring me the parcel from the mail room" finds it first, with its
full markdown."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from mcp import types
from mcp.shared.session import RequestResponder

from tests.conftest import MAILROOM, Client
from tests.e2e.harness import (
    PROCESS_TOOLS,
    ServerProcess,
    console_script,
    http_session,
    json_lines,
    server_command,
    sse_session,
    stdio_session,
)

pytestmark = pytest.mark.e2e

QUERY = "bring me the parcel from the mail room"
MAILROOM_ID = "fetch-package-mailroom"


async def run_acceptance_demo(client: Client) -> None:
    listed = await client.session.list_tools()
    assert {t.name for t in listed.tools} >= PROCESS_TOOLS

    saved = await client.call("save_process", markdown=MAILROOM)
    assert saved.get("error") is None, saved
    assert saved["id"] == MAILROOM_ID

    found = await client.call("find_processes", query=QUERY)
    assert found.get("error") is None, found
    first = found["processes"][0]
    assert first["id"] == MAILROOM_ID
    assert first["title"] == "Fetch a package from the mailroom"
    # the full document, not a snippet: every section of the body comes back
    body = MAILROOM.split("\n---\n", 1)[1].strip()
    assert body in first["markdown"]
    assert first["markdown"].startswith("---\n")


@pytest.mark.parametrize("how", ["console-script", "python-m"])
async def test_acceptance_demo_over_stdio_with_only_mcp_on_stdout(tmp_path: Path, how: str) -> None:
    if how == "console-script":
        script = console_script()
        assert script.exists(), f"{script} is missing: is the package installed in this environment?"
        cmd = [str(script)]
    else:
        cmd = server_command()
    not_mcp: list[Exception] = []

    async def on_message(
        message: RequestResponder[types.ServerRequest, types.ClientResult] | types.ServerNotification | Exception,
    ) -> None:
        # the SDK hands every stdout line that is not a JSON-RPC message to the session as an exception
        if isinstance(message, Exception):
            not_mcp.append(message)

    stderr_path = tmp_path / "stdio.stderr"
    with stderr_path.open("w") as errlog:
        async with stdio_session(cmd, tmp_path / "data", errlog, on_message) as client:
            await run_acceptance_demo(client)

    assert not_mcp == [], f"stdout carried something other than MCP: {not_mcp!r}"
    events = [line.get("event") for line in json_lines(stderr_path.read_text())]
    assert "store_ready" in events, stderr_path.read_text()
    assert (tmp_path / "data" / "index.db").exists()


@pytest.mark.parametrize("connect", [sse_session, http_session], ids=["sse", "streamable-http"])
async def test_acceptance_demo_over_http_transports(
    server: ServerProcess, connect: Callable[[ServerProcess], AbstractAsyncContextManager[Client]]
) -> None:
    async with connect(server) as client:
        await run_acceptance_demo(client)
    assert "store_ready" in [line.get("event") for line in json_lines(server.stderr())]


async def test_sse_and_streamable_http_share_one_store(server: ServerProcess) -> None:
    async with sse_session(server) as sse:
        assert (await sse.call("save_process", markdown=MAILROOM))["id"] == MAILROOM_ID
    async with http_session(server) as http:
        found = await http.call("find_processes", query=QUERY)
    assert found["processes"][0]["id"] == MAILROOM_ID
