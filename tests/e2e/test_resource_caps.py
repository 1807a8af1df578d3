"""What one client can hold of the real server: one robot token cannot take every MCP session
(the per-robot cap counts the sessions mcp's session manager really holds open, so one the robot
ends frees its slot), and a connection that never sends a request is closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from robot_mcp_memory.surfaces.mcp.server import MAX_PER_ROBOT
from robot_mcp_memory.surfaces.serve import HEADERS_TIMEOUT_S
from tests.e2e.harness import ServerProcess, initialize_request, running

pytestmark = pytest.mark.e2e  # starts the real server

ADMIN = "admin-token-0123456789"
ROBOT = "tok-rap-1-abcdefgh"
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    env = {"MEMORY_TOKEN": ADMIN, "MEMORY_ROBOT_TOKENS": f"rap-1:{ROBOT}", "MEMORY_EMBEDDER": "none"}
    async with running(tmp_path, env) as proc:
        yield proc


async def _open(http: httpx.AsyncClient, server: ServerProcess, token: str) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}", "accept": ACCEPT}
    return await http.post(server.url("/mcp"), json=initialize_request("caps"), headers=headers)


async def test_a_robot_past_its_session_cap_gets_503_while_the_admin_still_gets_in(server: ServerProcess) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        sessions = []
        for _ in range(MAX_PER_ROBOT):
            r = await _open(http, server, ROBOT)
            assert r.status_code == 200, r.text
            sessions.append(r.headers["mcp-session-id"])
        refused = await _open(http, server, ROBOT)
        assert refused.status_code == 503
        assert refused.json()["error"] == "busy"
        assert (await _open(http, server, ADMIN)).status_code == 200
        ended = await http.delete(
            server.url("/mcp"), headers={"authorization": f"Bearer {ROBOT}", "mcp-session-id": sessions[0]}
        )
        assert ended.status_code == 200
        assert (await _open(http, server, ROBOT)).status_code == 200
        assert (await _open(http, server, ROBOT)).status_code == 503


async def test_opening_requests_sent_all_at_once_still_stop_at_the_cap(server: ServerProcess) -> None:
    """Sent at once, 200 initializes all opened sessions, and 1,000 locked out everyone (found
    by review): the cap counted a session only once its answer came back."""
    async with httpx.AsyncClient(timeout=30.0, limits=httpx.Limits(max_connections=100)) as http:
        answers = await asyncio.gather(*(_open(http, server, ROBOT) for _ in range(MAX_PER_ROBOT + 20)))
        assert sorted(r.status_code for r in answers) == [200] * MAX_PER_ROBOT + [503] * 20
        assert (await _open(http, server, ADMIN)).status_code == 200


async def test_a_connection_that_never_sends_its_headers_is_closed(server: ServerProcess) -> None:
    """Without a deadline such connections stayed open for good, until no one could connect."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")  # and never the blank line
    async with asyncio.timeout(HEADERS_TIMEOUT_S + 10):
        assert await reader.read() == b""
    writer.close()
    async with httpx.AsyncClient(timeout=10.0) as http:
        assert (await http.get(server.url("/healthz"))).status_code == 200
