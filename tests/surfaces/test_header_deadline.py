"""The HTTP server's deadline on request headers, on a real uvicorn over real sockets: a connection
that sends nothing or half a request is closed; one whose request is being answered (a stream
outlasting the deadline) is not."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import Receive, Scope, Send

from robot_mcp_memory.surfaces.serve import HeaderDeadline, _more_open_files

WAIT = 10.0  # bound on every wait; a passing test never gets near it


class QuickDeadline(HeaderDeadline):
    headers_timeout_s = 0.3


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    if scope["path"] == "/slow":  # a stream that outlasts the deadline
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(0.2)
    await send({"type": "http.response.body", "body": b"done\n"})


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, log_level="warning", http=QuickDeadline, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(WAIT):
            while not server.started:  # noqa: ASYNC110 - uvicorn says it has started by this flag only
                await asyncio.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT)
        sock.close()


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server closes the connection (within WAIT) without answering."""
    async with asyncio.timeout(WAIT):
        return await reader.read() == b""


async def test_silent_and_half_sent_connections_are_closed_and_a_stream_is_not() -> None:
    async with serving() as port:
        silent = await asyncio.open_connection("127.0.0.1", port)
        half = await asyncio.open_connection("127.0.0.1", port)
        half[1].write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # no end of headers, ever
        assert await closed_by_server(silent[0])
        assert await closed_by_server(half[0])

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        async with asyncio.timeout(WAIT):
            answer = await reader.read()
        assert answer.startswith(b"HTTP/1.1 200")
        assert answer.count(b"tick") == 4
        assert b"done" in answer
        writer.close()


async def test_a_kept_alive_connection_gets_a_fresh_deadline_for_its_next_request() -> None:
    async with serving() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(2):
            await asyncio.sleep(0.2)  # each under the deadline on its own, not together
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            async with asyncio.timeout(WAIT):
                answer = await reader.readuntil(b"\r\n0\r\n\r\n")  # the end of a chunked body
            assert answer.startswith(b"HTTP/1.1 200")
            assert b"done" in answer
        assert await closed_by_server(reader)  # then idle past the deadline: closed
        writer.close()


def test_the_server_raises_its_open_file_limit_within_the_hard_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        _more_open_files()
        raised, same_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert same_hard == hard
        assert raised == (65_536 if hard == resource.RLIM_INFINITY else min(65_536, hard))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
