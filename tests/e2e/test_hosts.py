"""DNS-rebinding protection on the real server: the names in ``MEMORY_ALLOWED_HOSTS`` reach MCP
(SSE and Streamable HTTP) and the REST API alike, with or without a port in ``Host``, and a
foreign name is refused on every one of them without a traceback in the log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import ServerProcess, initialize_request

pytestmark = pytest.mark.e2e  # starts the real server


@pytest.fixture
async def proxied(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    proc = ServerProcess(
        data_dir=tmp_path / "data",
        log_dir=tmp_path,
        env={"MEMORY_ALLOWED_HOSTS": "memory-host", "MEMORY_EMBEDDER": "none"},
    )
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


async def _status(http: httpx.AsyncClient, server: ServerProcess, path: str, host: str) -> int:
    if path == "/mcp":
        r = await http.post(
            server.url(path),
            json=initialize_request("hosts-test"),
            headers={"host": host, "accept": "application/json, text/event-stream"},
        )
        return r.status_code
    if path == "/messages/":
        r = await http.post(server.url(path + "?session_id=" + "0" * 32), json={}, headers={"host": host})
        return r.status_code
    # /sse streams until closed: the status line is the answer
    async with http.stream("GET", server.url(path), headers={"host": host}) as r:
        return r.status_code


@pytest.mark.parametrize("path", ["/mcp", "/sse", "/messages/", "/api/stats", "/metrics"])
async def test_a_listed_name_is_served_with_or_without_a_port_and_a_foreign_one_is_refused(
    proxied: ServerProcess, path: str
) -> None:
    """Behind a reverse proxy on 80 or 443 the ``Host`` header carries no port."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        # Names compare as DNS names do, case-insensitively, on MCP as on the REST API.
        for host in ("memory-host", f"MEMORY-HOST:{proxied.port}", "localhost", f"127.0.0.1:{proxied.port}"):
            assert await _status(http, proxied, path, host) != 421, host
        for host in ("attacker.example", f"attacker.example:{proxied.port}", "memory-host.attacker.example"):
            assert await _status(http, proxied, path, host) == 421, host
            r = await http.get(proxied.url(path if path != "/sse" else "/mcp"), headers={"host": host})
            assert r.json()["error"] == "misdirected"  # the same actionable answer everywhere
            assert "MEMORY_ALLOWED_HOSTS" in r.json()["detail"]
    log = proxied.stderr()
    assert "Traceback" not in log
    assert "Exception in ASGI application" not in log
    for line in log.splitlines():  # mcp's own refusal warnings too: one format for a collector
        assert isinstance(json.loads(line), dict), line


async def test_numbers_mcp_would_turn_into_null_are_refused_over_http(proxied: ServerProcess) -> None:
    """``1e400`` is infinity to mcp's parser and null to its session: set_robot_meta would delete
    the key instead of storing a number (found by review). The same rule as over stdio."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        headers = {"accept": "application/json, text/event-stream"}
        r = await http.post(proxied.url("/mcp"), json=initialize_request("numbers"), headers=headers)
        headers["mcp-session-id"] = r.headers["mcp-session-id"]
        init_done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(proxied.url("/mcp"), json=init_done, headers=headers)
        for number in ("1e400", "-1e400", "NaN", "9" * 5000):
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "learn", "arguments": {}}}
            args = {"insight": "a reading", "context": {"params": {"n": "N"}}}
            body = json.dumps(call).replace("{}}}", json.dumps(args).replace('"N"', number) + "}}")
            r = await http.post(
                proxied.url("/mcp"), content=body, headers={**headers, "content-type": "application/json"}
            )
            assert r.status_code == 400, (number, r.text[:200])
            assert r.json()["id"] == 3
            assert r.json()["error"]["code"] == -32600


async def test_healthz_answers_any_name_and_metrics_only_the_listed_ones(proxied: ServerProcess) -> None:
    """A probe may ask by address; a page that rebinds its name to this server may not read the
    counters (found by review: /metrics answered any Host)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        assert (await http.get(proxied.url("/healthz"), headers={"host": "10.1.2.3:9103"})).status_code == 200
        assert (await http.get(proxied.url("/metrics"), headers={"host": "attacker.example"})).status_code == 421
        assert (await http.get(proxied.url("/metrics"), headers={"host": "memory-host"})).status_code == 200


async def test_a_body_nested_past_the_parser_is_a_json_rpc_parse_error_not_a_500(proxied: ServerProcess) -> None:
    """mcp's transport answered 500 and logged a traceback for each such POST (found by review)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        for body in ("[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000):
            r = await http.post(proxied.url("/mcp"), content=body, headers=headers)
            assert r.status_code == 400
            assert r.json()["error"]["code"] == -32700
        # a deep but parseable body still reaches mcp (which says what is wrong with it)
        r = await http.post(proxied.url("/mcp"), content="[" * 450 + "]" * 450, headers=headers)
        assert r.status_code != 500
    log = proxied.stderr()
    assert "Traceback" not in log
    assert "RecursionError" not in log
