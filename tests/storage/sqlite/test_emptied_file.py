"""A 0-byte database file where data was expected (another database of the data directory holds
data) is refused, untouched, with the next step; in a brand-new directory it is created as ever."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import StoreUnreadable
from robot_mcp_memory.lessons.sqlite import store as params
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.storage.sqlite import index_db as db


def filled(path: Path, lessons: bool = False) -> None:
    """A real store at `path`, closed (its WAL folded into the file)."""
    store = SqliteStore.open(path, params.schema(), params.MIGRATIONS) if lessons else db.open_index(path)
    store.close()
    assert path.stat().st_size > 0


def test_an_emptied_index_beside_a_lessons_db_with_data_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    filled(tmp_path / "lessons.db", lessons=True)
    (tmp_path / "index.db").write_bytes(b"")
    with pytest.raises(StoreUnreadable) as refused:
        db.open_index(tmp_path / "index.db")
    assert "lessons.db" in refused.value.reason
    assert (tmp_path / "index.db").stat().st_size == 0
    assert not (tmp_path / "index.db-wal").exists()


def test_an_emptied_lessons_db_beside_an_index_with_data_is_refused(tmp_path: Path) -> None:
    filled(tmp_path / "index.db")
    (tmp_path / "lessons.db").write_bytes(b"")
    with pytest.raises(StoreUnreadable):
        SqliteStore.open(tmp_path / "lessons.db", params.schema(), params.MIGRATIONS)
    assert (tmp_path / "lessons.db").stat().st_size == 0


def test_an_empty_file_in_a_new_directory_is_created(tmp_path: Path) -> None:
    (tmp_path / "index.db").write_bytes(b"")
    store = db.open_index(tmp_path / "index.db")
    try:
        assert store.report is not None
        assert store.report.created
    finally:
        store.close()
    filled(tmp_path / "index.db")  # and it opens again, with data now


def test_a_data_directory_is_judged_as_found_before_either_store_creates_its_file(tmp_path: Path) -> None:
    """Both files empty (a directory prepared by hand): the memory opens, creating both — opening
    index.db first must not make lessons.db look emptied. One emptied beside data: refused."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "index.db").write_bytes(b"")
    (data / "lessons.db").write_bytes(b"")
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"})
    with capture_logs() as seen:
        Memory.open(settings, backfill=False).close()
    # started empty, but said as a warning, not only in the info line of a new store
    warned = [e for e in seen if e["event"] == "store.empty_file"]
    assert [(e["log_level"], e["file"]) for e in warned] == [("warning", "index.db"), ("warning", "lessons.db")]
    assert (data / "index.db").stat().st_size > 0
    (data / "lessons.db").unlink()
    filled(data / "lessons.db", lessons=True)
    (data / "index.db").write_bytes(b"")
    with pytest.raises(StoreUnreadable) as refused:
        Memory.open(settings, backfill=False)
    assert "lessons.db" in refused.value.reason
    assert (data / "index.db").stat().st_size == 0
