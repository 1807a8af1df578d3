"""One exception tree for the whole package.

::

    MemoryError_                    code
     ├── NotFound                   not_found
     ├── Forbidden                  forbidden
     ├── InvalidInput               invalid
     │    └── DocumentParseError    invalid   (carries line/column)
     ├── Conflict                   conflict
     ├── Busy                       busy      (overloaded: retry later, nothing was stored)
     ├── ConfigError                config    (lists every bad setting)
     ├── CannotListen               unavailable (serve/web: the host:port cannot be bound; names it and why)
     ├── EmbedderUnavailable        unavailable (search degrades to keyword-only; never reaches a tool)
     └── StorageError               storage
          ├── StoreFailed           storage   (at run time: a read or write failed; says the next step)
          ├── SchemaTooNew          storage
          ├── StoreUnreadable       storage
          │    └── ForeignWal       storage   (a restored backup beside another file's -wal: move it aside)
          ├── StoreNotWritable      storage
          ├── StoreBusy             storage   (opening: another process kept the write lock; retry)
          ├── StoreWriteFailed      storage   (opening: the disk refused a write — full; the file is fine)
          └── MigrationFailed       storage

Every adapter (MCP tools, REST, CLI) maps this tree once. Messages are written for the
reader — an LLM planner or an operator — and say what to do next. They never contain SQL,
tokens or internal paths, except the `StorageError` subclasses below, which are operator-facing
startup errors and must name the file.

This module imports nothing of ours.
"""

from __future__ import annotations

from pathlib import PurePath


class MemoryError_(Exception):  # trailing underscore: avoids shadowing the builtin
    """Base of every error this package raises on purpose."""

    code = "error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(MemoryError_):
    code = "not_found"


class Forbidden(MemoryError_):
    code = "forbidden"


class InvalidInput(MemoryError_):
    code = "invalid"


class DocumentParseError(InvalidInput):
    """A process document that cannot be parsed; says what is wrong and where."""

    def __init__(self, detail: str, *, line: int | None = None, field: str | None = None) -> None:
        where = []
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        text = f"{detail} ({', '.join(where)})" if where else detail
        super().__init__(text)
        self.line = line
        self.field = field


class Conflict(MemoryError_):
    code = "conflict"


class Busy(MemoryError_):
    code = "busy"


class ConfigError(MemoryError_):
    """Bad configuration. `problems` has one entry per bad setting, each naming the variable."""

    code = "config"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration: " + "; ".join(problems))
        self.problems = problems


class CannotListen(MemoryError_):
    """The HTTP server cannot listen on its host:port: the port is in use, the host does not
    resolve or is not an address of this machine. Raised before anything says it is serving."""

    code = "unavailable"


class EmbedderUnavailable(MemoryError_):
    """The embedding model could not load or answer. Callers degrade to keyword search; the
    message names the backend and what to check, never a key."""

    code = "unavailable"


class DimensionChanged(EmbedderUnavailable):
    """The model answered vectors of another size than it loaded with (re-pulled under the same
    name, or another server behind the URL): it is loaded again, under an id with the new size."""


#: The next step after a storage failure that is not a full disk, a read-only directory or a
#: lock: what every such refusal ends with (docs/operations.md, "When the database is damaged").
CHECK_THE_STORE = (
    "The operator should run `robot-mcp-memory doctor` on the server and, if it reports damage, "
    "restore the file from a backup (see docs/operations.md)."
)


class StorageError(MemoryError_):
    code = "storage"


class StoreFailed(StorageError):
    """A read or write failed at run time (`kit.store.translate`). Its message is written for any
    client: what did not happen and the next step, never a path or SQL."""


class SchemaTooNew(StorageError):
    """The database was written by a newer version of this server; it is left untouched."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, but this server supports up to {supported}. "
            "Upgrade robot-mcp-memory, or point MEMORY_DATA_DIR at another directory. "
            "The file was not modified."
        )
        self.found = found
        self.supported = supported


class StoreUnreadable(StorageError):
    """The database file exists but is not a database this server can use. The message names
    the file, the reason and the `remedy`."""

    def __init__(self, path: str, reason: str) -> None:
        # the file's own name: lessons.db is restored from a copy of lessons.db, not of index.db
        self.remedy = f"Restore it from a backup (a copy of {PurePath(path).name}), or move it aside to start empty."
        super().__init__(
            f"{path} is not a usable robot-mcp-memory database ({reason}). {self.remedy} The file was not modified."
        )
        self.path = path
        self.reason = reason


class ForeignWal(StoreUnreadable):
    """The database file is a copy made by ``backup`` (restored into the data directory) and a
    ``-wal`` left by the server that used the directory before lies beside it: SQLite would
    replay that server's last writes onto the restored copy. The remedy is to move the leftover
    files aside — never to restore again, which would meet the same ``-wal``."""

    def __init__(self, path: str) -> None:
        name = PurePath(path).name
        self.remedy = f"Move {name}-wal and {name}-shm out of the data directory (or delete them), then start again."
        StorageError.__init__(
            self,
            f"{path} is a copy made by `robot-mcp-memory backup`, and {name}-wal beside it was left by the "
            f"server that used this directory before: opened together, that server's last writes would be "
            f"replayed onto the restored copy. {self.remedy} The files were not modified.",
        )
        self.path = path
        self.reason = f"{name}-wal beside it belongs to another database"


class StoreNotWritable(StorageError):
    """The database file, or the directory it lives in, cannot be written (a read-only mount, an
    immutable file, missing permissions). SQLite needs to create ``<file>-wal`` and ``<file>-shm``
    beside the file, so the server cannot use it. Nothing is wrong with the file itself, so the
    remedy is about access — never "restore a backup" or "move it aside"."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path} cannot be written ({reason}). Give the server write access to that directory "
            "(systemd: ReadWritePaths=; a container: mount the volume read-write), or point "
            "MEMORY_DATA_DIR at a writable directory. The file was not modified."
        )
        self.path = path
        self.reason = reason


class StoreBusy(StorageError):
    """Opening (creating or upgrading) the file needed its write lock, and another process — a
    server, a training loop's `RobotMemory`, a CLI command, perhaps upgrading the same file — held
    it past this process's patience. Nothing is wrong with the file: the same start succeeds a
    moment later, so the remedy is to retry (a service manager restarts it) — never the restore
    advice of `StoreUnreadable`."""

    def __init__(self, path: str, doing: str, waited_s: float) -> None:
        super().__init__(
            f"{path} is busy: another process (a server, a training loop, a command — perhaps upgrading "
            f"this same file) held its write lock for over {waited_s:.0f} s while this one was {doing}. "
            "Nothing is wrong with the file: start again in a moment (systemd restarts the service by "
            "itself); do not restore or move it."
        )
        self.path = path
        self.doing = doing


class StoreWriteFailed(StorageError):
    """Opening (creating or upgrading) the file needed to write it, and the disk refused: full, a
    file-size limit, or failing. The step was rolled back and the file is intact; the remedy is
    room on the disk — never the restore advice of `StoreUnreadable`, which would lose data."""

    def __init__(self, path: str, doing: str, reason: str, needed: str = "") -> None:
        super().__init__(
            f"{path} could not be written while {doing}: {reason}. Nothing is wrong with the file "
            f"(what was not finished was rolled back). Free space on that disk{needed} or raise the "
            "file-size limit, then start again; do not restore or move the file."
        )
        self.path = path
        self.doing = doing
        self.reason = reason


class MigrationFailed(StorageError):
    """A forward migration failed. Steps before it committed; the failed one was rolled back."""

    def __init__(self, path: str, at: int, to: int, reason: str) -> None:
        super().__init__(
            f"{path}: migrating from schema version {at} to {to} failed ({reason}). The file is intact "
            f"at version {at} (that step was rolled back). Keep it, report the error, and run the "
            "previous robot-mcp-memory version meanwhile — or restore a backup."
        )
        self.at = at
        self.to = to
