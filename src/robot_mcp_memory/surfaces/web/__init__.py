"""The REST API (``/api/…``) and the operator dashboard (``/``), thin over the same services as
the MCP tools. Only this package imports Starlette routing.

`build_web(memory, auth)` returns the routes (mounted by `server.http_app` ahead of the MCP
transports, or served alone by the ``web`` command) and what the tenancy middleware needs to
know: which paths are public, which may authenticate with the session cookie, and the session
store behind that cookie. The session store and the throttle are this process's unless given
(replicas pass the ones they share: `tenancy/postgres/`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.browse import ExperienceBrowser
from robot_mcp_memory.surfaces.web import openapi, problems
from robot_mcp_memory.surfaces.web.api import experiences, fleet, operations, processes, robots, session
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.hosts import HostGuard
from robot_mcp_memory.surfaces.web.routing import Api, misdirected
from robot_mcp_memory.tenancy.middleware import TenantAuthMiddleware
from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.sessions import SessionStore
from robot_mcp_memory.tenancy.throttle import AuthThrottle
from robot_mcp_memory.tenancy.tokens import TokenAuth

STATIC = Path(__file__).parent / "static"
#: Dashboard pages served as files; the app routes inside index.html by URL hash.
PAGES = {"/": "index.html", "/login": "login.html"}
#: Everything the dashboard loads is local: no CDN, no inline script, no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every response of the wrapped app, after the Host check (pure ASGI)."""

    def __init__(self, app: ASGIApp, hosts: HostGuard) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.hosts.allows(Headers(scope=scope).get("host")):
            await misdirected()(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


@dataclass
class Web:
    routes: list[BaseRoute]
    sessions: Sessions
    api: Api
    throttle: Throttle
    public_paths: set[str] = field(default_factory=set)
    public_prefixes: tuple[str, ...] = ("/static/",)

    @staticmethod
    def cookie_path(path: str) -> bool:
        """Where the session cookie may stand in for a bearer token: the API and the dashboard —
        never the MCP transports (/sse, /messages/, /mcp) or /metrics."""
        return path.startswith(("/api/", "/static/")) or path in PAGES

    def protect(self, app: ASGIApp, auth: TokenAuth) -> TenantAuthMiddleware:
        """`app` behind the tenancy middleware, told what this web part makes public, where
        its session cookie counts (``/healthz`` and ``/readyz`` are public on every surface), and the throttle
        the login shares, so a wrong token counts the same on every path."""
        return TenantAuthMiddleware(
            app,
            auth,
            public_paths={"/healthz", "/readyz", *self.public_paths},
            public_prefixes=self.public_prefixes,
            sessions=self.sessions,
            cookie_paths=self.cookie_path,
            throttle=self.throttle,
        )


def build_web(
    memory: Memory, auth: TokenAuth, sessions: Sessions | None = None, throttle: Throttle | None = None
) -> Web:
    ctx = WebContext(
        memory,
        auth,
        sessions if sessions is not None else SessionStore(),  # an empty store is falsy (len 0): test for None
        throttle if throttle is not None else AuthThrottle(),
    )
    hosts = HostGuard(memory.settings.allowed_hosts)
    api = Api(hosts)
    session.register(api, ctx)
    processes.register(api, ctx)
    fleet.register(api, ctx)
    operations.register(api, ctx)
    browser = _register_experiences(api, ctx)
    robots.register(api, ctx, browser)
    spec: dict[str, Any] | None = None

    async def openapi_json(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            response = problems.problem("method_not_allowed", f"{request.url.path} accepts GET")
            response.headers["allow"] = "GET"
            return response
        nonlocal spec
        if not hosts.allows(request.headers.get("host")):
            return misdirected()
        if spec is None:
            spec = openapi.document(api.endpoints, auth_enabled=auth.enabled)
        return JSONResponse(spec)

    def page(name: str) -> Route:
        async def serve(request: Request) -> Response:
            if not hosts.allows(request.headers.get("host")):
                return misdirected()
            headers = {k.decode(): v.decode() for k, v in SECURITY_HEADERS} | {"cache-control": "no-cache"}
            return FileResponse(STATIC / name, media_type="text/html", headers=headers)

        return Route(next(p for p, n in PAGES.items() if n == name), serve, methods=["GET"])

    routes: list[BaseRoute] = [
        *api.routes(Route("/api/openapi.json", openapi_json, methods=["GET"])),
        *(page(n) for n in PAGES.values()),
        Mount("/static", app=SecurityHeaders(StaticFiles(directory=STATIC), hosts), name="static"),
    ]
    public = api.public_paths | {"/api/openapi.json", *PAGES}
    return Web(routes=routes, sessions=ctx.sessions, api=api, throttle=ctx.login_throttle, public_paths=public)


def _register_experiences(api: Api, ctx: WebContext) -> ExperienceBrowser:
    """The experience memory's endpoints (and the dashboard's Experiences and Sessions pages);
    returns the read-only browser they share with the Robots report."""
    service = ctx.memory.experiences
    browser = ExperienceBrowser(ctx.memory.memories, ctx.memory.policy)
    experiences.register(api, ctx, service, browser)
    return browser


__all__ = ["Web", "build_web"]
