"""The SQLite adapter of the experiences ports (`experiences.ports`).

`SqliteMemories` implements `MemoryRepository` and `MemoryCatalogue` over an `ExperienceStore`
(reads on the reader pool, writes on the writer thread, or both blocking). Each snapshot or write
transaction is handed to the service as a `View`: the connection and the store's accelerators
(covering index, keyword cache), with one method per SQL function the service
used to call with the connection. A port `Scope` becomes the SQL `ranking_repo.Scope` here, its
filter tree compiled by `filter_sql.condition` once per view.

Invariant: a `View` is used only inside the read or write that made it (its connection's
snapshot or transaction); `connection_of` lets this adapter's vector index read the same one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Literal, TypeVar

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
from robot_mcp_memory.experiences.sqlite import browse_repo, filter_sql, ranking_repo, storage
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore

T = TypeVar("T")
#: The JSON column a context filter reads.
CONTEXT_COLUMN = "m.context"


def compiled(scope: Scope) -> ranking_repo.Scope:
    """`scope` with its filter tree compiled to SQL."""
    return ranking_repo.Scope(
        visible=scope.visible,
        collection=scope.collection,
        min_confidence=scope.min_confidence,
        now=scope.now,
        session_id=scope.session_id,
        exclude_session=scope.exclude_session,
        condition=filter_sql.condition(scope.context_filter, CONTEXT_COLUMN),
        spatial=scope.spatial,
    )


class View:
    """One read snapshot or write transaction on `conn`: a `ports.Snapshot` and a `ports.Transaction`."""

    def __init__(self, conn: sqlite3.Connection, store: ExperienceStore) -> None:
        self.conn = conn
        self._store = store
        self._scopes: dict[int, tuple[Scope, ranking_repo.Scope]] = {}

    def _sql(self, scope: Scope) -> ranking_repo.Scope:
        held = self._scopes.get(id(scope))
        if held is None or held[0] is not scope:
            held = (scope, compiled(scope))
            self._scopes[id(scope)] = held
        return held[1]

    # ------------------------------------------------------------------ records
    def select_one(self, mid: int) -> Experience | None:
        return storage.select_one(self.conn, mid)

    def select_public(self, public_id: int) -> Experience | None:
        return storage.select_public(self.conn, public_id)

    def public_ids(self, ids: Iterable[int]) -> dict[int, int]:
        return storage.public_ids(self.conn, ids)

    def select_session(self, sid: str) -> Session | None:
        return storage.select_session(self.conn, sid)

    def session_text(self, sid: str) -> str:
        return storage.session_text(self.conn, sid)

    def same_facts_ids(self, new: NewMemory) -> list[int]:
        return storage.same_facts_ids(self.conn, new)

    def rows_of(self, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]:
        return storage.rows_of(self.conn, ids, include_data)

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
        st, sql = self._store, self._sql(scope)
        if not accelerated:
            return ranking_repo.rank(self.conn, sql, match, order, limit, include_data, st.covering)
        return ranking_repo.rank(self.conn, sql, match, order, limit, include_data, st.covering, st.keywords)

    def weighed(self, scope: Scope, match: Sequence[str], limit: int) -> list[Weighed]:
        st = self._store
        return ranking_repo.weighed(self.conn, self._sql(scope), match, limit, st.covering, st.keywords)

    def weighed_ids(self, scope: Scope, ids: Collection[int]) -> list[Weighed]:
        return ranking_repo.weighed_ids(self.conn, self._sql(scope), ids, self._store.covering)

    def by_ids(self, scope: Scope, ids: Collection[int], include_data: bool = False) -> list[Ranked]:
        return ranking_repo.by_ids(self.conn, self._sql(scope), ids, include_data)

    def ids_passing(self, scope: Scope, ids: Collection[int]) -> set[int]:
        return ranking_repo.ids_passing(self.conn, self._sql(scope), ids, covering=self._store.covering)

    def ids_in_scope(self, scope: Scope) -> list[int]:
        return ranking_repo.ids_in_scope(self.conn, self._sql(scope), covering=self._store.covering)

    def mask(self, scope: Scope, make: Make) -> Mask | None:
        """None: this adapter holds no filter masks (every filter is read in SQL)."""
        return None

    # ------------------------------------------------------------------ writes
    def learn(self, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate:
        return storage.learn(self.conn, new, probe, decide, now)

    def forget(self, mid: int, reason: str, now: float) -> bool:
        return storage.forget(self.conn, mid, reason, now)

    def update(self, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool:
        return storage.update(self.conn, mid, new, now, keep_user_tags=keep_user_tags)

    def insert_session(self, s: Session) -> None:
        storage.insert_session(self.conn, s)

    def end_session(self, sid: str, outcome_score: float | None, now: float, planner: Planner) -> Ended | None:
        return storage.end_session(self.conn, sid, outcome_score, now, planner)


def connection_of(at: object) -> sqlite3.Connection:
    """The connection of a `View` this adapter handed out (for its vector index)."""
    if not isinstance(at, View):
        raise TypeError(f"expected a snapshot of the SQLite experience repository, not {type(at).__name__}")
    return at.conn


class SqliteMemories:
    """`ports.MemoryRepository` and `ports.MemoryCatalogue` over an `ExperienceStore`."""

    def __init__(self, store: ExperienceStore) -> None:
        self.store = store

    @property
    def blocking(self) -> bool:
        return self.store.blocking

    async def snapshot(self, fn: Callable[[View], T]) -> T:
        store = self.store
        return await store.read(lambda c: fn(View(c, store)))

    async def transaction(self, fn: Callable[[View], T]) -> T:
        store = self.store
        return await store.write(lambda c: fn(View(c, store)))

    async def transaction_then(self, fn: Callable[[View], T], after: Callable[[T], None]) -> T:
        store = self.store
        return await store.write_then(lambda c: fn(View(c, store)), after)

    async def offload(self, fn: Callable[[], T]) -> T:
        return await self.store.offload(fn)

    def touch(self, ids: Iterable[int], now: float) -> None:
        self.store.touch(ids, now)

    def blocking_twin(self) -> SqliteMemories:
        return SqliteMemories(self.store.blocking_twin())

    # ------------------------------------------------------------------ catalogue (browsing)
    async def page(self, f: Filters, limit: int, offset: int) -> tuple[list[Experience], int]:
        return await self.store.read(lambda c: browse_repo.page(c, f, limit, offset))

    async def one(self, public_id: int) -> Experience | None:
        return await self.store.read(lambda c: storage.select_public(c, public_id))

    async def sessions(
        self, visible: frozenset[str] | None, collection: str, robot: str, limit: int, offset: int
    ) -> tuple[list[SessionRow], int]:
        return await self.store.read(lambda c: browse_repo.sessions(c, visible, collection, robot, limit, offset))

    async def session(self, sid: str) -> Session | None:
        return await self.store.read(lambda c: browse_repo.session(c, sid))

    async def timeline(self, sid: str, limit: int) -> tuple[list[Experience], int, int]:
        def read(c: sqlite3.Connection) -> tuple[list[Experience], int, int]:
            rows = browse_repo.timeline(c, sid, limit)
            total, failures = browse_repo.session_counts(c, sid)
            return rows, total, failures

        return await self.store.read(read)

    async def counts_by(
        self, column: Literal["collection", "category"], visible: frozenset[str] | None
    ) -> list[tuple[str, int]]:
        return await self.store.read(lambda c: browse_repo.counts_by(c, column, visible))

    async def status_counts(self, visible: frozenset[str] | None) -> dict[str, int]:
        return await self.store.read(lambda c: browse_repo.status_counts(c, visible))

    async def per_day(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
        return await self.store.read(lambda c: browse_repo.per_day(c, visible, since))

    async def robot_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, str, int, int, int]]:
        return await self.store.read(lambda c: browse_repo.robot_days(c, visible, since))

    async def robot_totals(
        self, visible: frozenset[str] | None
    ) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
        return await self.store.read(lambda c: browse_repo.robot_totals(c, visible))

    async def session_days(self, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
        return await self.store.read(lambda c: browse_repo.session_days(c, visible, since))


__all__ = ["CONTEXT_COLUMN", "SqliteMemories", "View", "compiled", "connection_of"]
