"""Opening an SQLite file for a `SqliteStore`: checked, in WAL, at the last schema version.

Opening is versioned: migrations are an append-only list, each applied in its own transaction
together with the version bump, chosen from the version read under the write lock (processes
started together share one file's creation or upgrade; `Opener.migrate`). Before anything is
written the file is inspected (`Opener.inspect`): a newer file raises `SchemaTooNew`, and a file
that is not an SQLite database (or fails its integrity check, or belongs to another application)
raises `StoreUnreadable`; a file or directory that cannot be written raises `StoreNotWritable`
(`check_writable`); an emptied file beside others that hold data (`refuse_emptied`) and a backup
copy beside a WAL written for another file (`refuse_foreign_wal`) are refused. In every case the
file is left untouched. A lock another process kept past the patience raises `StoreBusy`, a disk
that refused the upgrade's writes `StoreWriteFailed` (the step rolled back): neither is the
file's fault (`Opener.failure`).

`Opener.read_write` returns the one read-write connection a store's writer owns;
`Opener.read_only` (commands that only read, on a directory they cannot write) writes nothing and
returns how readers open the file (`readonly.read_view`). Running reads and writes is `store`'s.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_mcp_memory import logs
from robot_mcp_memory.errors import (
    ForeignWal,
    MigrationFailed,
    SchemaTooNew,
    StorageError,
    StoreBusy,
    StoreNotWritable,
    StoreUnreadable,
    StoreWriteFailed,
)
from robot_mcp_memory.storage.sqlite.checkpoint import WRITER_AUTOCHECKPOINT
from robot_mcp_memory.storage.sqlite.kinds import Kind, Schema
from robot_mcp_memory.storage.sqlite.readonly import ReadView, read_view
from robot_mcp_memory.storage.sqlite.transaction import WRITE_IOERRS, begin, busy, rollback, short

Migration = Callable[[sqlite3.Connection], None]

_log = logs.get("robot_mcp_memory.processes.sqlite.store")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_META_DDL = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


@dataclass(frozen=True)
class OpenReport:
    """What happened when the file was opened; logged once as ``store_ready``."""

    path: str
    from_version: int
    to_version: int
    created: bool
    counts: dict[str, int]
    undeclared: list[str]
    pruned: dict[str, int]

    def log_fields(self) -> dict[str, object]:
        """The fields of the one ``store_ready`` line every store logs at open."""
        return {
            "path": self.path,
            "schema_from": self.from_version,
            "schema_to": self.to_version,
            "created": self.created,
            "rows": self.counts,
            "pruned": self.pruned,
        }


@dataclass(frozen=True)
class Opener:
    """How one file is opened: its schema, its migrations and the patience for its lock."""

    path: Path
    schema: Schema
    migrations: Sequence[Migration]
    busy_timeout_ms: int
    write_patience_s: float
    #: Creates a new file's whole schema at the last version in one step (None: a new file runs
    #: every migration). Must leave the schema the migrations leave (a test per store checks).
    baseline: Migration | None = None
    #: Whether a 0-byte file is refused when another database beside it holds data
    #: (`refuse_emptied`); off for a caller that checked the directory before opening any.
    refuse_emptied: bool = True

    # ------------------------------------------------------------------ read-write
    def read_write(self, stamp: Callable[[], str]) -> tuple[sqlite3.Connection, OpenReport]:
        """Check, create or migrate the file; its read-write connection (WAL, ``foreign_keys``,
        ``synchronous=NORMAL``, ``store_stamp()`` returning `stamp()`) and what was done."""
        path = self.path
        spath = str(path)
        started = time.monotonic()
        check_writable(path)
        if path.is_dir():  # (an empty one can have a size of 0, which would read as "create it")
            raise StoreUnreadable(spath, "it is a directory, not a file")
        new = not (path.exists() and path.stat().st_size > 0)
        if new and path.exists() and self.refuse_emptied:
            refuse_emptied(path)
        refuse_foreign_wal(path)
        if not new:
            # ours, whole, not too new: checked before anything writes
            seen = self.inspect(f"{path.resolve().as_uri()}?mode=ro", started)
            if seen > len(self.migrations):
                raise SchemaTooNew(spath, seen, len(self.migrations))
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(spath, isolation_level=None, check_same_thread=False)
            # A value no other writer of the file produces, for rows that let a reader tell this
            # store's writes from another process's (`vectorstore`'s freshness stamps).
            conn.create_function("store_stamp", 0, stamp)
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            self.enter_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT}")  # kit/checkpoint.py
            from_version, version = self.migrate(conn, started)
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            undeclared = self.schema.undeclared(names)
            for name in undeclared:
                _log.warning("store.undeclared_table", table=name, path=spath)
            pruned: dict[str, int] = {}
            for t in self.schema.pruned:
                begin(conn, self.write_patience_s, path)
                try:
                    pruned[t.name] = self.schema.prune(conn, t.name)
                    conn.execute("COMMIT")
                except BaseException:
                    rollback(conn, path)
                    raise
            counts = self._counts(conn, names)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self.failure(exc, "creating it" if new else "opening it", started) from exc
            raise
        report = OpenReport(
            path=spath,
            from_version=from_version,
            to_version=version,
            created=from_version == 0,
            counts=counts,
            undeclared=undeclared,
            pruned=pruned,
        )
        return conn, report

    def enter_wal(self, conn: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, tried again while another process creating the same new
        file holds its lock. SQLite answers that "busy" at once, without waiting (its busy handler
        is skipped where waiting could deadlock), so the busy timeout does not cover it: one of
        several processes started together on an empty data directory failed to open it."""
        deadline = time.monotonic() + self.write_patience_s
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if not busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def migrate(self, conn: sqlite3.Connection, started: float) -> tuple[int, int]:
        """Bring the file to the last version, one step per transaction: (the version this process
        found, the version it left). Several processes may open one new or old file at the same
        moment (a server and training loops started together): each step is chosen from the
        version read *under the write lock*, so a step never runs twice and the version never goes
        down — a process that planned its steps from a version read before the lock re-ran steps
        1-4 over a finished file, wrote version 4 over it, failed at step 5, and left a store no
        later start could open. A file already at the last version is opened without the lock."""
        spath = str(self.path)
        target = len(self.migrations)
        version = self.version(conn)
        found: int | None = None
        while version < target:
            doing = "creating it" if version == 0 else f"upgrading it from schema version {version} to {target}"
            waiting = time.monotonic()
            step_to = version + 1
            try:
                # Waits for the lock like any write: another process may be running a long step.
                begin(conn, self.write_patience_s, self.path)
            except sqlite3.Error as exc:
                raise self.failure(exc, doing, waiting) from exc
            try:
                version = self.version(conn)  # what the processes that held the lock before left
                if found is None:
                    found = version
                if version >= target:
                    conn.execute("COMMIT")
                    break
                conn.execute(_META_DDL)
                if version == 0 and self.baseline is not None:
                    step, step_to = self.baseline, target  # a new file: the whole schema at once
                else:
                    step, step_to = self.migrations[version], version + 1
                step(conn)
                conn.execute(
                    "INSERT INTO store_meta(key, value) VALUES('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(step_to),),
                )
                conn.execute("COMMIT")
            except BaseException as exc:
                rollback(conn, self.path)
                if isinstance(exc, sqlite3.Error):
                    raise self.failure(exc, doing, started, at=version) from exc
                if isinstance(exc, Exception) and not isinstance(exc, StorageError):
                    raise MigrationFailed(spath, version, step_to, short(exc)) from exc
                raise
            version = step_to
        if version > target:  # a newer robot-mcp-memory upgraded it meanwhile
            raise SchemaTooNew(spath, version, target)
        return (version if found is None else found), version

    def version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version as `conn` sees it now (0: a new file)."""
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='store_meta'").fetchone() is None:
            return 0
        row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
        return parse_version(str(self.path), row)

    # ------------------------------------------------------------------ read-only
    def read_only(self) -> tuple[ReadView, int]:
        """Check the file for reading only: nothing is created, migrated or pruned, so it must
        exist at the last version (an older one is upgraded by the first process that can write
        it). How readers open it, and its version (`report` reads the rest)."""
        path = self.path
        spath = str(path)
        started = time.monotonic()
        if path.is_dir():
            raise StoreUnreadable(spath, "it is a directory, not a file")
        if not path.exists() or path.stat().st_size == 0:
            raise StoreUnreadable(spath, "there is no database in it")
        refuse_foreign_wal(path)
        view = read_view(path)
        version = self.inspect(view.uri, started)
        target = len(self.migrations)
        if version > target:
            raise SchemaTooNew(spath, version, target)
        if version < target:
            raise StoreNotWritable(
                spath,
                f"it is at schema version {version}, and this robot-mcp-memory reads it only once "
                f"upgraded to {target}, which writes it: run it once where its directory is writable",
            )
        return view, version

    def report(self, conn: sqlite3.Connection, version: int) -> OpenReport:
        """What a read-only open found: the rows per declared table, nothing done."""
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        counts = self._counts(conn, names)
        return OpenReport(str(self.path), version, version, False, counts, self.schema.undeclared(names), {})

    def _counts(self, conn: sqlite3.Connection, names: list[str]) -> dict[str, int]:
        return {
            t.name: conn.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0]  # noqa: S608 - declared
            for t in self.schema.tables
            if t.kind is not Kind.DERIVED and t.name in names
        }

    # ------------------------------------------------------------------ checks
    def inspect(self, uri: str, started: float) -> int:
        """Read-only look at an existing file (opened as `uri` says): is it ours, is it whole,
        which version is it?"""
        path = self.path
        spath = str(path)
        try:
            with path.open("rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise StoreUnreadable(spath, f"it cannot be read: {exc.strerror or type(exc).__name__}") from exc
        if head != _SQLITE_MAGIC:
            raise StoreUnreadable(spath, "it is not an SQLite database")
        try:
            ro = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise self.failure(exc, "opening it", started) from exc
        try:
            ro.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            check = ro.execute("PRAGMA quick_check").fetchone()
            if not check or check[0] != "ok":
                raise StoreUnreadable(spath, "its integrity check failed")
            names = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "store_meta" not in names:
                if {n for n in names if not n.startswith("sqlite_")}:
                    raise StoreUnreadable(spath, "it belongs to another application (no store_meta table)")
                return 0
            row = ro.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
            return parse_version(spath, row)
        except sqlite3.Error as exc:
            raise self.failure(exc, "opening it", started) from exc
        finally:
            ro.close()

    def failure(self, exc: sqlite3.Error, doing: str, started: float, at: int | None = None) -> StorageError:
        """What an SQLite error while opening means for the operator. Only damage to the file gets
        `StoreUnreadable` (restore a backup, or move it aside): a lock another process held, a
        full disk or a read-only one leave a good file, and that advice would throw its data away.
        `started`: when the wait a "busy" ended began; `at`: the version a failed migration step
        started from (rolled back to)."""
        spath = str(self.path)
        code = getattr(exc, "sqlite_errorcode", None) or 0
        base = code & 0xFF
        if base in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreBusy(spath, doing, time.monotonic() - started)
        if base == sqlite3.SQLITE_FULL or code in WRITE_IOERRS:
            reason = (
                "the disk is full"
                if base == sqlite3.SQLITE_FULL
                else "the disk refused the write (it is full, a file-size limit was reached, or it is failing)"
            )
            return StoreWriteFailed(spath, doing, reason, self._room_hint())
        if base == sqlite3.SQLITE_READONLY:
            return StoreNotWritable(spath, "the disk or the file is read-only")
        if at is not None and base not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return MigrationFailed(spath, at, at + 1, short(exc))
        return StoreUnreadable(spath, short(exc))

    def _room_hint(self) -> str:
        """How much room an upgrade wants: its steps rewrite rows, and the WAL holds the new pages
        until they are folded into the file (up to about the file's own size)."""
        try:
            mib = self.path.stat().st_size // (1024 * 1024)
        except OSError:
            return ""
        return f" (an upgrade needs about as much free space as {self.path.name} takes: {mib + 1} MiB)" if mib else ""


def check_writable(path: Path) -> None:
    """Fail with `StoreNotWritable` before SQLite is involved when the directory (where the
    ``-wal`` and ``-shm`` files go) or the file cannot be written. Otherwise SQLite reports
    "unable to open database file", which reads as a broken database — and whose remedy,
    restoring a backup or starting empty, would be the wrong thing to do to a good file."""
    for folder in (path.parent, *path.parent.parents):
        if folder.exists() and not folder.is_dir():  # the data directory given is a file
            raise StoreNotWritable(str(path), f"{folder} is a file, not a directory")
    try:
        # Made here: only this user reads it (memories, lessons); one that exists is left as it is.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreNotWritable(str(path), f"its directory cannot be created: {exc.strerror}") from exc
    # os.access honours read-only mounts and immutable files even for root (permission bits
    # do not stop root; those two do).
    if not os.access(path.parent, os.W_OK):
        raise StoreNotWritable(str(path), "its directory is read-only")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreNotWritable(str(path), "the file is read-only")


def parse_version(path: str, row: tuple[Any, ...] | None) -> int:
    """The ``schema_version`` row's value as a step count; a file without one is version 0."""
    try:
        version = int(row[0]) if row else 0
    except ValueError as exc:
        raise StoreUnreadable(path, "its schema version is not a number") from exc
    if version < 0:  # no migration leads from it: step indexes would count from the end
        raise StoreUnreadable(path, f"its schema version is negative ({version})")
    return version


def refuse_emptied(path: Path) -> None:
    """Refuse a 0-byte `path` where data was expected: another database of the data directory
    holds data, and no ``-wal`` beside this one does (a new file's first pages may stand
    only there). A brand-new directory's empty file is created as ever; this one was emptied
    — an interrupted copy, a truncated restore — and opening it would start an empty store
    that robots then write into. Nothing is written to it."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    others = sorted(
        p.name
        for p in path.parent.glob("*.db")
        if p != path and p.is_file() and (p.stat().st_size > 0 or _size(p.with_name(p.name + "-wal")) > 0)
    )
    if others:
        raise StoreUnreadable(
            str(path),
            f"it is empty (0 bytes) while {', '.join(others)} beside it holds data, so its own data is "
            "missing (an interrupted copy or a truncated file?). To start it empty on purpose, delete it",
        )


def refuse_foreign_wal(path: Path) -> None:
    """Raise `ForeignWal` when `path` is a copy made by ``backup`` and a non-empty ``-wal`` lies
    beside it. ``backup`` writes its copies in rollback-journal mode (header bytes 18-19 are 1)
    and a store it opens is switched to WAL for good (2), so a WAL holding frames beside a file
    in journal mode was written for another file: SQLite replays any WAL whose own checksums
    hold, onto whatever file it lies beside (a crashed server's state over the restored backup)."""
    if _size(path.with_name(path.name + "-wal")) == 0:
        return
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return  # SQLite's own open says what is wrong with the file
    if header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x01\x01":
        raise ForeignWal(str(path))


def _size(path: Path) -> int:
    """The size of `path` in bytes, 0 when there is no such file."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = [
    "Migration",
    "OpenReport",
    "Opener",
    "check_writable",
    "parse_version",
    "refuse_emptied",
    "refuse_foreign_wal",
]
