"""PostgresThrottle: the token throttle (`tenancy.ports.Throttle`) in the PostgreSQL schema every
replica shares, so guesses spread over replicas add up to one hold, as they would in one process.

Tables (component ``auth_throttle``): ``auth_failures`` (per counted address, its latest failures,
oldest first, at most `max_failures` of them) and ``auth_trust`` (per address and principal, when
that principal's trust there ends).

Invariants (the rules are `tenancy.throttle`'s: the waits come from its `recent_failures` and
`held_for`; the upsert's ``SET`` is its `kept_after_failure` and its ``WHERE`` is "`held_for` is 0",
written in SQL; tests/tenancy/test_throttle.py runs both implementations on the same cases):

- **Every attempt starts with one read**: the address's failures and the token's trust, in one
  snapshot. A held address answers with its wait then and there, so a guesser flooding a held
  address costs the database reads, never writes; a held address admits a token only when its
  trust there is live (issue 29: the right token is never locked out, and a right guess at a held
  address looks like a wrong one).
- **A failure is one UPSERT, atomic across replicas.** ``INSERT … ON CONFLICT DO UPDATE … WHERE
  <not held>`` counts it only if the address is still not held, decided under the row's lock on
  the row's latest version: concurrent failures from any number of replicas each count once, and
  none counts once the address is held. When the ``WHERE`` refused (held meanwhile), the row stays
  locked by this transaction, so the wait read next is the one that decided. The write is
  shielded: a client that hangs up does not take its failure back.
- **A success writes only to keep its trust.** The trust is written when it would otherwise end
  more than `refresh_s` early: a token in steady use costs no write, and its trust ends between
  ``trust_s - refresh_s`` and ``trust_s`` after its last use.
- **One clock for every replica**: the database's, in seconds since the epoch (unless a `clock` is
  given, as tests do).
- **Bounded by time, not a count.** Rows whose every failure has left the window, and trust that
  has ended, say nothing; a replica deletes them after a counted failure, at most every
  `prune_every_s` (one replica at a time, under a try-lock). `AuthThrottle`'s count cap
  (`max_clients`) guards one process's memory and has no counterpart here: nothing is forgotten
  early.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from robot_mcp_memory.storage.postgres import Connection, Migration, PostgresStore
from robot_mcp_memory.tenancy.throttle import MAX_FAILURES, TRUST_S, WINDOW_S, counted_as, held_for, recent_failures

COMPONENT = "auth_throttle"
#: How much of a token's trust may go unrefreshed (seconds): a use within this of the last write
#: writes nothing.
TRUST_REFRESH_S = 60.0
#: How often (seconds, by this replica's clock) a replica deletes rows that no longer count.
PRUNE_EVERY_S = 60.0

#: Now, in seconds since the epoch: the bound ``now`` when the throttle has a clock, else the
#: database's (the statement's start, one value for the whole statement).
NOW = "COALESCE(%(now)s::float8, extract(epoch FROM statement_timestamp())::float8)"


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE auth_failures (
            client TEXT PRIMARY KEY,
            times DOUBLE PRECISION[] NOT NULL,
            latest DOUBLE PRECISION NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX auth_failures_latest ON auth_failures (latest)")
    conn.execute(
        """CREATE TABLE auth_trust (
            client TEXT NOT NULL,
            who TEXT NOT NULL,
            until DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (client, who)
        )"""
    )
    conn.execute("CREATE INDEX auth_trust_until ON auth_trust (until)")


#: Append-only. Step i brings the throttle's tables from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create]

# ---------------------------------------------------------------------------- SQL (connection first)
#: Count one failure at ``now`` unless the address is held. Inside ``DO UPDATE``, ``excluded.latest``
#: is the failure's time and the recent failures are the row's within the window of it: the new
#: array is the latest `max` of those and this one, oldest first (`kept_after_failure`), written
#: only while fewer than `max` are recent (`held_for` is 0).
_COUNT_FAILURE = """
INSERT INTO auth_failures AS f (client, times, latest) VALUES (%(client)s, ARRAY[%(now)s::float8], %(now)s)
ON CONFLICT (client) DO UPDATE SET
    times = ARRAY(
        SELECT t FROM (
            SELECT t FROM (
                SELECT t FROM unnest(f.times) AS u(t) WHERE excluded.latest - t < %(window)s
                UNION ALL SELECT excluded.latest
            ) AS r ORDER BY t DESC LIMIT %(max)s
        ) AS k ORDER BY t
    ),
    latest = GREATEST(f.latest, excluded.latest)
WHERE (SELECT count(*) FROM unnest(f.times) AS u(t) WHERE excluded.latest - t < %(window)s) < %(max)s
RETURNING 1
"""


def count_failure(conn: Connection, client: str, now: float, max_failures: int, window_s: float) -> int:
    """Count a failure from `client` at `now` unless it is held: 0 when counted, else the seconds to wait."""
    params = {"client": client, "now": now, "max": max_failures, "window": window_s}
    if conn.execute(_COUNT_FAILURE, params).fetchone() is not None:
        return 0
    row = conn.execute("SELECT times FROM auth_failures WHERE client = %s", (client,)).fetchone()
    times = [float(t) for t in row[0]] if row is not None else []
    # The upsert found the row held at `now` and keeps it locked, so this is the wait it saw (at
    # least 1): a refused failure never reads as a counted one.
    return max(1, held_for(recent_failures(times, now, window_s), now, max_failures, window_s))


def select_state(
    conn: Connection, client: str, who: str | None, now: float | None
) -> tuple[float, list[float], float | None]:
    """(now, the address's remembered failures, when `who`'s trust there ends or None)."""
    row = conn.execute(
        f"SELECT n.now, f.times, t.until FROM (SELECT {NOW} AS now) AS n "  # noqa: S608 - a fixed expression
        "LEFT JOIN auth_failures AS f ON f.client = %(client)s "
        "LEFT JOIN auth_trust AS t ON t.client = %(client)s AND t.who = %(who)s",
        {"client": client, "who": who, "now": now},
    ).fetchone()
    assert row is not None  # one row from the one-row source
    return float(row[0]), [float(t) for t in row[1] or ()], None if row[2] is None else float(row[2])


def trust(conn: Connection, client: str, who: str, until: float) -> None:
    """`who` is trusted at `client` until at least `until` (a later trust is kept)."""
    conn.execute(
        "INSERT INTO auth_trust AS t (client, who, until) VALUES (%s, %s, %s) "
        "ON CONFLICT (client, who) DO UPDATE SET until = GREATEST(t.until, excluded.until)",
        (client, who, until),
    )


def prune(conn: Connection, lock: str, now: float | None, window_s: float) -> int:
    """Delete what no longer counts, unless another replica is at it; how many rows went."""
    taken = conn.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (lock,)).fetchone()
    if taken is None or not taken[0]:
        return 0
    params: dict[str, Any] = {"now": now, "window": window_s}
    failures = conn.execute(f"DELETE FROM auth_failures WHERE {NOW} - latest >= %(window)s", params)  # noqa: S608
    trusts = conn.execute(f"DELETE FROM auth_trust WHERE until <= {NOW}", params)  # noqa: S608
    return max(0, failures.rowcount) + max(0, trusts.rowcount)


# ---------------------------------------------------------------------------- the throttle object
class PostgresThrottle:
    """The token throttle on a `PostgresStore` (implements `tenancy.ports.Throttle`). Every call
    runs on the store's worker threads, never on the event loop."""

    def __init__(
        self,
        db: PostgresStore,
        *,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        trust_s: float = TRUST_S,
        refresh_s: float = TRUST_REFRESH_S,
        prune_every_s: float = PRUNE_EVERY_S,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.db = db
        self.max_failures = max_failures
        self.window_s = window_s
        self.trust_s = trust_s
        self.refresh_s = refresh_s
        self.prune_every_s = prune_every_s
        #: None: the database's clock (see the module docstring); tests pass one to move time.
        self.clock = clock
        self._prune_lock = f"{db.schema}.{COMPONENT}.prune"
        self._pruned_at = time.monotonic()
        db.migrate(COMPONENT, MIGRATIONS)

    def _now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    async def attempt(self, client: str, who: str | None) -> int:
        key, now = counted_as(client), self._now()
        at, times, until = await self.db.read(lambda c: select_state(c, key, who, now))
        wait = held_for(recent_failures(times, at, self.window_s), at, self.max_failures, self.window_s)
        trusted = until is not None and until > at
        if wait and not (who is not None and trusted):
            return wait
        if who is None:
            wait = await self.db.write(lambda c: count_failure(c, key, at, self.max_failures, self.window_s))
            if wait == 0 and time.monotonic() - self._pruned_at >= self.prune_every_s:
                await self.prune()
            return wait
        if until is None or until - at < self.trust_s - self.refresh_s:
            await self.db.write(lambda c: trust(c, key, who, at + self.trust_s))
        return 0

    async def retry_after(self, client: str) -> int:
        key, now = counted_as(client), self._now()
        at, times, _ = await self.db.read(lambda c: select_state(c, key, None, now))
        return held_for(recent_failures(times, at, self.window_s), at, self.max_failures, self.window_s)

    async def allows(self, client: str) -> bool:
        return await self.retry_after(client) == 0

    async def prune(self) -> int:
        """Delete the rows that no longer count now (also done on its own: the module docstring)."""
        now = self._now()
        self._pruned_at = time.monotonic()
        return await self.db.write(lambda c: prune(c, self._prune_lock, now, self.window_s))

    def close(self) -> None:
        """Nothing of its own to release: the store (and its pool) is closed by its owner."""


__all__ = ["COMPONENT", "MIGRATIONS", "PRUNE_EVERY_S", "TRUST_REFRESH_S", "PostgresThrottle"]
