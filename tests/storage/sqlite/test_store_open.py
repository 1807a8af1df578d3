"""Opening a store while other processes open or write it, and on a disk that refuses writes.

Several processes may share a data directory (a server, training loops, the CLI), and they start
together: creating or upgrading the file must come out the same whoever wins the write lock, and a
lock held, or a full disk, during the upgrade is reported as what it is — never as a broken file
to restore from a backup (which would throw its data away)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import robot_mcp_memory
from robot_mcp_memory.errors import (
    MigrationFailed,
    StorageError,
    StoreBusy,
    StoreNotWritable,
    StoreUnreadable,
    StoreWriteFailed,
)
from robot_mcp_memory.storage.sqlite import Kind, Schema, SqliteStore, Table
from tests.conftest import eventually
from tests.storage.sqlite.test_opening import Steps, _schema, read_only

WAIT = 10.0  # upper bound for any wait; a passing test never gets near it
CHILD_WAIT = 120.0  # a child process: interpreter start and imports on a loaded 2-core machine

STORE_META = Table(
    "store_meta", Kind.DEFINITION, ("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT)",)
)


def child_env() -> dict[str, str]:
    """This environment, with this checkout's package first on the path of a child process."""
    src = str(Path(robot_mcp_memory.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}


def version_of(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------- processes creating one file at once
#: A process opening `path` with `steps` migrations, each of which fails if it runs twice (it
#: creates a table) and records who ran it. It says it is ready, then waits for the go file, so that
#: every process reads the file's version at the same moment — as a server and training loops
#: started together do. Each step holds the lock a little while, as real steps do.
_OPENER = r"""
import sys, time
from pathlib import Path
from robot_mcp_memory.storage.sqlite import Kind, Schema, SqliteStore, Table

path, go, me, n = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def step(i):
    def run(conn):
        if i == 0:
            conn.execute("CREATE TABLE ran (step INTEGER NOT NULL, who TEXT NOT NULL)")
        conn.execute(f"CREATE TABLE t{i} (x)")
        conn.execute("INSERT INTO ran VALUES (?, ?)", (i, me))
        time.sleep(0.05)
    return run

meta_ddl = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT)"
meta = Table("store_meta", Kind.DEFINITION, (meta_ddl,))
tables = (meta, Table("ran", Kind.DEFINITION, ()), *(Table(f"t{i}", Kind.DEFINITION, ()) for i in range(n)))
Path(f"{go}.{me}").touch()
while not go.exists():
    time.sleep(0.002)
SqliteStore.open(path, Schema(tables), [step(i) for i in range(n)]).close()
"""


def start_together(tmp_path: Path, script: str, args: list[str], n: int) -> list[subprocess.CompletedProcess[str]]:
    """Run `n` processes of `script` with `args` (``{go}``: the go file, ``{me}``: the process's
    name), wait until each has said it is ready, then let them go at the same moment."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *(a.format(go=go, me=f"p{i}") for a in args)],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    try:
        assert eventually(lambda: all(Path(f"{go}.p{i}").exists() for i in range(n)), CHILD_WAIT)
        go.touch()
        outs = [p.communicate(timeout=CHILD_WAIT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [
        subprocess.CompletedProcess(p.args, p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)
    ]


@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.parametrize("trial", range(2))
def test_processes_creating_one_new_file_at_once_run_each_step_once_and_all_open_it(tmp_path: Path, trial: int) -> None:
    """Each process planned its steps from the version it read before it took the write lock: a
    late one re-ran steps the first had applied (over the finished file, writing an older version
    over the newer), and failed on the first step that cannot run twice."""
    path = tmp_path / "index.db"
    steps = 6

    done = start_together(tmp_path, _OPENER, [str(path), "{go}", "{me}", str(steps)], n=4)

    assert [d.returncode for d in done] == [0, 0, 0, 0], [d.stderr[-1500:] for d in done if d.returncode]
    assert version_of(path) == steps
    conn = sqlite3.connect(path)
    try:
        assert sorted(r[0] for r in conn.execute("SELECT step FROM ran")) == list(range(steps))
    finally:
        conn.close()


# ---------------------------------------------------------------------------- a lock another process holds
@contextmanager
def lock_held_elsewhere(path: Path) -> Iterator[threading.Event]:
    """Another connection (as another process would: a server upgrading the file, a training loop
    writing a batch) holds SQLite's write lock on `path` until the yielded event is set."""
    release = threading.Event()
    taken = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            taken.set()
            release.wait(WAIT * 3)
            other.execute("COMMIT")
        finally:
            other.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(WAIT)
        yield release
    finally:
        release.set()
        holder.join(WAIT)


def test_an_upgrade_waits_for_a_lock_another_process_holds_then_migrates(tmp_path: Path) -> None:
    """The upgrade's `BEGIN IMMEDIATE` got one busy timeout and no retry: the open failed with
    "not a usable database (database is locked) — restore it from a backup" (exit 65, and the
    service manager did not restart) while the file was fine."""
    path = tmp_path / "index.db"
    steps = Steps()
    SqliteStore.open(path, _schema(1), steps(1)).close()

    with lock_held_elsewhere(path) as release, concurrent.futures.ThreadPoolExecutor(1) as pool:
        opening = pool.submit(SqliteStore.open, path, _schema(2), steps(2), busy_timeout_ms=20, write_patience_s=WAIT)
        concurrent.futures.wait([opening], timeout=0.5)  # 25 busy timeouts
        assert not opening.done(), f"the open gave up while the lock was held: {opening.exception()!r}"
        release.set()
        store = opening.result(WAIT)
    with store:
        assert store.report is not None
        assert (store.report.from_version, store.report.to_version) == (1, 2)
    assert version_of(path) == 2


def test_an_upgrade_that_cannot_get_the_lock_says_busy_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    steps = Steps()
    SqliteStore.open(path, _schema(1), steps(1)).close()
    before = sha256(path)
    steps.ran.clear()

    with lock_held_elsewhere(path), pytest.raises(StoreBusy) as caught:
        SqliteStore.open(path, _schema(2), steps(2), busy_timeout_ms=20, write_patience_s=0.2)

    message = caught.value.detail
    assert str(path) in message
    assert "start again in a moment" in message
    assert "backup" not in message  # the file is fine: restoring it would lose data
    assert not isinstance(caught.value, StoreUnreadable)
    assert steps.ran == []
    assert version_of(path) == 1
    assert sha256(path) == before


def test_another_process_upgrading_the_file_meanwhile_is_not_upgraded_over(tmp_path: Path) -> None:
    """The waiting open reads the version again once it holds the lock: what the other process
    applied meanwhile is not applied again (it would have failed: each step creates a table)."""
    path = tmp_path / "index.db"
    mine, theirs = Steps(), Steps()
    SqliteStore.open(path, _schema(1), theirs(1)).close()
    theirs.ran.clear()

    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # SQLite's own wait (a long busy timeout) takes the lock once the other commits: this
            # is about what the open does then.
            opening = pool.submit(SqliteStore.open, path, _schema(3), mine(3), busy_timeout_ms=int(WAIT * 1000))
            concurrent.futures.wait([opening], timeout=0.3)
            assert not opening.done(), f"the open gave up while the lock was held: {opening.exception()!r}"
            for i in (1, 2):  # the other process applies steps 1 and 2 while this one waits
                theirs(3)[i](other)
            other.execute("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
            other.execute("COMMIT")
            store = opening.result(WAIT)
    finally:
        other.close()
    with store:
        assert store.report is not None
        assert (store.report.from_version, store.report.to_version, store.report.created) == (3, 3, False)
    assert mine.ran == []
    assert version_of(path) == 3


# ---------------------------------------------------------------------------- a disk that refuses the upgrade's writes
#: Opens the file with its first `n` steps (the second rewrites ~2 MB of pages into the WAL); with a
#: `limit`, in a process that may not write files past that many bytes (a file-size limit, as
#: `ulimit -f` or systemd's LimitFSIZE=): the WAL cannot grow, as on a full disk, and SQLite rolls
#: the transaction back itself, as it does on ENOSPC.
_BLOB_OPENER = r"""
import resource, signal, sys
from pathlib import Path
from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.storage.sqlite import Kind, Schema, SqliteStore, Table

def create(conn):
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)")
    conn.executemany("INSERT INTO blobs(b) VALUES (zeroblob(4000))", [()] * 500)

def rewrite(conn):
    conn.execute("UPDATE blobs SET b = randomblob(4000)")

path, n, limit = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if limit:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
meta_ddl = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT)"
meta = Table("store_meta", Kind.DEFINITION, (meta_ddl,))
try:
    SqliteStore.open(path, Schema((meta, Table("blobs", Kind.DEFINITION, ()))), [create, rewrite][:n]).close()
    print("opened")
except StorageError as exc:
    print(type(exc).__name__)
    print(exc.detail)
"""


def open_blobs(path: Path, steps: int, limit: int = 0) -> tuple[str, str]:
    """(what `_BLOB_OPENER` says: "opened" or the error's class, the error's message)."""
    done = subprocess.run(
        [sys.executable, "-c", _BLOB_OPENER, str(path), str(steps), str(limit)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_WAIT,
    )
    assert done.returncode == 0, done.stderr[-800:]
    kind, _, message = done.stdout.partition("\n")
    return kind, message


@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE (POSIX): run the tests on Linux or macOS")
def test_an_upgrade_the_disk_refuses_says_so_and_keeps_the_file_at_its_version(tmp_path: Path) -> None:
    """SQLite rolls back by itself when the disk refuses a write; the unconditional ROLLBACK after
    it failed ("cannot rollback - no transaction is active"), hid the disk's error, and the open
    reported a corrupt database to restore from a backup (exit 65)."""
    path = tmp_path / "index.db"
    assert open_blobs(path, 1) == ("opened", "")
    assert path.stat().st_size > 1_000_000  # bigger than the limit: only writes past it are refused

    kind, message = open_blobs(path, 2, limit=1_000_000)

    assert kind == StoreWriteFailed.__name__, message
    assert str(path) in message
    assert "upgrading it from schema version 1 to 2" in message
    assert "Free space" in message
    assert "no transaction is active" not in message
    assert "backup" not in message
    assert version_of(path) == 1
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert open_blobs(path, 2) == ("opened", "")  # with room again the same file upgrades
    assert version_of(path) == 2


def _create_blobs(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB)")
    conn.executemany("INSERT INTO blobs(b) VALUES (zeroblob(4000))", [()] * 50)


def test_a_full_database_during_an_upgrade_is_a_write_failure_not_a_failed_migration(tmp_path: Path) -> None:
    """SQLITE_FULL (here from max_page_count, as from a full disk) is about room, not the step:
    "migrating failed … run the previous version or restore a backup" was the wrong advice."""
    path = tmp_path / "index.db"
    schema = Schema((STORE_META, Table("blobs", Kind.DEFINITION, ())))
    SqliteStore.open(path, schema, [_create_blobs]).close()

    def capped_rewrite(conn: sqlite3.Connection) -> None:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        conn.execute("INSERT INTO blobs(b) SELECT b FROM blobs")  # twice the rows: past the cap

    with pytest.raises(StoreWriteFailed) as caught:
        SqliteStore.open(path, schema, [_create_blobs, capped_rewrite])

    assert not isinstance(caught.value, MigrationFailed)
    assert "the disk is full" in caught.value.detail
    assert version_of(path) == 1


# ---------------------------------------------------------------------------- a read-only directory
NOTES = Table("notes", Kind.DEFINITION, ("CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY)",))
NOTES_SCHEMA = Schema((STORE_META, NOTES))


def _create_notes(conn: sqlite3.Connection) -> None:
    conn.execute(NOTES.ddl[0])


def _note(store: SqliteStore, note: str) -> None:
    store.write_blocking(lambda c: c.execute("INSERT INTO notes(id) VALUES (?)", (note,)))


def _notes(store: SqliteStore) -> list[str]:
    return store.read_blocking(lambda c: [r[0] for r in c.execute("SELECT id FROM notes ORDER BY id")])


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_store_in_a_read_only_directory_opens_read_only_reads_it_and_refuses_writes(tmp_path: Path) -> None:
    """A read-only connection creates ``-shm`` beside a WAL-mode file, which a read-only directory
    refuses ("unable to open database file", no cause named): a stopped store (no WAL) is read
    as an immutable file instead."""
    d = tmp_path / "data"
    d.mkdir()
    with SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes]) as s:
        _note(s, "kept")
    before = sha256(d / "index.db")

    with read_only(d):
        with pytest.raises(StoreNotWritable):  # opened to write, as a server does: refused as before
            SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes])
        with SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes], read_only=True) as s:
            assert s.report is not None
            assert (s.report.to_version, s.report.counts["notes"]) == (1, 1)
            assert _notes(s) == ["kept"]
            with pytest.raises(StorageError, match="read-only"):
                _note(s, "new")
            with pytest.raises(StorageError, match="read-only"):
                s.on_writer(lambda c: None)

    assert sorted(p.name for p in d.iterdir()) == ["index.db"]
    assert sha256(d / "index.db") == before


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_read_only_store_reads_the_commits_still_in_the_wal_of_a_running_writer(tmp_path: Path) -> None:
    """``-shm`` is there (a server has the file open through a writable path, or was killed): the
    commits not yet copied into the file are read too."""
    d = tmp_path / "data"
    with (
        _commit_in_the_wal(d),
        read_only(d),
        SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes], read_only=True) as s,
    ):
        assert _notes(s) == ["in the wal"]


@contextmanager
def _commit_in_the_wal(d: Path) -> Iterator[None]:
    """A notes store in `d` whose last commit is still only in its WAL: a writer that keeps the
    file open, checkpoints off, until the block ends."""
    d.mkdir()
    SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes]).close()
    writer = sqlite3.connect(d / "index.db", isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO notes(id) VALUES ('in the wal')")
        yield
    finally:
        writer.close()


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_wal_without_its_shm_in_a_read_only_directory_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    """Its commits cannot be read without creating ``-shm``; reading the file alone would miss
    them without a word."""
    d, copy = tmp_path / "data", tmp_path / "copy"
    copy.mkdir()
    with _commit_in_the_wal(d):
        for name in ("index.db", "index.db-wal"):  # a copy that left -shm behind
            shutil.copyfile(d / name, copy / name)

    with read_only(copy), pytest.raises(StoreNotWritable) as caught:
        SqliteStore.open(copy / "index.db", NOTES_SCHEMA, [_create_notes], read_only=True)
    assert "index.db-wal holds commits" in caught.value.detail
    assert "writable directory" in caught.value.detail


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_read_only_store_at_an_older_version_says_it_must_be_upgraded_where_it_can_be_written(
    tmp_path: Path,
) -> None:
    d = tmp_path / "data"
    d.mkdir()
    SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes]).close()
    with read_only(d), pytest.raises(StoreNotWritable) as caught:
        SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes, lambda c: None], read_only=True)
    assert "schema version 1" in caught.value.detail


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_a_file_read_without_locks_that_changed_meanwhile_is_refused(tmp_path: Path) -> None:
    """An immutable file is read without locks: a process writing it through another, writable
    path could change it under the read, which is then not one state of the file."""
    d = tmp_path / "data"
    d.mkdir()
    with SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes]) as s:
        _note(s, "kept")
    with (
        read_only(d),
        SqliteStore.open(d / "index.db", NOTES_SCHEMA, [_create_notes], read_only=True) as s,
    ):
        assert _notes(s) == ["kept"]
        st = (d / "index.db").stat()
        os.utime(d / "index.db", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as a checkpoint would
        with pytest.raises(StorageError, match="changed while it was read"):
            _notes(s)
