"""A JSON-RPC request over the size limit, answered with a JSON-RPC error its client survives.

mcp's transports answer a body over ``max_request_body_size`` with a plain-text 413, and the
official SDK client treats any non-2xx answer to a POST as fatal: over SSE its writer task stops
(every later call hangs), over Streamable HTTP the error tears down the client's task group. The
answer a client handles is a JSON-RPC error carrying the request's id — over SSE on the session's
stream, over Streamable HTTP in the POST's answer — and only the transport can send either.

`OversizedRequests` (pure ASGI) therefore reads an oversized POST to its end without keeping it
(its first and last `_EDGE` bytes are kept), finds the request's id, and hands the transport in
its place a small ``resources/read`` request with that id, the scope marked with what was refused
(`REFUSED`). The server answers that request with the JSON-RPC error (`MemoryMCP.read_resource`),
on whichever transport it came by. The id is the first member of the object, or the one after
``"jsonrpc"`` (the Python SDK's order), or the last member (the TypeScript SDK's order); a body
whose id is found in neither place, or that is not read to its end within `DRAIN_LIMIT`, gets a
JSON 413 with a JSON-RPC error (id null).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The scope key under which a replaced request carries its `RefusedBody`.
REFUSED = "robot_mcp_memory.refused_body"
#: The URI of the request put in place of an oversized one (answered only when `REFUSED` is set).
REFUSED_URI = "memory://refused/request-too-large"
#: An oversized body is read at most this far to find an id written last; past it the read stops.
DRAIN_LIMIT = 64 * 1024 * 1024
#: How much of each end of an oversized body is kept to find its id in.
_EDGE = 4096
#: JSON-RPC's "Invalid Request".
INVALID_REQUEST = -32600

_ID = r'(-?\d+|"(?:[^"\\]|\\.)*")'
_ID_FIRST = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID.encode())
_ID_LAST = re.compile(rb'"id"\s*:\s*' + _ID.encode() + rb"\s*\}\s*\Z")


@dataclass(frozen=True)
class RefusedBody:
    """What was refused: `size` bytes were read, all of them when `complete`."""

    size: int
    limit: int
    complete: bool

    def message(self) -> str:
        size = f"{self.size:,} bytes" if self.complete else f"more than {self.size:,} bytes"
        return (
            f"request too large: {size}, over this server's limit of {self.limit:,} bytes per request. "
            "Nothing was done; send less in one call (a process document holds at most 256,000 "
            "characters; split large data over several calls)"
        )

    def data(self) -> dict[str, Any]:
        return {"size": self.size, "limit": self.limit, "complete": self.complete}


def request_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC request whose body begins with `head` and ends with `tail`, when it
    stands first (or after ``"jsonrpc"``) or last in the object; None when not found there."""
    for pattern, edge in ((_ID_FIRST, head), (_ID_LAST, tail)):
        found = pattern.search(edge)
        if found is not None:
            try:
                value = json.loads(found.group(1))
            except ValueError:
                continue
            if isinstance(value, int | str):
                return value
    return None


class OversizedRequests:
    """Replaces a POST to `paths` whose body exceeds `limit` bytes with a small request that the
    server answers with a JSON-RPC error (see the module docstring); any other request passes
    through, its body unread when its ``Content-Length`` is within the limit."""

    def __init__(self, app: ASGIApp, limit: int, paths: tuple[str, ...] = ("/mcp", "/messages/")) -> None:
        self.app = app
        self.limit = limit
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) <= self.limit:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                await self.app(scope, replayed([message], receive), send)
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = bool(message.get("more_body"))
            if size > self.limit:
                break
            if not more:
                replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
                await self.app(scope, replayed(replay, receive), send)
                return
        body = b"".join(chunks)
        head, tail = body[:_EDGE], body[-_EDGE:]
        del chunks, body
        while more and size <= DRAIN_LIMIT:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            tail = (tail + chunk)[-_EDGE:]
            more = bool(message.get("more_body"))
        refused = RefusedBody(size=size, limit=self.limit, complete=not more)
        rid = request_id(head, tail if not more else b"")
        if rid is None:
            error = {"code": INVALID_REQUEST, "message": refused.message(), "data": refused.data()}
            await JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=413)(scope, receive, send)
            return
        small = json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "resources/read", "params": {"uri": REFUSED_URI}}
        ).encode()
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(small)).encode()))
        replaced = {**scope, "headers": headers, REFUSED: refused}
        await self.app(replaced, replayed([{"type": "http.request", "body": small, "more_body": False}], receive), send)


def replayed(first: list[Message], receive: Receive) -> Receive:
    """`receive` that hands out `first` (messages already read) before reading on."""
    pending = list(first)

    async def again() -> Message:
        return pending.pop(0) if pending else await receive()

    return again
