"""The processes port: what `ProcessService` needs from storage and search, and the values that
cross it. A backend implements `ProcessRepository` (the SQLite one is `processes.sqlite.store`);
the service never sees a connection.

Contract of a `ProcessRepository`:

- `get`/`list`/`find_hybrid` never return a document outside `visible` (None: every robot's).
- `save` creates, updates or forks (spec §5) in one transaction; `writable(owner)` is asked before an
  existing document is overwritten, and a refusal forks instead. Counters survive an update.
- `record_outcome` counts atomically and returns the document as it now is, or None when it is gone.
- `find_hybrid` ranks by relevance × reliability and says which mode ran (`hybrid` needs a query
  vector and stored vectors; otherwise `keyword`). With a `tenant`, a fleet-wide document's
  counters (and so its reliability) are that tenant's own view of them; `Hit.fleet` then carries
  the fleet-wide figures.
- Every outcome is a record (`OutcomeEntry`) beside the counters, in the same transaction; the
  stored body never holds the `## Outcome log` (the service renders it from the records).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, Protocol

from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc

SaveAction = Literal["created", "updated", "forked"]
SearchMode = Literal["hybrid", "keyword"]
#: The orders `list` accepts: newest first, or most used first.
ORDERS: tuple[str, ...] = ("updated", "used")
#: `progress(done, total)`, called after each batch of a long job.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Hit:
    doc: ProcessDoc
    score: float
    relevance: float
    #: The fleet-wide (successes, failures) when `doc` carries one group's view of a shared document.
    fleet: tuple[int, int] | None = None


@dataclass(frozen=True)
class Author:
    """Who records an outcome: the robot (or an unscoped caller's kind) and, for a robot token,
    its tenant (``group:<G>`` or ``solo:<robot>``; '' for an unscoped caller)."""

    robot: str = ""
    tenant: str = ""


#: An outcome whose author is not known (an outcome log read from a document, a direct call).
NOBODY = Author()


#: A document as a tenant is shown its counters, the fleet-wide (successes, failures) beside a
#: shared document's group view (else None), and its outcome records, oldest first.
RecordsView = tuple[ProcessDoc, tuple[int, int] | None, builtins.list[OutcomeEntry]]


@dataclass(frozen=True)
class Saved:
    doc: ProcessDoc
    action: SaveAction
    requested_id: str


class ProcessRepository(Protocol):
    async def get(self, pid: str) -> ProcessDoc | None: ...

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = ...) -> Saved: ...

    async def record_outcome(self, pid: str, success: bool, note: str = "", by: Author = ...) -> ProcessDoc | None: ...

    async def delete(self, pid: str) -> bool: ...

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None, order: str = "updated"
    ) -> tuple[builtins.list[ProcessDoc], int]: ...

    async def find_hybrid(
        self, query: str, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> tuple[builtins.list[Hit], SearchMode]: ...

    async def viewed(
        self, docs: builtins.list[ProcessDoc], tenant: str | None
    ) -> builtins.list[tuple[ProcessDoc, tuple[int, int] | None]]:
        """Each of `docs` with its counters as `tenant` is shown them, and the fleet-wide beside."""
        ...

    async def view(self, pid: str, tenant: str | None, *, with_note: bool = False) -> RecordsView | None:
        """One document as `tenant` sees it with its outcome records, in one read; None if gone."""
        ...

    async def views(
        self, docs: builtins.list[ProcessDoc], tenant: str | None, *, with_note: bool = False
    ) -> builtins.list[RecordsView]: ...

    async def outcomes(
        self, ids: Collection[str], *, with_note: bool = False
    ) -> dict[str, builtins.list[OutcomeEntry]]:
        """The newest outcome records of each of `ids` (bounded), oldest first."""
        ...

    async def outcome_days(
        self, since: str, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, bool, str, str, str, int]]:
        """(day, success, process id, owner, recording tenant, how many) since `since`."""
        ...

    async def outcome_events(
        self, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, str, bool, str, str, str]]:
        """(process id, time, success, owner, recording tenant, recording robot) of each document's
        newest records."""
        ...

    async def reembed(self, progress: Progress | None = None, *, force: bool = False) -> int: ...

    async def vector_status(self) -> dict[str, object]: ...

    async def reindex(self) -> int: ...
