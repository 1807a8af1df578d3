"""A new index.db is created from one baseline; a file from any earlier version migrates to the
same schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.storage.sqlite import SqliteStore, index_db
from tests.storage.sqlite.baseline import migrated_sql, schema_rows


def test_the_baseline_file_is_what_the_migrations_make() -> None:
    assert index_db.BASELINE.read_text(encoding="utf-8") == migrated_sql(), (
        "run: .venv/bin/python -m tests.storage.sqlite.baseline"
    )


def test_a_new_file_is_created_from_the_baseline_at_the_last_version(tmp_path: Path) -> None:
    store = index_db.open_index(tmp_path / "new.db")
    try:
        assert store.report is not None
        assert (store.report.from_version, store.report.to_version) == (0, len(index_db.MIGRATIONS))
    finally:
        store.close()
    migrated = tmp_path / "migrated.db"
    SqliteStore.open(migrated, index_db.schema(), index_db.MIGRATIONS).close()
    assert schema_rows(tmp_path / "new.db") == schema_rows(migrated)
    assert _contents(tmp_path / "new.db") == _contents(migrated)
    with sqlite3.connect(tmp_path / "new.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone() == (
            str(len(index_db.MIGRATIONS)),
        )


def test_a_file_from_every_earlier_version_migrates_to_the_baseline(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.db"
    index_db.open_index(baseline).close()
    for version in range(1, len(index_db.MIGRATIONS)):
        old = tmp_path / f"v{version}.db"
        SqliteStore.open(old, index_db.schema(), index_db.MIGRATIONS[:version]).close()
        index_db.open_index(old).close()
        assert schema_rows(old) == schema_rows(baseline), f"from version {version}"


def _contents(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table (FTS5's config included) but the store's own bookkeeping."""
    with sqlite3.connect(path) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {
            n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr)  # noqa: S608 - names from the schema
            for n in names
            if n != "store_meta" and not n.endswith(("_data", "_idx", "_docsize", "_content")) and "fts" not in n[:0]
        }


def _facts(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, content_hash, facts_hash FROM memories ORDER BY id").fetchall()


def test_dedup_rules_are_data_keys_by_older_rules_are_recomputed_once_on_open(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with RobotMemory(tmp_path, robot_id="rap-1", embedder="none") as memory:
        for n in range(3):
            memory.learn(f"the gripper slips on wet mug number {n}")
    current = _facts(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'dedup_rules'").fetchone() == (
            str(dedup.RULES_VERSION),
        )
        conn.execute("UPDATE memories SET content_hash = 'stale', facts_hash = 'stale'")
    stale = _facts(path)
    index_db.open_index(path).close()
    assert _facts(path) == stale, "keys by the current rules are not recomputed"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE store_meta SET value = '0' WHERE key = 'dedup_rules'")
    index_db.open_index(path).close()
    assert _facts(path) == current
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'dedup_rules'").fetchone() == (
            str(dedup.RULES_VERSION),
        )
