"""Which memories pass a `context_filter`, held in memory per filter and kept current through the
change log — so that recall can rank among them without reading every context again.

Finding the memories that pass a filter in SQL reads each one's context as JSON (~1 µs each on
SQLite 3.40): at 100,000 memories, a hybrid recall whose nearest vectors seldom passed its filter
spent ~60–250 ms there. A `Mask` is that answer for one (collection, filter), as a boolean per
memory id (and the id's robot); it is made once by that scan and then patched from `CHANGES`, as
the keyword cache is (`keyword_repo`): every write that can change whether a memory passes — an
index entry written (a learn, an update, an import), a change of its context, collection, robot
or status, an id moved, a row deleted — is logged, by our writes or by triggers on `memories`
whatever process writes it (`storage.RANK_LOG_TRIGGERS`), and re-read in the caller's snapshot
before a mask answers.

A mask is a superset, never the answer itself: it knows nothing of confidence or sessions, and an
id it cannot vouch for is allowed — past its end, or without an index entry (a row inserted by
hand without one is logged by no trigger). Its users check what it proposes against every filter
in SQL (`recall.hybrid`, `ranking_repo`).
"""

from __future__ import annotations

import collections
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from robot_mcp_memory.experiences.model import MAX_SOURCE_WEIGHT
from robot_mcp_memory.experiences.sqlite.filter_sql import Condition
from robot_mcp_memory.experiences.sqlite.keyword_repo import CHANGES, dense_ids, logged_since

#: How many (collection, filter) masks are kept, and how many bytes they may hold together (29
#: bytes per id: 2.9 MB each at 100,000 memories), least recently used first out.
MAX_MASKS = 64
MAX_MASK_BYTES = 64 * 2**20
#: A mask is patched from at most this many changed memories (or a sixteenth of its size, when
#: that is more); past it, the scan makes it again.
MAX_PATCH = 512
#: The robot code of an id a mask cannot vouch for: any robot.
ANY_ROBOT = -1
#: What a mask reads of each passing memory: its id, robot, and what ranks it without a query
#: (the weight as ranking caps it, computed by SQL as ranking computes it).
_COLUMNS = f"m.id, m.robot, min(m.source_weight, {MAX_SOURCE_WEIGHT!r}), m.confidence, m.updated_at"

#: How many filters asked for once (``make="again"``) are remembered.
ASKED = 256

Key = tuple[str, str, tuple[Any, ...]]
#: Whether `FilterMasks.mask` makes a mask it does not hold: never, now, or when asked again.
Make = Literal["no", "now", "again"]


@dataclass(frozen=True)
class Mask:
    """``passing[id]`` is True for every active memory of the collection whose context passes the
    filter, as of change-log entry `seq` (and for every id it cannot vouch for: no index entry);
    ``robot[id]`` is that memory's robot, as a code of `robots` (`ANY_ROBOT`: unknown). An id at
    or past ``len(passing)`` is unknown: allowed."""

    seq: int
    passing: npt.NDArray[np.bool_]
    robot: npt.NDArray[np.int32]
    robots: dict[str, int]
    #: per id: (weight as ranking caps it, confidence, updated_at) of a passing memory, NaN else —
    #: what ranks a filter-only list (`ranking_repo._filter_only_ranked`)
    ranking: npt.NDArray[np.float64]

    @property
    def nbytes(self) -> int:
        return int(self.passing.nbytes + self.robot.nbytes + self.ranking.nbytes)

    def allows(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Per id: whether it may pass (True past the end: unknown)."""
        inside = (ids >= 0) & (ids < self.passing.size)
        out = np.ones(ids.shape, dtype=np.bool_)
        out[inside] = self.passing[ids[inside]]
        return out

    def allowing(self, visible: frozenset[str] | None) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
        """`allows`, and only memories of the `visible` robots (all with None) — by the robot the
        table says, not the one a vector was filed under (a row moved by hand keeps its vector's)."""
        if visible is None:
            return self.allows
        wanted = np.array([ANY_ROBOT, *(self.robots[r] for r in visible if r in self.robots)], dtype=np.int32)

        def allowed(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
            out = self.allows(ids)
            inside = (ids >= 0) & (ids < self.passing.size)
            out[inside] &= np.isin(self.robot[ids[inside]], wanted)
            return out

        return allowed


class FilterMasks:
    """`Mask`s by (collection, filter), shared by every reader of one store. Thread-safe: a mask
    is never changed once made; a patched one replaces it."""

    def __init__(self, capacity: int = MAX_MASKS, max_bytes: int = MAX_MASK_BYTES) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._masks: collections.OrderedDict[Key, Mask] = collections.OrderedDict()
        self._asked: collections.OrderedDict[Key, None] = collections.OrderedDict()  # filters asked for once
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._masks.clear()

    def mask(self, conn: sqlite3.Connection, collection: str, condition: Condition, *, make: Make) -> Mask | None:
        """The mask of (`collection`, `condition`) in `conn`'s snapshot (its open read
        transaction): the cached one, patched up to the snapshot; when there is none to patch,
        made by a scan if `make` is ``"now"``, or ``"again"`` and this filter was asked for
        before (a filter used once is not worth its scan) — otherwise None."""
        key: Key = (collection, condition.sql, tuple(condition.params))
        with self._lock:
            held = self._masks.get(key)
            if held is not None:
                self._masks.move_to_end(key)
            elif make == "again" and key not in self._asked:
                self._asked[key] = None
                while len(self._asked) > ASKED:
                    self._asked.popitem(last=False)
                return None
        if held is None and make == "no":
            return None
        (top,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {CHANGES}").fetchone()  # noqa: S608
        if held is not None and top < held.seq:  # a snapshot older than the mask: SQL answers it
            return None
        found = None if held is None else _patched(conn, held, top, collection, condition)
        if found is None:
            found = _scan(conn, top, collection, condition) if make != "no" else None
            if found is None:
                if held is not None:  # neither patched nor made: not worth reading the log for again
                    with self._lock:
                        if self._masks.get(key) is held:
                            del self._masks[key]
                return None
        if held is None or found.seq >= held.seq:  # a reader with an older snapshot leaves a newer mask be
            with self._lock:
                self._asked.pop(key, None)
                self._masks[key] = found
                self._masks.move_to_end(key)
                held_bytes = sum(m.nbytes for m in self._masks.values())
                while len(self._masks) > 1 and (len(self._masks) > self.capacity or held_bytes > self.max_bytes):
                    held_bytes -= self._masks.popitem(last=False)[1].nbytes
        return found


def _where(collection: str, condition: Condition) -> tuple[str, list[Any]]:
    return (
        f"m.status = 'active' AND m.collection = ? AND ({condition.sql})",
        [collection, *condition.params],
    )


def _scan(conn: sqlite3.Connection, top: int, collection: str, condition: Condition) -> Mask | None:
    """The mask as of change-log entry `top`, by reading every active memory of `collection`;
    None when the ids do not suit an array indexed by id (`keyword_repo.dense_ids`: negative, or
    in the billions)."""
    low, high, count = conn.execute("SELECT min(id), max(id), count(*) FROM memories").fetchone()
    if not dense_ids(low, high, count):
        return None
    size = (high or 0) + 1
    # Every id without an index entry is allowed: a row inserted there by hand is logged by no trigger.
    passing = np.ones(size, dtype=np.bool_)
    robot = np.full(size, ANY_ROBOT, dtype=np.int32)
    ranking = np.full((size, 3), np.nan)
    indexed = np.fromiter((r[0] for r in conn.execute("SELECT id FROM memories_fts_docsize")), dtype=np.int64)
    passing[indexed[(indexed >= 0) & (indexed < size)]] = False
    robots: dict[str, int] = {}
    where, params = _where(collection, condition)
    for mid, who, *numbers in conn.execute(f"SELECT {_COLUMNS} FROM memories m WHERE {where}", params):  # noqa: S608
        passing[mid] = True
        robot[mid] = robots.setdefault(who, len(robots))
        ranking[mid] = numbers
    return Mask(top, passing, robot, robots, ranking)


def _patched(conn: sqlite3.Connection, held: Mask, top: int, collection: str, condition: Condition) -> Mask | None:
    """`held` brought to change-log entry `top` (this snapshot's last, newer than the mask's), or
    None when it cannot be: the log was trimmed past the mask's place or records a rebuilt index,
    or too many memories changed."""
    if top == held.seq:
        return held
    news = logged_since(conn, held.seq)
    if not news:
        return None
    if any(doc is None for _, doc in news):  # the whole index was rebuilt
        return None
    docs = sorted({doc for _, doc in news})
    if len(docs) > max(MAX_PATCH, held.passing.size // 16) or not dense_ids(docs[0], docs[-1], held.passing.size):
        return None
    size = max(held.passing.size, docs[-1] + 1)
    passing = np.ones(size, dtype=np.bool_)  # ids past the old end: unknown until read
    passing[: held.passing.size] = held.passing
    robot = np.full(size, ANY_ROBOT, dtype=np.int32)
    robot[: held.robot.size] = held.robot
    ranking = np.full((size, 3), np.nan)
    ranking[: held.ranking.shape[0]] = held.ranking
    robots = dict(held.robots)
    ids = json.dumps(docs)  # one JSON parameter: no limit on how many
    changed = np.asarray(docs, dtype=np.int64)
    passing[changed] = True  # without an index entry now: unknown
    robot[changed] = ANY_ROBOT
    ranking[changed] = np.nan
    indexed = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories_fts_docsize WHERE id IN (SELECT value FROM json_each(?))", (ids,)
        )
    ]
    if indexed:
        passing[np.asarray(indexed, dtype=np.int64)] = False
    where, params = _where(collection, condition)
    for mid, who, *numbers in conn.execute(
        f"SELECT {_COLUMNS} FROM memories m WHERE m.id IN (SELECT value FROM json_each(?)) AND {where}",  # noqa: S608
        [ids, *params],
    ):
        passing[mid] = True
        robot[mid] = robots.setdefault(who, len(robots))
        ranking[mid] = numbers
    return Mask(news[-1][0], passing, robot, robots, ranking)
