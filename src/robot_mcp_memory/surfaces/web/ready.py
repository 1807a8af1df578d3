"""``GET /readyz``: readiness (`services.readiness`) over HTTP, on every HTTP surface.

200 when every store can serve, else 503; either way a JSON body naming each check, and when one
failed the next step. Public like ``/healthz`` (probes carry no token): the body names stores by
file name only.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.operations.readiness import readiness

_log = logs.get("robot_mcp_memory.surfaces.web.ready")

PATH = "/readyz"


def readyz_route(memory: Memory) -> Route:
    async def ready(_: Request) -> Response:
        report = await readiness(memory)
        body: dict[str, object] = {
            "status": "ready" if report.ok else "not_ready",
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks],
        }
        if not report.ok:
            failed = [c.name for c in report.checks if not c.ok]
            body["failed"] = failed
            body["next_step"] = report.next_step
            _log.warning("readiness.failed", failed=failed)
        return JSONResponse(body, status_code=200 if report.ok else 503, headers={"cache-control": "no-store"})

    return Route(PATH, ready, methods=["GET"])
