"""`maintenance.probe`: the readiness read of one database file, on a connection of its own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_memory.storage.sqlite import maintenance

PAGE = 4096


def a_file(path: Path, rows: int = 3_000) -> Path:
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"PRAGMA page_size={PAGE}")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        conn.executemany("INSERT INTO t(body) VALUES (?)", [(f"row {n} " + "x" * 200,) for n in range(rows)])
        conn.commit()
    finally:
        conn.close()
    return path


def damage_page(path: Path, page: int) -> None:
    with path.open("r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(b"\x5a" * PAGE)


def test_a_sound_file_can_serve(tmp_path: Path) -> None:
    assert maintenance.probe(a_file(tmp_path / "a.db")) is None


def test_a_missing_or_foreign_file_cannot_and_the_reason_names_no_path(tmp_path: Path) -> None:
    assert maintenance.probe(tmp_path / "none.db") == "the file is missing"
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 500)
    reason = maintenance.probe(junk)
    assert reason is not None
    assert str(tmp_path) not in reason
    assert "junk" not in reason


def test_damage_past_the_first_rows_is_found_by_the_bounded_check(tmp_path: Path) -> None:
    """The first row of each table reads fine; only the integrity check reaches page 60."""
    path = a_file(tmp_path / "a.db")
    damage_page(path, 60)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        maintenance.read_each_table(conn)  # what a plain read sees: nothing wrong
    finally:
        conn.close()
    assert maintenance.probe(path) is not None


def test_a_file_over_the_bound_gets_the_cheap_reads_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over `PROBE_CHECK_MAX_BYTES` the integrity check (which reads every page, and cannot be
    stopped midway) is left to `doctor`: the same damage then goes unseen by readiness."""
    path = a_file(tmp_path / "a.db")
    damage_page(path, 60)
    monkeypatch.setattr(maintenance, "PROBE_CHECK_MAX_BYTES", 59 * PAGE)
    assert maintenance.probe(path) is None
