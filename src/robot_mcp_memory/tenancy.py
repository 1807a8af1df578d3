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
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Receive, Scope, Send

from robot_mcp_memory import logs
from robot_mcp_memory.principal import OPEN, Principal
from robot_mcp_memory.tokens import TokenAuth

_log = logs.get("robot_mcp_memory.tenancy")

UNAUTHORIZED_BODY = json.dumps(
    {"error": "unauthorized", "detail": "missing or invalid bearer token: send 'Authorization: Bearer <token>'"}
).encode()


def client_id(principal: Principal) -> str:
    return f"robot:{principal.robot_id}" if principal.robot_id is not None else principal.via


def bind(scope: Scope, principal: Principal) -> None:
    scope["principal"] = principal
    scope["user"] = AuthenticatedUser(AccessToken(token="redacted", client_id=client_id(principal), scopes=[]))
    scope["auth"] = AuthCredentials([])


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


class TenantAuthMiddleware:
    def __init__(self, app: ASGIApp, auth: TokenAuth, *, public_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.auth = auth
        self.public_paths = frozenset(public_paths)

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
        if principal is None:
            if scope.get("path", "") in self.public_paths:
                await self.app(scope, receive, send)
                return
            _log.info("auth.refused", path=scope.get("path", ""), bearer_present=token is not None)
            await _unauthorized(send)
            return
        bind(scope, principal)
        await self.app(scope, receive, send)


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
