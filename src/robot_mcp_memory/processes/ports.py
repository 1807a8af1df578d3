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
  the fleet-wide figures. The query arrives parsed (`search.query.Query`); the ranking is
  `processes.ranking`'s, run on the backend's `SearchSnapshot` (one read transaction).
- Every outcome is a record (`OutcomeEntry`) beside the counters, in the same transaction; the
  stored body never holds the `## Outcome log` (the service renders it from the records).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.vectors import Vector

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


#: A document as a tenant is shown its counters, and the fleet-wide (successes, failures) beside
#: a shared document's group view (else None).
TenantViewed = tuple[ProcessDoc, tuple[int, int] | None]


#: A query's phrases, in query order (a tuple: a `str` is a sequence of its characters).
Phrases = tuple[str, ...]


class PhraseCounts(NamedTuple):
    """Phrases (a query's `Query.phrases`) with how many of the `total` documents hold each,
    counted as bm25 counts them, in the snapshot of the find that uses them: the bound, the
    keyword list and every search of one find share one count."""

    phrases: Phrases
    total: int
    docs: tuple[int, ...]


#: The count of no phrase: nothing to search.
NO_PHRASES = PhraseCounts((), 0, ())


class SearchSnapshot(Protocol):
    """The primitives `processes.ranking` plans a find with, all read in one transaction of
    one backend. Relevance is ``-bm25`` over the OR of the phrases with the bm25 column weights
    `ranking.BM25_WEIGHTS` (FTS5's arithmetic, on every backend); `visible` None means every
    robot's documents, and no primitive returns a document outside it. `counted` is the count
    of these very phrases when the caller has one (a primitive counts again otherwise)."""

    def phrase_counts(self, phrases: Phrases) -> PhraseCounts:
        """How many documents hold each phrase (quoted alone), and how many there are."""
        ...

    def keyword_top(
        self,
        phrases: Phrases,
        counted: PhraseCounts | None,
        k: int,
        visible: Collection[str] | None,
        tenant: str | None,
    ) -> builtins.list[Hit]:
        """The `k` best visible matches by relevance × reliability (as `tenant` sees the
        counters), then id: documents loaded, `Hit.relevance` the raw ``-bm25``."""
        ...

    def keyword_relevant(
        self, phrases: Phrases, counted: PhraseCounts | None, n: int, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, float]]:
        """(id, raw ``-bm25``) of the `n` best visible matches by relevance alone, then id."""
        ...

    def vector_top(
        self, qvec: Vector, model_id: str, n: int, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, float]] | None:
        """(id, cosine) of the `n` visible documents nearest `qvec`, best first; None when no
        vector of `model_id` (of this size) is stored."""
        ...

    def vector_among(self, qvec: Vector, model_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of `ids` that has a vector of `model_id`."""
        ...

    def reliability(
        self, ids: Collection[str], visible: Collection[str] | None, tenant: str | None
    ) -> dict[str, float]:
        """The reliability of each of `ids` that exists and is visible, as `tenant` sees its counters."""
        ...

    def agreement_texts(self, ids: Collection[str]) -> dict[str, str]:
        """What each of `ids` that exists is checked against a query's slots by
        (`ranking.agreement_text`)."""
        ...

    def documents(self, ids: Sequence[str], tenant: str | None) -> builtins.list[TenantViewed]:
        """The documents `ids` (all existing), in that order, as `tenant` is shown them."""
        ...


class ProcessRepository(Protocol):
    async def get(self, pid: str) -> ProcessDoc | None: ...

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = ...) -> Saved: ...

    async def record_outcome(self, pid: str, success: bool, note: str = "", by: Author = ...) -> ProcessDoc | None: ...

    async def delete(self, pid: str) -> bool: ...

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None, order: str = "updated"
    ) -> tuple[builtins.list[ProcessDoc], int]: ...

    async def find_hybrid(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
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
