"""A posting cache on PostgreSQL: a domain's postings table held in memory as a
`search.postings.PostingIndex`, one per replica, kept exact for each reader's snapshot by the
change feed a trigger on the domain's rows writes (`storage.postgres.changes`). It knows no
domain: a domain names its rows, postings and feed (`Source`). The keeping-current half is
`FeedMirror`, which other mirrors of a domain's rows share (the memories' ranking numbers).

Invariants:

- **A mirror of the postings.** The cache holds one entry per row of `Source.rows` (every row
  the domain's bm25 counts), keyed by its id as text, with one instance (column +
  `Source.col_offset`, position, term) per position of its postings rows. It is used only while
  every row's ``doclen`` is its number of instances (checked for every entry it reads): then its
  row and token counts are the SQL path's (``count(*)``, ``sum(doclen)``) and every score is the
  double the domain's SQL path computes from the same postings.
- **Exact for the caller's snapshot, or silent.** The domain's trigger records a row's id in
  the feed in the writing transaction for every insert, delete and update of its postings,
  whichever code or replica writes. Before it answers, the cache reads the entries its cursor
  has not been returned, in the caller's ``REPEATABLE READ`` snapshot (`ChangeFeed.since`),
  reads those rows again in that snapshot and moves its cursor there. A snapshot that does not
  include the cursor's (older, or concurrent with it) answers None, the cache unmoved: the
  caller ranks in SQL. A feed pruned past the cursor (`Reload`), or more changes at once than
  patching is worth (an import, a reindex), and everything is read again in the caller's
  snapshot. Correctness never depends on ``NOTIFY``.
- Anything that goes wrong in Python inside it empties it (the caller ranks in SQL); a database
  error propagates as any read's does (the transaction is aborted).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg

from robot_mcp_memory import logs
from robot_mcp_memory.search.postings import PostingIndex, Scored, TooLarge
from robot_mcp_memory.storage.postgres import Connection
from robot_mcp_memory.storage.postgres.changes import ChangeFeed, Cursor, Reload

_log = logs.get("robot_mcp_memory.search.postgres.postings")

IndexT = TypeVar("IndexT")
FoundT = TypeVar("FoundT")


@dataclass(frozen=True)
class Source:
    """Where a domain's postings live. `rows` selects (id, owner, doclen) of every row the
    domain's bm25 counts and `postings` (id, term, column, how many positions, the positions
    as text separated by spaces) of every postings row; `row_id` and `posting_id` name the id
    columns a patch filters on, `id_type` their SQL type. A postings column c is bm25's column
    c + `col_offset` of `weights`."""

    feed: ChangeFeed
    rows: str
    postings: str
    row_id: str
    posting_id: str
    id_type: str
    col_offset: int
    weights: tuple[float, ...]


@dataclass(frozen=True)
class Entries:
    """Rows as `PostingIndex.put_runs` takes them: (id, owner) of each, and a run per postings
    row (the row's place in `entries`, term, bm25 column, how many positions), the positions one
    run after another in `offsets`."""

    entries: list[tuple[str, str]]
    entry: list[int]
    tokens: list[str]
    cols: list[int]
    counts: list[int]
    offsets: npt.NDArray[np.int64]

    def put(self, index: PostingIndex) -> None:
        index.put_runs(self.entries, self.entry, self.tokens, self.cols, self.counts, self.offsets)


def read_entries(conn: Connection, source: Source, ids: Sequence[str] | None) -> Entries | None:
    """The rows `ids` that exist (every row for None) with their postings, in the caller's
    snapshot; None when one's ``doclen`` is not its number of positions (the SQL path would
    count another length: the cache does not mirror it)."""
    if ids is None:
        rows = conn.execute(source.rows).fetchall()
        runs = conn.execute(source.postings).fetchall()
    else:
        wanted = (list(ids),)
        rows = conn.execute(f"{source.rows} WHERE {source.row_id} = ANY(%s::{source.id_type}[])", wanted).fetchall()
        runs = conn.execute(
            f"{source.postings} WHERE {source.posting_id} = ANY(%s::{source.id_type}[])", wanted
        ).fetchall()
    place = {str(key): n for n, (key, _, _) in enumerate(rows)}
    try:
        entry = [place[str(key)] for key, _, _, _, _ in runs]
    except KeyError:
        return None  # postings of no row (a foreign key prevents it)
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
        [(str(key), str(owner)) for key, owner, _ in rows],
        entry,
        [str(term) for _, term, _, _, _ in runs],
        [int(col) + source.col_offset for _, _, col, _, _ in runs],
        counts,
        offsets,
    )


def id_array(ids: Iterable[int | str]) -> str:
    """`ids` as one PostgreSQL array text (``{1,2,3}``) for a ``%s::bigint[]`` parameter: the
    driver dumps a list by walking it in Python, which costs more for thousands of ids."""
    return "{" + ",".join(map(str, ids)) + "}"


class PruneClock:
    """When a replica's next write also prunes a feed: at most once every `every` seconds (the
    interval read at each call). Thread-safe: one clock may serve several adapters of a store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = time.monotonic()

    def due(self, every: float) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._at < every:
                return False
            self._at = now
            return True


class FeedMirror(Generic[IndexT, FoundT]):
    """An index of a domain's rows held in memory by one replica (`I`), kept exact for each
    reader's snapshot from `feed` as the module docstring says; a subclass says how rows are
    read (`_read`: `F` for some ids, or all of them; None when they cannot be mirrored) and
    built into or patched onto the index. Thread-safe: one caller at a time brings it up to
    date and reads it; while one reads everything again, the others are answered None (they
    rank in SQL) rather than wait."""

    def __init__(self, feed: ChangeFeed, *, max_batch: int = 256) -> None:
        self.feed = feed
        #: More changed rows at once than this, or than 1/16 of them if that is more, and
        #: everything is read again instead of patched.
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._index: IndexT | None = None
        self._cursor: Cursor | None = None  # the snapshot the index describes
        #: The snapshot in which the mirror was found broken (None: it was not).
        self._broken: Cursor | None = None
        self._filling = False
        self.loads = 0  # how many times everything was read
        self.patched = 0  # rows read again from the feed since

    # ------------------------------------------------------------------ a domain's part
    def _read(self, conn: Connection, ids: Sequence[str] | None) -> FoundT | None:
        raise NotImplementedError

    def _build(self, found: FoundT) -> IndexT:
        raise NotImplementedError

    def _patch(self, index: IndexT, changed: Sequence[str], found: FoundT) -> None:
        """`index` with the rows `changed` as `found` holds them (those it lacks are gone)."""
        raise NotImplementedError

    def _size(self, index: IndexT) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------ reading
    @contextlib.contextmanager
    def current(self, conn: Connection) -> Iterator[IndexT | None]:
        """The index as `conn`'s open read transaction sees the store, for the block's length
        (the lock held); None when it cannot answer for that snapshot. Anything that goes
        wrong in Python inside empties it, and the block is answered None."""
        if self._filling:
            yield None
            return
        with self._lock:
            index: IndexT | None = None
            with self._guarded():
                index = self._index if self._sync(conn) else None
            yield index

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except (TooLarge, MemoryError) as exc:
            _log.warning("posting_cache.unavailable", feed=self.feed.component, error=type(exc).__name__)
            self._index, self._cursor = None, None
        except Exception as exc:
            self._index, self._cursor = None, None
            if isinstance(exc, psycopg.Error):
                raise  # the transaction is aborted: the read fails as any read would
            _log.warning(
                "posting_cache.unavailable",
                feed=self.feed.component,
                error=type(exc).__name__,
                detail=str(exc).splitlines()[:1],
            )
        except BaseException:
            self._index, self._cursor = None, None
            raise

    # ------------------------------------------------------------------ keeping it current
    def _sync(self, conn: Connection) -> bool:
        """Bring the index to `conn`'s snapshot; False when it cannot answer for it."""
        if self._index is None or self._cursor is None:
            if self._broken is not None:
                got = self.feed.since(self._broken, conn)
                if not isinstance(got, Reload) and not got.entries:
                    return False  # nothing written since the mirror was found broken
            return self._load(conn)
        got = self.feed.since(self._cursor, conn)
        if isinstance(got, Reload):
            return self._load(conn)
        if not got.cursor.includes(self._cursor):
            return False  # a snapshot older than the index's (or concurrent with it)
        changed = sorted({entry.ref for entry in got.entries})
        if changed:
            if len(changed) > max(self.max_batch, self._size(self._index) // 16):
                return self._load(conn)
            found = self._read(conn, changed)
            if found is None:
                return self._broken_at(got.cursor)
            self._patch(self._index, changed, found)
            self.patched += len(changed)
        self._cursor = got.cursor
        return True

    def _load(self, conn: Connection) -> bool:
        """Everything again, in `conn`'s snapshot."""
        self._index, self._cursor = None, None
        self._filling = True
        try:
            cursor = self.feed.start(conn)
            found = self._read(conn, None)
            if found is None:
                return self._broken_at(cursor)
            index = self._build(found)
            self.loads += 1
            self._index, self._cursor, self._broken = index, cursor, None
            return True
        finally:
            self._filling = False

    def _broken_at(self, cursor: Cursor) -> bool:
        # A row the domain's SQL path counts otherwise than the mirror would (written by hand;
        # the health check reports it): the SQL path answers until the next change.
        _log.warning("posting_cache.mirror_broken", feed=self.feed.component)
        self._index, self._cursor, self._broken = None, None, cursor
        return False


class PostingCache(FeedMirror[PostingIndex, Entries]):
    """`source`'s postings in memory for one replica's readers (see the module docstring)."""

    def __init__(self, source: Source, *, max_batch: int = 256) -> None:
        super().__init__(source.feed, max_batch=max_batch)
        self.source = source

    def score(self, conn: Connection, phrases: Sequence[Sequence[str]]) -> Scored | None:
        """Every row holding one of `phrases` (each a phrase's tokens, OR-ed) with its
        ``-bm25()``, as `conn`'s open read transaction sees the store; None when the cache cannot
        answer for that snapshot (the caller ranks in SQL)."""
        with self.current(conn) as index:
            return None if index is None else index.score(phrases)

    def _read(self, conn: Connection, ids: Sequence[str] | None) -> Entries | None:
        return read_entries(conn, self.source, ids)

    def _build(self, found: Entries) -> PostingIndex:
        index = PostingIndex(self.source.weights)
        found.put(index)
        return index

    def _patch(self, index: PostingIndex, changed: Sequence[str], found: Entries) -> None:
        index.remove(set(changed) - {key for key, _ in found.entries})
        found.put(index)

    def _size(self, index: PostingIndex) -> int:
        return len(index)


__all__ = ["Entries", "FeedMirror", "PostingCache", "PruneClock", "Source", "id_array", "read_entries"]
