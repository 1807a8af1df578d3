"""What the server says when it starts serving HTTP: every address an operator opens."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.harness import ServerProcess, json_lines

pytestmark = pytest.mark.e2e


async def test_the_startup_line_names_the_dashboard_url_and_it_opens(server: ServerProcess) -> None:
    serving = [line for line in json_lines(server.stderr()) if line.get("event") == "serve.http"]
    assert len(serving) == 1, server.stderr()
    line = serving[0]
    assert line["dashboard"] == server.url("/")
    assert line["sse"] == server.url("/sse")
    assert line["streamable_http"] == server.url("/mcp")
    async with httpx.AsyncClient(timeout=10, follow_redirects=True) as http:
        r = await http.get(line["dashboard"])
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
