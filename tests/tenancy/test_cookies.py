"""The tenancy middleware's browser-session path, in-process: where the cookie counts, the CSRF
check on writes (before the app runs, without reading the body), and that a bearer header wins —
on every session store (`make_sessions`)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.tenancy.middleware import AUTH_VIA_KEY, SESSION_COOKIE, TenantAuthMiddleware
from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from robot_mcp_memory.tenancy.tokens import TokenAuth
from tests.tenancy.conftest import MakeSessions

AUTH = TokenAuth("adminadmin", {"rap-1": "tokA1234"})


class Recorder:
    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def never_receive() -> Message:
    raise AssertionError("the middleware must not read the request body")


async def app_with_session(
    make_sessions: MakeSessions, principal: Principal = ADMIN
) -> tuple[TenantAuthMiddleware, Recorder, str, str]:
    sessions = make_sessions()
    sid, session = await sessions.create(principal)
    inner = Recorder()
    mw = TenantAuthMiddleware(
        inner,
        AUTH,
        public_paths={"/api/login"},
        sessions=sessions,
        cookie_paths=lambda p: p.startswith("/api/") or p == "/",
    )
    return mw, inner, sid, session.csrf_token


async def call(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app({"type": "http", "method": method, "path": path, "headers": headers}, never_receive, send)
    return sent


def cookie(sid: str) -> tuple[bytes, bytes]:
    return (b"cookie", f"theme=dark; {SESSION_COOKIE}={sid}".encode())


async def test_a_session_cookie_authenticates_a_read_on_an_api_path(make_sessions: MakeSessions) -> None:
    app, inner, sid, _ = await app_with_session(make_sessions, Principal.robot("rap-1"))
    sent = await call(app, "GET", "/api/processes", [cookie(sid)])
    assert sent[0]["status"] == 200
    assert inner.scopes[0]["principal"] == Principal.robot("rap-1")
    assert inner.scopes[0][AUTH_VIA_KEY] == "cookie"


async def test_the_cookie_does_not_count_on_the_mcp_transports(make_sessions: MakeSessions) -> None:
    app, inner, sid, csrf = await app_with_session(make_sessions)
    for method, path in (("GET", "/sse"), ("POST", "/messages/"), ("POST", "/mcp"), ("GET", "/metrics")):
        sent = await call(app, method, path, [cookie(sid), (b"x-csrf-token", csrf.encode())])
        assert sent[0]["status"] == 401, path
    assert inner.scopes == []


async def test_a_cookie_write_without_the_csrf_header_is_refused_before_the_app_runs(
    make_sessions: MakeSessions,
) -> None:
    app, inner, sid, csrf = await app_with_session(make_sessions)
    for headers in ([cookie(sid)], [cookie(sid), (b"x-csrf-token", b"not-it")]):
        sent = await call(app, "POST", "/api/processes", headers)
        assert sent[0]["status"] == 403
        assert json.loads(sent[1]["body"])["error"] == "forbidden"
    assert inner.scopes == []
    sent = await call(app, "DELETE", "/api/processes/x", [cookie(sid), (b"x-csrf-token", csrf.encode())])
    assert sent[0]["status"] == 200


async def test_a_public_path_with_a_stale_csrf_header_is_served_unauthenticated(make_sessions: MakeSessions) -> None:
    app, inner, sid, _ = await app_with_session(make_sessions)
    sent = await call(app, "POST", "/api/login", [cookie(sid)])
    assert sent[0]["status"] == 200
    assert "principal" not in inner.scopes[0]


async def test_any_authorization_header_turns_the_cookie_off(make_sessions: MakeSessions) -> None:
    app, inner, sid, _ = await app_with_session(make_sessions)
    for value in (b"Bearer wrong-token", b"Basic YWRtaW46YWRtaW4="):
        sent = await call(app, "GET", "/api/processes", [cookie(sid), (b"authorization", value)])
        assert sent[0]["status"] == 401
    sent = await call(app, "GET", "/api/processes", [cookie(sid), (b"authorization", b"Bearer tokA1234")])
    assert sent[0]["status"] == 200
    assert inner.scopes[-1]["principal"] == Principal.robot("rap-1")


async def test_an_unknown_or_ended_session_is_401(make_sessions: MakeSessions) -> None:
    app, inner, _, _ = await app_with_session(make_sessions)
    sent = await call(app, "GET", "/api/processes", [cookie("made-up-session-id")])
    assert sent[0]["status"] == 401
    assert inner.scopes == []
