"""Each replica's mirror of the memories' ranking numbers on PostgreSQL: what a keyword recall
reads of every memory its words match (collection, status, robot, session, confidence, age,
source weight), held in arrays so that a recall filters and scores its matches without reading
their rows (`ranking._passing`'s SQL, whose cost grows with the matches).

Invariants:

- **A mirror of the rows.** One slot per memory, keyed by id; a memory written again keeps its
  slot (the numbers are fixed-size), a deleted one's slot is dead. Kept exact for the caller's
  snapshot from the memories' change feed (`postings.FEED`), whose trigger fires on every
  column held here, as `search.postgres.postings.FeedMirror` says; None when it cannot answer.
- **The same doubles.** A recall ranked from it returns the rows, order and numbers the SQL
  path returns: the filters are equalities on the same values, the decayed confidence is
  `ranking._decayed` of each match (Python's ``math.pow``, as the SQL path computes it), and
  the score is the same products in the same order (numpy's elementwise IEEE operations).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robot_mcp_memory.experiences.postgres.postings import FEED
from robot_mcp_memory.search.postgres.postings import FeedMirror, id_array
from robot_mcp_memory.storage.postgres import Connection

_ROWS = (
    "SELECT id, robot, collection, status = 'active', session_id, confidence, updated_at, source_weight FROM memories"
)
_NO_SESSION = -1


@dataclass(frozen=True)
class Rows:
    """Some memories' numbers, one list entry per memory."""

    ids: list[int]
    robots: list[str]
    collections: list[str]
    active: list[bool]
    sessions: list[str | None]
    confidence: list[float]
    updated_at: list[float]
    source_weight: list[float]


def read_rows(conn: Connection, ids: Sequence[str] | None) -> Rows:
    """The memories `ids` that exist (every memory for None), in the caller's snapshot."""
    if ids is None:
        got = conn.execute(_ROWS).fetchall()
    else:
        got = conn.execute(f"{_ROWS} WHERE id = ANY(%s::bigint[])", (id_array(ids),)).fetchall()
    cols = list(zip(*got, strict=True)) if got else [()] * 8
    return Rows(
        [int(i) for i in cols[0]],
        [str(r) for r in cols[1]],
        [str(c) for c in cols[2]],
        [bool(a) for a in cols[3]],
        [None if s is None else str(s) for s in cols[4]],
        [float(x) for x in cols[5]],
        [float(x) for x in cols[6]],
        [float(x) for x in cols[7]],
    )


class Numbers:
    """The arrays (see the module docstring); not thread-safe (`MemoryNumbers` locks)."""

    def __init__(self) -> None:
        self.slot_of: dict[int, int] = {}
        self.alive = np.zeros(0, np.bool_)
        self.active = np.zeros(0, np.bool_)
        self.robot = np.zeros(0, np.int32)
        self.collection = np.zeros(0, np.int32)
        self.session = np.zeros(0, np.int32)
        self.confidence = np.zeros(0, np.float64)
        self.updated_at = np.zeros(0, np.float64)
        self.source_weight = np.zeros(0, np.float64)
        self.codes: dict[str, int] = {}  # robots, collections and sessions share one code book
        self._used = 0

    def __len__(self) -> int:
        return len(self.slot_of)

    def code(self, text: str) -> int | None:
        return self.codes.get(text)

    def _code(self, text: str) -> int:
        return self.codes.setdefault(text, len(self.codes))

    def _grow(self, size: int) -> None:
        if size <= len(self.alive):
            return
        new = max(size, 2 * len(self.alive), 64)
        for name in ("alive", "active", "robot", "collection", "session", "confidence", "updated_at", "source_weight"):
            old = getattr(self, name)
            grown = np.zeros(new, old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)

    def put(self, rows: Rows) -> None:
        slots = []
        for mid in rows.ids:
            slot = self.slot_of.get(mid)
            if slot is None:
                slot = self.slot_of[mid] = self._used
                self._used += 1
            slots.append(slot)
        self._grow(self._used)
        at = np.array(slots, np.int64)
        self.alive[at] = True
        self.active[at] = rows.active
        self.robot[at] = [self._code(r) for r in rows.robots]
        self.collection[at] = [self._code(c) for c in rows.collections]
        self.session[at] = [_NO_SESSION if s is None else self._code(s) for s in rows.sessions]
        self.confidence[at] = rows.confidence
        self.updated_at[at] = rows.updated_at
        self.source_weight[at] = rows.source_weight

    def remove(self, ids: Collection[int]) -> None:
        for mid in ids:
            slot = self.slot_of.pop(mid, None)
            if slot is not None:
                self.alive[slot] = False

    def slots(self, ids: Sequence[int]) -> npt.NDArray[np.int64]:
        """Each id's slot, -1 for an id it does not hold."""
        get = self.slot_of.get
        return np.fromiter((get(i, -1) for i in ids), np.int64, len(ids))


class MemoryNumbers(FeedMirror[Numbers, Rows]):
    """The memories' ranking numbers in memory for one replica's recalls."""

    def __init__(self, *, max_batch: int = 256) -> None:
        super().__init__(FEED, max_batch=max_batch)

    def _read(self, conn: Connection, ids: Sequence[str] | None) -> Rows:
        return read_rows(conn, ids)

    def _build(self, found: Rows) -> Numbers:
        index = Numbers()
        index.put(found)
        return index

    def _patch(self, index: Numbers, changed: Sequence[str], found: Rows) -> None:
        index.remove({int(c) for c in changed} - set(found.ids))
        index.put(found)

    def _size(self, index: Numbers) -> int:
        return len(index)


__all__ = ["MemoryNumbers", "Numbers", "Rows", "read_rows"]
