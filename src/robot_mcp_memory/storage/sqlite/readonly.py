"""Reading a database file in a directory this process cannot write (a snapshot, a read-only mount).

A WAL-mode file is read through ``<file>-shm`` beside it, and a read-only connection creates that
file when it is missing — which a read-only directory refuses: SQLite says "unable to open
database file" and names no cause. What a reader can do there depends on the files beside it:

- ``-shm`` present (a server has the file open, or was killed): a plain read-only connection
  works, and reads the commits still in ``-wal`` (SQLite keeps the shared memory in its own heap).
- no ``-wal``, or an empty one (a server stopped cleanly: every commit is in the file): the file is
  opened ``immutable`` — no locks and no ``-shm``. Nothing can be coordinated with a writer then,
  so the view records the file's size and modification time and `ReadView.check` refuses a read
  during which they changed (a process writing the same directory through another, writable path).
- a non-empty ``-wal`` without ``-shm``: its commits cannot be read without creating ``-shm``,
  and reading the file alone would silently miss them — refused, with the way out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from robot_mcp_memory.errors import StorageError, StoreNotWritable


@dataclass(frozen=True)
class ReadView:
    """How to open `path` read-only: the URI for ``sqlite3.connect(uri, uri=True)``."""

    path: Path
    uri: str
    immutable: bool
    stamp: tuple[int, int] | None = None  # (size, mtime_ns) when taken, for an immutable view

    def check(self) -> None:
        """Raise `StorageError` if an immutable view's file changed since the view was taken: what
        was read may then mix two states of it."""
        if self.stamp is None or _stamp(self.path) == self.stamp:
            return
        raise StorageError(
            f"{self.path} changed while it was read through a read-only directory (another process "
            "writes it through a writable path), so what was read may not be one consistent state: "
            "run the command where the directory is writable, or while nothing writes the file"
        )


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def read_view(path: Path) -> ReadView:
    """The way to read `path` without writing anything beside it (see the module's docstring)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if os.access(path.parent, os.W_OK):
        return ReadView(path, uri, immutable=False)  # SQLite makes -shm if it needs one
    wal = path.with_name(path.name + "-wal")
    if path.with_name(path.name + "-shm").exists() and wal.exists():
        return ReadView(path, uri, immutable=False)
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreNotWritable(
            str(path),
            f"its directory is read-only, and {wal.name} holds commits not yet in {path.name}, which "
            f"SQLite reads only with {path.name}-shm beside it (missing here); copy the directory's "
            f"{path.name}* files to a writable directory and run the command there",
        )
    return ReadView(path, f"{uri}&immutable=1", immutable=True, stamp=_stamp(path))


__all__ = ["ReadView", "read_view"]
