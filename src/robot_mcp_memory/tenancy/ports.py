"""The tenancy ports: what the HTTP surfaces need from the browser-session store and the token
throttle, so that one process (`sessions.SessionStore`, `throttle.AuthThrottle`, the embedded
default) and several replicas on one database (`tenancy/postgres/`) are interchangeable.

Both ports are asynchronous: the callers (the tenancy middleware, the login handler) run on the
event loop, and a store on a database must answer from a worker thread rather than hold the loop.
The in-memory implementations never suspend — an ``await`` on them costs a coroutine and nothing
more.

Contract of `Sessions` (every implementation; tests/tenancy/test_sessions.py runs them all):

- `create` returns a fresh random id and its session; the id is never stored, only its SHA-256;
- `lookup` answers a session until `ttl_s` after its creation (absolute: no idle extension),
  then None, as it does for an id never issued or one `end` ended; the CSRF token it carries is
  the one `create` returned;
- at most `max_sessions` live at once (the oldest dropped first) and at most `per_robot` per robot
  id (its own oldest dropped first), so logging in with one robot token over and over cannot log
  anyone else out.

Contract of `Throttle`: the rules in `tenancy.throttle` (failures per counted address within a
window, a held address's attempts answered with the seconds to wait and not counted, a success
never clearing failures, a token that got in from an address trusted there while it is held).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from robot_mcp_memory.tenancy.principal import Principal


@dataclass(frozen=True)
class WebSession:
    """A browser session: who it authenticates, the token its writes echo, and when it ends (in
    the implementation's clock: monotonic in one process, seconds since the epoch on a database)."""

    principal: Principal
    csrf_token: str
    expires_at: float


class Sessions(Protocol):
    """The browser sessions behind the ``memory_session`` cookie."""

    @property
    def ttl_s(self) -> float:
        """How long a session lasts after `create` (the cookie's Max-Age)."""
        ...

    async def create(self, principal: Principal) -> tuple[str, WebSession]:
        """A new session for `principal`: (cookie value, session)."""
        ...

    async def lookup(self, session_id: str) -> WebSession | None:
        """The live session with this id, or None (unknown, ended or expired)."""
        ...

    async def end(self, session_id: str) -> bool:
        """End the session; whether there was one to end."""
        ...

    async def count(self) -> int:
        """How many sessions are live."""
        ...


class Throttle(Protocol):
    """Failed token checks per client address, for every way a token is presented."""

    async def attempt(self, client: str, who: str | None) -> int:
        """One token from `client`, resolved to `who` (None: a wrong token). The seconds the
        attempt must wait (answer 429), or 0: it goes on (a success, or a failure now counted)."""
        ...

    async def retry_after(self, client: str) -> int:
        """Whole seconds until `client` is no longer held (0 when it is not)."""
        ...

    async def allows(self, client: str) -> bool:
        """Whether `client` is not held (any token may try)."""
        ...


__all__ = ["Sessions", "Throttle", "WebSession"]
