"""A portable archive of declared tables: one JSON-lines file per table.

Generic over the `Schema`: `derived` tables are never archived (they are rebuilt from their
sources after a load), everything else can be. Rows are written in primary-key order with sorted
keys, so an archive of a loaded archive is byte-identical.

Loading (`loader`) is a merge, run in the caller's one transaction, so a load is all or nothing:

- A row of the archive replaces the row of the same primary key *in place*
  (``INSERT … ON CONFLICT DO UPDATE``). Never ``INSERT OR REPLACE``: its delete of the old row
  fires the ``ON DELETE`` actions of the rows that point at it, which the archive may not carry
  at all (a robot that joined a group after the dump was ungrouped by loading the group).
- Rows the archive does not carry are kept, and so are their references.
- Rows owned by another row (a foreign key ``ON DELETE CASCADE``: a memory's tags) are the one
  exception, and only when the archive carries both files: each loaded owner's rows are then
  exactly the archive's, as a loaded row is exactly its line.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.storage import files
from robot_mcp_memory.storage.sqlite.kinds import Kind
from robot_mcp_memory.storage.sqlite.store import SqliteStore

FORMAT = 1
Progress = Callable[[int, int], None]


def archivable(store: SqliteStore, exclude: Sequence[str] = ()) -> list[str]:
    """Declared, non-derived tables of `store`, in declaration order, minus `exclude`."""
    return [t.name for t in store.schema.tables if t.kind is not Kind.DERIVED and t.name not in exclude]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]  # declared names only


def _declared(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    """Each column's declared type (``REAL``, ``INTEGER``, ``TEXT``…)."""
    return {r[1]: str(r[2]) for r in conn.execute(f"PRAGMA table_info({table})")}  # declared names only


def exporter(tables: Sequence[str], dest: Path, prefix: str = "") -> Callable[[sqlite3.Connection], dict[str, int]]:
    """A read job writing ``<prefix><table>.jsonl`` for each table into `dest` and returning rows
    per table: run it inside a larger read transaction to archive the same snapshot."""

    def dump(conn: sqlite3.Connection) -> dict[str, int]:
        dest.mkdir(mode=0o700, parents=True, exist_ok=True)
        counts: dict[str, int] = {}
        for table in tables:
            cols = _columns(conn, table)
            rows = conn.execute(
                f"SELECT {', '.join(cols)} FROM {table} ORDER BY {', '.join(cols)}"  # noqa: S608 - declared
            )
            n = 0
            with files.replacing(dest / f"{prefix}{table}.jsonl") as fh:
                for row in rows:
                    fh.write(json.dumps(dict(zip(cols, row, strict=True)), ensure_ascii=False, sort_keys=True))
                    fh.write("\n")
                    n += 1
            counts[table] = n
        return counts

    return dump


def export_tables(store: SqliteStore, tables: Sequence[str], dest: Path, prefix: str = "") -> dict[str, int]:
    """Write ``<prefix><table>.jsonl`` for each table, from one snapshot; returns rows per table."""
    return store.read_blocking(exporter(tables, dest, prefix))


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of each non-blank line of a ``.jsonl`` file."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{path} line {n} is not UTF-8 (byte {exc.start}); re-save the file as UTF-8") from exc
        if not line.strip():
            continue  # an editor's trailing newline or a blank line: nothing to load
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"{path} line {n} is not JSON") from exc
        if not isinstance(row, dict):
            raise InvalidInput(f"{path} line {n} is not a JSON object")
        rows.append((n, row))
    return rows


def _refusal(conn: sqlite3.Connection, table: str, row: dict[str, Any], exc: sqlite3.IntegrityError) -> str:
    """Why the database refused `row`, in the archive's terms (a missing field, a dangling reference)."""
    text = str(exc)
    if "NOT NULL" in text:
        return f"misses the required field {text.rsplit('.', 1)[-1]}"
    if "FOREIGN KEY" in text:
        for fk in conn.execute(f"PRAGMA foreign_key_list({table})"):  # declared names only
            target, column, key = fk[2], fk[3], fk[4]
            value = row.get(column)
            found = conn.execute(
                f"SELECT 1 FROM {target} WHERE {key} = ?",  # noqa: S608 - declared names
                (value,),
            ).fetchone()
            if value is not None and found is None:
                return f"has {column} {json.dumps(value, ensure_ascii=False)}, which names no row of {target}"
        return "names a row of another table that does not exist"
    if "UNIQUE" in text:
        return f"repeats a value that must be unique ({text.split(':', 1)[-1].strip()})"
    if "CHECK" in text:
        return "has a value the table does not accept"
    return "is refused by the database"


#: A row check of the caller's: why `row` of `table` cannot be loaded, or None.
RowCheck = Callable[[str, Mapping[str, Any]], str | None]
#: Run in each table's transaction before or after its rows are written: ``(conn, table, rows)``.
AfterLoad = Callable[[sqlite3.Connection, str, list[dict[str, Any]]], None]
#: The row as it is stored, from a checked line of `table`: the caller's derived columns (a
#: digest of other columns) computed from the line's own values, never taken from the archive.
Derive = Callable[[str, Mapping[str, Any]], dict[str, Any]]


def _typed(cols: Mapping[str, str], row: Mapping[str, Any]) -> str | None:
    """Why a value of `row` does not fit its column's declared type, or None: SQLite stores text
    in a REAL column as text (``"created_at": "yesterday"``), and every reader of that row fails."""
    for name, value in row.items():
        declared = cols.get(name, "").upper()
        if value is None or not declared:
            continue
        shown = json.dumps(value, ensure_ascii=False)[:40]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if isinstance(value, float) and not math.isfinite(value):
            return f"has {name} {shown}, which is not a finite number"
        if "INT" in declared:
            whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
            if not (number and whole and -(2**63) <= value < 2**63):
                return f"has {name} {shown}, which is not a whole number SQLite can hold (64-bit)"
        if any(t in declared for t in ("REAL", "FLOA", "DOUB")):
            if not number:
                return f"has {name} {shown}, which is not a number"
            if isinstance(value, int) and not -(10**308) < value < 10**308:
                return f"has {name} {shown}, which is too large for a number column"
    return None


#: Columns that name a row of another table without a declared foreign key, by table:
#: ``(column, table, key)``. Checked once every file is in (the row may come later in the archive).
Links = Mapping[str, Sequence[tuple[str, str, str]]]


def _primary_key(conn: sqlite3.Connection, table: str) -> list[str]:
    keyed = sorted((int(r[5]), str(r[1])) for r in conn.execute(f"PRAGMA table_info({table})") if r[5])
    return [name for _, name in keyed]  # declared names only


def _owned_by(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, str]]:
    """``(column, owner table, owner key)`` of each foreign key of `table` that deletes its rows
    with their owner (``ON DELETE CASCADE``): those rows are part of the owner's."""
    return [
        (str(fk[3]), str(fk[2]), str(fk[4]))
        for fk in conn.execute(f"PRAGMA foreign_key_list({table})")  # declared names only
        if str(fk[6]).upper() == "CASCADE"
    ]


def _upsert(table: str, names: Sequence[str], columns: Sequence[str], key: Sequence[str]) -> str:
    """An insert of `names` that updates the row of the same `key` in place when there is one.
    Every other column is set, those the row does not name to their defaults (``excluded`` holds
    them): the row becomes what the line says, as a fresh insert would, without being deleted."""
    insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"  # noqa: S608 - checked names
    if not key:
        return insert
    rest = [c for c in columns if c not in key]
    if not rest:
        return f"{insert} ON CONFLICT({', '.join(key)}) DO NOTHING"
    return f"{insert} ON CONFLICT({', '.join(key)}) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in rest)}"


def loader(
    tables: Sequence[str],
    src: Path,
    prefix: str = "",
    check: RowCheck | None = None,
    derive: Derive | None = None,
    before: AfterLoad | None = None,
    after: AfterLoad | None = None,
    links: Links | None = None,
    interrupt: Callable[[], None] | None = None,
) -> Callable[[sqlite3.Connection], dict[str, int]]:
    """A write job loading the rows of each ``<prefix><table>.jsonl`` present in `src` (see the
    module's docstring for what a load does to the rows already there), in the caller's
    transaction; it returns the rows loaded per file. Blank lines are skipped; a row that cannot
    be loaded is refused naming the file, the line and why — a value not of its column's
    declared type, what the caller's `check` says, what the database refuses, a `links` value
    naming no row — and the caller's transaction rolls back: nothing was loaded. `derive` makes
    each checked line the row stored (derived columns recomputed: a line may leave them out, and
    an archive from another version or a hand edit holds stale ones). `before` runs once a
    table's rows are checked and before they are written (it can compare them with the rows they
    replace), `after` once they are in. `interrupt` is called before each row: what it raises
    (a Ctrl-C the caller saw on another thread) stops the load likewise."""

    def load(conn: sqlite3.Connection) -> dict[str, int]:
        owned = {table: _owned_by(conn, table) for table in tables}
        # What is remembered of each loaded row: the values its owned rows and `links` need.
        wanted: dict[str, set[str]] = {}
        for fks in owned.values():
            for _column, owner, owned_key in fks:
                wanted.setdefault(owner, set()).add(owned_key)
        for table, columns in (links or {}).items():
            wanted.setdefault(table, set()).update(column for column, _t, _k in columns)
        kept: dict[str, tuple[Path, list[tuple[int, dict[str, Any]]]]] = {}
        loaded: dict[str, int] = {}
        for table in tables:
            path = src / f"{prefix}{table}.jsonl"
            if not path.exists():
                continue
            rows = _rows(path)
            declared = _declared(conn, table)
            for i, (n, row) in enumerate(rows):
                if not row:
                    raise InvalidInput(f"{path} line {n} is an empty JSON object")
                unknown = set(row) - set(declared)
                if unknown:
                    raise InvalidInput(f"{path} line {n} has unknown columns: {', '.join(sorted(unknown))}")
                why = _typed(declared, row) or (check(table, row) if check is not None else None)
                if why is not None:
                    raise InvalidInput(f"{path} line {n} {why}; nothing was loaded")
                if derive is not None:
                    if interrupt is not None and i % 1000 == 0:  # a stop is seen within 1,000 digests
                        interrupt()
                    rows[i] = (n, derive(table, row))
            if before is not None:
                before(conn, table, [row for _, row in rows])
            for column, owner, owner_key in owned[table]:
                if owner in kept:  # the archive carries the owners: their rows here become its rows
                    conn.executemany(
                        f"DELETE FROM {table} WHERE {column} = ?",  # noqa: S608 - declared names
                        [(row[owner_key],) for _n, row in kept[owner][1] if row.get(owner_key) is not None],
                    )
            key = _primary_key(conn, table)
            statements: dict[tuple[str, ...], str] = {}
            for n, row in rows:  # one by one, each with its own columns: a refusal names its line
                if interrupt is not None:
                    interrupt()
                names = tuple(sorted(row))
                sql = statements.get(names)
                if sql is None:
                    sql = statements[names] = _upsert(table, names, list(declared), key)
                try:
                    conn.execute(sql, [row[k] for k in names])
                except sqlite3.IntegrityError as exc:
                    why = _refusal(conn, table, row, exc)
                    raise InvalidInput(f"{path} line {n} {why}; nothing was loaded") from exc
                except OverflowError as exc:  # an integer of a TEXT column past 64 bits (SQLite binds it as one)
                    raise InvalidInput(f"{path} line {n} has a number too large to store; write it as text") from exc
                except (sqlite3.InterfaceError, sqlite3.ProgrammingError) as exc:  # a list or object as a value
                    raise InvalidInput(f"{path} line {n} has a value that is not a string, number or null") from exc
            if after is not None:
                after(conn, table, [row for _, row in rows])
            if table in wanted:
                kept[table] = (path, [(n, {c: row.get(c) for c in wanted[table]}) for n, row in rows])
            loaded[table] = len(rows)
        for table, columns in (links or {}).items():
            path, rows = kept.get(table, (src, []))
            for column, target, target_key in columns:
                for n, row in rows:
                    value = row.get(column)
                    if value is None:
                        continue
                    found = conn.execute(
                        f"SELECT 1 FROM {target} WHERE {target_key} = ?",  # noqa: S608 - declared names
                        (value,),
                    ).fetchone()
                    if found is None:
                        shown = json.dumps(value, ensure_ascii=False)
                        raise InvalidInput(
                            f"{path} line {n} has {column} {shown}, which names no row of {target} (neither "
                            f"the archive nor this store holds one); nothing was loaded"
                        )
        return loaded

    return load


#: The `store_meta` entry of a load that spans two database files (index.db and lessons.db: no
#: transaction spans both) between the first one's commit and the second's: a load stopped there
#: (kill -9 between two commits, a full disk at the second) left one file loaded and not the
#: other, and this says so (`doctor`) until a load finishes.
UNFINISHED = "load_unfinished"


def mark_unfinished(conn: sqlite3.Connection, what: str) -> None:
    """Record, in the caller's transaction, that a load of `what` has not finished yet."""
    conn.execute(
        "INSERT INTO store_meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (UNFINISHED, what),
    )


def mark_finished(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM store_meta WHERE key = ?", (UNFINISHED,))


def unfinished(conn: sqlite3.Connection) -> str | None:
    """What a load that did not finish was loading (`mark_unfinished`), or None."""
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (UNFINISHED,)).fetchone()
    return None if row is None else str(row[0])
