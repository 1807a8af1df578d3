"""The baseline schema of index.db, as the migrations leave a new file: what
`storage/sqlite/index_baseline.sql` must hold. Rewrite that file after adding a migration::

    .venv/bin/python -m tests.storage.sqlite.baseline

(`test_baseline.py` fails until the file matches.)"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from robot_mcp_memory.storage.sqlite import SqliteStore, index_db

HEADER = (
    "-- index.db at the last schema version: a new file is created from this, in one step.\n"
    "-- Generated from the migrations (python -m tests.storage.sqlite.baseline); do not edit by hand.\n"
)


def schema_rows(path: Path) -> list[tuple[str, str, str]]:
    """(type, name, sql) of everything a file's schema holds but store_meta, FTS5's shadow tables
    and automatic indexes: tables (plain, then virtual), then indexes, then triggers."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    virtual = {name for _t, name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")}
    shadow = {f"{v}_{s}" for v in virtual for s in ("data", "idx", "content", "docsize", "config")}
    kept = [(t, n, s) for t, n, s in rows if n != "store_meta" and n not in shadow]
    rank = {"table": 0, "index": 2, "trigger": 3}
    return sorted(kept, key=lambda r: rank[r[0]] + (1 if r[1] in virtual else 0))


def migrated_sql() -> str:
    """The baseline text, from a new file taken through every migration one step at a time."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.db"
        SqliteStore.open(path, index_db.schema(), index_db.MIGRATIONS).close()
        return HEADER + "".join(f"{sql};\n" for _t, _n, sql in schema_rows(path))


if __name__ == "__main__":
    index_db.BASELINE.write_text(migrated_sql(), encoding="utf-8")
