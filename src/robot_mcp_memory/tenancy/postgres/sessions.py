"""PostgresSessions: the dashboard's browser sessions (`tenancy.ports.Sessions`) as rows of the
PostgreSQL schema every replica shares, so a login on one replica is valid on the next and a
logout on any ends it on all.

Table (component ``web_sessions``): ``web_sessions``, one row per session.

Invariants (the rules are `tenancy.sessions.SessionStore`'s; tests/tenancy/test_sessions.py runs
both):

- **No usable id at rest.** A row is keyed by the SHA-256 of the session id (`session_key`); the id
  itself is only ever in the cookie. The row holds the CSRF token, which is worthless without the
  cookie it belongs to.
- **One clock for every replica.** Expiry is seconds since the epoch by the database's clock
  (unless a `clock` is given, as tests do), so replicas whose clocks disagree still agree on when a
  session ends. The lifetime is absolute (`ttl_s` after creation); a lookup does not extend it.
- **Creations are serialized** under a transaction-level advisory lock, so the caps hold across
  replicas: the expired rows go, then the robot's own oldest beyond `per_robot`, then the oldest
  overall beyond `max_sessions`, then the new row — the order `SessionStore` keeps, "oldest" being
  creation order (``seq``, taken under the lock). Lookups, ends and counts take no lock.
- **Reads never write.** A lookup answers only a live row (``expires_at`` after now); an expired
  row stays until the next creation removes it, and nothing can read it meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from robot_mcp_memory.storage.postgres import Connection, Migration, PostgresStore
from robot_mcp_memory.tenancy.ports import WebSession
from robot_mcp_memory.tenancy.principal import Principal, Via
from robot_mcp_memory.tenancy.sessions import DEFAULT_TTL_S, MAX_PER_ROBOT, MAX_SESSIONS, new_secret, session_key

COMPONENT = "web_sessions"

#: Now, in seconds since the epoch: the bound ``now`` when the store has a clock, else the
#: database's (the statement's start, one value for the whole statement).
NOW = "COALESCE(%(now)s::float8, extract(epoch FROM statement_timestamp())::float8)"

_VIAS: dict[str, Via] = {v: v for v in get_args(Via)}


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE web_sessions (
            key BYTEA PRIMARY KEY,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            via TEXT NOT NULL,
            robot_id TEXT,
            csrf_token TEXT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX web_sessions_seq ON web_sessions (seq)")
    conn.execute("CREATE INDEX web_sessions_robot ON web_sessions (robot_id, seq) WHERE robot_id IS NOT NULL")
    conn.execute("CREATE INDEX web_sessions_expires ON web_sessions (expires_at)")


#: Append-only. Step i brings the sessions table from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create]


# ---------------------------------------------------------------------------- SQL (connection first)
def insert(
    conn: Connection,
    lock: str,
    key: bytes,
    principal: Principal,
    csrf_token: str,
    now: float | None,
    ttl_s: float,
    max_sessions: int,
    per_robot: int,
) -> float:
    """Store a new session under the creation lock, making room by the caps; its expiry."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock,))
    row = conn.execute(f"SELECT {NOW}", {"now": now}).fetchone()
    assert row is not None  # a SELECT of one expression returns one row
    at = float(row[0])
    conn.execute("DELETE FROM web_sessions WHERE expires_at <= %s", (at,))
    if principal.robot_id is not None:
        conn.execute(
            "DELETE FROM web_sessions WHERE key IN (SELECT key FROM web_sessions WHERE robot_id = %(robot)s "
            "ORDER BY seq LIMIT GREATEST(0, (SELECT count(*) FROM web_sessions WHERE robot_id = %(robot)s) "
            "- %(per)s + 1))",
            {"robot": principal.robot_id, "per": per_robot},
        )
    conn.execute(
        "DELETE FROM web_sessions WHERE key IN (SELECT key FROM web_sessions ORDER BY seq "
        "LIMIT GREATEST(0, (SELECT count(*) FROM web_sessions) - %s + 1))",
        (max_sessions,),
    )
    expires_at = at + ttl_s
    conn.execute(
        "INSERT INTO web_sessions (key, via, robot_id, csrf_token, expires_at) VALUES (%s, %s, %s, %s, %s)",
        (key, principal.via, principal.robot_id, csrf_token, expires_at),
    )
    return expires_at


def select_live(conn: Connection, key: bytes, now: float | None) -> WebSession | None:
    row = conn.execute(
        f"SELECT via, robot_id, csrf_token, expires_at FROM web_sessions WHERE key = %(key)s AND expires_at > {NOW}",  # noqa: S608 - a fixed expression
        {"key": key, "now": now},
    ).fetchone()
    return _session(row) if row is not None else None


def delete(conn: Connection, key: bytes) -> bool:
    return conn.execute("DELETE FROM web_sessions WHERE key = %s RETURNING 1", (key,)).fetchone() is not None


def count_live(conn: Connection, now: float | None) -> int:
    row = conn.execute(
        f"SELECT count(*) FROM web_sessions WHERE expires_at > {NOW}",  # noqa: S608 - a fixed expression
        {"now": now},
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _session(row: tuple[Any, ...]) -> WebSession | None:
    via, robot_id, csrf_token, expires_at = row
    known = _VIAS.get(via)
    if known is None or (known == "robot") != (robot_id is not None):
        return None  # not a principal this build issues sessions to: refused, never guessed at
    return WebSession(Principal(known, robot_id), csrf_token, float(expires_at))


# ---------------------------------------------------------------------------- the store object
class PostgresSessions:
    """Browser sessions on a `PostgresStore` (implements `tenancy.ports.Sessions`). Every call runs
    on the store's worker threads, never on the event loop."""

    def __init__(
        self,
        db: PostgresStore,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = MAX_SESSIONS,
        per_robot: int = MAX_PER_ROBOT,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.db = db
        self._ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.per_robot = per_robot
        #: None: the database's clock (see the module docstring); tests pass one to move time.
        self.clock = clock
        self._lock = f"{db.schema}.{COMPONENT}.create"
        db.migrate(COMPONENT, MIGRATIONS)

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    def _now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    async def create(self, principal: Principal) -> tuple[str, WebSession]:
        session_id, csrf_token = new_secret(), new_secret()
        key, now = session_key(session_id), self._now()
        expires_at = await self.db.write(
            lambda c: insert(
                c, self._lock, key, principal, csrf_token, now, self._ttl_s, self.max_sessions, self.per_robot
            )
        )
        return session_id, WebSession(principal, csrf_token, expires_at)

    async def lookup(self, session_id: str) -> WebSession | None:
        key, now = session_key(session_id), self._now()
        return await self.db.read(lambda c: select_live(c, key, now))

    async def end(self, session_id: str) -> bool:
        key = session_key(session_id)
        return await self.db.write(lambda c: delete(c, key))

    async def count(self) -> int:
        now = self._now()
        return await self.db.read(lambda c: count_live(c, now))

    def close(self) -> None:
        """Nothing of its own to release: the store (and its pool) is closed by its owner."""


__all__ = ["COMPONENT", "MIGRATIONS", "PostgresSessions"]
