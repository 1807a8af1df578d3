"""The REST API's one error shape, ``{"error": code, "detail": …}``, and its HTTP statuses.

Every refusal the services raise (`errors.MemoryError_`) maps here once, by its ``code``:

====================  ======  ==========================================================
code                  status  when
====================  ======  ==========================================================
invalid               400     bad arguments or body (also 413 too large, 415 not JSON)
unauthorized          401     no or a wrong token / session (from the tenancy middleware)
forbidden             403     the §6a policy refuses it, or a cookie write lacks its CSRF token
not_found             404     no such thing, or not visible to this caller
method_not_allowed    405     the path exists, the method does not
conflict              409     the change clashes with what is stored
misdirected           421     the Host header is not this server's (DNS-rebinding protection)
too_many_requests     429     too many failed token checks from one address (``Retry-After``)
busy                  503     overloaded; nothing was stored — retry later (``Retry-After``)
unavailable           503     a dependency (the embedder) is down
internal              500     a bug: logged with a ``reference``; the body says nothing else
====================  ======  ==========================================================

An unexpected exception never leaks its message (SQL, paths, tokens): the client gets the
reference id, the log gets the traceback under the same id.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from robot_mcp_memory import logs
from robot_mcp_memory.errors import CHECK_THE_STORE, MemoryError_, StoreFailed

_log = logs.get("robot_mcp_memory.surfaces.web")

STATUS: dict[str, int] = {
    "invalid": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "too_large": 413,
    "misdirected": 421,
    "too_many_requests": 429,
    "unsupported_media_type": 415,
    "busy": 503,
    "unavailable": 503,
    "storage": 503,
    "internal": 500,
}
#: What each status means in the OpenAPI document.
DESCRIPTIONS: dict[int, str] = {
    400: "invalid arguments or body",
    401: "no or a wrong bearer token / session",
    403: "forbidden for this caller (tenancy policy, or a cookie write without X-CSRF-Token)",
    404: "not found, or not visible to this caller",
    405: "method not allowed on this path",
    409: "conflicts with what is stored",
    413: "request body too large",
    415: "the body must be application/json",
    421: "the Host header names no host this server answers for (MEMORY_ALLOWED_HOSTS)",
    429: "too many failed token checks from this address: wait and retry (Retry-After)",
    500: "internal error (the body carries a reference id for the server log)",
    503: "busy or a dependency is unavailable: retry later",
}
NO_STORE = {"cache-control": "no-store"}


def problem(
    code: str, detail: str, status: int | None = None, retry_after: int | None = None, **extra: str
) -> JSONResponse:
    headers = dict(NO_STORE)
    status = status if status is not None else STATUS.get(code, 400)
    if retry_after is not None:
        headers["retry-after"] = str(max(1, retry_after))
    elif status == 503:
        headers["retry-after"] = "5"
    elif status == 429:
        headers["retry-after"] = "60"
    if status == 401:
        headers["www-authenticate"] = "Bearer"  # RFC 6750: say which scheme a retry should use
    return JSONResponse({"error": code, "detail": detail, **extra}, status_code=status, headers=headers)


def from_error(exc: MemoryError_) -> JSONResponse:
    if exc.code in ("storage",):
        # Storage trouble at run time: a `StoreFailed` says what did not happen and the next step
        # without internals; any other names a file, so it is answered generically, with the step.
        detail = exc.detail if isinstance(exc, StoreFailed) else f"the database is unavailable. {CHECK_THE_STORE}"
        return internal(exc, code="storage", status=503, detail=detail)
    if exc.code not in STATUS or exc.code == "internal":
        return internal(exc)
    retry_after = getattr(exc, "retry_after", None)
    return problem(exc.code, exc.detail, retry_after=retry_after if isinstance(retry_after, int) else None)


def internal(
    exc: BaseException,
    *,
    code: str = "internal",
    status: int = 500,
    detail: str = "an internal error occurred; quote the reference to the operator",
) -> JSONResponse:
    reference = secrets.token_hex(8)
    # A failing log sink must not turn a handled error into a crash.
    with contextlib.suppress(Exception):
        _log.error("web.internal_error", reference=reference, error_type=type(exc).__name__, exc_info=exc)
    return problem(code, detail, status, reference=reference)


async def _unmatched(_request: Request, exc: Exception) -> Response:
    """Starlette's router raises HTTPException(404/405) for a path no route matches — a path
    with a newline matches no route pattern at all — and answers it as plain text by default."""
    status = getattr(exc, "status_code", 404)
    if status == 405:
        return problem("method_not_allowed", "this path does not accept that method", 405)
    return problem("not_found", "nothing is served at this path: GET /api/openapi.json lists the REST API", 404)


#: For every Starlette app we build: an unmatched path answers the one JSON error shape.
EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    404: _unmatched,
    405: _unmatched,
}
