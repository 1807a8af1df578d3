"""A Streamable HTTP client that sends calls on one connection (pipelined, HTTP/1.1) and never
reads their answers, on the real server: the server answers one request of a connection at a
time (h11 stops reading the connection while one is answered), so what it holds for the client
is one answer and the socket buffers, and the connection is cut once its writing has stayed
paused (`serve.WRITE_STALL_S`). Other clients are served meanwhile."""

from __future__ import annotations

import json
import socket
import time

import anyio
import httpx
import pytest

from robot_mcp_memory.surfaces.serve import WRITE_STALL_S
from tests.e2e.harness import (
    HOST,
    ServerProcess,
    embedder_settled,
    http_session,
    initialize_request,
    rss,
    save_big_document,
    server_ended,
)

pytestmark = pytest.mark.e2e

#: Calls sent without reading, each answered with a ~190 kB document (~57 MB of answers).
CALLS = 300
#: What the server may grow by while they wait: buffering them all would pass it.
RSS_BOUND = 32 * 1024 * 1024
WAIT = 60.0  # bound on every wait; a passing test never gets near it
CUT_BOUND = WRITE_STALL_S + WAIT


def request(port: int, body: dict[str, object], session: str | None) -> bytes:
    data = json.dumps(body).encode()
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: {HOST}:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2025-06-18",
        f"Content-Length: {len(data)}",
    ]
    if session is not None:
        head.append(f"Mcp-Session-Id: {session}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def session_of(port: int) -> str:
    """A new MCP session's id, through an ordinary client that reads its answer."""
    got = httpx.post(
        f"http://{HOST}:{port}/mcp",
        json=initialize_request("slow-http-reader"),
        headers={"Accept": "application/json, text/event-stream"},
        timeout=WAIT,
    )
    assert got.status_code == 200, got.text
    sid = got.headers.get("mcp-session-id")
    assert sid, got.headers
    return str(sid)


async def test_a_streamable_http_client_that_never_reads_is_cut_and_memory_stays_bounded(
    server: ServerProcess,
) -> None:
    await save_big_document(server)
    await embedder_settled(server)
    sid = await anyio.to_thread.run_sync(session_of, server.port)
    before = rss(server.pid)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(2.0)
    try:
        sock.connect((HOST, server.port))
        sock.sendall(request(server.port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid))
        call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_process", "arguments": {"id": "big"}}}
        sent = 0
        for n in range(CALLS):  # until the server stops reading them (the socket's buffers fill)
            try:
                sock.sendall(request(server.port, {**call, "id": 100 + n}, sid))
            except TimeoutError:
                break
            sent += 1
        assert sent >= 2, sent
        # Meanwhile another client is served as ever.
        async with http_session(server) as other:
            assert (await other.call("list_processes")).get("error") is None
        grown = rss(server.pid) - before
        assert grown < RSS_BOUND, f"the server grew by {grown / 2**20:.1f} MiB for a client that reads nothing"

        stalled = (
            f"the server did not cut, in {CUT_BOUND:.0f} s, the connection of a client that reads nothing "
            f"(no serve.reader_stalled in its log): the write-stall deadline ({WRITE_STALL_S:.0f} s) is not kept"
        )
        started = time.monotonic()
        with anyio.fail_after(CUT_BOUND, reason=stalled):
            while "serve.reader_stalled" not in server.stderr():  # noqa: ASYNC110 - the log is the signal
                await anyio.sleep(0.2)
        assert time.monotonic() - started < CUT_BOUND
        assert await anyio.to_thread.run_sync(server_ended, sock, WAIT), (
            f"logged as cut, yet the connection was open {WAIT:.0f} s on"
        )
    finally:
        sock.close()
    assert rss(server.pid) - before < RSS_BOUND
    health = await anyio.to_thread.run_sync(lambda: httpx.get(server.url("/healthz"), timeout=WAIT))
    assert health.status_code == 200
