"""The ``web`` command: the REST API and dashboard alone on the port, without the MCP transports,
behind the same tokens."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from robot_mcp_memory import __version__, logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.serve import listen, open_memory, run_http
from robot_mcp_memory.surfaces.web import build_web, problems
from robot_mcp_memory.surfaces.web.ready import readyz_route
from robot_mcp_memory.tenancy.tokens import TokenAuth

_log = logs.get("robot_mcp_memory.surfaces.web")


def web_app(memory: Memory) -> ASGIApp:
    """REST + dashboard + /healthz, wrapped in the tenancy middleware."""
    auth = TokenAuth(memory.settings.admin_token, memory.settings.robot_tokens)
    web = build_web(memory, auth, memory.sessions, memory.throttle)

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield

    routes = [Route("/healthz", health, methods=["GET"]), readyz_route(memory), *web.routes]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=problems.EXCEPTION_HANDLERS)
    return web.protect(app, auth)


def serve(settings: Settings) -> None:
    sockets = listen(settings.host, settings.port)
    memory = open_memory(settings, sockets)
    try:
        if not settings.auth_enabled:
            _log.warning(
                "auth.open",
                message="no MEMORY_TOKEN or MEMORY_ROBOT_TOKENS set: the dashboard and REST API accept anyone "
                "who can reach this port. Only run this way on a trusted network.",
            )
        _log.info("serve.web", host=settings.host, port=settings.port, url=f"http://{settings.host}:{settings.port}/")
        run_http(web_app(memory), settings, sockets)
    finally:
        memory.close()
