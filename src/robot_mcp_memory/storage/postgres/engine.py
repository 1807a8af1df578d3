"""PostgresStore: the PostgreSQL engine the domains' postgres adapters run their SQL on. It knows no domain.

Invariants:

- **One pool, no session state.** Connections come from a `psycopg_pool.ConnectionPool` in
  autocommit mode with ``prepare_threshold=None`` (no server-side prepared statements), and every
  unit of work is one explicit transaction that sets what it needs with ``SET LOCAL`` (the
  search path, read-only): nothing outlives the transaction, so a PgBouncer in transaction mode
  may hand each transaction to another server connection.
- **A schema of its own.** Every table lives in `schema` (``robot_memory`` unless told), which
  the transaction's ``search_path`` names first; SQL uses bare table names.
- **Reads see one snapshot.** A read runs ``REPEATABLE READ, READ ONLY``: every statement of it
  sees the same committed state, as a SQLite read transaction does.
- **Writes commit or raise.** A write runs ``READ COMMITTED`` (row locks and ``ON CONFLICT`` make
  its counters and upserts atomic); `write` is shielded, so a cancelled caller's write still
  commits. A deadlock or serialization failure is retried a few times, then reported.
- **Migrations under an advisory lock.** Each component (a domain's adapter) has its own ordered,
  append-only list of steps and its version in ``store_meta``; `migrate` takes a transaction-level
  advisory lock on (schema, component), reads the version under it and applies the missing steps
  with the version bump in the same transaction — replicas starting at once never run a step
  twice, and a version newer than this build's is refused (`SchemaTooNew`), the data untouched.
- **No driver error escapes.** `psycopg.Error` becomes `StoreFailed` (logged with its detail; the
  message names neither SQL nor the URL); our own errors (`NotFound`, `Conflict`, …) pass through.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from robot_mcp_memory import logs
from robot_mcp_memory.errors import MemoryError_, SchemaTooNew, StorageError, StoreFailed

_log = logs.get("robot_mcp_memory.storage.postgres")

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]
#: One step of a component's schema: runs inside the migration's transaction, on the store's schema.
Migration = Callable[[Connection], None]

DEFAULT_SCHEMA = "robot_memory"
#: A schema name we put into SQL ourselves: lower-case letters, digits and '_' (never quoted input).
SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Retries of a write that lost a deadlock or a serialization check to another transaction.
RETRIES = 3

_META = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


@dataclass(frozen=True)
class Migrated:
    """What `migrate` did for one component."""

    component: str
    from_version: int
    to_version: int


class PostgresStore:
    """A connection pool on one database and one schema, with the transaction shapes above."""

    def __init__(self, pool: ConnectionPool[Connection], schema: str) -> None:
        self.pool = pool
        self.schema = schema
        self._begin_read = sql.SQL(
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET LOCAL search_path TO {}"
        ).format(sql.Identifier(schema))
        self._begin_write = sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema))

    @classmethod
    def open(
        cls,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 4,
        timeout_s: float = 30.0,
        name: str = "robot-mcp-memory",
    ) -> PostgresStore:
        """Connect (waiting up to `timeout_s` for the first connection) and create `schema` if it is missing."""
        if not SCHEMA_RE.match(schema):
            raise StorageError(
                f"invalid PostgreSQL schema name {schema[:80]!r}: use lower-case letters, digits and '_'"
            )
        pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "prepare_threshold": None, "application_name": name},
            timeout=timeout_s,
            open=False,
            name=name,
        )
        try:
            pool.open(wait=True, timeout=timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            pool.close()
            _log.error("postgres.connect_failed", reason=_short(exc))
            raise StoreFailed(
                f"could not connect to PostgreSQL within {timeout_s:.0f} s; check that the server is up and "
                "that the database URL, its user and password are right (the log has the reason)"
            ) from exc
        store = cls(pool, schema)
        try:
            store._run(lambda c: c.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))))
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        self.pool.close()

    # ------------------------------------------------------------------ transactions
    def _run(self, fn: Callable[[Connection], T], *, read_only: bool = False) -> T:
        begin = self._begin_read if read_only else self._begin_write
        for attempt in range(RETRIES + 1):
            try:
                with self.pool.connection() as conn, conn.transaction():
                    conn.execute(begin)
                    return fn(conn)
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:
                if attempt == RETRIES:
                    raise _failed(exc, "lost to concurrent writers") from exc
                time.sleep(0.005 * (attempt + 1))  # bounded: RETRIES tries, then the error
            except MemoryError_:
                raise
            except PoolTimeout as exc:
                raise StoreFailed(
                    "the database is busy (no connection free in time); nothing was changed: retry shortly"
                ) from exc
            except psycopg.Error as exc:
                raise _failed(exc, "failed") from exc
        raise AssertionError("unreachable")  # the loop returns or raises

    def read_blocking(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a read-only snapshot on the calling thread."""
        return self._run(fn, read_only=True)

    def write_blocking(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a write transaction on the calling thread; it commits or raises."""
        return self._run(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self._run, fn, read_only=True)

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a write transaction off the event loop. Shielded: once submitted it commits
        (or fails) whether or not the caller still awaits it."""
        return await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(self._run, fn)))

    # ------------------------------------------------------------------ migrations
    def migrate(self, component: str, steps: Sequence[Migration]) -> Migrated:
        """Bring `component`'s tables to ``len(steps)``; see the module docstring."""
        key = f"schema_version:{component}"

        def run(conn: Connection) -> Migrated:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.schema}.{component}",))
            conn.execute(_META)
            row = conn.execute("SELECT value FROM store_meta WHERE key = %s", (key,)).fetchone()
            found = int(row[0]) if row else 0
            if found > len(steps):
                raise SchemaTooNew(f"PostgreSQL schema {self.schema!r} ({component})", found, len(steps))
            for step in steps[found:]:
                step(conn)
            if found != len(steps):
                conn.execute(
                    "INSERT INTO store_meta(key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, str(len(steps))),
                )
            return Migrated(component, found, len(steps))

        done = self.write_blocking(run)
        if done.from_version != done.to_version:
            _log.info(
                "postgres.migrated",
                schema=self.schema,
                component=component,
                from_version=done.from_version,
                to_version=done.to_version,
            )
        return done


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _failed(exc: psycopg.Error, what: str) -> StoreFailed:
    _log.error("postgres.error", what=what, sqlstate=exc.sqlstate or "", kind=type(exc).__name__, reason=_short(exc))
    if isinstance(exc, psycopg.OperationalError):
        return StoreFailed("the database could not be reached; nothing was changed: retry shortly")
    return StoreFailed("the database refused the operation; nothing was changed (the log has the reason)")


__all__ = ["DEFAULT_SCHEMA", "Connection", "Migrated", "Migration", "PostgresStore"]
