"""A client that posts calls to its SSE session and never reads the stream their answers go to, on
the real server: the server holds a bounded number of answers for it (further calls get 503), its
memory stays bounded, and the stream is cut once its writing has stayed paused
(`serve.WRITE_STALL_S`)."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from robot_mcp_memory.serve import WRITE_STALL_S
from robot_mcp_memory.server import MAX_SSE_BACKLOG
from tests.conftest import doc
from tests.e2e.harness import HOST, ServerProcess, http_session, initialize_request

pytestmark = pytest.mark.e2e

#: Calls posted, each answered with a ~190 kB document: ~280 MB held for the client if every answer waited.
CALLS = 1500
#: What the server may grow by while the client reads nothing (docs/operations.md states the bound).
RSS_BOUND = 120 * 1024 * 1024
WAIT = 60.0  # bound on every wait; a passing test never gets near it


def rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) * 1024


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


def cut(sock: socket.socket) -> bool:
    """Whether the server has ended the stream: what it had sent is read, then the end."""
    sock.settimeout(WAIT)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


async def test_a_client_that_never_reads_its_sse_stream_is_refused_then_cut_and_memory_stays_bounded(
    server: ServerProcess,
) -> None:
    async with http_session(server) as client:
        saved = await client.call("save_process", markdown=doc("big", "a big one", "word " * 38_000))
        assert saved.get("error") is None, saved

    with unread_stream(server) as (sock, path):
        url = server.url(path)
        async with httpx.AsyncClient(timeout=WAIT) as http:
            await http.post(url, json=initialize_request("slow-reader"))
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            before = rss(server.pid)
            statuses: list[int] = []
            limit = anyio.Semaphore(8)

            async def call(n: int) -> None:
                async with limit:
                    if statuses.count(503) or rss(server.pid) - before > RSS_BOUND:
                        return
                    body = {
                        "jsonrpc": "2.0",
                        "id": 10 + n,
                        "method": "tools/call",
                        "params": {"name": "get_process", "arguments": {"id": "big"}},
                    }
                    statuses.append((await http.post(url, json=body)).status_code)

            async with anyio.create_task_group() as tg:
                for n in range(CALLS):
                    tg.start_soon(call, n)
            grown = rss(server.pid) - before
            assert 503 in statuses, (len(statuses), grown)
            assert statuses.count(202) >= MAX_SSE_BACKLOG
            assert grown < RSS_BOUND

            with anyio.fail_after(WRITE_STALL_S + WAIT):
                while "serve.reader_stalled" not in server.stderr():  # noqa: ASYNC110 - the log is the signal
                    await anyio.sleep(0.2)
            assert await anyio.to_thread.run_sync(cut, sock)
            # The session is gone with its stream: nothing is held for it any more.
            assert (await http.post(url, json={"jsonrpc": "2.0", "method": "ping", "id": 1})).status_code == 404
    assert (await anyio.to_thread.run_sync(lambda: httpx.get(server.url("/healthz")))).status_code == 200
