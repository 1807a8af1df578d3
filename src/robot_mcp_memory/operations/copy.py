"""Copying one installation into another — a fleet moving from SQLite to PostgreSQL, or back —
backend-neutral: it takes two `ports.OperatorStore`s and moves what a dump moves (every document
with its outcome records, the fleet, memories, sessions, tags, lessons; ids kept) through their
own `export` and `restore`, the archive being the language both speak.

Invariants:

- **Only into an empty target.** A target already holding any row of `COPIED` is refused
  (`Conflict`) before anything is read or written: a copy is a move, never a merge.
- **One snapshot in, one transaction out.** The source is read by one `export` (its consistent
  snapshot); the target is written by one `restore` (all or nothing).
- **Verified, or labelled failed.** The target is labelled unfinished (`mark_unfinished`) before
  the restore and the label is removed only once every table's count in the target equals the
  source snapshot's (`CopyReport`); a restore that fails or a count that differs leaves the label
  — `doctor` fails on it — and raises. There is no silent partial copy.
- **Derived rows are made, not moved.** Text indexes are rebuilt by the target's restore;
  vectors are the embedder's and are made again there by re-embedding (``reembed``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from robot_mcp_memory.errors import Conflict, StorageError
from robot_mcp_memory.operations.archive import LESSONS_PREFIX
from robot_mcp_memory.operations.ports import OperatorStore
from robot_mcp_memory.processes.docmodel import ProcessDoc

#: `progress(stage, table, done, total)`: stage is ``export``, ``restore`` or ``verify``; `table`
#: a `COPIED` name. Documents (``processes``) are reported one by one as they are read and written;
#: every other table once, when its rows are exported, restored (`done` of the `total` exported),
#: or verified (`done` rows in the target against the source's `total`).
CopyProgress = Callable[[str, str, int, int], None]
#: How the unfinished label of a copy begins (`doctor` says how to take one up again).
UNFINISHED_COPY = "copy of "
#: The tables a copy moves, by the name `row_counts` gives them on every backend.
COPIED = (
    "processes",
    "process_outcomes",
    "process_tenant_counts",
    "fleet_groups",
    "fleet_robots",
    "fleet_settings",
    "memories",
    "memory_tags",
    "memory_public",
    "sessions",
    "lessons",
)


@dataclass(frozen=True)
class TableCount:
    table: str
    source: int  # rows in the source's snapshot
    target: int  # rows in the target after the copy

    @property
    def ok(self) -> bool:
        return self.source == self.target


@dataclass(frozen=True)
class CopyReport:
    tables: tuple[TableCount, ...]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    def counts(self) -> dict[str, tuple[int, int]]:
        return {t.table: (t.source, t.target) for t in self.tables}


def _counted(file: str) -> str:
    """The `row_counts` name of an archive file's table."""
    return file.removeprefix(LESSONS_PREFIX)


async def copy_installation(
    source: OperatorStore,
    target: OperatorStore,
    *,
    label: str,
    scratch: Path | None = None,
    progress: CopyProgress | None = None,
    interrupt: Callable[[], None] = lambda: None,
) -> CopyReport:
    """Copy `source` into the empty `target` (see the module docstring). `label` names the source
    in the target's unfinished label (a path or a schema name, never a URL with a password);
    the archive is written into a temporary folder under `scratch` and removed afterwards."""
    occupied = {t: n for t, n in target.row_counts().items() if t in COPIED and n}
    if occupied:
        held = ", ".join(f"{n} {t}" for t, n in sorted(occupied.items()))
        raise Conflict(
            f"the target already holds {held}; a copy goes only into an empty installation (a fresh "
            "PostgreSQL schema or data directory): nothing was copied"
        )
    docs: list[ProcessDoc] = []

    def each(doc: ProcessDoc, n: int, total: int) -> None:
        docs.append(doc)
        if progress:
            progress("export", "processes", n, total)

    with tempfile.TemporaryDirectory(prefix="robot-memory-copy-", dir=scratch) as tmp:
        folder = Path(tmp) / "archive"
        documents, exported = await source.export(each, folder)
        if progress:
            for file, rows in exported.items():
                progress("export", _counted(file), rows, rows)

        def restoring() -> Iterator[ProcessDoc]:
            for n, doc in enumerate(docs, start=1):
                interrupt()
                if progress:
                    progress("restore", "processes", n, len(docs))
                yield doc

        await target.mark_unfinished(f"{UNFINISHED_COPY}{label}")
        _, restored = await target.restore(restoring(), folder, source=folder, interrupt=interrupt)
        if progress:
            for file, rows in restored.items():
                progress("restore", _counted(file), rows, exported.get(file, rows))
    after = target.row_counts()
    expected = {"processes": documents, **{_counted(f): n for f, n in exported.items()}}
    tables: list[TableCount] = []
    for table, n in sorted(expected.items()):
        tables.append(TableCount(table, n, after.get(table, 0)))
        if progress:
            progress("verify", table, after.get(table, 0), n)
    report = CopyReport(tuple(tables))
    if not report.ok:
        differ = "; ".join(f"{t.table}: {t.source} in the source, {t.target} copied" for t in tables if not t.ok)
        await target.mark_unfinished(f"{UNFINISHED_COPY}{label} (counts differ: {differ})")
        raise StorageError(
            f"the copy of {label} does not match its source ({differ}); the target is labelled as a failed "
            "copy (`doctor` reports it): drop it and copy into a fresh one"
        )
    await target.mark_finished()
    return report
