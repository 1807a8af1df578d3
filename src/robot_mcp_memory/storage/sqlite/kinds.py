"""The kind vocabulary, table declarations and the prune chokepoint.

Every table declares what elapsed time does to its content:

- ``record``      — history; prunes by age or count (the only kind retention may touch)
- ``definition``  — authored by a person or a process they armed; never removed by time
- ``belief``      — true as of an epoch; must carry the epoch it was observed in
- ``derived``     — a projection of another table (a search index); rebuilt, never pruned

`Schema.prune` is the one way rows leave a table by retention, and it refuses anything that is
not a declared ``record`` *before* it deletes anything.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    RECORD = "record"
    DEFINITION = "definition"
    BELIEF = "belief"
    DERIVED = "derived"


@dataclass(frozen=True)
class Retention:
    """How a ``record`` table ages out: rows older than `max_age_s` by `time_column`, and/or
    beyond the newest `max_rows`.

    `time_column` may hold epoch seconds (a number) or a UTC ISO-8601 text timestamp in the
    ``2026-06-12T14:00:00Z`` form the store writes; each row is compared in its own type."""

    time_column: str
    max_age_s: float | None = None
    max_rows: int | None = None


#: The shadow tables FTS5 creates for a contentful table (sqlite's own; see fts5 docs §"Shadow tables").
_FTS5_SHADOWS = ("data", "idx", "content", "docsize", "config")


@dataclass(frozen=True)
class Table:
    name: str
    kind: Kind
    ddl: tuple[str, ...]
    retention: Retention | None = None
    #: For ``derived`` virtual tables: the suffixes of the shadow tables sqlite makes for it.
    shadow_suffixes: tuple[str, ...] = ()
    #: For ``derived``: the table it projects.
    source: str | None = None

    def __post_init__(self) -> None:
        if self.retention is not None and self.kind is not Kind.RECORD:
            raise ValueError(f"table {self.name}: only a record may declare retention")
        if self.shadow_suffixes and self.kind is not Kind.DERIVED:
            raise ValueError(f"table {self.name}: only a derived table has shadow tables")

    @property
    def is_fts5(self) -> bool:
        """Whether this is an FTS5 index declared with `fts5_table`."""
        return self.kind is Kind.DERIVED and self.shadow_suffixes == _FTS5_SHADOWS


def fts5_table(name: str, source: str, columns: str, tokenize: str = "porter unicode61") -> Table:
    """Declare a contentful FTS5 index as a ``derived`` projection of `source`."""
    return Table(
        name=name,
        kind=Kind.DERIVED,
        ddl=(f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5({columns}, tokenize='{tokenize}')",),
        shadow_suffixes=_FTS5_SHADOWS,
        source=source,
    )


def fts5_problem(conn: sqlite3.Connection, table: Table) -> str | None:
    """FTS5's own integrity check of `table` (index vs stored text), or None when it passes.

    ``PRAGMA quick_check`` (and, before SQLite 3.44, ``integrity_check``) never looks inside an
    FTS5 index: its pages are well-formed b-tree pages whatever they hold. The check is an
    ``INSERT`` that writes nothing, so it needs a read-write connection."""
    if not table.is_fts5:
        raise ValueError(f"{table.name} is not an FTS5 index")
    try:
        conn.execute(f"INSERT INTO {table.name}({table.name}) VALUES('integrity-check')")
    except sqlite3.DatabaseError as exc:
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return None


def recreate(conn: sqlite3.Connection, table: Table) -> None:
    """Drop a ``derived`` table and create it again, empty, from its declaration (the caller
    holds the transaction and refills it from the source). A damaged FTS5 index cannot be
    emptied with ``DELETE``: that removes each row's tokens through the damaged pages."""
    if table.kind is not Kind.DERIVED:
        raise PermissionError(f"refusing to recreate {table.name!r}: it is a {table.kind.value}, not derived")
    try:
        conn.execute(f"DROP TABLE IF EXISTS {table.name}")
    except sqlite3.DatabaseError:
        if not table.is_fts5:
            raise
        _unlink_fts5(conn, table.name)
    for stmt in table.ddl:
        conn.execute(stmt)


@contextlib.contextmanager
def schema_edit(conn: sqlite3.Connection) -> Iterator[None]:
    """Edit ``sqlite_master`` in place within the caller's transaction (``writable_schema``); the
    schema version is bumped after, so every connection reads the schema again."""
    conn.execute("PRAGMA writable_schema=ON")
    try:
        yield
        (version,) = conn.execute("PRAGMA schema_version").fetchone()
        conn.execute(f"PRAGMA schema_version={int(version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema=OFF")


#: The tables FTS5 keeps an index in (``<name>_data`` …): ordinary tables, droppable on their own.
_FTS5_SHADOWS = ("data", "idx", "content", "docsize", "config")


def _unlink_fts5(conn: sqlite3.Connection, name: str) -> None:
    """Remove an FTS5 table too damaged to be dropped — ``DROP TABLE`` must open it first, and
    with its ``_data`` or ``_config`` rows gone it cannot be opened ("vtable constructor failed",
    "invalid fts5 file format"). Its schema entry is deleted (``writable_schema``, with the schema
    version bumped so every connection reloads the schema) and its shadow tables dropped; the
    caller's transaction then creates it again. Only what the index holds is lost: it is derived."""
    with schema_edit(conn):
        conn.execute("DELETE FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    for shadow in _FTS5_SHADOWS:
        conn.execute(f"DROP TABLE IF EXISTS {name}_{shadow}")


@dataclass(frozen=True)
class Schema:
    tables: tuple[Table, ...]
    _by_name: dict[str, Table] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Table] = {}
        for t in self.tables:
            if t.name in by_name:
                raise ValueError(f"table {t.name} declared twice")
            by_name[t.name] = t
        object.__setattr__(self, "_by_name", by_name)

    def kind_of(self, table: str) -> Kind | None:
        t = self._by_name.get(table)
        return t.kind if t else None

    def table(self, name: str) -> Table:
        return self._by_name[name]

    @property
    def pruned(self) -> tuple[Table, ...]:
        """The tables the startup sweep touches: declared records that have a retention."""
        return tuple(t for t in self.tables if t.kind is Kind.RECORD and t.retention is not None)

    def not_ours(self) -> frozenset[str]:
        """Tables sqlite creates on our behalf, derived from the ``derived`` declarations."""
        return frozenset(f"{t.name}_{s}" for t in self.tables for s in t.shadow_suffixes)

    def undeclared(self, existing: Iterable[str]) -> list[str]:
        """Tables present in a database that nobody declared (sqlite internals excluded)."""
        skip = self.not_ours()
        return sorted(n for n in existing if n not in self._by_name and n not in skip and not n.startswith("sqlite_"))

    def prune(self, conn: sqlite3.Connection, table: str, now: float | None = None) -> int:
        """Apply `table`'s retention. Refuses (raises) for anything but a declared record —
        before any row is touched. Returns the number of rows deleted."""
        t = self._by_name.get(table)
        if t is None:
            raise PermissionError(f"refusing to prune {table!r}: it has no declared kind")
        if t.kind is not Kind.RECORD:
            raise PermissionError(f"refusing to prune {table!r}: it is a {t.kind.value}, not a record")
        if t.retention is None:
            return 0
        r = t.retention
        deleted = 0
        now = time.time() if now is None else now
        # Identifiers come from our own declarations, never from input.
        if r.max_age_s is not None:
            # In SQLite a number is always less than any text, so a bare `col < cutoff` would never
            # age out an ISO-text timestamp: compare text with text and numbers with numbers.
            cutoff = now - r.max_age_s
            col = r.time_column
            cur = conn.execute(
                f"DELETE FROM {t.name} WHERE CASE typeof({col}) "  # noqa: S608 - declared identifiers
                f"WHEN 'text' THEN {col} < ? ELSE {col} < ? END",
                (_iso_utc(cutoff), cutoff),
            )
            deleted += cur.rowcount
        if r.max_rows is not None:
            cur = conn.execute(
                f"DELETE FROM {t.name} WHERE rowid NOT IN "  # noqa: S608 - declared identifiers
                f"(SELECT rowid FROM {t.name} ORDER BY {r.time_column} DESC LIMIT ?)",
                (r.max_rows,),
            )
            deleted += cur.rowcount
        return deleted


def _iso_utc(ts: float) -> str:
    """`ts` as the store's text timestamp (UTC, second precision), for comparing with text columns."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
