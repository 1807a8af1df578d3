"""Per-request tenancy for the HTTP transports: a pure-ASGI bearer-token middleware.

Pure ASGI (not Starlette's ``BaseHTTPMiddleware``, which runs the app in another task): it passes
non-HTTP scopes (lifespan) straight through, reads only the ``Authorization`` header — never the
body — and on failure answers 401 with ``WWW-Authenticate: Bearer`` and a JSON body.

On success it binds two things to the ASGI scope of *this* request:

- ``scope["user"]`` — the SDK's `AuthenticatedUser`. Only with it does mcp bind each SSE or
  Streamable-HTTP session to its principal and refuse a POST from another principal into that
  session (without it, tenant B could run tools inside tenant A's session).
- ``scope["principal"]`` — our `Principal`, which the tool layer reads per call from the request
  that carried the call (``ctx.request_context.request``).

With no tokens configured the transport is open: every request is the unscoped ``open``
principal (the server logs that loudly at startup).

**Browser sessions** (the dashboard): given a `SessionLookup`, a request *without* an
``Authorization`` header on a cookie path (``/api/…`` and the dashboard — never ``/sse``, ``/mcp``
or ``/messages/``) may authenticate with the ``memory_session`` cookie instead. A
cookie-authenticated request that changes state (any method but GET/HEAD/OPTIONS) must echo the
session's CSRF token in ``X-CSRF-Token``, or it is refused with 403 before the app runs. A bearer
request needs no CSRF token: a browser never attaches one on its own.

**Guessing** (given a `Throttle`): every wrong bearer token counts against the client
address the scope carries, on every path; once the address is held, its bearer requests are
answered 429 (JSON, ``Retry-After``) before any route runs — except a token already trusted from
that address (see `throttle`), which still gets in.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Iterable
from typing import Protocol

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from robot_mcp_memory import logs
from robot_mcp_memory.tenancy.ports import Throttle
from robot_mcp_memory.tenancy.principal import OPEN, Principal
from robot_mcp_memory.tenancy.tokens import TokenAuth

_log = logs.get("robot_mcp_memory.tenancy.middleware")

UNAUTHORIZED_BODY = json.dumps(
    {"error": "unauthorized", "detail": "missing or invalid bearer token: send 'Authorization: Bearer <token>'"}
).encode()
CSRF_BODY = json.dumps(
    {
        "error": "forbidden",
        "detail": "a cookie-authenticated change needs the X-CSRF-Token header: read csrf_token from GET /api/session",
    }
).encode()

SESSION_COOKIE = "memory_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Scope keys set for a cookie-authenticated request (the web layer reads them for logout).
AUTH_VIA_KEY = "memory.auth_via"
SESSION_ID_KEY = "memory.session_id"


class CookieSession(Protocol):
    @property
    def principal(self) -> Principal: ...

    @property
    def csrf_token(self) -> str: ...


class SessionLookup(Protocol):
    async def lookup(self, session_id: str) -> CookieSession | None: ...


def client_id(principal: Principal) -> str:
    return f"robot:{principal.robot_id}" if principal.robot_id is not None else principal.via


def bind(scope: Scope, principal: Principal) -> None:
    scope["principal"] = principal
    scope["user"] = AuthenticatedUser(AccessToken(token="redacted", client_id=client_id(principal), scopes=[]))
    scope["auth"] = AuthCredentials([])


def client_address(scope: Scope) -> str:
    """The client address the throttle counts: the scope's (uvicorn put a trusted proxy's
    forwarded address there, and only a trusted proxy's), or ``-`` when the server has none."""
    client = scope.get("client")
    if isinstance(client, (tuple, list)) and client and isinstance(client[0], str):
        return client[0]
    return "-"


def throttled_body(wait: int) -> bytes:
    detail = f"too many failed token checks from this address; try again in {wait} seconds"
    return json.dumps({"error": "too_many_requests", "detail": detail}).encode()


def bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            try:
                text = value.decode("latin-1")
            except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
                return None
            scheme, _, rest = text.strip().partition(" ")
            token: str = rest.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


def header(scope: Scope, name: str) -> str | None:
    raw = name.encode()
    for key, value in scope.get("headers", ()):
        if key == raw:
            text: str = value.decode("latin-1")
            return text
    return None


def session_cookie(scope: Scope) -> str | None:
    cookies = header(scope, "cookie")
    if not cookies:
        return None
    return cookie_parser(cookies).get(SESSION_COOKIE) or None


class TenantAuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        auth: TokenAuth,
        *,
        public_paths: Iterable[str] = (),
        public_prefixes: Iterable[str] = (),
        sessions: SessionLookup | None = None,
        cookie_paths: Callable[[str], bool] | None = None,
        throttle: Throttle | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.public_paths = frozenset(public_paths)
        self.public_prefixes = tuple(public_prefixes)
        self.sessions = sessions
        self.cookie_paths = cookie_paths
        self.throttle = throttle

    def _public(self, path: str) -> bool:
        return path in self.public_paths or path.startswith(self.public_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.auth.enabled:
            bind(scope, OPEN)
            await self.app(scope, receive, send)
            return
        token = bearer(scope)
        principal = self.auth.resolve(token) if token is not None else None
        if token is not None and self.throttle is not None:
            client = client_address(scope)
            wait = await self.throttle.attempt(client, client_id(principal) if principal is not None else None)
            if wait:
                if self._public(scope.get("path", "")):  # served as to anyone, as with a wrong token
                    await self.app(scope, receive, send)
                    return
                _log.info("auth.throttled", path=scope.get("path", ""), client=client)
                await _throttled(send, wait)
                return
        if principal is None and header(scope, "authorization") is None and await self._by_cookie(scope, receive, send):
            return
        if principal is None:
            if self._public(scope.get("path", "")):
                await self.app(scope, receive, send)
                return
            _log.info("auth.refused", path=scope.get("path", ""), bearer_present=token is not None)
            await _unauthorized(send)
            return
        bind(scope, principal)
        await self.app(scope, receive, send)

    async def _by_cookie(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request as its session cookie's principal; False when it has none that counts."""
        path = scope.get("path", "")
        if self.sessions is None or self.cookie_paths is None or not self.cookie_paths(path):
            return False
        session_id = session_cookie(scope)
        session = await self.sessions.lookup(session_id) if session_id else None
        if session is None or session_id is None:
            return False
        if scope.get("method", "GET") not in SAFE_METHODS:
            presented = header(scope, CSRF_HEADER) or ""
            if not hmac.compare_digest(presented.encode(), session.csrf_token.encode()):
                if self._public(path):
                    return False  # e.g. logging in again: served as unauthenticated
                _log.info("auth.csrf_refused", path=path)
                await _respond(send, 403, CSRF_BODY)
                return True
        bind(scope, session.principal)
        scope[AUTH_VIA_KEY] = "cookie"
        scope[SESSION_ID_KEY] = session_id
        await self.app(scope, receive, send)
        return True


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _throttled(send: Send, wait: int) -> None:
    body = throttled_body(wait)
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(wait).encode()),
                (b"cache-control", b"no-store"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _unauthorized(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="memory"'),
                (b"content-length", str(len(UNAUTHORIZED_BODY)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": UNAUTHORIZED_BODY})
