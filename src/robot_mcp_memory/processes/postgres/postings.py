"""The posting cache of the PostgreSQL processes: `process_postings` in memory, one per replica
(each `PostgresProcesses`), so a find's keyword leg is a few array passes over its phrases'
lists instead of reading the postings of every match (`store._Scored`). The cache itself is
`search.postgres.postings` (its invariants: a mirror of the postings, exact for the caller's
snapshot or silent); this module names the processes' rows, postings and feed.

- The columns are numbered as `ranking.BM25_WEIGHTS` counts them (the id column first), so
  every score is the double `store._Scored` computes from the same postings
  (tests/processes/postgres/test_postings.py compares them through random writes).
- A trigger on `processes` (`FEED_TRIGGER`, migration 2) records the process's id in the change
  feed (component `FEED`) in the writing transaction for every insert, delete and update that
  sets its id, robot, text, lexemes or length — whichever code or replica writes (a save, a
  delete, a restore or copy, a reindex, a hand-over of ``unknown``).
- **Outcomes do not touch it.** Counters are not in the cache and the trigger does not fire on
  them: reliability is read in SQL for the candidates the ranking needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from robot_mcp_memory.processes.ranking import BM25_WEIGHTS
from robot_mcp_memory.search.postgres.postings import Entries, Source
from robot_mcp_memory.search.postgres.postings import PostingCache as _PostingCache
from robot_mcp_memory.search.postgres.postings import read_entries as _read_entries
from robot_mcp_memory.storage.postgres import Connection
from robot_mcp_memory.storage.postgres.changes import ChangeFeed, create_record_trigger

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


SOURCE = Source(
    feed=FEED,
    rows=_ROWS,
    postings=_POSTINGS,
    row_id="id",
    posting_id="process_id",
    id_type="text",
    col_offset=1,  # bm25 counts the id column first
    weights=tuple(float(w) for w in BM25_WEIGHTS),
)


def read_entries(conn: Connection, ids: Sequence[str] | None) -> Entries | None:
    """`search.postgres.postings.read_entries` of the processes."""
    return _read_entries(conn, SOURCE, ids)


class PostingCache(_PostingCache):
    """`process_postings` in memory for one replica's finds."""

    def __init__(self, *, max_batch: int = 256) -> None:
        super().__init__(SOURCE, max_batch=max_batch)


__all__ = [
    "FEED",
    "FEED_COLUMNS",
    "FEED_HORIZON",
    "FEED_TRIGGER",
    "PRUNE_EVERY_S",
    "SOURCE",
    "Entries",
    "PostingCache",
    "create_feed_trigger",
    "prune_feed",
    "read_entries",
]
