"""Opening a file (`storage.sqlite.opening`): migrations in order, each with its version; a newer,
broken, foreign or misplaced file refused and left untouched; a directory that cannot be written
refused as such, not as a broken file. Opening under contention and on a full disk:
`test_store_open.py`."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from robot_mcp_memory.errors import (
    MigrationFailed,
    SchemaTooNew,
    StoreNotWritable,
    StoreUnreadable,
)
from robot_mcp_memory.storage.sqlite import Kind, Migration, Schema, SqliteStore, Table
from robot_mcp_memory.storage.sqlite.opening import Opener
from robot_mcp_memory.storage.sqlite.transaction import BUSY_TIMEOUT_MS, WRITE_PATIENCE_S
from tests.storage.sqlite.test_store import MIGRATIONS, SCHEMA, STORE_META, insert_note, notes, open_store, sha256


# ---------------------------------------------------------------------------- versioned open
class Steps:
    """Injected migrations: step i creates table t<i> and records that it ran."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def __call__(self, n: int) -> list[Migration]:
        return [self._step(i) for i in range(n)]

    def _step(self, i: int) -> Migration:
        def step(conn: sqlite3.Connection) -> None:
            self.ran.append(i)
            conn.execute(f"CREATE TABLE t{i} (x)")

        return step


def _schema(n: int) -> Schema:
    return Schema((STORE_META, *(Table(f"t{i}", Kind.DEFINITION, ()) for i in range(n))))


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


def test_migrations_run_in_order_from_zero_and_record_the_version(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    with SqliteStore.open(path, _schema(3), steps(3)) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (0, 3, True)
    assert steps.ran == [0, 1, 2]
    assert _version(path) == 3


def test_reopening_applies_only_the_new_migrations(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    SqliteStore.open(path, _schema(2), steps(2)).close()
    steps.ran.clear()

    with SqliteStore.open(path, _schema(4), steps(4)) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (2, 4, False)
    assert steps.ran == [2, 3]
    assert _version(path) == 4

    steps.ran.clear()
    SqliteStore.open(path, _schema(4), steps(4)).close()
    assert steps.ran == []


def test_a_failing_migration_keeps_the_last_completed_version(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("step 2 is broken")

    with pytest.raises(MigrationFailed) as caught:
        SqliteStore.open(path, _schema(2), [*steps(2), broken])
    assert (caught.value.at, caught.value.to) == (2, 3)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert _version(path) == 2
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_file_from_a_newer_version_raises_schema_too_new_and_is_left_untouched(tmp_path: Path) -> None:
    steps = Steps()
    path = tmp_path / "index.db"
    SqliteStore.open(path, _schema(3), steps(3)).close()
    before = sha256(path)
    steps.ran.clear()

    with pytest.raises(SchemaTooNew) as caught:
        SqliteStore.open(path, _schema(2), steps(2))

    assert (caught.value.found, caught.value.supported) == (3, 2)
    assert caught.value.code == "storage"
    assert str(path) in str(caught.value)
    assert steps.ran == []
    assert sha256(path) == before


def _assert_unreadable(path: Path, caught: pytest.ExceptionInfo[StoreUnreadable]) -> None:
    exc = caught.value
    assert exc.code == "storage"
    assert exc.path == str(path)
    assert str(path) in str(exc), "the message names the file"
    assert exc.remedy in str(exc), "the message says how to fix it"


def test_a_garbage_file_raises_store_unreadable_naming_the_path_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.write_bytes(b'{"robots": [{"id": "rap-1", "gro')  # the truncated JSON that crash-looped fleets
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


def test_a_truncated_database_raises_store_unreadable_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with open_store(path) as s:
        s.write_blocking(
            lambda c: c.executemany("INSERT INTO notes VALUES (?, ?)", [(str(i), "x" * 500) for i in range(200)])
        )
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


def test_a_foreign_sqlite_database_raises_store_unreadable_and_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users(email) VALUES ('a@example.com')")
    conn.close()
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert sha256(path) == before


@pytest.mark.parametrize("value", ["-1", "-7"])
def test_a_negative_schema_version_raises_store_unreadable_and_is_left_untouched(tmp_path: Path, value: str) -> None:
    """No migration leads from a negative version: run, its step indexes counted from the end of
    the list, re-ran the last migrations over the file and left it unopenable."""
    path = tmp_path / "index.db"
    open_store(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.close()
    before = sha256(path)

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert "negative" in caught.value.reason
    assert sha256(path) == before


@pytest.mark.parametrize("empty", [True, False])
def test_a_directory_where_the_file_belongs_raises_store_unreadable_and_is_left_alone(
    tmp_path: Path, empty: bool
) -> None:
    path = tmp_path / "index.db"
    path.mkdir()
    if not empty:
        (path / "x").write_text("kept")

    with pytest.raises(StoreUnreadable) as caught:
        open_store(path)

    _assert_unreadable(path, caught)
    assert "directory" in caught.value.reason
    assert path.is_dir()
    assert sorted(p.name for p in path.iterdir()) == ([] if empty else ["x"])


def test_a_zero_byte_file_is_opened_as_a_new_empty_database(tmp_path: Path) -> None:
    """An empty file holds nothing to lose (a `touch`, or a crash before sqlite wrote its first
    page), and SQLite itself treats it as an empty database: refusing it would turn a harmless
    state into an outage."""
    path = tmp_path / "index.db"
    path.touch()

    with open_store(path) as s:
        assert s.report is not None
        assert (s.report.from_version, s.report.to_version, s.report.created) == (0, 1, True)
        assert notes(s) == []


@contextmanager
def read_only(d: Path) -> Iterator[Path]:
    """`d` made read-only for this process, as a snapshot or a read-only mount is: permission bits
    for a normal user; for root (whom they do not stop) the immutable attribute, where the file
    system has it. The files in it keep their mode."""
    d.chmod(0o555)
    immutable = False
    if os.access(d, os.W_OK):
        chattr = shutil.which("chattr")
        immutable = chattr is not None and subprocess.run([chattr, "+i", str(d)], capture_output=True).returncode == 0
        if not immutable:
            d.chmod(0o755)
            pytest.skip(
                "running as root without chattr, so no directory can be made read-only: install e2fsprogs "
                "(chattr, on ext4 or xfs) or run the tests as a normal user"
            )
    try:
        yield d
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(d)], check=True)
        d.chmod(0o755)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot write: permission bits for a normal user; for root (whom
    permission bits do not stop) the immutable attribute, where the file system has it."""
    d = tmp_path / "ro"
    d.mkdir()
    with open_store(d / "index.db") as s:
        s.write_blocking(insert_note("kept"))
    with read_only(d):
        yield d


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_read_only_directory_raises_store_not_writable_naming_the_path_not_store_unreadable(
    read_only_dir: Path,
) -> None:
    """SQLite alone would say "unable to open database file", which reads as a broken file whose
    remedy (restore a backup, or start empty) would be wrong for a good one."""
    path = read_only_dir / "index.db"
    before = sha256(path)

    with pytest.raises(StoreNotWritable) as caught:
        open_store(path)

    assert caught.value.code == "storage"
    assert caught.value.path == str(path)
    assert str(path) in caught.value.detail
    assert sha256(path) == before
    assert sorted(p.name for p in read_only_dir.iterdir()) == ["index.db"]


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_data_directory_that_cannot_be_created_raises_store_not_writable(read_only_dir: Path) -> None:
    with pytest.raises(StoreNotWritable):
        open_store(read_only_dir / "data" / "index.db")


def test_a_data_directory_that_is_a_file_says_so(tmp_path: Path) -> None:
    """`--data-dir notes.txt` said "its directory cannot be created: File exists", then to grant
    write access — the wrong remedy."""
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(StoreNotWritable) as caught:
        open_store(tmp_path / "notes.txt" / "index.db")
    assert "notes.txt is a file, not a directory" in caught.value.detail
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_an_opener_alone_leaves_a_wal_file_at_the_last_version_and_the_writers_connection(tmp_path: Path) -> None:
    """Opening needs no store: `Opener.read_write` hands back the read-write connection (WAL,
    foreign keys, the store's stamp) and its report; `read_only` then finds the last version."""
    path = tmp_path / "index.db"
    opener = Opener(path, SCHEMA, MIGRATIONS, BUSY_TIMEOUT_MS, WRITE_PATIENCE_S)
    conn, report = opener.read_write(lambda: "ours:1")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("SELECT store_stamp()").fetchone()[0] == "ours:1"
        assert (report.from_version, report.to_version, report.created) == (0, 1, True)
        assert report.counts == {"store_meta": 1, "notes": 0, "counters": 1}
    finally:
        conn.close()
    _view, version = opener.read_only()
    assert version == len(MIGRATIONS) == 1
