"""PostgresMemories: the experiences ports (`MemoryRepository`, `MemoryCatalogue`) on a `PostgresStore`.

Each snapshot is one ``REPEATABLE READ, READ ONLY`` transaction and each write one transaction
(`storage.postgres.engine`); the service is handed a `View` of it — the same records, recall
index and writes the SQLite adapter's `View` offers, their SQL in `records`, `ranking`,
`keywords`, `filter_sql` and `catalogue`.

Invariants:

- A `View` is used only inside the read or write that made it.
- Keyword relevance and the matches' ranking numbers in a read snapshot come from this
  replica's mirrors (`postings`, `numbers`: exact for that snapshot, else SQL); a write's View
  ranks in SQL. A replica's writes prune the
  memories' change feed now and then (`postings.PRUNE_EVERY_S`).
- Vectors are `vectors.PostgresMemoryVectors` (the `MemoryVectors` seam, given to the service
  beside this; rows of the shared ``vectors`` table, which this adapter migrates before its
  own); without it recall ranks by keywords (bm25, as on SQLite) and filters, and dedup
  has no semantic stage. `mask` is None: every filter is read in SQL.
- Access counters (`touch`) never delay a read: they are added up in memory and written at most
  every `ACCESS_FLUSH_S` as one transaction on a timer thread (dropped, and logged, if that write
  fails — counters may be lost, never a recall); `close` writes what is pending.
- `transaction_then`'s `after` runs once the write has committed and before this process's next
  write begins (one lock around both), and also when the awaiting coroutine was cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Literal, TypeVar

from robot_mcp_memory import logs
from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.experiences.access import PendingAccesses
from robot_mcp_memory.experiences.dedup import Duplicate
from robot_mcp_memory.experiences.model import Experience, NewMemory, Session
from robot_mcp_memory.experiences.ports import (
    Decide,
    Ended,
    Filters,
    Make,
    Mask,
    Order,
    Planner,
    Probe,
    Ranked,
    Scope,
    SessionRow,
    Weighed,
)
from robot_mcp_memory.experiences.postgres import catalogue, ranking, records
from robot_mcp_memory.experiences.postgres import postings as feed
from robot_mcp_memory.experiences.postgres.filter_sql import Condition
from robot_mcp_memory.experiences.postgres.numbers import MemoryNumbers
from robot_mcp_memory.experiences.postgres.tables import COMPONENT, MIGRATIONS
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.search.postgres.postings import PostingCache, PruneClock
from robot_mcp_memory.storage.postgres import Connection, PostgresStore, changes

T = TypeVar("T")
_log = logs.get("robot_mcp_memory.experiences.postgres")

#: Access counts wait at most this long before they are written (one transaction for the lot).
ACCESS_FLUSH_S = 0.25


class View:
    """One read snapshot or write transaction on `conn`: a `ports.Snapshot` and a `ports.Transaction`."""

    def __init__(self, conn: Connection, schema: str, caches: ranking.Caches = ranking.NO_CACHES) -> None:
        self.conn = conn
        self.schema = schema
        self.caches = caches  # a read snapshot's (REPEATABLE READ); a write's has none
        self._scopes: dict[int, tuple[Scope, Condition]] = {}

    def _cond(self, scope: Scope) -> Condition:
        held = self._scopes.get(id(scope))
        if held is None or held[0] is not scope:
            held = (scope, ranking.compiled(scope))
            self._scopes[id(scope)] = held
        return held[1]

    # ------------------------------------------------------------------ records
    def select_one(self, mid: int) -> Experience | None:
        return records.select_one(self.conn, mid)

    def select_public(self, public_id: int) -> Experience | None:
        return records.select_public(self.conn, public_id)

    def public_ids(self, ids: Iterable[int]) -> dict[int, int]:
        return records.public_ids(self.conn, ids)

    def select_session(self, sid: str) -> Session | None:
        return records.select_session(self.conn, sid)

    def session_text(self, sid: str) -> str:
        return records.session_text(self.conn, sid)

    def same_facts_ids(self, new: NewMemory) -> list[int]:
        return records.same_facts_ids(self.conn, new)

    def rows_of(self, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]:
        return records.rows_of(self.conn, ids, include_data)

    # ------------------------------------------------------------------ recall index
    def rank(
        self,
        scope: Scope,
        match: Sequence[str] | None,
        order: Order,
        limit: int,
        include_data: bool = False,
        *,
        accelerated: bool = True,
    ) -> list[Ranked]:
        return ranking.rank(self.conn, scope, self._cond(scope), match, order, limit, include_data, None, self.caches)

    def weighed(self, scope: Scope, match: Sequence[str], limit: int) -> list[Weighed]:
        return ranking.weighed(self.conn, scope, self._cond(scope), match, limit, self.caches)

    def weighed_ids(self, scope: Scope, ids: Collection[int]) -> list[Weighed]:
        return ranking.weighed_ids(self.conn, scope, self._cond(scope), ids)

    def by_ids(self, scope: Scope, ids: Collection[int], include_data: bool = False) -> list[Ranked]:
        return ranking.by_ids(self.conn, scope, self._cond(scope), ids, include_data)

    def ids_passing(self, scope: Scope, ids: Collection[int]) -> set[int]:
        return ranking.ids_passing(self.conn, scope, self._cond(scope), ids)

    def ids_in_scope(self, scope: Scope) -> list[int]:
        return ranking.ids_in_scope(self.conn, scope, self._cond(scope))

    def mask(self, scope: Scope, make: Make) -> Mask | None:
        """None: this adapter holds no filter masks (every filter is read in SQL)."""
        return None

    # ------------------------------------------------------------------ writes
    def learn(self, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate:
        return records.learn(self.conn, self.schema, new, probe, decide, now)

    def forget(self, mid: int, reason: str, now: float) -> bool:
        return records.forget(self.conn, mid, reason, now)

    def update(self, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool:
        return records.update(self.conn, mid, new, now, keep_user_tags=keep_user_tags)

    def insert_session(self, s: Session) -> None:
        records.insert_session(self.conn, s)

    def end_session(self, sid: str, outcome_score: float | None, now: float, planner: Planner) -> Ended | None:
        return records.end_session(self.conn, sid, outcome_score, now, planner)


def connection_of(at: object) -> Connection:
    """The connection of a `View` this adapter handed out (for its vector search)."""
    if not isinstance(at, View):
        raise TypeError(f"expected a snapshot of the PostgreSQL experience repository, not {type(at).__name__}")
    return at.conn


class AccessCounts(PendingAccesses[None]):
    """Access counters (`experiences.access`) written as one transaction at most every `interval`
    seconds (see the module docstring)."""

    def __init__(self, db: PostgresStore, interval: float = ACCESS_FLUSH_S) -> None:
        super().__init__(interval)
        self._db = db

    def _write(self, counts: dict[int, int], now: float) -> None:
        try:
            self._db.write_blocking(lambda c: records.touch(c, counts, now))
        except StorageError as exc:  # counters may be lost, never a read
            _log.warning("experiences.access_counts_dropped", memories=len(counts), error=type(exc).__name__)


class PostgresMemories:
    """`ports.MemoryRepository` and `ports.MemoryCatalogue` on a `PostgresStore` (keyword recall)."""

    def __init__(
        self,
        db: PostgresStore,
        *,
        blocking: bool = False,
        access: AccessCounts | None = None,
        write_lock: threading.Lock | None = None,
        migrate: bool = True,
        postings: PostingCache | None = None,
        numbers: MemoryNumbers | None = None,
    ) -> None:
        self.db = db
        self._blocking = blocking
        if migrate:
            vectorstore.migrate(db)  # first: the experience tables' step 3 moves memory vectors into it
            changes.migrate(db)  # before them too: step 4's trigger writes the change feed
            db.migrate(COMPONENT, MIGRATIONS)
        self.access = access if access is not None else AccessCounts(db)
        self._write_lock = write_lock if write_lock is not None else threading.Lock()
        #: This replica's posting cache and numbers mirror (kept exact for each read's snapshot
        #: from the change feed).
        self.postings = postings if postings is not None else feed.memory_postings()
        self.numbers = numbers if numbers is not None else MemoryNumbers()
        self.caches = ranking.Caches(self.postings, self.numbers)
        self._prune = PruneClock()  # shared with the blocking twin

    @property
    def blocking(self) -> bool:
        return self._blocking

    def close(self) -> None:
        """Write the pending access counts (the store itself is closed by its owner)."""
        self.access.flush()

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        if self._blocking:
            return self.db.read_blocking(fn)
        return await self.db.read(fn)

    async def snapshot(self, fn: Callable[[View], T]) -> T:
        schema, caches = self.db.schema, self.caches
        return await self._read(lambda c: fn(View(c, schema, caches)))

    def _job(self, fn: Callable[[View], T]) -> Callable[[Connection], T]:
        """A write's transaction: `fn`, then — at most every `PRUNE_EVERY_S` on this replica —
        the memories' change feed pruned past its horizon, after the rows (the order every
        feed write takes its locks in)."""
        schema, prune = self.db.schema, self._prune.due(feed.PRUNE_EVERY_S)

        def job(c: Connection) -> T:
            result = fn(View(c, schema))
            if prune:
                feed.prune_feed(c)
            return result

        return job

    async def transaction(self, fn: Callable[[View], T]) -> T:
        if self._blocking:
            return self.db.write_blocking(self._job(fn))
        return await self.db.write(self._job(fn))

    async def transaction_then(self, fn: Callable[[View], T], after: Callable[[T], None]) -> T:
        job = self._job(fn)

        def run() -> T:
            with self._write_lock:
                result = self.db.write_blocking(job)
                after(result)
                return result

        if self._blocking:
            return run()
        return await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(run)))

    async def offload(self, fn: Callable[[], T]) -> T:
        return fn() if self._blocking else await asyncio.to_thread(fn)

    def touch(self, ids: Iterable[int], now: float) -> None:
        self.access.add(ids, now)

    def blocking_twin(self) -> PostgresMemories:
        """The same store, blocking; it shares the access counts and the write lock."""
        twin = PostgresMemories(
            self.db,
            blocking=True,
            access=self.access,
            write_lock=self._write_lock,
            migrate=False,
            postings=self.postings,
            numbers=self.numbers,
        )
        twin._prune = self._prune
        return twin

    # ------------------------------------------------------------------ catalogue (browsing)
    async def page(self, f: Filters, limit: int, offset: int) -> tuple[list[Experience], int]:
        return await self._read(lambda c: catalogue.page(c, f, limit, offset))

    async def one(self, public_id: int) -> Experience | None:
        return await self._read(lambda c: records.select_public(c, public_id))

    async def sessions(
        self, visible: frozenset[str] | None, collection: str, robot: str, limit: int, offset: int
    ) -> tuple[list[SessionRow], int]:
        return await self._read(lambda c: catalogue.sessions(c, visible, collection, robot, limit, offset))

    async def session(self, sid: str) -> Session | None:
        return await self._read(lambda c: records.select_session(c, sid))

    async def timeline(self, sid: str, limit: int) -> tuple[list[Experience], int, int]:
        def read(c: Connection) -> tuple[list[Experience], int, int]:
            rows = catalogue.timeline(c, sid, limit)
            total, failures = catalogue.session_counts(c, sid)
            return rows, total, failures

        return await self._read(read)

    async def counts_by(
        self, column: Literal["collection", "category"], visible: frozenset[str] | None
    ) -> list[tuple[str, int]]:
        return await self._read(lambda c: catalogue.counts_by(c, column, visible))

    async def status_counts(self, visible: frozenset[str] | None) -> dict[str, int]:
        return await self._read(lambda c: catalogue.status_counts(c, visible))

    async def per_day(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
        return await self._read(lambda c: catalogue.per_day(c, visible, since))

    async def robot_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, str, int, int, int]]:
        return await self._read(lambda c: catalogue.robot_days(c, visible, since))

    async def robot_totals(
        self, visible: frozenset[str] | None
    ) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
        return await self._read(lambda c: catalogue.robot_totals(c, visible))

    async def session_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
        return await self._read(lambda c: catalogue.session_days(c, visible, since))


__all__ = ["ACCESS_FLUSH_S", "AccessCounts", "PostgresMemories", "View", "connection_of"]
