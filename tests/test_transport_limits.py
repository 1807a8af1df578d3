from __future__ import annotations

import anyio
from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.app import Memory
from robot_mcp_memory.server import SseCap, build_server


def test_transport_limits_are_mcp_defaults_or_tighter(memory: Memory) -> None:
    s = build_server(memory).settings
    assert s.max_request_body_size <= 4 * 1024 * 1024
    assert s.max_sessions is not None
    assert s.max_sessions <= 10_000
    assert s.session_idle_timeout is not None
    assert s.session_idle_timeout <= 30 * 60
    ts = s.transport_security
    assert ts is not None
    assert ts.enable_dns_rebinding_protection


async def test_sse_streams_beyond_the_cap_are_refused_with_503() -> None:
    release = anyio.Event()
    entered = anyio.Event()

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        entered.set()
        await release.wait()

    cap = SseCap(stream, limit=1)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope: Scope = {"type": "http", "method": "GET", "path": "/sse", "headers": []}
    async with anyio.create_task_group() as tg:
        tg.start_soon(cap, dict(scope), receive, send)
        await entered.wait()
        await cap(dict(scope), receive, send)
        assert sent[0]["status"] == 503
        release.set()
    assert cap.open == 0
