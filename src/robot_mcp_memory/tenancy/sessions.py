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
- they live in this process only: a restart logs everyone out, which costs a re-login and
  nothing else (MCP clients never use them).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from robot_mcp_memory.tenancy.principal import Principal

DEFAULT_TTL_S = 12 * 60 * 60
MAX_SESSIONS = 10_000
#: Browser sessions one robot token may hold (a person logs in from a few browsers).
MAX_PER_ROBOT = 20


@dataclass(frozen=True)
class WebSession:
    principal: Principal
    csrf_token: str
    expires_at: float


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


class SessionStore:
    """Thread-safe; satisfies `tenancy.SessionLookup`."""

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

    def create(self, principal: Principal) -> tuple[str, WebSession]:
        """A new session for `principal`: (cookie value, session)."""
        session_id = secrets.token_urlsafe(32)
        session = WebSession(principal, secrets.token_urlsafe(32), self.clock() + self.ttl_s)
        with self._lock:
            self._prune()
            if principal.scoped:
                own = [k for k, v in self._sessions.items() if v.principal.label == principal.label]
                for key in own[: max(0, len(own) - self.per_robot + 1)]:  # oldest first
                    del self._sessions[key]
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[_key(session_id)] = session
        return session_id, session

    def lookup(self, session_id: str) -> WebSession | None:
        """The live session with this id, or None (unknown or expired)."""
        key = _key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if session.expires_at <= self.clock():
                del self._sessions[key]
                return None
            return session

    def end(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(_key(session_id), None) is not None

    def _prune(self) -> None:
        now = self.clock()
        for key in [k for k, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[key]
