"""A request over the 2 MiB limit gets a JSON-RPC error the official SDK client survives, on SSE
and on Streamable HTTP (the real server process, the real `mcp` client). mcp's own answer, a
plain-text 413, ended the client's whole session: over SSE its writer stopped and every later
call hung; over Streamable HTTP the error tore down the client."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import McpError

from robot_mcp_memory.surfaces.mcp.oversized import INVALID_REQUEST
from robot_mcp_memory.surfaces.mcp.server import MAX_REQUEST_BODY
from tests.conftest import Client, doc
from tests.e2e.harness import ServerProcess, http_session, initialize_request, sse_session

pytestmark = pytest.mark.e2e

Session = Callable[[ServerProcess], AbstractAsyncContextManager[Client]]


def _sse(server: ServerProcess) -> AbstractAsyncContextManager[Client]:
    return sse_session(server)


def _http(server: ServerProcess) -> AbstractAsyncContextManager[Client]:
    return http_session(server)


@pytest.mark.parametrize("session", [_sse, _http], ids=["sse", "streamable-http"])
async def test_an_oversized_call_is_a_json_rpc_error_and_the_session_goes_on(
    server: ServerProcess, session: Session
) -> None:
    huge = doc("too-big", "Too big", "## Steps\n" + "1. walk\n" * (MAX_REQUEST_BODY // 8 + 1000))
    with anyio.fail_after(60):
        async with session(server) as client:
            with pytest.raises(McpError) as refused:
                await client.session.call_tool("save_process", {"markdown": huge})
            assert refused.value.error.code == INVALID_REQUEST
            assert isinstance(refused.value.error.data, dict)
            assert refused.value.error.data["limit"] == MAX_REQUEST_BODY
            assert refused.value.error.data["size"] > MAX_REQUEST_BODY
            # the same session still works, and nothing of the refused call was stored
            saved = await client.call("save_process", markdown=doc("small", "Small enough", "## Steps\n1. walk"))
            assert saved["id"] == "small"
            listed = await client.call("list_processes")
            assert [p["id"] for p in listed["processes"]] == ["small"]


async def _mcp_session(http: httpx.AsyncClient, server: ServerProcess) -> dict[str, str]:
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    r = await http.post(server.url("/mcp"), json=initialize_request("raw"), headers=accept)
    assert r.status_code == 200
    headers = {**accept, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(server.url("/mcp"), json=done, headers=headers)).status_code == 202
    return headers


def _answer(r: httpx.Response) -> Any:
    """The JSON-RPC message of a Streamable HTTP answer (JSON, or one SSE event)."""
    if r.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return r.json()


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
async def test_the_error_carries_the_request_id_wherever_the_client_wrote_it(
    server: ServerProcess, id_last: bool
) -> None:
    """The Python SDK writes ``id`` before ``method``; the TypeScript SDK writes it last."""
    arguments = {"markdown": "x" * (MAX_REQUEST_BODY + 10)}
    body: dict[str, Any] = {"method": "tools/call", "params": {"name": "save_process", "arguments": arguments}}
    body = {**body, "jsonrpc": "2.0", "id": "call-7"} if id_last else {"jsonrpc": "2.0", "id": "call-7", **body}
    with anyio.fail_after(60):
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await _mcp_session(http, server)
            r = await http.post(server.url("/mcp"), content=json.dumps(body).encode(), headers=headers)
            assert r.status_code == 200
            answer = _answer(r)
            assert answer["id"] == "call-7"
            assert answer["error"]["code"] == INVALID_REQUEST
            listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
            r = await http.post(server.url("/mcp"), json=listing, headers=headers)
            assert r.status_code == 200
            assert _answer(r)["id"] == 8


async def test_an_oversized_body_without_a_findable_id_is_a_json_413(server: ServerProcess) -> None:
    middle = {"params": {"x": "y" * (MAX_REQUEST_BODY + 10)}, "id": 1, "method": "tools/call", "jsonrpc": "2.0"}
    body = json.dumps(middle).encode()  # the id neither first nor last
    with anyio.fail_after(60):
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await _mcp_session(http, server)
            r = await http.post(server.url("/mcp"), content=body, headers=headers)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == INVALID_REQUEST
    assert r.json()["id"] is None
