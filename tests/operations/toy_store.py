"""A toy `OperatorStore` held in dicts: proof that the operations port is a real seam.

It keeps the port's contract where the use cases rely on it — an export hands over every document
and writes one ``<table>.jsonl`` per archived table; a restore is all or nothing (it builds the new
state aside and swaps it in only once every document and row is in, so an `interrupt` or a bad
line leaves the store as it was); a hand-over moves every ``unknown`` row at once — and reports
its health from fields a test sets. No SQL, no files but the archive's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.operations.ports import EachDocument, IndexHealth, Progress, StoreHealth, StoreProbe
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import UNKNOWN

#: The one archived table of the toy: rows with an ``id`` and a ``robot``.
NOTES = "notes"


class ToyOperatorStore:
    def __init__(self) -> None:
        self.documents: dict[str, ProcessDoc] = {}
        self.notes: dict[int, dict[str, Any]] = {}
        self.read_only = False
        self.hot_writes_dropped = 0
        self.integrity: list[str] = []
        self.schema = (3, 3)  # (the store's version, this build's)
        self.index_entries: int | None = None  # None: one entry per document
        self.index_problem: str | None = None
        self.deep_checks: list[bool] = []
        self.unfinished: str | None = None
        self.problems: dict[str, str | None] = {"toy.db": None}

    # ------------------------------------------------------------------ dump and load
    async def export(self, each: EachDocument, folder: Path) -> tuple[int, dict[str, int]]:
        docs = sorted(self.documents.values(), key=lambda d: d.id)
        for n, doc in enumerate(docs, start=1):
            each(doc, n, len(docs))
        lines = [json.dumps(self.notes[k], sort_keys=True) + "\n" for k in sorted(self.notes)]
        (folder / f"{NOTES}.jsonl").write_text("".join(lines), encoding="utf-8")
        return len(docs), {NOTES: len(lines)}

    async def restore(
        self,
        documents: Iterable[ProcessDoc],
        archive_dir: Path | None,
        *,
        source: Path,
        interrupt: Callable[[], None],
    ) -> tuple[int, dict[str, int]]:
        docs = dict(self.documents)
        notes = dict(self.notes)
        n = 0
        for doc in documents:
            interrupt()
            docs[doc.id] = doc
            n += 1
        counts: dict[str, int] = {}
        path = None if archive_dir is None else archive_dir / f"{NOTES}.jsonl"
        if path is not None and path.is_file():
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            for i, line in enumerate(lines, start=1):
                interrupt()
                row = json.loads(line)
                if not isinstance(row.get("id"), int):
                    raise InvalidInput(f"{path} line {i} has no id; nothing was loaded")
                notes[row["id"]] = row
            counts[NOTES] = len(lines)
        self.documents, self.notes = docs, notes  # the commit
        return n, counts

    # ------------------------------------------------------------------ doctor, reindex, stats
    def health(self, *, full: bool = False) -> StoreHealth:
        return StoreHealth("toy.db", list(self.integrity), self.schema[0], self.schema[1], 4096, 0)

    async def text_indexes(self, *, deep: bool) -> list[IndexHealth]:
        self.deep_checks.append(deep)
        rows = len(self.documents)
        entries = rows if self.index_entries is None else self.index_entries
        return [IndexHealth("process index", rows, entries, self.index_problem if deep else None)]

    async def rebuild_text_indexes(self) -> dict[str, int]:
        self.index_entries = self.index_problem = None
        return {"process index": len(self.documents)}

    async def unfinished_load(self) -> str | None:
        return self.unfinished

    async def mark_unfinished(self, what: str) -> None:
        self.unfinished = what

    async def mark_finished(self) -> None:
        self.unfinished = None

    def row_counts(self) -> dict[str, int]:
        return {"processes": len(self.documents), NOTES: len(self.notes), "lessons": 0}

    # ------------------------------------------------------------------ hand-over
    def count_unknown_blocking(self) -> dict[str, int]:
        return {
            "processes": sum(d.robot == UNKNOWN for d in self.documents.values()),
            "memories": sum(r.get("robot") == UNKNOWN for r in self.notes.values()),
            "sessions": 0,
        }

    async def count_unknown(self) -> dict[str, int]:
        return self.count_unknown_blocking()

    async def hand_over_unknown(self, to: str) -> dict[str, int]:
        counts = self.count_unknown_blocking()
        self.documents = {
            k: d.model_copy(update={"robot": to}) if d.robot == UNKNOWN else d for k, d in self.documents.items()
        }
        self.notes = {k: {**r, "robot": to} if r.get("robot") == UNKNOWN else r for k, r in self.notes.items()}
        return counts

    # ------------------------------------------------------------------ readiness, robotmem
    async def probe(self) -> list[StoreProbe]:
        return [StoreProbe(name, problem) for name, problem in self.problems.items()]

    async def import_robotmem(
        self, path: Path, *, robot: str | None, collection_prefix: str, progress: Progress | None
    ) -> ImportReport:
        return ImportReport(str(path), robot or UNKNOWN)


@dataclass
class ToyEmbedder:
    mode: str = "keyword"


@dataclass
class ToyInstallation:
    """An `operations.ports.Installation` around the toy store."""

    settings: Settings
    operations: ToyOperatorStore = field(default_factory=ToyOperatorStore)
    policy: Policy = field(default_factory=Policy)
    embedder: ToyEmbedder | None = field(default_factory=ToyEmbedder)
