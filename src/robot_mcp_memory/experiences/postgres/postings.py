"""The posting cache of the PostgreSQL memories: `memory_postings` in memory, one per replica
(each `PostgresMemories`), so a keyword recall's relevance is a few array passes over its
phrases' lists instead of reading the postings rows of every match (`keywords.relevance`'s SQL
path, whose cost grows with the store). The cache itself is `search.postgres.postings` (its
invariants: a mirror of the postings, exact for the caller's snapshot or silent); this module
names the memories' rows, postings and feed.

- Every memory is an entry, whatever its status, collection or robot: FTS5's idf and average
  length count them all, so the cache's row and token counts are ``count(*)`` and
  ``sum(doclen)`` of ``memories``, as the SQL path reads them. Owners are not kept (relevance
  is read for every match, and the recall filters them in SQL): each entry's owner is ``""``.
- A trigger on `memories` (`FEED_TRIGGER`, experience migration 4) records the memory's id in
  the change feed (component `FEED`) in the writing transaction for every insert, delete and
  update that sets its id or ``doclen`` — and `keywords.write_entry` sets ``doclen`` every time
  it writes a memory's postings, whichever code or replica writes (a learn, an update, an
  import, a copy) — or one of the ranking numbers `numbers` mirrors from the same feed (robot,
  collection, status, session, confidence, age, source weight). An access counter or a tag
  change touches neither, nor the feed.
"""

from __future__ import annotations

from datetime import timedelta

from robot_mcp_memory.experiences.indexing import BM25_WEIGHTS
from robot_mcp_memory.search.postgres.postings import PostingCache, Source
from robot_mcp_memory.storage.postgres import Connection
from robot_mcp_memory.storage.postgres.changes import ChangeFeed, create_record_trigger

#: The memories' entries in the change feed (one per changed memory; the op is a hint only).
FEED = ChangeFeed("memories")
#: The name of the trigger (and of its function) that records them.
FEED_TRIGGER = "memories_change_feed"
#: `doclen` for the postings (`keywords.write_entry` sets it whenever it writes them); the rest
#: for the ranking numbers' mirror (`numbers`).
FEED_COLUMNS = (
    "id",
    "doclen",
    "robot",
    "collection",
    "status",
    "session_id",
    "confidence",
    "updated_at",
    "source_weight",
)
#: Entries older than this are pruned (`prune_feed`); a cache further behind reads everything again.
FEED_HORIZON = timedelta(hours=1)
#: A replica's writes prune the feed at most this often.
PRUNE_EVERY_S = 60.0

SOURCE = Source(
    feed=FEED,
    rows="SELECT id, '', doclen FROM memories",
    postings=(
        "SELECT memory_id, term, col, cardinality(positions), array_to_string(positions, ' ') FROM memory_postings"
    ),
    row_id="id",
    posting_id="memory_id",
    id_type="bigint",
    col_offset=0,  # content, context text: bm25(memories_fts, 1.0, 0.4) has no id column
    weights=tuple(float(w) for w in BM25_WEIGHTS.split(",")),
)


def create_feed_trigger(conn: Connection) -> None:
    """The trigger that records every change of a memory's postings (a migration step)."""
    create_record_trigger(conn, FEED.component, "memories", "id", FEED_COLUMNS, name=FEED_TRIGGER)


def prune_feed(conn: Connection) -> None:
    """Drop the memories' feed entries older than `FEED_HORIZON` (in a write transaction)."""
    FEED.prune(conn, horizon=FEED_HORIZON)


def memory_postings(*, max_batch: int = 256) -> PostingCache:
    """A replica's cache of `memory_postings`."""
    return PostingCache(SOURCE, max_batch=max_batch)


__all__ = [
    "FEED",
    "FEED_COLUMNS",
    "FEED_HORIZON",
    "FEED_TRIGGER",
    "PRUNE_EVERY_S",
    "SOURCE",
    "create_feed_trigger",
    "memory_postings",
    "prune_feed",
]
