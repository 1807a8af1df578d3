"""Operations on a database file that do not need the writer: online backup, integrity, size.

Each opens its own read-only connection, so they are safe while a server is writing the same
file (WAL lets readers and the writer proceed together), and work in a read-only directory (a
snapshot) too (`readonly`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robot_mcp_memory.errors import StorageError, StoreUnreadable
from robot_mcp_memory.storage import files
from robot_mcp_memory.storage.sqlite.readonly import ReadView, read_view

Progress = Callable[[int, int], None]


def _ro(path: Path) -> tuple[sqlite3.Connection, ReadView]:
    """A read-only connection to `path`, also in a read-only directory (`readonly.read_view`)."""
    if not path.exists():
        raise StoreUnreadable(str(path), "the file does not exist")
    view = read_view(path)
    try:
        conn = sqlite3.connect(view.uri, uri=True, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=5000")
        return conn, view
    except sqlite3.Error as exc:
        raise StoreUnreadable(str(path), str(exc).splitlines()[0]) from exc


def backup(src: Path, dest: Path, progress: Progress | None = None) -> int:
    """Copy `src` to `dest` with SQLite's online backup API: a consistent snapshot even while
    another process writes. Returns the number of pages copied. `dest` must not exist. The copy is
    made under a temporary name beside `dest` and renamed to `dest` once it passed its check, so
    a failed or interrupted backup leaves no `dest` (and nothing that blocks a retry)."""
    if dest.exists() or dest.is_symlink():
        raise StorageError(f"{dest} already exists; choose a new backup location")
    dest.parent.mkdir(parents=True, exist_ok=True)
    source, view = _ro(src)
    tmp = files.temp_beside(dest)
    copied = 0

    def step(status: int, remaining: int, total: int) -> None:
        nonlocal copied
        copied = total - remaining
        if progress is not None:
            progress(copied, total)

    try:
        target = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            # pages=-1: one step under one read transaction, so the copy is one consistent snapshot
            # (a multi-step backup restarts whenever another connection writes meanwhile).
            source.backup(target, pages=-1, progress=step)
            target.execute("PRAGMA journal_mode=DELETE")
            check = target.execute("PRAGMA quick_check").fetchone()
        finally:
            target.close()
        if not check or check[0] != "ok":
            raise StorageError(f"the backup of {src.name} failed its integrity check; nothing was kept")
        view.check()  # read without locks (a read-only directory): was it one state of the file?
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        raise StorageError(f"the backup of {src.name} failed: {str(exc).splitlines()[0]}") from exc
    finally:
        source.close()
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            leftover.unlink(missing_ok=True)
    return copied


@dataclass(frozen=True)
class FileHealth:
    path: str
    integrity: list[str]
    schema_version: int | None
    size_bytes: int
    wal_bytes: int


def health(path: Path, full: bool = False) -> FileHealth:
    """Integrity (`quick_check`, or `integrity_check` with `full`), schema version and sizes."""
    conn, view = _ro(path)
    try:
        pragma = "integrity_check" if full else "quick_check"
        problems = [r[0] for r in conn.execute(f"PRAGMA {pragma}") if r[0] != "ok"]
        try:
            row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else None
        except (sqlite3.Error, ValueError):
            version = None
    except sqlite3.DatabaseError as exc:
        problems, version = [str(exc).splitlines()[0]], None
    finally:
        conn.close()
    view.check()  # a check of a file that changed under a lock-free read would report false damage
    wal = path.with_name(path.name + "-wal")
    return FileHealth(
        path=str(path),
        integrity=problems,
        schema_version=version,
        size_bytes=path.stat().st_size,
        wal_bytes=wal.stat().st_size if wal.exists() else 0,
    )


def count_rows(path: Path, tables: list[str]) -> dict[str, int]:
    """Row counts of declared tables (names come from our own declarations)."""
    conn, view = _ro(path)
    try:
        present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        counts = {
            t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # noqa: S608 - declared names
            for t in tables
            if t in present
        }
    finally:
        conn.close()
    view.check()
    return counts


#: `probe` runs SQLite's `quick_check` only on a file up to this size: it reads every page, so its
#: time grows with the file, and SQLite 3.40 cannot stop it midway (its progress handler is not
#: called inside the check). A bigger file gets the schema and first-row reads only; `doctor`
#: checks it whole.
PROBE_CHECK_MAX_BYTES = 16 * 1024 * 1024


def read_each_table(conn: sqlite3.Connection) -> None:
    """A real read of the schema and of the first row of every table, through `conn`: raises
    `sqlite3.Error` when the file cannot serve them (not a database, a damaged page)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for name in names:
        quoted = '"' + name.replace('"', '""') + '"'
        conn.execute(f"SELECT * FROM {quoted} LIMIT 1").fetchall()  # noqa: S608 -- names from the file's own schema


def probe(path: Path) -> str | None:
    """Whether `path` can serve reads now, on a connection of its own (a fresh page cache: what
    the file holds, not what a reader cached): its schema, the first row of each table and an
    integrity check when the file is small enough (`PROBE_CHECK_MAX_BYTES`). None when it can,
    else the reason — without the path or SQL, for a public readiness answer."""
    if not path.exists():
        return "the file is missing"
    try:
        conn, _ = _ro(path)
    except StorageError:
        return "the file cannot be opened"
    try:
        conn.execute("PRAGMA busy_timeout=1000")
        read_each_table(conn)
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        if int(pages) * int(page_size) <= PROBE_CHECK_MAX_BYTES:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check(1)")]
            if rows != ["ok"]:
                return "its integrity check found damage"
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == sqlite3.SQLITE_BUSY:
            return "it is locked by another process"
        return "it cannot be read (not a database, or a damaged page)"
    finally:
        conn.close()
    return None
