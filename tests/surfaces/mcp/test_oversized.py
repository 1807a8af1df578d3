"""Finding the id of an oversized JSON-RPC request from the ends of its body (oversized.py)."""

from __future__ import annotations

import json

import pytest
from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.surfaces.mcp.oversized import REFUSED, OversizedRequests, RefusedBody, request_id

BIG = "x" * 10_000


def _ends(obj: object) -> tuple[bytes, bytes]:
    body = json.dumps(obj).encode()
    return body[:4096], body[-4096:]


@pytest.mark.parametrize("rid", [7, -3, "call-7", 'with "quotes" \\ inside'])
def test_the_id_is_found_first_after_jsonrpc_or_last(rid: int | str) -> None:
    params = {"name": "save_process", "arguments": {"markdown": BIG, "id": "not-this-one"}}
    python_order = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    id_first = {"id": rid, "jsonrpc": "2.0", "method": "tools/call", "params": params}
    typescript_order = {"method": "tools/call", "params": params, "jsonrpc": "2.0", "id": rid}
    for obj in (python_order, id_first, typescript_order):
        assert request_id(*_ends(obj)) == rid, obj


def test_an_id_inside_the_params_is_never_taken_for_the_requests() -> None:
    notification = {"jsonrpc": "2.0", "method": "x", "params": {"blob": BIG, "id": 5}}
    assert request_id(*_ends(notification)) is None
    middle = {"method": "x", "id": 5, "params": {"blob": BIG}}
    assert request_id(*_ends(middle)) is None  # neither first nor last: not searched for


async def test_a_body_within_the_limit_passes_through_whole_and_an_oversized_one_is_replaced() -> None:
    seen: list[tuple[Scope, bytes]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append((scope, body))

    async def send(message: Message) -> None:
        raise AssertionError(f"answered by the middleware: {message}")

    def chunked(body: bytes) -> Receive:
        parts = [body[i : i + 1000] for i in range(0, len(body), 1000)]

        async def receive() -> Message:
            part = parts.pop(0)
            return {"type": "http.request", "body": part, "more_body": bool(parts)}

        return receive

    limit = 5000
    guard = OversizedRequests(app, limit)
    scope: Scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}  # chunked: no length
    small = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    await guard(dict(scope), chunked(small), send)
    big = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"a": "b" * 9000}}).encode()
    await guard(dict(scope), chunked(big), send)
    (first, first_body), (second, second_body) = seen
    assert first_body == small
    assert REFUSED not in first
    assert json.loads(second_body) == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "resources/read",
        "params": {"uri": "memory://refused/request-too-large"},
    }
    assert second[REFUSED] == RefusedBody(size=len(big), limit=limit, complete=True)
    assert dict(second["headers"])[b"content-length"] == str(len(second_body)).encode()
