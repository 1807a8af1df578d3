"""What a robotmem import brought across (`ImportReport`): the value the importer
(`experiences.sqlite.robotmem_import`) returns and the operator reads, backend-neutral."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ImportReport:
    source: str
    robot: str
    total_memories: int = 0
    total_sessions: int = 0
    memories: int = 0
    facts: int = 0
    perceptions: int = 0
    forgotten: int = 0
    superseded: int = 0
    sessions: int = 0
    tags: int = 0  # robotmem's tags brought across
    inferred_tags: int = 0  # tags our classifier added
    skipped_memories: Counter[str] = field(default_factory=Counter)
    skipped_sessions: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    memory_ids: dict[int, int] = field(default_factory=dict)  # robotmem id → our (public) id, imported or found
    renamed: dict[str, str] = field(default_factory=dict)  # robotmem collection → the name used here
    #: Why reading stopped partway (a damaged page): what was read before is imported.
    failed: str | None = None

    def lines(self) -> list[str]:
        """The summary, for people."""
        out = [
            f"robotmem import from {self.source} (as robot {self.robot})",
            f"  memories: {self.memories} imported of {self.total_memories} ({self.facts} facts, "
            f"{self.perceptions} perceptions; {self.forgotten} forgotten, {self.superseded} superseded)",
            f"  sessions: {self.sessions} imported of {self.total_sessions}",
            f"  tags: {self.tags} imported ({self.inferred_tags} more inferred here)",
        ]
        for what, skipped in (("memories", self.skipped_memories), ("sessions", self.skipped_sessions)):
            for reason, n in sorted(skipped.items()):
                if n:
                    out.append(f"  skipped {n} {what}: {reason}")
        for note, n in sorted(self.notes.items()):
            out.append(f"  note: {n} × {note}")
        for theirs, ours in sorted(self.renamed.items()):
            out.append(f"  collection {theirs!r} is {ours!r} here (robotmem's name is not usable as a collection)")
        if self.failed is not None:
            out.append(
                f"  stopped: {self.failed}. What was read before is imported; run the import again to "
                "bring the rest (it skips what is here), after repairing the file (sqlite3 .recover) if it "
                "fails at the same place"
            )
        return out
