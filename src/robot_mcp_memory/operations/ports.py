"""The operations port: what the operator's use cases (`service`, `handover`, `readiness`) need
from storage, named for what the operator does, and the values that cross it. A backend
implements `OperatorStore` (`operations.sqlite.store`, `operations.postgres.store`) and `Backups`; `app.py`
wires them, and the use cases never see a connection, a file format or a table.

Contract of an `OperatorStore`:

- `mark_unfinished` labels the store as holding a load that did not finish (a copy whose
  verification failed: `copy.copy_installation`) until `mark_finished`.
- `export` hands every process document to `each` and writes every other archived row (one
  ``<name>.jsonl`` per table into `folder`) from one consistent snapshot of the store while
  writers go on; the lessons, kept apart, from a snapshot of their own. It returns the documents
  handed over and the rows written per file (keyed by the file's name without ``.jsonl``).
- `restore` writes the documents exactly as given and merges the archive's rows in, all of the
  main store in one transaction with its search indexes rebuilt in it: a restore stopped at any
  point (`interrupt` raising, a refused row, a full disk) leaves it as it was. The lessons, in a
  store of their own, commit just after it; only a stop between the two commits leaves the main
  store restored without them, and `unfinished_load` names the source until a restore finishes.
  Whatever committed, this process's caches of what it replaced are read again before it returns.
- `health` and `row_counts` read the files on connections of their own (safe beside a server
  writing them, and in a read-only directory); `text_indexes(deep=True)` may hold the write lock
  while it reads every index, so a serving process asks for it only when the operator does.
- `count_unknown` / `hand_over_unknown` see and move the rows that carry robot ``unknown`` (no
  provenance), the hand-over in one transaction.
- `probe` really reads each store (the server's own readers, and a connection of its own): a
  store that cannot serve carries a `problem`, named by file name only (the answer is public).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.tenancy.policy import Policy

#: `progress(done, total)`, called as a long job advances.
Progress = Callable[[int, int], None]
#: `each(document, n, total)`: one document of a snapshot, with its position and the total.
EachDocument = Callable[[ProcessDoc, int, int], None]


@dataclass(frozen=True)
class StoreHealth:
    """The main store as `doctor` sees it."""

    name: str  # how the operator names it (its file name)
    integrity: list[str]  # the problems the integrity check found; empty when it found none
    schema_version: int | None  # None when it cannot be read
    schema_supported: int  # the schema version this build writes
    size_bytes: int
    wal_bytes: int  # the write-ahead log beside it, 0 when there is none


@dataclass(frozen=True)
class IndexHealth:
    """One full-text index as `doctor` sees it."""

    name: str  # how the operator names it ("process index")
    rows: int  # rows of the table it indexes
    entries: int  # entries in the index
    problem: str | None  # the index's own integrity check, when it failed

    @property
    def ok(self) -> bool:
        return self.problem is None and self.rows == self.entries


@dataclass(frozen=True)
class StoreProbe:
    """One store as readiness sees it: None, or why it cannot serve (no path, no SQL)."""

    name: str
    problem: str | None


class Archives(Protocol):
    """dump and load."""

    async def export(self, each: EachDocument, folder: Path) -> tuple[int, dict[str, int]]: ...

    async def restore(
        self,
        documents: Iterable[ProcessDoc],
        archive_dir: Path | None,
        *,
        source: Path,
        interrupt: Callable[[], None],
    ) -> tuple[int, dict[str, int]]:
        """(documents written, rows loaded per archive file); `documents` is iterated inside the
        transaction, `interrupt` called throughout it, `source` recorded while unfinished."""
        ...

    async def mark_unfinished(self, what: str) -> None:
        """Record that a load (or a copy) of `what` has not finished: `unfinished_load` names it
        (and `doctor` fails) until `mark_finished`."""
        ...

    async def mark_finished(self) -> None: ...


class Checkup(Protocol):
    """doctor, reindex and stats."""

    @property
    def read_only(self) -> bool:
        """Opened where nothing may be written: checks that write (an index's own) are skipped."""
        ...

    @property
    def hot_writes_dropped(self) -> int: ...

    def health(self, *, full: bool = False) -> StoreHealth:
        """`full`: the thorough integrity check instead of the quick one."""
        ...

    async def text_indexes(self, *, deep: bool) -> list[IndexHealth]: ...

    async def rebuild_text_indexes(self) -> dict[str, int]:
        """Every full-text index rebuilt from its rows in one transaction: entries made, by index."""
        ...

    async def unfinished_load(self) -> str | None:
        """The source of a restore that committed the main store and not the lessons, or None."""
        ...

    def row_counts(self) -> dict[str, int]:
        """Rows per table of the main store, and ``lessons``."""
        ...


class Provenance(Protocol):
    """hand-over."""

    async def count_unknown(self) -> dict[str, int]:
        """Rows carrying robot ``unknown``: ``processes``, ``memories``, ``sessions``."""
        ...

    def count_unknown_blocking(self) -> dict[str, int]: ...

    async def hand_over_unknown(self, to: str) -> dict[str, int]:
        """Every ``unknown`` row given to `to`, in one transaction; rows changed, as `count_unknown`."""
        ...


class ReadinessProbe(Protocol):
    async def probe(self) -> list[StoreProbe]: ...


class RobotmemImport(Protocol):
    async def import_robotmem(
        self, path: Path, *, robot: str | None, collection_prefix: str, progress: Progress | None
    ) -> ImportReport: ...


class OperatorStore(Archives, Checkup, Provenance, ReadinessProbe, RobotmemImport, Protocol):
    """Everything the operator's use cases need from one data directory's stores."""


class Backups(Protocol):
    """Online backups of a data directory's databases, without opening them as a server does."""

    def databases(self, data_dir: Path) -> list[Path]:
        """The database files `data_dir` holds, each to be copied."""
        ...

    def copy(self, src: Path, dest: Path, progress: Progress | None = None) -> None:
        """A consistent copy of `src` at `dest` (which does not exist) while others write it."""
        ...


class Embedding(Protocol):
    @property
    def mode(self) -> str: ...


class Installation(Protocol):
    """What the operator's use cases are handed: one data directory's settings, the tenancy
    policy, the operations adapter wired to its stores, and the embedder (`app.Memory` is one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def operations(self) -> OperatorStore: ...

    @property
    def embedder(self) -> Embedding | None: ...
