"""A client that posts calls to its SSE session and never reads the stream their answers go to, on
the real server: the server holds a bounded number of answers for it (further calls get 503), its
memory stays bounded, and the stream is cut once its writing has stayed paused
(`serve.WRITE_STALL_S`)."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator

import anyio
import httpx
import pytest

from robot_mcp_memory.surfaces.mcp.server import MAX_SSE_BACKLOG
from robot_mcp_memory.surfaces.serve import WRITE_STALL_S
from tests.e2e.harness import (
    HOST,
    ServerProcess,
    embedder_settled,
    initialize_request,
    rss,
    save_big_document,
    server_ended,
    sse_session,
)

pytestmark = pytest.mark.e2e

#: Calls posted, each answered with a ~190 kB document (~1-2.5 MB in the server while it waits).
CALLS = 1500
#: What the server may grow by in all (the accepted calls' processing included): unbounded, it
#: passed this within ~250 calls.
RSS_BOUND = 250 * 1024 * 1024
#: What it may grow by once the accepted calls have run, while the client keeps posting (noise).
PLATEAU = 32 * 1024 * 1024
WAIT = 60.0  # bound on every wait; a passing test never gets near it
#: How long to wait, once the answers wait unread, for the server to cut the stream before
#: declaring it never will: the write-stall deadline, then the bound on every wait.
CUT_BOUND = WRITE_STALL_S + WAIT


@contextlib.contextmanager
def unread_stream(server: ServerProcess) -> Iterator[tuple[socket.socket, str]]:
    """``GET /sse`` on a socket with a small receive buffer, read only up to the endpoint event:
    (the socket, the path to post to)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(WAIT)
    try:
        sock.connect((HOST, server.port))
        sock.sendall(f"GET /sse HTTP/1.1\r\nHost: {HOST}:{server.port}\r\nAccept: text/event-stream\r\n\r\n".encode())
        seen = b""
        while (found := re.search(rb"data: (/messages/\?session_id=[0-9a-f]{32})\r?\n", seen)) is None:
            chunk = sock.recv(4096)
            assert chunk, seen
            seen += chunk
        yield sock, found.group(1).decode()
    finally:
        sock.close()


async def test_a_client_that_never_reads_its_sse_stream_is_refused_then_cut_and_memory_stays_bounded(
    server: ServerProcess,
) -> None:
    await save_big_document(server)
    await embedder_settled(server)

    with unread_stream(server) as (sock, path):
        url = server.url(path)
        async with httpx.AsyncClient(timeout=WAIT) as http:
            await http.post(url, json=initialize_request("slow-reader"))
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            before = rss(server.pid)
            statuses: list[int] = []
            limit = anyio.Semaphore(8)

            posted = 0
            round_from = 0

            async def call(until_refused: bool) -> None:
                nonlocal posted
                async with limit:
                    if (until_refused and 503 in statuses[round_from:]) or rss(server.pid) - before > RSS_BOUND:
                        return  # (unbounded, the server passes RSS_BOUND: stop there)
                    posted += 1
                    body = {
                        "jsonrpc": "2.0",
                        "id": 10 + posted,
                        "method": "tools/call",
                        "params": {"name": "get_process", "arguments": {"id": "big"}},
                    }
                    statuses.append((await http.post(url, json=body)).status_code)

            # Rounds of calls until the server refuses one, each waited out (every accepted call
            # has run), until a round gets none in: the answers then wait, unread, for the client.
            for _ in range(20):
                round_from = len(statuses)
                async with anyio.create_task_group() as tg:
                    for _ in range(CALLS):
                        tg.start_soon(call, True)
                assert 503 in statuses[round_from:], (len(statuses), rss(server.pid) - before)
                accepted = statuses.count(202)
                unrun = f"the server did not run the {accepted} accepted calls in {WAIT:.0f} s"
                with anyio.fail_after(WAIT, reason=unrun):
                    while server.stderr().count('"tool": "get_process"') < 8 + accepted:  # noqa: ASYNC110 - the log is the signal
                        await anyio.sleep(0.1)
                if 202 not in statuses[round_from:]:
                    break
            assert statuses[-1] == 503
            assert accepted >= MAX_SSE_BACKLOG
            held = rss(server.pid)
            async with anyio.create_task_group() as tg:  # the client keeps posting
                for _ in range(CALLS):
                    tg.start_soon(call, False)
            after = rss(server.pid)
            assert statuses.count(202) == accepted
            assert set(statuses) <= {202, 503, 404}  # 404 once the stream was cut and the session gone
            assert after - held < PLATEAU
            assert after - before < RSS_BOUND

            stalled = (
                f"the server did not cut, in {CUT_BOUND:.0f} s, the SSE stream of a client that reads nothing "
                f"(no serve.reader_stalled in its log): the write-stall deadline ({WRITE_STALL_S:.0f} s) is not kept"
            )
            with anyio.fail_after(CUT_BOUND, reason=stalled):
                while "serve.reader_stalled" not in server.stderr():  # noqa: ASYNC110 - the log is the signal
                    await anyio.sleep(0.2)
            assert await anyio.to_thread.run_sync(server_ended, sock, WAIT), (
                f"logged as cut, yet the stream was open {WAIT:.0f} s on"
            )
            # The session is gone with its stream: nothing is held for it any more.
            assert (await http.post(url, json={"jsonrpc": "2.0", "method": "ping", "id": 1})).status_code == 404
    assert (await anyio.to_thread.run_sync(lambda: httpx.get(server.url("/healthz")))).status_code == 200


async def test_a_client_that_reads_its_sse_stream_is_never_refused(server: ServerProcess) -> None:
    """Every answer written to the stream frees its slot: calls one after another, and as many at
    once as the bound allows, far past it in all."""
    async with sse_session(server) as client:
        for _ in range(3 * MAX_SSE_BACKLOG):
            assert "error" not in await client.call("list_processes")
        for _ in range(3):
            async with anyio.create_task_group() as tg:
                for _ in range(MAX_SSE_BACKLOG):
                    tg.start_soon(client.call, "list_processes")
        assert "error" not in await client.call("list_processes")
