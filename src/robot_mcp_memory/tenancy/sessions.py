"""Browser sessions: a server-side map from a random cookie value to a principal.

The operator pastes a token into the login page once; ``POST /api/login`` checks it with the same
`TokenAuth` as the bearer header and answers with an opaque session id in an ``HttpOnly;
SameSite=Strict`` cookie. The token itself never reaches a URL, the cookie jar or local storage.

- ids are 32 random bytes (``secrets.token_urlsafe(32)``); the map is keyed by their SHA-256, so
  a lookup's timing says nothing about a stored id, and a heap dump holds no usable cookie;
- every session carries its own CSRF token (also 32 random bytes), returned by ``GET
  /api/session`` and required in ``X-CSRF-Token`` on cookie-authenticated writes;
- sessions expire (`ttl_s`, absolute) and are capped (`max_sessions`, oldest dropped first; a
  robot token holds at most `per_robot`, its own oldest dropped first, so logging in with one
  over and over cannot log the admin out);
- `SessionStore` keeps them in this process: a restart logs everyone out, which costs a re-login
  and nothing else (MCP clients never use them). Replicas behind a load balancer share
  `tenancy.postgres.sessions.PostgresSessions` instead, which keeps the same rules in the database
  (the contract is `tenancy.ports.Sessions`).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from robot_mcp_memory.tenancy.ports import WebSession
from robot_mcp_memory.tenancy.principal import Principal

DEFAULT_TTL_S = 12 * 60 * 60
MAX_SESSIONS = 10_000
#: Browser sessions one robot token may hold (a person logs in from a few browsers).
MAX_PER_ROBOT = 20


def session_key(session_id: str) -> bytes:
    """What a session is stored under: the SHA-256 of its id (never the id)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


def new_secret() -> str:
    """A session id or CSRF token: 32 random bytes, base64url."""
    return secrets.token_urlsafe(32)


class SessionStore:
    """Thread-safe; implements `tenancy.ports.Sessions` in this process. Its coroutines never
    suspend: the work is a few dict operations under a lock, done where it is awaited."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = MAX_SESSIONS,
        per_robot: int = MAX_PER_ROBOT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.per_robot = per_robot
        self.clock = clock
        self._sessions: OrderedDict[bytes, WebSession] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self, principal: Principal) -> tuple[str, WebSession]:
        """A new session for `principal`: (cookie value, session)."""
        session_id = new_secret()
        session = WebSession(principal, new_secret(), self.clock() + self.ttl_s)
        with self._lock:
            self._prune()
            if principal.robot_id is not None:
                robot = principal.robot_id
                own = [k for k, v in self._sessions.items() if v.principal.robot_id == robot]
                for key in own[: max(0, len(own) - self.per_robot + 1)]:  # oldest first
                    del self._sessions[key]
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[session_key(session_id)] = session
        return session_id, session

    async def lookup(self, session_id: str) -> WebSession | None:
        """The live session with this id, or None (unknown or expired)."""
        key = session_key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if session.expires_at <= self.clock():
                del self._sessions[key]
                return None
            return session

    async def end(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_key(session_id), None) is not None

    async def count(self) -> int:
        with self._lock:
            self._prune()
            return len(self._sessions)

    def _prune(self) -> None:
        now = self.clock()
        for key in [k for k, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[key]


__all__ = ["DEFAULT_TTL_S", "MAX_PER_ROBOT", "MAX_SESSIONS", "SessionStore", "WebSession", "new_secret", "session_key"]
