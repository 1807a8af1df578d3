"""Files written whole or not at all: each goes to a temporary name beside its target and is
renamed over it (`os.replace`), so a reader never sees half a file, an interrupted write leaves
the old file, and a symlink at the target is replaced — never written through to a file elsewhere.
`directory_lock` keeps two writers of one directory's files apart.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: there, nothing is locked
    fcntl = None  # type: ignore[assignment]


def temp_beside(path: Path) -> Path:
    """A fresh hidden name in `path`'s directory, ending in ``.tmp`` (never ``.md``/``.jsonl``/``.db``)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[TextIO]:
    """Write UTF-8 text to a temporary file; on success it replaces `path`, on error it is removed."""
    tmp = temp_beside(path)
    # O_EXCL: never opens an existing file or follows a symlink; mode 0o666 honours the umask.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_text(path: Path, text: str) -> None:
    """`path` now holds `text` (UTF-8, newlines as given)."""
    with replacing(path) as fh:
        fh.write(text)


@contextlib.contextmanager
def directory_lock(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on the directory `path` for the block; yields False (holding
    nothing) when another holder has it. An advisory `flock` on the directory itself — no file to
    leave behind — that the kernel releases when its holder dies, kill -9 included; two holders in
    one process exclude each other too (each has its own open file)."""
    if fcntl is None:  # pragma: no cover
        yield True
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
