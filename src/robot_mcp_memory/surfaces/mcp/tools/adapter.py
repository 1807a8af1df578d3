"""The MCP adapter's two cross-cutting pieces: who is calling, and errors → results.

The principal is read **per call** from the HTTP request that carried this JSON-RPC message
(`ctx.request_context.request`), never from a value captured when the session opened. stdio has
no request and is always unscoped.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server.fastmcp import Context

from robot_mcp_memory import logs
from robot_mcp_memory.errors import MemoryError_
from robot_mcp_memory.surfaces.mcp.tools.results import Refusal
from robot_mcp_memory.tenancy.principal import STDIO, Principal

P = ParamSpec("P")
R = TypeVar("R")
PrincipalOf = Callable[[Context], Principal]  # type: ignore[type-arg]

_log = logs.get("robot_mcp_memory.surfaces.mcp.tools")
_REFUSABLE = {"not_found", "forbidden", "invalid", "conflict", "busy", "storage"}


def refusal_for(exc: BaseException, tool: str) -> Refusal:
    """Map any exception to a result a client can act on, without internals."""
    if isinstance(exc, MemoryError_) and exc.code in _REFUSABLE:
        return Refusal(error=exc.code, detail=exc.detail)  # type: ignore[arg-type]
    ref = secrets.token_hex(4)
    _log.error("tool.unexpected_error", tool=tool, ref=ref, error_type=type(exc).__name__, exc_info=exc)
    return Refusal(error="internal", detail=f"unexpected server error (reference {ref}); the operator can look it up")


def refusals(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R | Refusal]]:
    """Turn raised errors into `Refusal` results (the spec's ``{"error": …}`` shapes)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R | Refusal:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            return refusal_for(exc, fn.__name__)

    return wrapper


def principal_from_request(request: Any, open_principal: Principal) -> Principal:
    """The principal the auth middleware bound to this request (``scope["principal"]``)."""
    if request is None:
        return STDIO
    scope = getattr(request, "scope", None) or {}
    principal = scope.get("principal")
    return principal if isinstance(principal, Principal) else open_principal


def make_principal_of(open_principal: Principal) -> PrincipalOf:
    def principal_of(ctx: Context) -> Principal:  # type: ignore[type-arg]
        try:
            request = ctx.request_context.request
        except ValueError:  # no request context: called outside a request (tests, stdio)
            return STDIO
        return principal_from_request(request, open_principal)

    return principal_of
