"""What every REST handler module gets: the `Memory`, the token check and the browser sessions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.principal import Principal
from robot_mcp_memory.tenancy.throttle import AuthThrottle
from robot_mcp_memory.tenancy.tokens import TokenAuth


@dataclass
class WebContext:
    memory: Memory
    auth: TokenAuth
    sessions: Sessions
    #: Failed token checks per address, shared by the login and the bearer middleware.
    login_throttle: Throttle = field(default_factory=AuthThrottle)
    #: Memory counts for /api/stats, set when the experience memory is registered.
    experience_counts: Callable[[Principal], Awaitable[dict[str, int]]] | None = None
