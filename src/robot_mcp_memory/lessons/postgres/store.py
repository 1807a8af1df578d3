"""PostgresLessons: the lesson store (`LessonRepository`) as one table of the shared PostgreSQL schema.

The rules are the SQLite adapter's (`lessons.sqlite.store`, its docstring): one row per (scope,
key, place), counters that describe the params beside them, a failure of other params changing
nothing. Here several replicas may report the same lesson at once, so:

- a report first tries to create the row (``INSERT … ON CONFLICT DO NOTHING``); when the row
  exists it is read ``FOR UPDATE``, so concurrent reports of one lesson apply one after another,
  each to the row the previous one left — no outcome is lost and no two creations race;
- counters move by ``count = count + n`` in the same statement that returns the row.

Lessons live in the same database (and schema) as everything else: one snapshot, one backup. The
table is created at open (no lazy file: a database has no file to leave behind).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from robot_mcp_memory.lessons.model import Action, Lesson, Stored, same_params
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.storage.postgres import Connection, Migration, PostgresStore

COMPONENT = "lessons"


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE lessons (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            place TEXT NOT NULL DEFAULT '',
            params TEXT NOT NULL DEFAULT '{}',
            success_count BIGINT NOT NULL DEFAULT 0,
            failure_count BIGINT NOT NULL DEFAULT 0,
            recorded_by TEXT NOT NULL DEFAULT '',
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            PRIMARY KEY (scope, key, place)
        )"""
    )
    conn.execute("CREATE INDEX lessons_updated ON lessons (updated)")


#: Append-only. Step i brings the lessons table from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create]

# ---------------------------------------------------------------------------- SQL (connection first)
_COLS = "scope, key, place, params, success_count, failure_count, recorded_by, created, updated"
#: SQLite's order (BINARY collation) whatever the database's locale.
_ORDER = 'updated DESC, scope COLLATE "C", key COLLATE "C", place COLLATE "C"'


def _lesson(row: tuple[Any, ...]) -> Lesson:
    scope, key, place, params, s, f, by, created, updated = row
    return Lesson(scope, key, place, json.loads(params), int(s), int(f), by, created, updated)


def select_for_key(conn: Connection, scopes: Collection[str], key: str) -> list[Lesson]:
    """Every place's lesson for `key` in `scopes`."""
    if not scopes:
        return []
    rows = conn.execute(
        f"SELECT {_COLS} FROM lessons WHERE scope = ANY(%s) AND key = %s "  # noqa: S608 - fixed names
        'ORDER BY scope COLLATE "C", place COLLATE "C"',
        (sorted(scopes), key),
    )
    return [_lesson(r) for r in rows]


def select_page(conn: Connection, scopes: Collection[str] | None, limit: int, offset: int) -> tuple[list[Lesson], int]:
    """Lessons in `scopes` (None: all), most recently updated first, and their total."""
    if scopes is not None and not scopes:
        return [], 0
    if scopes is None:
        total = conn.execute("SELECT count(*) FROM lessons").fetchone()
        rows = conn.execute(
            f"SELECT {_COLS} FROM lessons ORDER BY {_ORDER} LIMIT %s OFFSET %s",  # noqa: S608 - fixed names
            (limit, offset),
        )
    else:
        wanted = sorted(scopes)
        total = conn.execute("SELECT count(*) FROM lessons WHERE scope = ANY(%s)", (wanted,)).fetchone()
        rows = conn.execute(
            f"SELECT {_COLS} FROM lessons WHERE scope = ANY(%s) ORDER BY {_ORDER} LIMIT %s OFFSET %s",  # noqa: S608
            (wanted, limit, offset),
        )
    return [_lesson(r) for r in rows], int(total[0]) if total else 0


def record(
    conn: Connection,
    scope: str,
    key: str,
    place: str,
    params: Mapping[str, Any],
    success: bool | None,
    recorded_by: str,
    now: str,
) -> Stored | None:
    """Apply one report by the rules in `lessons.sqlite.store`. None: a failure of other params
    than the stored ones, which changes nothing."""
    s, f = (0, 0) if success is None else ((1, 0) if success else (0, 1))
    encoded = json.dumps(dict(params), ensure_ascii=False, sort_keys=True)
    where = (scope, key, place)
    row = conn.execute(
        f"INSERT INTO lessons({_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "  # noqa: S608 - fixed names
        f"ON CONFLICT (scope, key, place) DO NOTHING RETURNING {_COLS}",
        (*where, encoded, s, f, recorded_by, now, now),
    ).fetchone()
    if row is not None:
        return Stored(_lesson(row), "created")
    locked = conn.execute(
        f"SELECT {_COLS} FROM lessons WHERE scope = %s AND key = %s AND place = %s FOR UPDATE",  # noqa: S608
        where,
    ).fetchone()
    assert locked is not None  # the insert above met it; lessons are never deleted
    existing = _lesson(locked)
    action: Action
    if same_params(existing.params, dict(params)):
        if success is None:
            return Stored(existing, "unchanged")
        row = conn.execute(
            f"UPDATE lessons SET success_count = success_count + %s, failure_count = failure_count + %s, "  # noqa: S608
            f"recorded_by = %s, updated = %s WHERE scope = %s AND key = %s AND place = %s RETURNING {_COLS}",
            (s, f, recorded_by, now, *where),
        ).fetchone()
        action = "counted"
    elif success is False:
        return None
    else:
        row = conn.execute(
            f"UPDATE lessons SET params = %s, success_count = %s, failure_count = 0, recorded_by = %s, "  # noqa: S608
            f"updated = %s WHERE scope = %s AND key = %s AND place = %s RETURNING {_COLS}",
            (encoded, s, recorded_by, now, *where),
        ).fetchone()
        action = "replaced"
    assert row is not None  # the row is locked by this transaction
    return Stored(_lesson(row), action)


# ---------------------------------------------------------------------------- the store object
class PostgresLessons:
    """The lessons table on a `PostgresStore` (implements `LessonRepository`)."""

    def __init__(self, db: PostgresStore) -> None:
        self.db = db
        db.migrate(COMPONENT, MIGRATIONS)

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
        return await self.db.write(lambda c: record(c, scope, key, place, params, success, recorded_by, now))

    async def for_key(self, scopes: Collection[str], key: str) -> list[Lesson]:
        return await self.db.read(lambda c: select_for_key(c, scopes, key))

    async def page(self, scopes: Collection[str] | None, limit: int, offset: int) -> tuple[list[Lesson], int]:
        return await self.db.read(lambda c: select_page(c, scopes, limit, offset))

    def close(self) -> None:
        """Nothing of its own to release: the store (and its pool) is closed by its owner."""


__all__ = ["COMPONENT", "MIGRATIONS", "PostgresLessons"]
