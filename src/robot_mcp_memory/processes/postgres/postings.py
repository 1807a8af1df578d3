"""The posting cache of the PostgreSQL processes: `process_postings` in memory (`search.postings`),
one per replica (each `PostgresProcesses`), so a find's keyword leg is a few array passes over its
phrases' lists instead of reading the postings of every match (`store._Scored`).

Invariants:

- **A mirror of the postings.** The cache holds one entry per process, keyed by id, owned by its
  robot, with one instance (column + 1, position, term) per position of its `process_postings`
  rows (`PostingIndex.put_runs`): the columns are numbered as `ranking.BM25_WEIGHTS` counts them
  (the id column first). It is used only while every process's ``doclen`` is its number of
  instances (checked for every entry it reads): then its row and token counts are the SQL path's
  (``count(*)``, ``sum(doclen)``) and every score is the double `store._Scored` computes from the
  same postings (tests/processes/postgres/test_postings.py compares them through random writes).
- **Exact for the caller's snapshot, or silent.** A trigger on `processes` (`FEED_TRIGGER`,
  migration 2) records the process's id in the change feed (`storage.postgres.changes`, component
  `FEED`) in the writing transaction for every insert, delete and update that sets its id, robot,
  text, lexemes or length — whichever code or replica writes (a save, a delete, a restore or copy,
  a reindex, a hand-over of ``unknown``). Before it answers, the cache reads the entries its
  cursor has not been returned, in the caller's ``REPEATABLE READ`` snapshot (`ChangeFeed.since`),
  reads those processes again in that snapshot and moves its cursor there. A snapshot that does
  not include the cursor's (older, or concurrent with it) answers None, the cache unmoved: the
  caller ranks in SQL. A feed pruned past the cursor (`Reload`), or more changes at once than
  patching is worth (an import, a reindex), and everything is read again in the caller's snapshot.
  Correctness never depends on ``NOTIFY`` (the trigger sends none).
- **Outcomes do not touch it.** Counters are not in the cache and the trigger does not fire on
  them: reliability is read in SQL for the candidates the ranking needs.
- Anything that goes wrong in Python inside it empties it (the caller ranks in SQL); a database
  error propagates as any read's does (the transaction is aborted).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt
import psycopg

from robot_mcp_memory import logs
from robot_mcp_memory.processes.ranking import BM25_WEIGHTS
from robot_mcp_memory.search.postings import PostingIndex, Scored, TooLarge
from robot_mcp_memory.storage.postgres import Connection
from robot_mcp_memory.storage.postgres.changes import ChangeFeed, Cursor, Reload, create_record_trigger

_log = logs.get("robot_mcp_memory.processes.postgres.postings")

#: The processes' entries in the change feed (one per changed process; the op is a hint only).
FEED = ChangeFeed("processes")
#: The name of the trigger (and of its function) that records them.
FEED_TRIGGER = "processes_change_feed"
#: Every column of `processes` whose update changes what the cache holds of a process. `_index`
#: always sets ``lexemes`` and ``doclen`` after it writes a process's postings, so a rewrite of
#: the postings (a save, a reindex) is recorded even when the text stays; the counters are not here.
FEED_COLUMNS = ("id", "robot", "title", "task_pattern", "tags", "body", "lexemes", "doclen")
#: Entries older than this are pruned (`prune_feed`); a cache further behind reads everything again.
FEED_HORIZON = timedelta(hours=1)
#: A replica's writes prune the feed at most this often.
PRUNE_EVERY_S = 60.0

_ROWS = "SELECT id, robot, doclen FROM processes"
_POSTINGS = (
    "SELECT process_id, term, col, cardinality(positions), array_to_string(positions, ' ') FROM process_postings"
)


def create_feed_trigger(conn: Connection) -> None:
    """The trigger that records every change of a process's indexed state (a migration step)."""
    create_record_trigger(conn, FEED.component, "processes", "id", FEED_COLUMNS, name=FEED_TRIGGER)


def prune_feed(conn: Connection) -> None:
    """Drop the processes' feed entries older than `FEED_HORIZON` (in a write transaction)."""
    FEED.prune(conn, horizon=FEED_HORIZON)


@dataclass(frozen=True)
class Entries:
    """Processes as `PostingIndex.put_runs` takes them: (id, robot) of each, and a run per
    postings row (the process's place in `entries`, term, column + 1, how many positions),
    the positions one run after another in `offsets`."""

    entries: list[tuple[str, str]]
    entry: list[int]
    tokens: list[str]
    cols: list[int]
    counts: list[int]
    offsets: npt.NDArray[np.int64]

    def put(self, index: PostingIndex) -> None:
        index.put_runs(self.entries, self.entry, self.tokens, self.cols, self.counts, self.offsets)


def read_entries(conn: Connection, ids: Sequence[str] | None) -> Entries | None:
    """The processes `ids` that exist (every process for None) with their postings, in the
    caller's snapshot; None when one's ``doclen`` is not its number of positions (the SQL path
    would count another length: the cache does not mirror it)."""
    if ids is None:
        rows = conn.execute(_ROWS).fetchall()
        runs = conn.execute(_POSTINGS).fetchall()
    else:
        rows = conn.execute(f"{_ROWS} WHERE id = ANY(%s)", (list(ids),)).fetchall()
        runs = conn.execute(f"{_POSTINGS} WHERE process_id = ANY(%s)", (list(ids),)).fetchall()
    place = {pid: n for n, (pid, _, _) in enumerate(rows)}
    try:
        entry = [place[pid] for pid, _, _, _, _ in runs]
    except KeyError:
        return None  # postings of no process (a foreign key prevents it)
    counts = [int(n) for _, _, _, n, _ in runs]
    # The positions as one text parsed at once: the driver's array parsing costs more.
    text = " ".join([t for _, _, _, _, t in runs])
    offsets = np.fromstring(text, dtype=np.int64, sep=" ") if text.strip() else np.empty(0, np.int64)
    if len(offsets) != sum(counts):
        return None
    lengths = np.bincount(np.repeat(np.array(entry, np.int64), counts), minlength=len(rows)).tolist()
    if any(length != int(doclen) for length, (_, _, doclen) in zip(lengths, rows, strict=True)):
        return None
    return Entries(
        [(str(pid), str(robot)) for pid, robot, _ in rows],
        entry,
        [str(term) for _, term, _, _, _ in runs],
        [int(col) + 1 for _, _, col, _, _ in runs],  # bm25 counts the id column first
        counts,
        offsets,
    )


class PostingCache:
    """`process_postings` in memory for one replica's readers (see the module docstring).
    Thread-safe: one caller at a time brings it up to date and reads it; while one reads
    everything again, the others rank in SQL rather than wait."""

    def __init__(self, *, max_batch: int = 256) -> None:
        #: More changed processes at once than this, or than 1/16 of them if that is more, and
        #: everything is read again instead of patched.
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._index: PostingIndex | None = None
        self._cursor: Cursor | None = None  # the snapshot the index describes
        #: The snapshot in which the mirror was found broken (None: it was not).
        self._broken: Cursor | None = None
        self._filling = False
        self.loads = 0  # how many times everything was read
        self.patched = 0  # processes read again from the feed since

    def score(self, conn: Connection, phrases: Sequence[Sequence[str]]) -> Scored | None:
        """Every process holding one of `phrases` (each a phrase's tokens, OR-ed) with its
        ``-bm25()``, as `conn`'s open read transaction sees the store; None when the cache cannot
        answer for that snapshot (the caller ranks in SQL)."""
        if self._filling:
            return None
        with self._lock, self._guarded():
            if not self._sync(conn):
                return None
            assert self._index is not None
            return self._index.score(phrases)
        return None  # something went wrong inside (`_guarded`): SQL ranks

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except (TooLarge, MemoryError) as exc:
            _log.warning("posting_cache.unavailable", error=type(exc).__name__)
            self._index, self._cursor = None, None
        except Exception as exc:
            self._index, self._cursor = None, None
            if isinstance(exc, psycopg.Error):
                raise  # the transaction is aborted: the read fails as any read would
            _log.warning("posting_cache.unavailable", error=type(exc).__name__, detail=str(exc).splitlines()[:1])
        except BaseException:
            self._index, self._cursor = None, None
            raise

    # ------------------------------------------------------------------ keeping it current
    def _sync(self, conn: Connection) -> bool:
        """Bring the index to `conn`'s snapshot; False when it cannot answer for it."""
        if self._index is None or self._cursor is None:
            if self._broken is not None:
                got = FEED.since(self._broken, conn)
                if not isinstance(got, Reload) and not got.entries:
                    return False  # nothing written since the mirror was found broken
            return self._load(conn)
        got = FEED.since(self._cursor, conn)
        if isinstance(got, Reload):
            return self._load(conn)
        if not got.cursor.includes(self._cursor):
            return False  # a snapshot older than the index's (or concurrent with it)
        changed = sorted({entry.ref for entry in got.entries})
        if changed:
            if len(changed) > max(self.max_batch, len(self._index) // 16):
                return self._load(conn)
            found = read_entries(conn, changed)
            if found is None:
                return self._broken_at(got.cursor)
            self._index.remove(set(changed) - {key for key, _ in found.entries})
            found.put(self._index)
            self.patched += len(changed)
        self._cursor = got.cursor
        return True

    def _load(self, conn: Connection) -> bool:
        """Everything again, in `conn`'s snapshot."""
        self._index, self._cursor = None, None
        self._filling = True
        try:
            cursor = FEED.start(conn)
            found = read_entries(conn, None)
            if found is None:
                return self._broken_at(cursor)
            index = PostingIndex(BM25_WEIGHTS)
            found.put(index)
            self.loads += 1
            self._index, self._cursor, self._broken = index, cursor, None
            return True
        finally:
            self._filling = False

    def _broken_at(self, cursor: Cursor) -> bool:
        # A process whose length disagrees with its postings (written by hand; the health check
        # reports it): the SQL path's counts are not the cache's until the next change.
        _log.warning("posting_cache.mirror_broken")
        self._index, self._cursor, self._broken = None, None, cursor
        return False


__all__ = [
    "FEED",
    "FEED_COLUMNS",
    "FEED_HORIZON",
    "FEED_TRIGGER",
    "PRUNE_EVERY_S",
    "Entries",
    "PostingCache",
    "create_feed_trigger",
    "prune_feed",
    "read_entries",
]
