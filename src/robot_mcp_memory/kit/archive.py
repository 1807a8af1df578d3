"""A portable archive of declared tables: one JSON-lines file per table, plus a manifest.

Generic over the `Schema`: `derived` tables are never archived (they are rebuilt from their
sources after a load), everything else can be. Rows are written in primary-key order with sorted
keys, so an archive of a loaded archive is byte-identical. Loading replaces rows with the same
key and keeps others; it runs in one transaction per file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
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


def exporter(tables: Sequence[str], dest: Path, prefix: str = "") -> Callable[[sqlite3.Connection], dict[str, int]]:
    """A read job writing ``<prefix><table>.jsonl`` for each table into `dest` and returning rows
    per table: run it inside a larger read transaction to archive the same snapshot."""

    def dump(conn: sqlite3.Connection) -> dict[str, int]:
        dest.mkdir(parents=True, exist_ok=True)
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


def import_tables(store: SqliteStore, tables: Sequence[str], src: Path, prefix: str = "") -> dict[str, int]:
    """Insert-or-replace the rows of each ``<prefix><table>.jsonl`` present in `src`."""
    loaded: dict[str, int] = {}
    for table in tables:
        path = src / f"{prefix}{table}.jsonl"
        if not path.exists():
            continue
        rows: list[dict[str, Any]] = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise InvalidInput(f"{path.name} line {n} is not JSON") from exc
            if not isinstance(row, dict):
                raise InvalidInput(f"{path.name} line {n} is not a JSON object")
            rows.append(row)

        def load(conn: sqlite3.Connection, table: str = table, rows: list[dict[str, Any]] = rows) -> int:
            cols = _columns(conn, table)
            for n, row in enumerate(rows, start=1):
                unknown = set(row) - set(cols)
                if unknown:
                    raise InvalidInput(f"{table}.jsonl row {n} has unknown columns: {', '.join(sorted(unknown))}")
            if rows:
                names = sorted({k for row in rows for k in row})
                conn.executemany(
                    f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) "  # noqa: S608 - checked names
                    f"VALUES ({', '.join('?' * len(names))})",
                    [[row.get(k) for k in names] for row in rows],
                )
            return len(rows)

        loaded[table] = store.write_blocking(load)
    return loaded
