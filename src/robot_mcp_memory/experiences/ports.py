"""The experiences ports: what `ExperienceService`, its recall planner (`recall.py`) and
`ExperienceBrowser` need from storage and search, and the values that cross them. The SQLite
adapter is `experiences.sqlite.repository.SqliteMemories`; the service never sees a connection,
a table or SQL text (a ``context_filter`` travels as the tree `filters.Filter`).

Contract:

- `MemoryRepository.snapshot(fn)` runs `fn` over one consistent `Snapshot` (every read inside
  sees the same committed state); `transaction(fn)` runs `fn` in one write `Transaction`, all or
  nothing; `transaction_then(fn, after)` calls `after(result)` once it has committed and before
  the next write begins (so an in-memory index patched there sees writes in commit order).
  Over a blocking repository (`blocking`, from `blocking_twin`) every await completes without
  suspending (`service.run_sync`).
- A `RecallIndex` never returns a memory outside its `Scope`: every filter (visibility,
  collection, status, the decayed-confidence floor, session, context filter) applies before
  ranking, and lists re-check ids they are handed (`by_ids`, `weighed_ids`, `ids_passing`).
- `MemoryVectors` ranks by cosine; `nearest` only among the ids it is given, `nearest_any` among
  some robots' memories (and those a filter's `Mask` allows) before any other filter; None when
  no vector of the query's model is stored yet. Its `Snapshot`/`Transaction` arguments are the
  ones its repository handed out (an adapter reads its own).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from robot_mcp_memory.experiences import consolidate
from robot_mcp_memory.experiences.dedup import Candidate, Duplicate
from robot_mcp_memory.experiences.filters import EVERYTHING, Filter
from robot_mcp_memory.experiences.model import Experience, NewMemory, Session, Spatial
from robot_mcp_memory.search.resilient import Offload
from robot_mcp_memory.search.vectors import KeyFilter, Vector

T = TypeVar("T")

#: A text's embedding: (model id, unit vector).
Embedded = tuple[str, Vector]
#: How a ranked list is ordered.
Order = Literal["score", "relevance", "distance", "blend"]
#: Whether a filter's mask may be made now: never ("no", only one already held), now, or on the
#: second time the filter is asked for ("again").
Make = Literal["no", "now", "again"]
#: Dedup's decision over (exact, lexical, semantic) candidates: the duplicate, or None.
Decide = Callable[[list[Candidate], list[Candidate], list[Candidate]], Duplicate | None]
#: Consolidation's plan over a session's memories: (kept, superseded) pairs.
Planner = Callable[[list[consolidate.Row]], list[tuple[int, int]]]


@dataclass(frozen=True)
class Scope:
    """Everything that decides *whether* a memory may be returned (never how it ranks)."""

    visible: frozenset[str] | None
    collection: str
    min_confidence: float
    now: float
    session_id: str | None = None
    exclude_session: str | None = None
    context_filter: Filter = field(default=EVERYTHING)
    spatial: Spatial | None = None

    @property
    def maskable(self) -> bool:
        """Whether a filter's mask may serve this scope: not within a session, nor outside one,
        where most of the memories it allows would fail."""
        return self.session_id is None and self.exclude_session is None


@dataclass(frozen=True)
class Ranked:
    memory: Experience
    relevance: float  # -bm25 for keyword lists, 1.0 for filter-only lists
    score: float  # relevance × source weight × (0.5 + 0.5 × decayed confidence)
    confidence: float  # decayed
    dist2: float | None
    #: For ``order="blend"``: (1 − w)·score/best score + w·proximity, the spatial ranking key.
    blend: float | None = None


@dataclass(frozen=True)
class Weighed:
    """What ranking knows of a memory before its row is read: enough to fuse lists."""

    id: int
    relevance: float
    weight: float  # source weight × (0.5 + 0.5 × decayed confidence)
    confidence: float  # decayed

    def ranked(self, memory: Experience) -> Ranked:
        return Ranked(memory, self.relevance, self.relevance * self.weight, self.confidence, None)


@dataclass(frozen=True)
class Probe:
    """How to look for duplicates of a new memory: its hash (for a fact, the lexical key
    `dedup.content_hash`: its exact repeats and lexical duplicates share it), the ids (with
    cosines) a vector index proposed. Candidates must share the new memory's facts digest
    (`NewMemory.facts_hash`) — memories with different numbers or outcomes are never proposed."""

    content_hash: str
    semantic: tuple[tuple[int, float], ...] = ()
    same_session: bool = False
    #: At most this many memories with the same hash are proposed: of one robot, collection and
    #: facts digest, more than one shares a key only where `dedup.conflicting` kept them apart.
    hash_limit: int = 20


@dataclass(frozen=True)
class Ended:
    session: Session
    consolidated: list[tuple[int, int]]
    summary: dict[str, Any]


@dataclass(frozen=True)
class Filters:
    """What an operator's memory list is narrowed to (`ExperienceBrowser.page`)."""

    visible: frozenset[str] | None
    collection: str = ""
    robot: str = ""
    category: str = ""
    type: str = ""
    session_id: str = ""
    since: float | None = None
    until: float | None = None
    success: bool | None = None
    status: str = "active"  # active | forgotten | superseded | all


@dataclass(frozen=True)
class SessionRow:
    session: Session
    memories: int
    failures: int


class Mask(Protocol):
    """Which memories a context filter allows, held by the index (an accelerator)."""

    def allowing(self, visible: frozenset[str] | None) -> KeyFilter: ...


class PublicIds(Protocol):
    """Public memory ids (`model.PUBLIC_FROM`) and the stored ones, which never leave the service."""

    def select_public(self, public_id: int) -> Experience | None:
        """The memory shown as `public_id`, or None."""
        ...

    def public_ids(self, ids: Iterable[int]) -> dict[int, int]:
        """The public id of each stored id in `ids` (of the memories there are)."""
        ...


class Records(PublicIds, Protocol):
    """Memories and sessions as one snapshot holds them."""

    def select_one(self, mid: int) -> Experience | None: ...

    def select_session(self, sid: str) -> Session | None: ...

    def session_text(self, sid: str) -> str: ...

    def same_facts_ids(self, new: NewMemory) -> list[int]: ...

    def rows_of(self, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]: ...


class RecallIndex(Protocol):
    """Ranked lists and candidate checks within a `Scope`, in one snapshot."""

    def rank(
        self,
        scope: Scope,
        match: Sequence[str] | None,
        order: Order,
        limit: int,
        include_data: bool = False,
        *,
        accelerated: bool = True,
    ) -> list[Ranked]: ...

    def weighed(self, scope: Scope, match: Sequence[str], limit: int) -> list[Weighed]: ...

    def weighed_ids(self, scope: Scope, ids: Collection[int]) -> list[Weighed]: ...

    def by_ids(self, scope: Scope, ids: Collection[int], include_data: bool = False) -> list[Ranked]: ...

    def ids_passing(self, scope: Scope, ids: Collection[int]) -> set[int]: ...

    def ids_in_scope(self, scope: Scope) -> list[int]: ...

    def mask(self, scope: Scope, make: Make) -> Mask | None: ...


class Snapshot(Records, RecallIndex, Protocol):
    """One consistent read: records and the recall index."""


class Transaction(PublicIds, Protocol):
    """One write transaction."""

    def select_one(self, mid: int) -> Experience | None: ...

    def learn(self, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate: ...

    def forget(self, mid: int, reason: str, now: float) -> bool: ...

    def update(self, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool: ...

    def insert_session(self, s: Session) -> None: ...

    def end_session(self, sid: str, outcome_score: float | None, now: float, planner: Planner) -> Ended | None: ...


class MemoryRepository(Protocol):
    """Where memories live: snapshots to read, transactions to write."""

    @property
    def blocking(self) -> bool: ...

    async def snapshot(self, fn: Callable[[Snapshot], T]) -> T: ...

    async def transaction(self, fn: Callable[[Transaction], T]) -> T: ...

    async def transaction_then(self, fn: Callable[[Transaction], T], after: Callable[[T], None]) -> T: ...

    async def offload(self, fn: Callable[[], T]) -> T:
        """Slow work that is not storage (embedding): off the event loop, or here when blocking."""
        ...

    def touch(self, ids: Iterable[int], now: float) -> None:
        """Count accesses without waiting (they may be dropped under load)."""
        ...

    def blocking_twin(self) -> MemoryRepository: ...


class MemoryCatalogue(Protocol):
    """The operator's read-only views of the memory (`ExperienceBrowser`)."""

    async def page(self, f: Filters, limit: int, offset: int) -> tuple[list[Experience], int]: ...

    async def one(self, public_id: int) -> Experience | None:
        """The memory shown as `public_id`, or None."""
        ...

    async def sessions(
        self, visible: frozenset[str] | None, collection: str, robot: str, limit: int, offset: int
    ) -> tuple[list[SessionRow], int]: ...

    async def session(self, sid: str) -> Session | None: ...

    async def timeline(self, sid: str, limit: int) -> tuple[list[Experience], int, int]:
        """The session's first `limit` memories, how many it has, and how many of those failed —
        from one snapshot."""
        ...

    async def counts_by(
        self, column: Literal["collection", "category"], visible: frozenset[str] | None
    ) -> list[tuple[str, int]]: ...

    async def status_counts(self, visible: frozenset[str] | None) -> dict[str, int]: ...

    async def per_day(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]: ...

    async def robot_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, str, int, int, int]]:
        """(robot, day, memories, successes, failures) since `since`."""
        ...

    async def robot_totals(
        self, visible: frozenset[str] | None
    ) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
        """Per robot: memories, successes, failures, newest memory, sessions, newest session event."""
        ...

    async def session_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
        """(day, scored >= 0.5, scored < 0.5, unscored) of sessions started since `since`."""
        ...


class MemoryVectors(Protocol):
    """The seam for embedding search. With none, recall is keyword-only and dedup skips its
    semantic stage.

    - `embed` makes (model id, unit vector) per text, None each when the embedder is off or down.
      Blocking: the service runs it off the event loop, before a write is queued — unless
      `would_embed` says it would answer None anyway (no thread hop then).
    - `query_vector` is `embed` of one query text through the embedder's query cache (a fleet
      asks the same instructions again and again): a hit on the event loop, a miss through the
      caller's `offload`.
    - `nearest` ranks by cosine **only among `within`** (ids that passed every filter, read in the
      same snapshot `at`); None when no vector of the query's model is stored yet. `nearest_any`
      ranks among the memories of some robots — and, given `ids`, those it allows (a filter's
      `Mask`) — before any other filter (recall checks its answer in the index).
    - `write` stores a memory's vector inside the memory's own write transaction (None: deletes
      an old one, now stale); `written` hears of the commit (new vectors, forgotten ids).
    - `weights` (keyword, vector) and `k`: the weighted reciprocal-rank fusion."""

    weights: tuple[float, float]
    k: int

    def would_embed(self) -> bool: ...

    def embed(self, texts: Sequence[str]) -> list[Embedded | None]: ...

    async def query_vector(self, text: str, offload: Offload) -> Embedded | None: ...

    def nearest(
        self, at: Snapshot, query: Embedded, k: int, within: Sequence[int]
    ) -> list[tuple[int, float]] | None: ...

    def nearest_any(
        self, at: Snapshot, query: Embedded, k: int, robots: Collection[str] | None, ids: KeyFilter | None = None
    ) -> list[tuple[int, float]] | None: ...

    def write(self, at: Transaction, memory_id: int, embedded: Embedded | None) -> None: ...

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None: ...


__all__ = [
    "Decide",
    "Embedded",
    "Ended",
    "Filters",
    "Make",
    "Mask",
    "MemoryCatalogue",
    "MemoryRepository",
    "MemoryVectors",
    "Order",
    "Planner",
    "Probe",
    "PublicIds",
    "Ranked",
    "RecallIndex",
    "Records",
    "Scope",
    "SessionRow",
    "Snapshot",
    "Transaction",
    "Weighed",
]
