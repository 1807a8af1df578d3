"""A backup restored into a data directory where a crashed server left its ``-wal``: SQLite
would replay that server's last writes onto the restored copy. The open is refused, with the
files untouched and the advice to move the leftovers aside; after that the backup opens as it
was taken."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from robot_mcp_memory.errors import ForeignWal, StoreUnreadable
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.storage.sqlite import maintenance


def meta(path: Path, key: str) -> str | None:
    store = db.open_index(path)
    try:
        row = store.read_blocking(lambda c: c.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone())
    finally:
        store.close()
    return None if row is None else str(row[0])


def test_a_backup_restored_beside_a_crashed_servers_wal_is_refused_until_the_wal_is_moved_aside(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    index = data / "index.db"
    db.open_index(index).close()
    maintenance.backup(index, tmp_path / "backup" / "index.db")
    # The server writes on and is killed: its last commit stands only in index.db-wal.
    live = sqlite3.connect(index, isolation_level=None)
    live.execute("PRAGMA wal_autocheckpoint=0")
    live.execute("INSERT INTO store_meta(key, value) VALUES('crashed', 'yes')")
    shutil.copy(data / "index.db-wal", tmp_path / "leftover-wal")
    live.close()
    shutil.copy(tmp_path / "leftover-wal", data / "index.db-wal")
    shutil.copy(tmp_path / "backup" / "index.db", index)  # the operator restores the backup
    restored = index.read_bytes()

    with pytest.raises(ForeignWal) as refused:
        db.open_index(index)
    assert isinstance(refused.value, StoreUnreadable)  # exit 65, doctor's FAIL line
    assert "index.db-wal" in refused.value.remedy
    assert index.read_bytes() == restored
    assert (data / "index.db-wal").stat().st_size > 0

    for leftover in ("index.db-wal", "index.db-shm"):
        (data / leftover).unlink(missing_ok=True)
    assert meta(index, "crashed") is None  # the backup's state, not the crashed server's
    assert meta(index, "schema_version") is not None


def test_a_crashed_servers_own_wal_is_replayed(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    db.open_index(index).close()
    live = sqlite3.connect(index, isolation_level=None)
    live.execute("PRAGMA wal_autocheckpoint=0")
    live.execute("INSERT INTO store_meta(key, value) VALUES('crashed', 'yes')")
    crashed = tmp_path / "crashed"  # the files as a kill -9 leaves them
    crashed.mkdir()
    for name in ("index.db", "index.db-wal"):
        shutil.copy(tmp_path / name, crashed / name)
    live.close()
    assert (crashed / "index.db-wal").stat().st_size > 0
    assert meta(crashed / "index.db", "crashed") == "yes"
