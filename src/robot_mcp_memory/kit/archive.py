"""A portable archive of declared tables: one JSON-lines file per table, plus a manifest.

Generic over the `Schema`: `derived` tables are never archived (they are rebuilt from their
sources after a load), everything else can be. Rows are written in primary-key order with sorted
keys, so an archive of a loaded archive is byte-identical. Loading replaces rows with the same
key and keeps others; it runs in one transaction per file.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.kit import files
from robot_mcp_memory.kit.kinds import Kind
from robot_mcp_memory.kit.store import SqliteStore

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
#: Run in each table's transaction after its rows are in: ``(conn, table, rows)``.
AfterLoad = Callable[[sqlite3.Connection, str, list[dict[str, Any]]], None]


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


def import_tables(
    store: SqliteStore,
    tables: Sequence[str],
    src: Path,
    prefix: str = "",
    check: RowCheck | None = None,
    after: AfterLoad | None = None,
) -> dict[str, int]:
    """Insert-or-replace the rows of each ``<prefix><table>.jsonl`` present in `src`. Blank lines
    are skipped; a row that cannot be loaded is refused naming the file, the line and why: a
    value not of its column's declared type, or what the caller's `check` says. `after` runs in
    each table's transaction once its rows are in (a derived row to drop, say)."""
    loaded: dict[str, int] = {}
    for table in tables:
        path = src / f"{prefix}{table}.jsonl"
        if not path.exists():
            continue
        rows = _rows(path)

        def load(
            conn: sqlite3.Connection,
            table: str = table,
            rows: list[tuple[int, dict[str, Any]]] = rows,
            path: Path = path,
        ) -> int:
            declared = _declared(conn, table)
            for n, row in rows:
                unknown = set(row) - set(declared)
                if unknown:
                    raise InvalidInput(f"{path} line {n} has unknown columns: {', '.join(sorted(unknown))}")
                why = _typed(declared, row) or (check(table, row) if check is not None else None)
                if why is not None:
                    raise InvalidInput(f"{path} line {n} {why}; nothing of that file was loaded")
            for n, row in rows:  # one by one, each with its own columns: a refusal names its line
                if not row:
                    raise InvalidInput(f"{path} line {n} is an empty JSON object")
                names = sorted(row)
                try:
                    conn.execute(
                        f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) "  # noqa: S608 - checked names
                        f"VALUES ({', '.join('?' * len(names))})",
                        [row[k] for k in names],
                    )
                except sqlite3.IntegrityError as exc:
                    why = _refusal(conn, table, row, exc)
                    raise InvalidInput(f"{path} line {n} {why}; nothing of that file was loaded") from exc
                except OverflowError as exc:  # an integer of a TEXT column past 64 bits (SQLite binds it as one)
                    raise InvalidInput(f"{path} line {n} has a number too large to store; write it as text") from exc
                except (sqlite3.InterfaceError, sqlite3.ProgrammingError) as exc:  # a list or object as a value
                    raise InvalidInput(f"{path} line {n} has a value that is not a string, number or null") from exc
            if after is not None:
                after(conn, table, [row for _, row in rows])
            return len(rows)

        loaded[table] = store.write_blocking(load)
    return loaded
