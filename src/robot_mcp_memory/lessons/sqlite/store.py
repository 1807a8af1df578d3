"""The lesson store (the spec's ParamStore + SqliteBackend): learned parameters, one table for every
scope, in ``MEMORY_DATA_DIR/lessons.db``.

**Lazy.** Nothing is created until the first lesson is written, so a server where nobody switched
self-improvement on leaves no ``lessons.db`` behind. Reads before that answer "no lessons"
without touching the disk. A file that already exists is opened (and checked) at startup, so an
unreadable one stops the server with the usual message instead of failing later.

**One row per (scope, key, place).** The spec keys lessons by ``(scope, key)``; we add ``place`` to
the primary key because env-awareness is a property of the lesson, not of the request: the same
key learned at two places is two lessons with their own counters, and the service decides when
one place's lesson may answer at another. ``place = ''`` is "no place given" and behaves as a
place of its own.

**Counters describe the params beside them** (they decide whether a lesson may transfer to
another place, so they must not count outcomes of other params):

- no lesson yet → created with these params, counting this outcome (if any);
- same params → the outcome is counted (``success=None`` changes nothing);
- different params, ``success`` True or None → the params are replaced and the counters restart
  from this outcome (the robot learned something newer that works, or is storing a correction);
- different params, ``success`` False → nothing changes: a failure of *other* params says nothing
  about the stored ones (and must not replace good params with bad).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from robot_mcp_memory import logs
from robot_mcp_memory.errors import CHECK_THE_STORE, StorageError, StoreBusy
from robot_mcp_memory.lessons.model import Action, Lesson, Stored, same_params
from robot_mcp_memory.storage.sqlite import Kind, Migration, Schema, SqliteStore, Table
from robot_mcp_memory.storage.sqlite.store import now_iso

_log = logs.get("robot_mcp_memory.lessons.sqlite.store")

LESSONS = Table(
    name="lessons",
    # definition, not record: a lesson is what the fleet learned (or an operator's correction);
    # letting it age out would make robots silently forget working parameters. Its counters are
    # records about it and sit on its row, as `processes` does with its outcome counters.
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS lessons (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            place TEXT NOT NULL DEFAULT '',
            params TEXT NOT NULL DEFAULT '{}',
            success_count INTEGER NOT NULL DEFAULT 0,
            failure_count INTEGER NOT NULL DEFAULT 0,
            recorded_by TEXT NOT NULL DEFAULT '',
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            PRIMARY KEY (scope, key, place)
        ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS idx_lessons_updated ON lessons(updated)",
    ),
)
STORE_META = Table(
    name="store_meta",
    kind=Kind.DEFINITION,  # the file's schema version: its identity, not its history
    ddl=("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",),
)
TABLES: list[Table] = [STORE_META, LESSONS]


def _create_lessons(conn: sqlite3.Connection) -> None:
    for t in TABLES:
        for stmt in t.ddl:
            conn.execute(stmt)


#: Append-only. Step i brings lessons.db from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create_lessons]


def schema() -> Schema:
    return Schema(tuple(TABLES))


# ---------------------------------------------------------------------------- SQL (connection first)
_COLS = "scope, key, place, params, success_count, failure_count, recorded_by, created, updated"


def _lesson(row: tuple[Any, ...]) -> Lesson:
    scope, key, place, params, s, f, by, created, updated = row
    return Lesson(scope, key, place, json.loads(params), s, f, by, created, updated)


def _in(column: str, values: Collection[str]) -> tuple[str, list[str]]:
    return f"{column} IN ({','.join('?' * len(values))})", sorted(values)


def select_lesson(conn: sqlite3.Connection, scope: str, key: str, place: str) -> Lesson | None:
    row = conn.execute(
        f"SELECT {_COLS} FROM lessons WHERE scope = ? AND key = ? AND place = ?",  # noqa: S608 - fixed names
        (scope, key, place),
    ).fetchone()
    return _lesson(row) if row else None


def select_for_key(conn: sqlite3.Connection, scopes: Collection[str], key: str) -> list[Lesson]:
    """Every place's lesson for `key` in `scopes`."""
    if not scopes:
        return []
    where, args = _in("scope", scopes)
    rows = conn.execute(
        f"SELECT {_COLS} FROM lessons WHERE {where} AND key = ? ORDER BY scope, place",  # noqa: S608
        [*args, key],
    )
    return [_lesson(r) for r in rows]


def select_page(
    conn: sqlite3.Connection, scopes: Collection[str] | None, limit: int, offset: int
) -> tuple[list[Lesson], int]:
    """Lessons in `scopes` (None: all), most recently updated first, and their total."""
    if scopes is not None and not scopes:
        return [], 0
    where, args = ("1", []) if scopes is None else _in("scope", scopes)
    total = conn.execute(f"SELECT count(*) FROM lessons WHERE {where}", args).fetchone()[0]  # noqa: S608
    rows = conn.execute(
        f"SELECT {_COLS} FROM lessons WHERE {where} "  # noqa: S608 - fixed names
        "ORDER BY updated DESC, scope, key, place LIMIT ? OFFSET ?",
        [*args, limit, offset],
    )
    return [_lesson(r) for r in rows], int(total)


def record(
    conn: sqlite3.Connection,
    scope: str,
    key: str,
    place: str,
    params: Mapping[str, Any],
    success: bool | None,
    recorded_by: str,
    now: str,
) -> Stored | None:
    """Apply one report by the rules in the module docstring. None: a failure of other params
    than the stored ones, which changes nothing."""
    s, f = (0, 0) if success is None else ((1, 0) if success else (0, 1))
    encoded = json.dumps(dict(params), ensure_ascii=False, sort_keys=True)
    existing = select_lesson(conn, scope, key, place)
    action: Action
    if existing is None:
        conn.execute(
            f"INSERT INTO lessons({_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",  # noqa: S608 - fixed names
            (scope, key, place, encoded, s, f, recorded_by, now, now),
        )
        action = "created"
    elif same_params(existing.params, dict(params)):
        if success is None:
            return Stored(existing, "unchanged")
        conn.execute(
            "UPDATE lessons SET success_count = success_count + ?, failure_count = failure_count + ?, "
            "recorded_by = ?, updated = ? WHERE scope = ? AND key = ? AND place = ?",
            (s, f, recorded_by, now, scope, key, place),
        )
        action = "counted"
    elif success is False:
        return None
    else:
        conn.execute(
            "UPDATE lessons SET params = ?, success_count = ?, failure_count = 0, recorded_by = ?, updated = ? "
            "WHERE scope = ? AND key = ? AND place = ?",
            (encoded, s, recorded_by, now, scope, key, place),
        )
        action = "replaced"
    lesson = select_lesson(conn, scope, key, place)
    assert lesson is not None  # written above, in this transaction
    return Stored(lesson, action)


# ---------------------------------------------------------------------------- the store object
class ParamStore:
    """lessons.db, opened on first need. Async like the other stores: reads on reader threads,
    writes on the writer thread, each write awaited until committed (never dropped)."""

    def __init__(self, path: Path, *, readers: int = 2, read_only: bool = False, refuse_emptied: bool = True) -> None:
        self.path = Path(path)
        self.readers = readers
        self.read_only = read_only  # see `SqliteStore.open`
        self.refuse_emptied = refuse_emptied  # see `SqliteStore.open`
        self._db: SqliteStore | None = None
        self._lock = threading.Lock()
        self._closed = False
        if self.path.exists():
            self._open()  # an existing file is checked at startup: unreadable → a clear boot error

    @property
    def opened(self) -> bool:
        return self._db is not None

    def _open(self) -> SqliteStore:
        with self._lock:
            if self._closed:
                raise StorageError("the lesson store is closed; the server is shutting down: retry once it restarted")
            if self._db is None:
                db = SqliteStore.open(
                    self.path,
                    schema(),
                    MIGRATIONS,
                    readers=self.readers,
                    read_only=self.read_only,
                    refuse_emptied=self.refuse_emptied,
                )
                report = db.report
                if report is not None:
                    _log.info("lessons.store_ready", **report.log_fields())
                self._db = db
            return self._db

    async def writable(self) -> SqliteStore:
        if self._db is not None:
            return self._db
        try:
            return await asyncio.to_thread(self._open)
        except StoreBusy as exc:  # another process is upgrading (or writing) lessons.db: nothing is wrong
            _log.warning("lessons.open_busy", path=str(self.path), reason=exc.detail)
            raise StorageError("the lesson store is busy (another process holds it); retry shortly") from exc
        except StorageError as exc:
            _log.error("lessons.open_failed", path=str(self.path), reason=exc.detail)
            raise StorageError(
                f"the lesson store could not be opened; the operator can find why in the log. {CHECK_THE_STORE}"
            ) from exc

    async def readable(self) -> SqliteStore | None:
        """The open store, or None while no lesson was ever written (nothing to read)."""
        if self._db is not None or not self.path.exists():
            return self._db
        return await self.writable()

    async def record(
        self,
        scope: str,
        key: str,
        place: str,
        params: Mapping[str, Any],
        success: bool | None,
        recorded_by: str,
    ) -> Stored | None:
        now = now_iso()
        db = await self.writable()
        return await db.write(lambda c: record(c, scope, key, place, params, success, recorded_by, now))

    async def for_key(self, scopes: Collection[str], key: str) -> list[Lesson]:
        db = await self.readable()
        return [] if db is None else await db.read(lambda c: select_for_key(c, scopes, key))

    async def page(self, scopes: Collection[str] | None, limit: int, offset: int) -> tuple[list[Lesson], int]:
        db = await self.readable()
        return ([], 0) if db is None else await db.read(lambda c: select_page(c, scopes, limit, offset))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            db, self._db = self._db, None
        if db is not None:
            db.close()


__all__ = ["LESSONS", "MIGRATIONS", "TABLES", "Lesson", "ParamStore", "Stored", "schema"]
