"""`StrictNumbers`, the guard in front of mcp's POST endpoints: a body mcp would misread, or could
not answer, is refused with a JSON-RPC error before anything runs — on ``/mcp`` and on every path
under ``/messages/`` (mcp's SSE endpoint takes them all)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.surfaces.mcp.server import StrictNumbers

SESSION = "0" * 32


class Inner:
    """The app behind the guard: records that it ran (and answers 202, as mcp's SSE endpoint)."""

    def __init__(self) -> None:
        self.ran = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.ran += 1
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"Accepted"})


async def post(app: StrictNumbers, path: str, body: bytes) -> tuple[int, Any]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    path, _, query = path.partition("?")
    scope: Scope = {"type": "http", "method": "POST", "path": path, "query_string": query.encode(), "headers": []}
    await app(scope, receive, send)
    raw = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(raw) if sent[0]["status"] != 202 else None


def call(rid: object, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": "set_robot_meta", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


@pytest.mark.parametrize(
    "path", ["/messages/", f"/messages/?session_id={SESSION}", f"/messages/x?session_id={SESSION}"]
)
async def test_infinity_is_refused_under_every_messages_path(path: str) -> None:
    inner = Inner()
    body = json.dumps(call(3, {"robot_id": "r1", "meta": {"battery": float("inf")}})).encode()
    assert b"Infinity" in body
    status, answer = await post(StrictNumbers(inner), path, body)
    assert (status, answer["id"], answer["error"]["code"]) == (400, 3, -32600)
    assert inner.ran == 0


@pytest.mark.parametrize("path", ["/mcp", f"/messages/?session_id={SESSION}"])
async def test_a_body_that_is_not_utf8_is_a_parse_error(path: str) -> None:
    inner = Inner()
    status, answer = await post(StrictNumbers(inner), path, b'{"jsonrpc": "2.0", "id": 1, "method": "ping\xff"}')
    assert (status, answer["error"]["code"]) == (400, -32700)
    assert inner.ran == 0


async def test_a_request_whose_id_holds_a_lone_surrogate_is_refused_before_it_runs() -> None:
    inner = Inner()
    body = b'{"jsonrpc": "2.0", "id": "x\\ud800", "method": "tools/call", "params": {"name": "delete_process"}}'
    status, answer = await post(StrictNumbers(inner), "/mcp", body)
    assert (status, answer["id"], answer["error"]["code"]) == (400, None, -32600)
    assert inner.ran == 0
    paired = json.dumps(call("smile \U0001f600", {"robot_id": "r1"})).encode()  # \ud83d\ude00: a whole character
    assert b"\\ud83d" in paired
    assert (await post(StrictNumbers(inner), "/mcp", paired))[0] == 202
    assert inner.ran == 1


async def test_malformed_sse_messages_are_answered_once_each_and_logged_at_most_once_a_minute() -> None:
    inner = Inner()
    guard = StrictNumbers(inner)
    with structlog.testing.capture_logs() as logs:
        for n in range(20):
            status, answer = await post(guard, f"/messages/?session_id={SESSION}", json.dumps({"id": n}).encode())
            assert (status, answer["id"], answer["error"]["code"]) == (400, n, -32600)
    assert inner.ran == 0  # nothing reached the session: no "Internal Server Error" pushed into it
    assert [e["event"] for e in logs] == ["transport.bad_message"]
    good = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert (await post(guard, f"/messages/?session_id={SESSION}", good))[0] == 202
