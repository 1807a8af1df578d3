"""A toy in-memory experience repository (`ports.MemoryRepository`): dicts instead of tables,
Python instead of SQL, and its own evaluator of the filter tree (`filters.Filter`). Blocking: every
await completes at once. Keyword relevance is the number of query phrases a memory's content
holds (each an FTS-quoted phrase) — not bm25, so tests compare which memories come back, not their scores."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from robot_mcp_memory.errors import Conflict, NotFound
from robot_mcp_memory.experiences.dedup import Candidate, Duplicate
from robot_mcp_memory.experiences.filters import Filter, Path, Test
from robot_mcp_memory.experiences.model import Experience, NewMemory, Session, draw_public_id, effective_confidence
from robot_mcp_memory.experiences.ports import (
    Decide,
    Ended,
    Make,
    Mask,
    Order,
    Planner,
    Probe,
    Ranked,
    Scope,
    Weighed,
)

T = TypeVar("T")
_MISSING = object()


def _at(context: Any, path: Path) -> Any:
    value = context
    for seg in path:
        if isinstance(seg, int) and isinstance(value, list) and seg < len(value):  # noqa: SIM114 - mypy narrows each index type
            value = value[seg]
        elif isinstance(seg, str) and isinstance(value, dict) and seg in value:
            value = value[seg]
        else:
            return _MISSING
    return value


def _number(v: Any) -> bool:
    return isinstance(v, bool | int | float)


def _equal(a: Any, b: Any) -> bool:
    """By value: numbers by value with true == 1, strings exactly, null only null."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if _number(a) and _number(b):
        return float(a) == float(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return False


def _passes(t: Test, context: Mapping[str, Any]) -> bool:
    v = _at(context, t.path)
    found = v is not _MISSING
    if t.op == "$eq":
        return found and _equal(v, t.operand)
    if t.op == "$ne":
        return not (found and _equal(v, t.operand))
    if t.op == "$in":
        return found and any(_equal(v, x) for x in t.operand)
    if t.op == "$nin":
        return not (found and any(_equal(v, x) for x in t.operand))
    if t.op == "$exists":
        return found is bool(t.operand)
    same_kind = (isinstance(v, str) and isinstance(t.operand, str)) or (
        _number(v) and not isinstance(v, bool) and not isinstance(t.operand, str)
    )
    if not found or not same_kind:
        return False
    ordered: dict[str, bool] = {
        "$lt": v < t.operand,
        "$lte": v <= t.operand,
        "$gt": v > t.operand,
        "$gte": v >= t.operand,
    }
    return ordered[t.op]


def matches(tree: Filter, context: Mapping[str, Any]) -> bool:
    return all(_passes(t, context) for t in tree.tests)


class _View:
    def __init__(self, toy: ToyMemories) -> None:
        self.toy = toy

    # records
    def select_one(self, mid: int) -> Experience | None:
        return self.toy.rows.get(mid)

    def select_public(self, public_id: int) -> Experience | None:
        return next((e for e in self.toy.rows.values() if e.public_id == public_id), None)

    def public_ids(self, ids: Iterable[int]) -> dict[int, int]:
        return {m: self.toy.rows[m].public_id for m in ids if m in self.toy.rows}

    def select_session(self, sid: str) -> Session | None:
        return self.toy.sessions.get(sid)

    def session_text(self, sid: str) -> str:
        return " ".join(e.content for e in self.toy.rows.values() if e.session_id == sid)

    def same_facts_ids(self, new: NewMemory) -> list[int]:
        return []

    def rows_of(self, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]:
        return {m: self.toy.rows[m] for m in ids if m in self.toy.rows}

    # recall index
    def _in_scope(self, scope: Scope) -> list[tuple[Experience, float]]:
        out = []
        for e in self.toy.rows.values():
            conf = effective_confidence(e.confidence, e.updated_at, scope.now)
            if (
                e.status == "active"
                and e.collection == scope.collection
                and (scope.visible is None or e.robot in scope.visible)
                and (scope.session_id is None or e.session_id == scope.session_id)
                and (scope.exclude_session is None or e.session_id != scope.exclude_session)
                and conf >= scope.min_confidence
                and matches(scope.context_filter, e.context)
            ):
                out.append((e, conf))
        return out

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
        if scope.spatial is not None:
            raise NotImplementedError("the toy has no spatial order")
        ranked = []
        for e, conf in self._in_scope(scope):
            rel = 1.0 if match is None else float(sum(p.strip('"').lower() in e.content.lower() for p in match))
            if rel > 0:
                ranked.append(Ranked(e, rel, rel * (0.5 + 0.5 * conf), conf, None))
        ranked.sort(key=lambda r: (-r.score, -r.memory.id))
        return ranked[:limit]

    def weighed(self, scope: Scope, match: Sequence[str], limit: int) -> list[Weighed]:
        return [
            Weighed(r.memory.id, r.relevance, r.score / r.relevance, r.confidence)
            for r in self.rank(scope, match, "score", limit)
        ]

    def weighed_ids(self, scope: Scope, ids: Collection[int]) -> list[Weighed]:
        return [Weighed(e.id, 1.0, 0.5 + 0.5 * c, c) for e, c in self._in_scope(scope) if e.id in ids]

    def by_ids(self, scope: Scope, ids: Collection[int], include_data: bool = False) -> list[Ranked]:
        return [r for r in self.rank(scope, None, "score", len(self.toy.rows)) if r.memory.id in ids]

    def ids_passing(self, scope: Scope, ids: Collection[int]) -> set[int]:
        return {e.id for e, _ in self._in_scope(scope) if e.id in ids}

    def ids_in_scope(self, scope: Scope) -> list[int]:
        return [e.id for e, _ in self._in_scope(scope)]

    def mask(self, scope: Scope, make: Make) -> Mask | None:
        return None

    # writes
    def learn(self, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate:
        if new.session_id is not None:
            s = self.toy.sessions.get(new.session_id)
            if s is None or s.robot != new.robot:
                raise NotFound(f"no session '{new.session_id}'")
            if s.ended_at is not None:
                raise Conflict(f"session '{new.session_id}' has ended")
        exact = [
            Candidate(e.id, e.content)
            for e in self.toy.rows.values()
            if e.status == "active"
            and (e.robot, e.collection, e.type) == (new.robot, new.collection, new.type)
            and self.toy.hashes[e.id] == (new.content_hash, new.facts_hash)
        ]
        dup = decide(exact, [], [])
        if dup is not None:
            return dup
        mid = self.toy.next_id
        self.toy.next_id += 1
        self.toy.hashes[mid] = (new.content_hash, new.facts_hash)
        self.toy.rows[mid] = Experience(
            mid, new.robot, new.collection, new.type, new.content, new.category, new.confidence,
            dict(new.context), new.perception_type, new.data, dict(new.metadata), new.session_id,
            "active", None, None, now, now, 0, None, draw_public_id(), tuple(t for t, _ in new.tags),
            new.data is not None,
        )  # fmt: skip
        return mid

    def forget(self, mid: int, reason: str, now: float) -> bool:
        e = self.toy.rows.get(mid)
        if e is None or e.status != "active":
            return False
        self.toy.rows[mid] = replace(e, status="forgotten", forget_reason=reason, updated_at=now)
        return True

    def update(self, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool:
        e = self.toy.rows.get(mid)
        if e is None or e.status != "active":
            return False
        self.toy.hashes[mid] = (new.content_hash, new.facts_hash)
        self.toy.rows[mid] = replace(
            e, content=new.content, category=new.category, confidence=new.confidence, context=dict(new.context),
            updated_at=now,
        )  # fmt: skip
        return True

    def insert_session(self, s: Session) -> None:
        self.toy.sessions[s.id] = s

    def end_session(self, sid: str, outcome_score: float | None, now: float, planner: Planner) -> Ended | None:
        raise NotImplementedError("the toy does not consolidate")


class ToyMemories:
    """`ports.MemoryRepository` in dicts; a transaction that raises leaves nothing behind."""

    def __init__(self) -> None:
        self.rows: dict[int, Experience] = {}
        self.hashes: dict[int, tuple[str, str]] = {}  # (content hash, facts digest)
        self.sessions: dict[str, Session] = {}
        self.next_id = 1

    @property
    def blocking(self) -> bool:
        return True

    async def snapshot(self, fn: Callable[[_View], T]) -> T:
        return fn(_View(self))

    async def transaction(self, fn: Callable[[_View], T]) -> T:
        saved = copy.copy((self.rows, self.hashes, self.sessions, self.next_id))
        self.rows, self.hashes, self.sessions = dict(self.rows), dict(self.hashes), dict(self.sessions)
        try:
            return fn(_View(self))
        except BaseException:
            self.rows, self.hashes, self.sessions, self.next_id = saved
            raise

    async def transaction_then(self, fn: Callable[[_View], T], after: Callable[[T], None]) -> T:
        result = await self.transaction(fn)
        after(result)
        return result

    async def offload(self, fn: Callable[[], T]) -> T:
        return fn()

    def touch(self, ids: Iterable[int], now: float) -> None:
        return None

    def blocking_twin(self) -> ToyMemories:
        return self
