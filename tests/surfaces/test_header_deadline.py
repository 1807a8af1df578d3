"""The HTTP server's deadlines (`serve.Deadlines`), on a real uvicorn over real sockets: a connection
that sends nothing or half a request is closed; one whose request is being answered (a stream
outlasting the deadline) is not; a client that stops reading an answer is cut, one that reads
slowly is not."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from robot_mcp_memory.surfaces.serve import DeadlineConfig, Deadlines, _more_open_files

WAIT = 10.0  # bound on every wait; a passing test never gets near it
QUICK = Deadlines(headers_s=0.3, write_stall_s=1.0)
#: The answer of ``/big``: far more than the kernel's buffers and the transport's hold.
BIG = 16 * 1024 * 1024


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    if scope["path"] == "/slow":  # a stream that outlasts the deadline
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(0.2)
    if scope["path"] == "/big":  # more than a client that does not read can take
        chunk = b"x" * (1024 * 1024)
        for _ in range(BIG // len(chunk)):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"done\n"})


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = DeadlineConfig(app, deadlines=QUICK, log_config=None, log_level="warning", lifespan="off")
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


@pytest.mark.e2e  # seconds of a client not reading, and 16 MB through real sockets
async def test_a_client_that_stops_reading_is_cut_and_one_that_reads_is_not() -> None:
    async with serving() as port:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        async with asyncio.timeout(WAIT):
            got = await reader.read(65536)  # the answer begins
        assert got.startswith(b"HTTP/1.1 200")
        await asyncio.sleep(3 * QUICK.write_stall_s)  # the client reads nothing meanwhile
        with contextlib.suppress(ConnectionResetError):
            async with asyncio.timeout(WAIT):
                while chunk := await reader.read(1024 * 1024):
                    got += chunk
        assert len(got) < BIG  # cut short, not answered in full
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        async with asyncio.timeout(WAIT):
            answer = await reader.read()
        assert len(answer) > BIG  # read as it came: answered in full
        assert answer.endswith(b"done\n\r\n0\r\n\r\n")  # the last chunk, then the end of the body
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
