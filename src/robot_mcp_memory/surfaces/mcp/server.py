"""FastMCP("memory"): builds the MCP server around a `Memory`, and serves it.

`build_server(memory)` registers every tool explicitly (no module-level server), so a test
builds one around a temporary database in one line. `http_app` puts SSE (``/sse``,
``/messages/``) and Streamable HTTP (``/mcp``) on one Starlette app and one port.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import os
import re
import time
import typing
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from types import UnionType
from typing import Any

import anyio
import pydantic_core
import structlog
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, ContentBlock, ErrorData, JSONRPCMessage, TextContent
from mcp.types import Tool as MCPTool
from pydantic import AnyUrl, BaseModel, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_memory import __version__, logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.looplag import LoopLag
from robot_mcp_memory.metrics import Metrics
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.surfaces.mcp.oversized import INVALID_REQUEST, REFUSED, OversizedRequests, RefusedBody, replayed
from robot_mcp_memory.surfaces.mcp.stdio import message_id, number_problem
from robot_mcp_memory.surfaces.mcp.tools import experiences, fleet, lessons, processes
from robot_mcp_memory.surfaces.mcp.tools.adapter import PrincipalOf, make_principal_of
from robot_mcp_memory.surfaces.mcp.tools.arguments import ArgumentRules
from robot_mcp_memory.surfaces.mcp.tools.results import Refusal
from robot_mcp_memory.surfaces.web import build_web, problems
from robot_mcp_memory.surfaces.web.hosts import LOOPBACK, HostGuard, split_host
from robot_mcp_memory.surfaces.web.ready import readyz_route
from robot_mcp_memory.surfaces.web.routing import misdirected
from robot_mcp_memory.tenancy.principal import OPEN, Principal
from robot_mcp_memory.tenancy.tokens import TokenAuth

_log = logs.get("robot_mcp_memory.surfaces.mcp.server")

INSTRUCTIONS = (
    "Fleet memory for robots. Processes are markdown documents describing how tasks were done "
    "before, ranked by how often they worked: call find_processes with an instruction to get advice, "
    "save_process after a taught mission, record_outcome after a mission that used one. Experiences "
    "are what happened in episodes: start_session, learn (with the parameters and outcome) and "
    "save_perception during one, recall before acting, end_session after. Everything "
    "returned is advice from past executions: deviate when reality disagrees."
)


#: Transport limits: mcp 1.30's defaults kept or tightened, never loosened (4 MiB, 10,000 sessions,
#: 30 min idle). The largest legitimate call is a 256k-character process document.
MAX_REQUEST_BODY = 2 * 1024 * 1024
MAX_SESSIONS = 1000
SESSION_IDLE_TIMEOUT_S = 30 * 60
#: mcp caps Streamable HTTP sessions but not SSE streams; `SseCap` caps those.
MAX_SSE_STREAMS = 1000
#: Open SSE streams, and open Streamable HTTP sessions, one robot token may hold: without it one
#: robot filled every slot and the rest of the fleet, the admin too, got 503 for 30 minutes. A
#: robot needs one or two; unscoped callers (the admin, an open server) have the global caps only.
MAX_PER_ROBOT = 50
#: Answers an SSE session may owe its client at once: calls posted and not yet written to its
#: stream. mcp answers each call in a task that holds the result until the stream takes it (a
#: large `get_process` answer costs ~2.5 MB meanwhile), so a client that posts and never reads
#: its stream would otherwise make the server hold every answer (`SseBacklog`); a stream that
#: stays unread is then cut (`serve.Deadlines`). A robot's calls come one after another.
MAX_SSE_BACKLOG = 8
#: Answers owed over all the SSE streams of one scoped robot (it may hold `MAX_PER_ROBOT`).
MAX_SSE_BACKLOG_PER_ROBOT = 32


def _robot_of(scope: Scope) -> str | None:
    """The scoped robot the auth middleware bound to this request, or None (unscoped)."""
    principal = scope.get("principal")
    return principal.label if isinstance(principal, Principal) and principal.scoped else None


def _release(counts: dict[str, int], robot: str) -> None:
    """One fewer for `robot` in `counts`, which keeps no zeros (one key per robot that holds some)."""
    left = counts.pop(robot) - 1
    if left:
        counts[robot] = left


def _too_many(what: str) -> JSONResponse:
    detail = f"this robot holds {MAX_PER_ROBOT} open {what} already; close one (or let it idle out) and retry"
    return JSONResponse({"error": "busy", "detail": detail}, status_code=503)


class SseCap:
    """Refuses new ``GET /sse`` streams beyond `limit` open ones with 503 (pure ASGI), and a
    request that fails `security` (a foreign ``Host`` or ``Origin``) with mcp's own answer: mcp's
    SSE endpoint answers it too, but then raises, and the server logs a traceback for every
    refused request."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int = MAX_SSE_STREAMS,
        path: str = "/sse",
        security: TransportSecuritySettings | None = None,
        per_robot: int = MAX_PER_ROBOT,
    ) -> None:
        self.app = app
        self.limit = limit
        self.path = path
        self.open = 0
        self.per_robot = per_robot
        self.by_robot: dict[str, int] = {}
        self.security = TransportSecurityMiddleware(security) if security is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        if self.security is not None:
            refusal = await self.security.validate_request(Request(scope, receive), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        if self.open >= self.limit:
            response = JSONResponse(
                {"error": "busy", "detail": "too many open SSE streams; retry later or use /mcp"}, status_code=503
            )
            await response(scope, receive, send)
            return
        robot = _robot_of(scope)
        if robot is not None and self.by_robot.get(robot, 0) >= self.per_robot:
            await _too_many("SSE streams")(scope, receive, send)
            return
        self.open += 1
        if robot is not None:
            self.by_robot[robot] = self.by_robot.get(robot, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1
            if robot is not None:
                _release(self.by_robot, robot)


#: An answer in an SSE stream as mcp writes it (``JSONRPCResponse``/``JSONRPCError`` dumped with
#: ``jsonrpc`` and ``id`` first): a request or a notification from the server carries ``method``
#: after them instead.
_SSE_ANSWER = re.compile(rb'data: ?\{"jsonrpc":"2\.0","id":(?:-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')
_SSE_SESSION = re.compile(rb"session_id=([0-9a-f]{32})")


class SseBacklog:
    """Refuses a call posted to an SSE session (``POST /messages/?session_id=…``) with 503 while
    that session owes its client `limit` answers, or the scoped robot that opened it owes
    `per_robot` over all its streams (pure ASGI). A session's debt is the requests
    posted to it (answered 202 by mcp) less the answers written to its stream; the stream's
    session id is read from its first event (mcp's ``endpoint`` event). A client that reads its
    stream is never refused while it keeps fewer than `limit` calls open; one that does not read
    is refused from then on, so the server holds at most `limit` answers for it, and its stream
    is cut once its writing stays paused (`serve.Deadlines`)."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int = MAX_SSE_BACKLOG,
        per_robot: int = MAX_SSE_BACKLOG_PER_ROBOT,
        stream: str = "/sse",
        post: str = "/messages/",
    ) -> None:
        self.app = app
        self.limit = limit
        self.per_robot = per_robot
        self.stream = stream
        self.post = post
        self.owed: dict[str, int] = {}  # session id (hex) → answers owed, for each open stream
        self.robot_of: dict[str, str] = {}  # session id → the scoped robot that opened it
        #: robot → the sum of `owed` over the sessions it opened, kept as `owed` changes (no zeros),
        #: so a POST reads it without walking every open stream
        self.robot_owed: dict[str, int] = {}

    def robot_owes(self, robot: str) -> int:
        return self.robot_owed.get(robot, 0)

    def _owe(self, session: str, change: int) -> None:
        """`session` owes `change` more answers (fewer when negative, never below none)."""
        before = self.owed[session]
        after = max(0, before + change)
        self.owed[session] = after
        robot = self.robot_of.get(session)
        if robot is not None and after != before:
            total = self.robot_owed.get(robot, 0) + after - before
            if total:
                self.robot_owed[robot] = total
            else:
                self.robot_owed.pop(robot, None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET" and scope.get("path") == self.stream:
            await self._stream(scope, receive, send)
        elif scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path", "").startswith(self.post):
            await self._posted(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        session: str | None = None

        async def counting(message: Message) -> None:
            nonlocal session
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            if body and session is None:
                found = _SSE_SESSION.search(body)
                if found is not None:
                    session = found.group(1).decode()
                    self.owed[session] = 0
                    robot = _robot_of(scope)
                    if robot is not None:
                        self.robot_of[session] = robot
            await send(message)
            if body and session is not None and session in self.owed:
                answered = len(_SSE_ANSWER.findall(body))
                if answered:
                    self._owe(session, -answered)

        try:
            await self.app(scope, receive, counting)
        finally:
            if session is not None and session in self.owed:
                self._owe(session, -self.owed[session])
                self.owed.pop(session, None)
                self.robot_of.pop(session, None)

    async def _posted(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"")
        found = _SSE_SESSION.search(query) if isinstance(query, bytes) else None
        session = found.group(1).decode() if found is not None else None
        if session is None or session not in self.owed:
            await self.app(scope, receive, send)
            return
        robot = self.robot_of.get(session)
        if self.owed[session] >= self.limit or (robot is not None and self.robot_owes(robot) >= self.per_robot):
            detail = (
                "answers to this robot's calls wait unread in its SSE stream"
                f"{'' if self.owed[session] >= self.limit else 's'}; read the stream (GET /sse), then retry"
            )
            await JSONResponse({"error": "busy", "detail": detail}, status_code=503)(scope, receive, send)
            return
        body: list[bytes] = []

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
            return message

        async def noting(message: Message) -> None:
            if (
                message["type"] == "http.response.start"
                and message.get("status") == 202
                and session in self.owed
                and message_id(b"".join(body), of_request=True) is not None
            ):
                self._owe(session, 1)
            await send(message)

        await self.app(scope, reading, noting)


class SessionCap:
    """Refuses a scoped robot a new Streamable HTTP session (a POST to `path` without a session
    id) while it holds `per_robot` open ones (pure ASGI). Which sessions are open is `live`'s
    answer (`LiveSessions.live`: whose server runs); whose they are is read from the
    ``mcp-session-id`` header of the answer that opened them. An opening request still being
    answered counts too, from before its first ``await``: requests sent all at once must not all
    get in before any answer comes back."""

    def __init__(
        self, app: ASGIApp, live: Callable[[str], bool], per_robot: int = MAX_PER_ROBOT, path: str = "/mcp"
    ) -> None:
        self.app = app
        self.live = live
        self.per_robot = per_robot
        self.path = path
        self.owned: dict[str, set[str]] = {}  # robot → the session ids it opened
        self.opening: dict[str, int] = {}  # robot → its opening requests not answered yet

    def open_sessions(self, robot: str) -> int:
        ids = {sid for sid in self.owned.get(robot, ()) if self.live(sid)}
        if ids:
            self.owned[robot] = ids
        else:
            self.owned.pop(robot, None)
        return len(ids)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        robot = _robot_of(scope) if scope["type"] == "http" and scope.get("method") == "POST" else None
        if robot is None or scope.get("path") != self.path or Headers(scope=scope).get("mcp-session-id"):
            await self.app(scope, receive, send)
            return
        if self.open_sessions(robot) + self.opening.get(robot, 0) >= self.per_robot:
            await _too_many("MCP sessions")(scope, receive, send)
            return
        self.opening[robot] = self.opening.get(robot, 0) + 1
        pending = True

        def settled() -> None:
            nonlocal pending
            if pending:
                pending = False
                _release(self.opening, robot)

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                sid = Headers(raw=message.get("headers", [])).get("mcp-session-id")
                if sid:
                    self.owned.setdefault(robot, set()).add(sid)
                settled()  # from here the session (if one opened) is counted as open instead
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            settled()


class McpHosts:
    """The MCP transports' (and ``/metrics``') ``Host`` check, made as the REST API makes it (pure ASGI): a foreign
    name gets the same JSON 421 naming ``MEMORY_ALLOWED_HOSTS`` (mcp's own answer is a bare
    "Invalid Host header"), and names compare case-insensitively, as DNS names do — an allowed
    ``Host`` is passed on lower-cased, since mcp's own check (kept, with the origins) compares
    exactly, and ``MEMORY-HOST`` got 421 on /mcp and 200 on /api."""

    def __init__(self, app: ASGIApp, hosts: HostGuard) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        # /metrics too: a page that rebinds its name to this server must not read its counters.
        # /healthz stays open to any name (a probe by address); it says only ok / not ok.
        if path in ("/sse", "/mcp", "/metrics") or path.startswith(("/messages/", "/mcp/")):
            host = Headers(scope=scope).get("host")
            if not self.hosts.allows(host):
                await misdirected()(scope, receive, send)
                return
            if host is not None and host != host.lower():  # else the scope already says it so
                headers = [(k, v.lower()) if k == b"host" else (k, v) for k, v in scope["headers"]]
                scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class StrictNumbers:
    """POSTed JSON-RPC whose numbers mcp would change — NaN, Infinity, ``1e400``, an integer of
    thousands of digits, which its session turns into null — is answered with a JSON-RPC error
    (400), as the stdio transport does (`stdio.number_problem`), and so is a body nested past
    what Python's parser takes (mcp's transport answered 500 and logged a traceback for each);
    every other body goes through unchanged (pure ASGI: the body is read once and handed on)."""

    def __init__(self, app: ASGIApp, paths: tuple[str, ...] = ("/mcp", "/messages/")) -> None:
        self.app = app
        self.paths = paths
        self.bad_messages = BadMessageLog()

    def _guarded(self, path: str) -> bool:
        """`paths`, a path ending in ``/`` standing for everything under it: mcp's SSE endpoint
        takes a POST to ``/messages/<anything>``, which skipped every check here."""
        return any(path == p or (p.endswith("/") and path.startswith(p)) for p in self.paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not self._guarded(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the app see it
                await self.app(scope, replayed([message], receive), send)
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = bool(message.get("more_body"))
            if size > MAX_REQUEST_BODY:  # mcp's own limit answers this one
                break
        body = b"".join(chunks)
        if not more and nests_too_deeply(body):
            parse_error = {"code": -32700, "message": "parse error: JSON nested too deeply"}
            await JSONResponse({"jsonrpc": "2.0", "id": None, "error": parse_error}, status_code=400)(
                scope, receive, send
            )
            return
        problem = None if more else number_problem(body)
        if problem is not None:
            error = {"jsonrpc": "2.0", "id": message_id(body), "error": {"code": -32600, "message": problem}}
            await JSONResponse(error, status_code=400)(scope, receive, send)
            return
        refusal = None if more else unreadable(body, sse=scope.get("path", "").startswith("/messages/"))
        if refusal is not None:
            code, reason = refusal
            self.bad_messages.note(scope.get("path", ""), reason)
            error = {"jsonrpc": "2.0", "id": message_id(body), "error": {"code": code, "message": reason}}
            await JSONResponse(error, status_code=400)(scope, receive, send)
            return
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]
        await self.app(scope, replayed(replay, receive), send)


#: A JSON string escape of a UTF-16 surrogate (``\\ud800``-``\\udfff``): only a body with one can
#: hold a lone surrogate, which no answer can carry.
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")


def unreadable(body: bytes, *, sse: bool) -> tuple[int, str] | None:
    """(JSON-RPC error code, reason) for a POSTed body mcp cannot answer properly, or None:
    bytes that are not UTF-8 (mcp's Streamable HTTP transport answered 500); a request whose id
    holds a lone surrogate (its tool ran, and the answer, which cannot be encoded, was an empty
    200); with `sse`, a body that is not a JSON-RPC message (mcp's SSE transport answers 400 but
    also pushes an "Internal Server Error" notification into the session and logs a traceback,
    for every such POST)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return -32700, "parse error: the body is not UTF-8 text; send JSON encoded as UTF-8"
    if _SURROGATE_ESCAPE.search(body):
        try:
            raw = json.loads(body)
        except (ValueError, RecursionError):
            raw = None
        rid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(rid, str) and message_id(body) is None:
            return -32600, "invalid request: the id holds a lone surrogate (\\ud800-\\udfff), which no answer can carry"
    if sse:
        try:
            JSONRPCMessage.model_validate_json(body)
        except ValidationError:
            return -32600, "invalid request: the body is not a JSON-RPC message (a request, notification or response)"
    return None


class BadMessageLog:
    """``transport.bad_message`` lines, at most one per `every_s` seconds: each refused body was
    logged (with a traceback) and a client could flood the log. The line after a quiet spell says
    how many were refused in between (`suppressed`)."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self.last: float | None = None
        self.suppressed = 0

    def note(self, path: str, reason: str) -> None:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.every_s:
            self.suppressed += 1
            return
        _log.warning("transport.bad_message", path=path, reason=reason, suppressed=self.suppressed)
        self.last = now
        self.suppressed = 0


#: A body with fewer brackets than this cannot nest deeply enough to trouble Python's parser
#: (~1,000 levels): counted at C speed, and only a body with more is parsed to find out.
_NEST_SUSPECT = 400


def nests_too_deeply(body: bytes) -> bool:
    """Whether parsing `body` as JSON overflows the parser's recursion limit."""
    if body.count(b"[") + body.count(b"{") < _NEST_SUSPECT:
        return False
    try:
        json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        return False  # not JSON for another reason: mcp's parser says so
    return False


#: What FastMCP's public ``call_tool`` hands back: content, or (content, structured content);
#: a tool wrapped by `structured_results` returns a finished `CallToolResult` instead.
ToolOutput = Sequence[ContentBlock] | dict[str, Any] | tuple[Sequence[ContentBlock], dict[str, Any]]

#: The JSON Schema dialect our output schemas declare. mcp 1.x clients validate every tool result
#: with ``jsonschema.validate``, which first checks the schema itself against its meta-schema —
#: on every call. Unlabelled, that is draft 2020-12, whose meta-schema check dominates a small
#: call in the Python SDK (python-sdk#3133); draft-07's is far cheaper. The schemas pydantic writes for
#: our results use nothing draft-07 lacks (`$defs` references resolve by JSON pointer), and a test
#: validates real results against them.
OUTPUT_SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


#: The metrics label of every call to a name no tool has.
UNKNOWN_TOOL = "unknown"


class ResultMismatch(TypeError):
    """A tool returned a value its declared result type does not admit (a defect of ours, never
    of the caller's arguments): the call fails as a protocol error, not as a refusal."""


class MemoryMCP(FastMCP):
    """FastMCP with the adapter's cross-cutting duties at the one place every call passes:

    - arguments the published input schema does not describe (an unknown name, ``"yes"`` for a
      boolean, ``"5"`` for a number: `ArgumentRules`) and argument-validation failures come back
      as ``{"error": "invalid", …}`` results (the spec's refusal shape) rather than a raw pydantic
      report; every refusal is marked ``isError: true``;
    - each call is logged (``tool.call`` with request id, tenant, tool, outcome, duration) and
      counted in `metrics`; log lines emitted during the call carry the same fields.

    FastMCP keeps the tools (their schemas from the signatures, argument validation, `Context`);
    the MCP protocol is served by `lowlevel`, a `mcp.server.lowlevel.Server` of our own that
    carries the server's version and whose handlers are FastMCP's public methods (as FastMCP
    wires its own). Every transport — stdio, SSE, Streamable HTTP — runs `lowlevel`.
    """

    def __init__(self, *args: Any, principal_of: PrincipalOf, version: str = __version__, **kwargs: Any) -> None:
        #: The registered tools' names: the only `tool` label values metrics carry (`metric_label`).
        self.tool_names: set[str] = set()
        #: Per tool: whether FastMCP wraps its structured result in ``{"result": …}``.
        self.wraps_output: dict[str, bool] = {}
        super().__init__(*args, **kwargs)
        self.metrics = Metrics()
        self.principal_of = principal_of
        self._arguments: dict[str, ArgumentRules] = {}  # per tool: what its published input schema admits
        #: The Streamable HTTP sessions whose server runs, as `lowlevel`'s per-session lifespan says.
        self.sessions = LiveSessions()
        server: Server[dict[str, Any], Any] = Server(
            self.name, version=version, instructions=self.instructions, lifespan=self.sessions.lifespan
        )
        # The handlers FastMCP registers on its own server, each one of FastMCP's public methods (the
        # low-level decorators carry no annotations: mcp 1.30 leaves them untyped).
        server.list_tools()(self.list_tools)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        # FastMCP converts and validates arguments itself: the low-level check stays off, as FastMCP sets it.
        server.call_tool(validate_input=False)(self.call_tool)
        server.list_resources()(self.list_resources)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        server.read_resource()(self.read_resource)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        server.list_prompts()(self.list_prompts)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        server.get_prompt()(self.get_prompt)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        server.list_resource_templates()(self.list_resource_templates)  # type: ignore[no-untyped-call]  # untyped in mcp 1.30
        self.lowlevel = server
        self._streamable: StreamableHTTPSessionManager | None = None

    @property
    def session_manager(self) -> StreamableHTTPSessionManager:
        """The Streamable HTTP session manager of `lowlevel` (one per server, made on first use)."""
        if self._streamable is None:
            s = self.settings
            self._streamable = StreamableHTTPSessionManager(
                app=self.lowlevel,
                json_response=s.json_response,
                stateless=s.stateless_http,
                security_settings=s.transport_security,
                max_request_body_size=s.max_request_body_size,
                session_idle_timeout=s.session_idle_timeout,
                max_sessions=s.max_sessions,
            )
        return self._streamable

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, *args: Any, **kwargs: Any) -> None:
        tool = name or fn.__name__  # FastMCP's own default name
        converted, wraps = structured_results(fn)
        super().add_tool(converted, name, *args, **kwargs)
        self.tool_names.add(tool)
        self.wraps_output[tool] = wraps

    def remove_tool(self, name: str) -> None:
        super().remove_tool(name)
        self.tool_names.discard(name)
        self.wraps_output.pop(name, None)

    def metric_label(self, name: str) -> str:
        """`name` if a tool of that name is registered, else ``unknown``: a client choosing names
        cannot grow the series `metrics` keeps (one per registered tool and outcome, plus one)."""
        return name if name in self.tool_names else UNKNOWN_TOOL

    async def call_tool(  # type: ignore[override]  # returns CallToolResult, which the low-level server accepts
        self, name: str, arguments: dict[str, Any]
    ) -> ToolOutput | CallToolResult:
        ctx = self.get_context()
        try:
            request_id = str(ctx.request_id)
        except ValueError:
            request_id = "-"
        tenant = self.principal_of(ctx).label
        started = time.perf_counter()
        outcome = "ok"
        with structlog.contextvars.bound_contextvars(request_id=request_id, tenant=tenant, tool=name):
            try:
                result = await self._call(name, arguments)
                outcome = _outcome(result)
                return result
            except Exception:
                outcome = "protocol_error"
                raise
            finally:
                elapsed = time.perf_counter() - started
                label = self.metric_label(name)
                self.metrics.inc("memory_tool_calls_total", "MCP tool calls", tool=label, outcome=outcome)
                self.metrics.observe("memory_tool_seconds", "MCP tool call latency", elapsed, tool=label)
                _log.info("tool.call", outcome=outcome, ms=round(elapsed * 1000, 3))

    async def list_tools(self) -> list[MCPTool]:
        """The tools, each output schema labelled draft-07 (`OUTPUT_SCHEMA_DIALECT`), with its
        optional fields written as type lists (`nullable_as_type_lists`), without what checks
        nothing (`lean_schema`) and with the definitions used once written where they are used
        (`inline_single_use`)."""
        tools = await super().list_tools()
        for tool in tools:
            # Unknown argument names are refused (`ArgumentRules`), and the schema says so.
            tool.inputSchema = {**tool.inputSchema, "additionalProperties": False}
            if tool.outputSchema is not None and "$schema" not in tool.outputSchema:
                schema = inline_single_use(lean_schema(nullable_as_type_lists(tool.outputSchema)))
                tool.outputSchema = {"$schema": OUTPUT_SCHEMA_DIALECT, **schema}
        return tools

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutput | CallToolResult:
        known = name in self.tool_names
        if known:
            problem = (await self._rules(name)).problem(arguments)
            if problem is not None:
                return self._refuse(name, problem)
        try:
            result = await super().call_tool(name, arguments)
        except ToolError as exc:
            cause = exc.__cause__
            if not known:  # FastMCP's "Unknown tool" error
                raise
            if isinstance(cause, RecursionError):  # FastMCP decoding a JSON-string argument
                return self._refuse(name, f"bad arguments for {name}: JSON nested too deeply; flatten it")
            if isinstance(cause, ValueError) and not isinstance(cause, ValidationError):
                # FastMCP decoding a JSON-string argument that holds a number of thousands of digits
                return self._refuse(name, f"bad arguments for {name}: a JSON string argument cannot be read")
            if not isinstance(cause, ValidationError):
                raise
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in cause.errors()[:5]
            )
            return self._refuse(name, f"bad arguments for {name}: {detail}")
        if isinstance(result, CallToolResult):
            return result
        return _as_result(_compact_text(result))  # a tool outside `structured_results`' reach

    async def read_resource(self, uri: AnyUrl | str) -> Iterable[ReadResourceContents]:
        """A request `OversizedRequests` put in place of one over the size limit is answered with
        a JSON-RPC error (its request id kept), on whichever transport it came; any other read
        is FastMCP's (this server has no resources)."""
        try:
            request = self.get_context().request_context.request
        except ValueError:  # no request: stdio, or a test's in-memory client
            request = None
        refused = getattr(request, "scope", {}).get(REFUSED)
        if isinstance(refused, RefusedBody):
            _log.warning("request.too_large", bytes=refused.size, limit=refused.limit, complete=refused.complete)
            raise McpError(ErrorData(code=INVALID_REQUEST, message=refused.message(), data=refused.data()))
        return await super().read_resource(uri)

    async def _rules(self, name: str) -> ArgumentRules:
        """The argument rules of tool `name`, read once from the input schema `list_tools` publishes."""
        if name not in self._arguments:
            for t in await self.list_tools():
                self._arguments[t.name] = ArgumentRules.of(t.name, t.inputSchema)
        return self._arguments[name]

    def _refuse(self, name: str, detail: str) -> CallToolResult:
        return _result(Refusal(error="invalid", detail=detail), self.wraps_output.get(name, True))  # as every other


#: Opening a Streamable HTTP session: the `Opening` of the request that opens one, read by
#: `LiveSessions.lifespan` in the session's server task (which starts inside that request).
_OPENING: contextvars.ContextVar[Opening | None] = contextvars.ContextVar("robot_mcp_memory.opening", default=None)


class Opening:
    """One request that may open a Streamable HTTP session: its session id once the answer
    names it, and whether the session's server runs."""

    def __init__(self, sessions: LiveSessions) -> None:
        self.sessions = sessions
        self.sid: str | None = None
        self.running = False

    def named(self, sid: str) -> None:
        self.sid = sid
        if self.running:
            self.sessions.ids.add(sid)

    def started(self) -> None:
        self.running = True
        if self.sid is not None:
            self.sessions.ids.add(self.sid)

    def ended(self) -> None:
        self.running = False
        if self.sid is not None:
            self.sessions.ids.discard(self.sid)


class LiveSessions:
    """The Streamable HTTP sessions whose server runs. mcp runs each session's server in a task
    started inside the request that opens it, and the server enters its lifespan for the
    session's whole life (until a DELETE, the idle timeout or a crash ends it): `track` wraps the
    transport so that each opening request carries an `Opening`, `lifespan` marks it running
    and ended, and the answer's ``mcp-session-id`` names it; a successful DELETE ends it at once.
    `live` is `SessionCap`'s view."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def live(self, session_id: str) -> bool:
        return session_id in self.ids

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Server[dict[str, Any], Any]) -> AsyncIterator[dict[str, Any]]:
        opening = _OPENING.get()
        if opening is not None:
            opening.started()
        try:
            yield {}  # FastMCP's own default lifespan context
        finally:
            if opening is not None:
                opening.ended()

    def track(self, app: ASGIApp) -> ASGIApp:
        async def tracked(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope.get("method") == "DELETE":
                await app(scope, receive, self._ending(Headers(scope=scope).get("mcp-session-id"), send))
                return
            if scope["type"] != "http" or scope.get("method") != "POST" or Headers(scope=scope).get("mcp-session-id"):
                await app(scope, receive, send)
                return
            opening = Opening(self)

            async def naming(message: Message) -> None:
                if message["type"] == "http.response.start":
                    sid = Headers(raw=message.get("headers", [])).get("mcp-session-id")
                    if sid:
                        opening.named(sid)
                await send(message)

            token = _OPENING.set(opening)
            try:
                await app(scope, receive, naming)
            finally:
                _OPENING.reset(token)

        return tracked

    def _ending(self, sid: str | None, send: Send) -> Send:
        """`send` for a DELETE of session `sid`: once the transport answers it with success, the
        session is over for the cap at once — its server task leaves its lifespan a moment later,
        and a client that ended one session may open the next as soon as the DELETE returns."""

        async def ending(message: Message) -> None:
            if message["type"] == "http.response.start" and sid and 200 <= message["status"] < 300:
                self.ids.discard(sid)
            await send(message)

        return ending


def structured_results(fn: Callable[..., Awaitable[Any]]) -> tuple[Callable[..., Awaitable[Any]], bool]:
    """(the tool function FastMCP registers, whether FastMCP wraps its result in ``{"result": …}``).

    A tool declared to return a pydantic model, or a union of them, is wrapped so that it hands
    FastMCP a finished `CallToolResult` (`_result`): the structured content dumped once and its
    text block the same value as compact JSON. FastMCP would write the text indented (~60 % more
    bytes, every one of them tokens when the text is what a model reads), and then it would be
    written again compact. FastMCP still checks the structured content against the tool's output
    model. The wrapper keeps the function's signature (``functools.wraps``), so the schemas
    FastMCP derives from it are the same. Any other tool is registered as it is."""
    returns: Any = typing.get_type_hints(fn).get("return")
    members = typing.get_args(returns) if typing.get_origin(returns) in (typing.Union, UnionType) else (returns,)
    models = all(inspect.isclass(m) and issubclass(m, BaseModel) for m in members)
    wraps = not (inspect.isclass(returns) and issubclass(returns, BaseModel))  # FastMCP wraps all but a model
    if not models:
        return fn, wraps
    admits: TypeAdapter[Any] = TypeAdapter(returns)

    @functools.wraps(fn)
    async def structured(*args: Any, **kwargs: Any) -> Any:
        raw = await fn(*args, **kwargs)
        if not isinstance(raw, BaseModel):
            return raw
        try:
            admits.validate_python(raw)  # an instance of a declared model passes at once
        except ValidationError as exc:
            raise ResultMismatch(f"{fn.__name__} returned a {type(raw).__name__}") from exc
        return _result(raw, wraps)

    return structured, wraps


def _result(raw: BaseModel, wraps: bool) -> CallToolResult:
    """`raw` as the `CallToolResult` FastMCP would make of it — structured content dumped as
    FastMCP dumps it, wrapped as it wraps it — with one compact text block of the same value; a
    refusal (``{"error": …, "detail": …}``) is marked ``isError: true``, with the same JSON body:
    a client that keys on ``isError`` reads it as the failure it is."""
    value = raw.model_dump(mode="json", by_alias=True)
    text = TextContent(type="text", text=pydantic_core.to_json(value).decode())
    structured = {"result": value} if wraps else value
    return CallToolResult(content=[text], structuredContent=structured, isError=isinstance(value.get("error"), str))


def nullable_as_type_lists(schema: Any) -> Any:
    """`schema` with pydantic's ``{"anyOf": [{"type": T}, {"type": "null"}]}`` written as
    ``{"type": [T, "null"]}``: the same constraint, but a client validating a result no longer
    tries a failing branch (and builds its error) for every null or every value — ~20 % of
    checking a recall result with the SDK's jsonschema (docs/benchmarks.md)."""
    if isinstance(schema, list):
        return [nullable_as_type_lists(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: nullable_as_type_lists(v) for k, v in schema.items()}
    branches = out.get("anyOf")
    if (
        isinstance(branches, list)
        and len(branches) == 2
        and "type" not in out
        and all(isinstance(b, dict) and set(b) == {"type"} and isinstance(b["type"], str) for b in branches)
        and any(b["type"] == "null" for b in branches)
    ):
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
    return out


#: Where a subschema stands: under these keywords one, a list of them (``items`` may be either),
#: or a map of names to them (``dependencies`` may map a name to a list of names instead).
_ONE = ("items", "additionalItems", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_MANY = ("anyOf", "allOf", "oneOf", "prefixItems")
_BY_NAME = ("properties", "$defs", "definitions", "patternProperties", "dependencies", "dependentSchemas")


def lean_schema(schema: Any) -> Any:
    """`schema` without the keywords that check nothing: pydantic's titles (``"title": "Id"``
    for a field named id) and ``"additionalProperties": true`` (the default). A client checking
    a result walks every keyword of every subschema it meets, and a stock mcp 1.x client checks
    the schema itself against its meta-schema on every call: a recall result's check costs ~8 %
    less (docs/benchmarks.md). Descriptions stay: they are what the schema tells a reader. Only
    keywords go; a property *named* title is a property like any other."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and value is True:
            continue
        out[key] = _below(key, value, lean_schema)
    return out


#: The keywords a reference may carry beside ``$ref`` and still be written over: annotations,
#: which check nothing (draft-07 ignores every sibling of ``$ref``; these stay ignorable inlined).
_ANNOTATIONS = frozenset({"description", "default", "title", "examples"})


def inline_single_use(schema: Any) -> Any:
    """`schema` with each definition that one other definition uses, once, written in place of
    that reference: a recall result's memory (`MemoryView`) inside `RecallResult`, a learn
    result's `AutoInferred` inside `LearnResult`. The same constraint; a client no longer resolves
    the reference for every memory of every result (~9 % of checking a 5-memory recall with the
    SDK's jsonschema). Only a definition free of references itself moves (nothing recursive), and
    only into another definition: draft-07 does not know ``$defs``, so a client's check of the
    schema against its meta-schema, on every call, skips what lies there; a definition written
    into the top level would be checked each time (three times the cost for a recall's).
    References are read where a subschema can stand, never inside a value (``const``, ``enum``,
    ``default``); a schema with a reference into a definition (``#/$defs/X/properties/y``) is left
    as it is, and so is a definition whose name a JSON pointer would have to escape."""
    if not isinstance(schema, dict) or not isinstance(schema.get("$defs"), dict):
        return schema
    defs: dict[str, Any] = dict(schema["$defs"])
    top = {k: v for k, v in schema.items() if k != "$defs"}
    while True:
        refs = _refs({**top, "$defs": defs})
        if any(r.startswith(_DEFS) and "/" in r[len(_DEFS) :] for r in refs):
            return schema  # a reference into a definition: moving it could change what it names
        uses = Counter(refs)
        movable = {
            f"{_DEFS}{name}": sub
            for name, sub in defs.items()
            if isinstance(sub, dict) and uses[f"{_DEFS}{name}"] == 1 and not _refs(sub) and not set(name) & set("~/%")
        }
        moved: set[str] = set()
        for name in list(defs):
            defs[name] = _subschemas(defs[name], functools.partial(_written, movable=movable, moved=moved))
        if not moved:
            break
        for ref in moved:
            del defs[ref.removeprefix(_DEFS)]
    return {**top, "$defs": defs} if defs else top


_DEFS = "#/$defs/"


def _subschemas(schema: Any, fn: Callable[[dict[str, Any]], Any]) -> Any:
    """`schema` with every subschema in it (itself first) replaced by what `fn` returns for it,
    or walked into when `fn` returns None."""
    if not isinstance(schema, dict):
        return schema
    replaced = fn(schema)
    if replaced is not None:
        return replaced
    return {key: _below(key, value, lambda sub: _subschemas(sub, fn)) for key, value in schema.items()}


def _below(key: str, value: Any, walk: Callable[[Any], Any]) -> Any:
    """The value of keyword `key` with `walk` applied to each subschema it holds (`_ONE`,
    `_MANY`, `_BY_NAME`); any other value as it is."""
    if key in _BY_NAME and isinstance(value, dict):
        return {name: walk(sub) for name, sub in value.items()}
    if (key in _MANY or key in _ONE) and isinstance(value, list):
        return [walk(sub) for sub in value]
    if key in _ONE:
        return walk(value)
    return value


def _refs(schema: Any) -> list[str]:
    """Every reference in `schema`'s subschemas, as often as it occurs."""
    found: list[str] = []

    def note(node: dict[str, Any]) -> None:
        if isinstance(node.get("$ref"), str):
            found.append(node["$ref"])

    _subschemas(schema, note)
    return found


def _written(node: dict[str, Any], movable: dict[str, Any], moved: set[str]) -> dict[str, Any] | None:
    """A reference to a `movable` definition as the definition (its annotations kept), the
    reference added to `moved`; None for any other subschema."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref in movable and set(node) - {"$ref"} <= _ANNOTATIONS:
        moved.add(ref)
        return {**movable[ref], **{k: v for k, v in node.items() if k != "$ref"}}
    return None


def _compact_text(result: ToolOutput) -> ToolOutput:
    """The text block of a structured result as compact JSON: FastMCP indents it, and it is the
    same value as the structured content — unwrapped when FastMCP wrapped that in ``{"result": …}``."""
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
        return result
    content, structured = result
    if len(content) != 1 or not isinstance(content[0], TextContent):
        return result
    value = structured["result"] if set(structured) == {"result"} else structured
    return [TextContent(type="text", text=pydantic_core.to_json(value).decode())], structured


def _as_result(result: ToolOutput) -> ToolOutput | CallToolResult:
    """Hand the low-level server a finished `CallToolResult`.

    FastMCP has already validated the structured content against the tool's pydantic output
    model; given a bare (content, structured) pair, mcp 1.30's low-level server validates it
    again with ``jsonschema.validate``, which re-checks the schema itself on every call (on the
    event loop every session shares; python-sdk#3133). A `CallToolResult` is passed through as
    is. A refusal is marked ``isError: true``, as `_result` marks it."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        content, structured = result
        refused = _outcome(CallToolResult(content=[], structuredContent=structured)) != "ok"
        return CallToolResult(content=list(content), structuredContent=structured, isError=refused)
    return result


def _outcome(result: object) -> str:
    """The refusal code of a tool result, or "ok"."""
    structured = result.structuredContent if isinstance(result, CallToolResult) else None
    if isinstance(structured, dict):
        inner = structured.get("result", structured)
        if isinstance(inner, dict) and isinstance(inner.get("error"), str):
            return str(inner["error"])
    return "ok"


def transport_security(memory: Memory) -> TransportSecuritySettings:
    """DNS-rebinding protection stays on: localhost names always, plus configured hosts — a
    name listed without a port matches it on any port *and* without one (a ``Host`` header
    omits the port for 80 and 443, as behind a reverse proxy), as the REST API's `HostGuard`
    does."""
    hosts: list[str] = []
    origins: list[str] = []
    for entry in (*LOOPBACK, *memory.settings.allowed_hosts):
        h, port = split_host(entry)  # as HostGuard reads an entry: lower case, name:* is the name
        if port not in (None, "*"):
            h = f"{h}:{port}"
            hosts.append(h)
            origins += [f"http://{h}", f"https://{h}"]
        else:
            hosts += [h, f"{h}:*"]
            origins += [f"http://{h}", f"http://{h}:*", f"https://{h}", f"https://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def build_server(memory: Memory) -> MemoryMCP:
    s = memory.settings
    principal_of = make_principal_of(OPEN)
    mcp = MemoryMCP(
        "memory",
        principal_of=principal_of,
        instructions=INSTRUCTIONS,
        host=s.host,
        port=s.port,
        log_level="WARNING",
        transport_security=transport_security(memory),
        max_request_body_size=MAX_REQUEST_BODY,
        max_sessions=MAX_SESSIONS,
        session_idle_timeout=SESSION_IDLE_TIMEOUT_S,
        # Stateless: each POST to /mcp is answered on its own (as JSON), so behind a balancer any
        # replica answers any request; the bearer token is still resolved on every request.
        stateless_http=s.stateless_http,
        json_response=s.stateless_http,
    )
    processes.register(mcp, memory, principal_of)
    fleet.register(mcp, memory, principal_of)
    lessons.register(mcp, memory, principal_of)
    experiences.register(mcp, memory, principal_of)
    return mcp


class Endpoint:
    """An ASGI app as a route's endpoint (Starlette calls a plain function with a `Request`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def transport_routes(mcp: MemoryMCP, *, sse_served: bool = True) -> list[Route | Mount]:
    """Streamable HTTP (``/mcp``) and SSE (``/sse``, ``/messages/``) over `mcp.lowlevel`, built
    from the SDK's transports as FastMCP builds them, with its settings (limits, security).
    Without `sse_served` (several worker processes: a stream and its session's POSTs could reach
    different processes) the SSE paths answer 404 naming Streamable HTTP instead."""
    s = mcp.settings
    if not sse_served:

        async def no_sse(_: Request) -> Response:
            detail = "SSE is not served by a server with several worker processes (MEMORY_WORKERS); use /mcp"
            return JSONResponse({"error": "not_found", "detail": detail}, status_code=404)

        return [
            Route(s.streamable_http_path, endpoint=Endpoint(mcp.sessions.track(mcp.session_manager.handle_request))),
            Route(s.sse_path, endpoint=no_sse, methods=["GET"]),
            Mount(s.message_path, routes=[Route("/{rest:path}", endpoint=no_sse, methods=["POST"])]),
        ]
    server = mcp.lowlevel
    sse = SseServerTransport(
        s.message_path, security_settings=s.transport_security, max_request_body_size=s.max_request_body_size
    )

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        async with sse.connect_sse(scope, receive, send) as (reading, writing):
            await server.run(reading, writing, server.create_initialization_options())
        await Response()(scope, receive, send)

    return [
        Route(s.streamable_http_path, endpoint=Endpoint(mcp.sessions.track(mcp.session_manager.handle_request))),
        Route(s.sse_path, endpoint=Endpoint(stream), methods=["GET"]),
        Mount(s.message_path, app=sse.handle_post_message),
    ]


def _sqlite_gauges(mcp: MemoryMCP, index: SqliteStore) -> None:
    stats = index.stats
    mcp.metrics.gauge("memory_hot_queue_depth", "hot record writes waiting", lambda: [((), stats.hot_pending)])
    mcp.metrics.gauge("memory_hot_writes_dropped_total", "hot writes dropped", lambda: [((), stats.hot_dropped)])
    mcp.metrics.gauge("memory_writes_total", "definition writes committed", lambda: [((), stats.writes_done)])
    report = index.report
    if report is not None:
        mcp.metrics.gauge(
            "memory_rows_at_start",
            "rows per table at startup",
            lambda: [((("table", t),), float(n)) for t, n in report.counts.items()],
        )


def http_app(memory: Memory, mcp: MemoryMCP) -> ASGIApp:
    """SSE + Streamable HTTP (+ health) on one app. The parent's lifespan runs the Streamable
    HTTP session manager (a mounted sub-app's lifespan never runs)."""

    async def health(_: Request) -> Response:
        # `worker`: the process that answered (several share the port with MEMORY_WORKERS).
        return JSONResponse({"status": "ok", "version": __version__, "worker": os.getpid()})

    if memory.sqlite is not None:  # SQLite's writer queue; PostgreSQL writes are transactions on a pool
        _sqlite_gauges(mcp, memory.sqlite.index)

    async def metrics(request: Request) -> Response:
        principal = request.scope.get("principal")
        if isinstance(principal, Principal) and principal.scoped:
            return JSONResponse({"error": "forbidden", "detail": "metrics need the admin token"}, status_code=403)
        return PlainTextResponse(mcp.metrics.render(), media_type="text/plain; version=0.0.4")

    lag = LoopLag(mcp.metrics, memory.settings.loop_lag_warn_ms / 1000)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run(), anyio.create_task_group() as tasks:
            tasks.start_soon(lag.run)
            yield
            tasks.cancel_scope.cancel()

    auth = TokenAuth(memory.settings.admin_token, memory.settings.robot_tokens)
    web = build_web(memory, auth, memory.sessions, memory.throttle)  # REST API + dashboard
    # The transports first: Starlette tries the routes in order, and every MCP message (each SSE
    # POST, each /mcp POST) would otherwise be matched against every REST route before its own.
    # Their paths (/mcp, /sse, /messages/…) are exact or a prefix no other route shares, so
    # which route answers a path is the same in either order.
    routes = [
        *transport_routes(mcp, sse_served=memory.settings.workers == 1),
        Route("/healthz", health, methods=["GET"]),
        readyz_route(memory),
        Route("/metrics", metrics, methods=["GET"]),
        *web.routes,
    ]
    app = SessionCap(
        SseCap(
            OversizedRequests(
                StrictNumbers(
                    SseBacklog(
                        Starlette(routes=routes, lifespan=lifespan, exception_handlers=problems.EXCEPTION_HANDLERS)
                    )
                ),
                MAX_REQUEST_BODY,
            ),
            security=mcp.settings.transport_security,
        ),
        mcp.sessions.live,
    )
    return web.protect(McpHosts(app, HostGuard(memory.settings.allowed_hosts)), auth)


__all__ = ["MemoryMCP", "Mount", "build_server", "http_app"]
