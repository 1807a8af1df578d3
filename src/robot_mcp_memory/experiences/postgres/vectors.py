"""PostgresMemoryVectors: the `MemoryVectors` seam (hybrid recall, semantic dedup) on PostgreSQL.

A memory's vector (its content's embedding, as on SQLite) is a row of the shared ``vectors``
table in domain ``'memory'`` (ref = the memory id as text, partition = its robot) — the table,
change feed, replica cache and backfill of `search.postgres.vectorstore`, as processes use them,
and as SQLite keeps memory vectors in its own ``vectors`` table beside processes'. Sharing them
(rather than the same pattern on a table of our own) keeps one feed lock, one cache and one
backfill to reason about; `tables` step 3 moved the former ``memory_vectors`` rows in.

Invariants:

- **Every vector committed before the snapshot.** `nearest` and `nearest_any` rank with this
  replica's `VectorCache` index, brought up to the caller's REPEATABLE READ snapshot from the feed
  (only the rows whose ``seq`` is above what it holds): a write on any replica is in the next
  recall on every replica. It may also hold a few vectors committed after that snapshot (see
  `vectorstore`): recall checks every id the vectors name in its own snapshot (`ids_passing`), so
  such an id is dropped there.
- `nearest` ranks **only among the ids it is given** (those that passed every filter, read in
  the same snapshot); `nearest_any` among the memories of some robots (and those a mask allows)
  before any other filter — recall checks its answer in the index. Superseded memories keep their
  vectors, as on SQLite; recall's check leaves them out.
- **A forgotten memory never comes back.** Forgetting deletes its vector in the forget's own
  transaction (a tombstone the feed carries to every replica); an edit writes the new vector, or
  deletes the stale one when the embedder gave none. Every such write takes the feed's lock, so
  the backfill never stores a vector for text a memory no longer has.
- **Backfill.** Active memories lacking a vector of the current model (learned while the embedder
  was off or down, or copied in by `operations.copy` or an archive load) are embedded in the
  background (`vectorstore.backfiller`), kicked when the embedder becomes ready and when a memory
  is written without a vector; ``reembed`` runs it in the foreground.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

from robot_mcp_memory.experiences.embedding import EmbedsWith
from robot_mcp_memory.experiences.ports import Embedded, Snapshot, Transaction
from robot_mcp_memory.experiences.postgres.repository import connection_of
from robot_mcp_memory.search import fusion
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.search.postgres.vectorstore import Progress, VectorCache
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.vectors import ExactIndex, KeyFilter
from robot_mcp_memory.storage.postgres import Connection, PostgresStore

DOMAIN = "memory"


# ---------------------------------------------------------------------------- SQL (connection first)
def _missing(conn: Connection, model_id: str, after: str, limit: int) -> list[vectorstore.Row]:
    """Active memories past id `after` with no vector of `model_id`, in id order (the backfill
    resumes from the last id it read, compared as a number)."""
    rows = conn.execute(
        "SELECT m.id, m.robot, m.content FROM memories m LEFT JOIN vectors v ON v.domain = 'memory' "
        "AND v.ref = m.id::text AND v.model_id = %s AND v.vec IS NOT NULL "
        "WHERE v.ref IS NULL AND m.status = 'active' AND m.id > %s ORDER BY m.id LIMIT %s",
        (model_id, int(after or 0), limit),
    )
    return [(str(mid), robot, content) for mid, robot, content in rows]


def _count_missing(conn: Connection, model_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM memories m LEFT JOIN vectors v ON v.domain = 'memory' "
        "AND v.ref = m.id::text AND v.model_id = %s AND v.vec IS NOT NULL "
        "WHERE v.ref IS NULL AND m.status = 'active'",
        (model_id,),
    ).fetchone()
    return int(row[0]) if row else 0


def _current(conn: Connection, ref: str) -> vectorstore.Row | None:
    row = conn.execute(
        "SELECT robot, content FROM memories WHERE id = %s AND status = 'active'", (int(ref),)
    ).fetchone()
    return None if row is None else (ref, row[0], row[1])


#: How the backfill (`vectorstore.fill_missing`) reads memories.
SOURCE = vectorstore.Source(DOMAIN, _missing, _count_missing, _current)


def drop(conn: Connection, memory_ids: Collection[int]) -> int:
    """In the caller's write transaction: the vectors of `memory_ids` removed (tombstones, under the
    feed lock, so every replica's cache drops them); how many there were. For writes that replace
    memories wholesale (an archive load): the backfill embeds their new text."""
    if not memory_ids:
        return 0
    seq = vectorstore.lock(conn, DOMAIN)
    return conn.execute(
        "UPDATE vectors SET vec = NULL, model_id = '', dim = 0, seq = %s "
        "WHERE domain = 'memory' AND ref = ANY(%s::text[]) AND vec IS NOT NULL",
        (seq, [str(m) for m in sorted(memory_ids)]),
    ).rowcount


def refiled(conn: Connection) -> int:
    """In the caller's write transaction, after memories changed robot (a hand-over): every memory
    vector filed under its memory's robot again, under the feed lock (so every replica's cache
    re-files it, and `nearest_any`'s robots find it); how many moved."""
    seq = vectorstore.lock(conn, DOMAIN)
    return conn.execute(
        "UPDATE vectors v SET part = m.robot, seq = %s FROM memories m "
        "WHERE v.domain = 'memory' AND v.ref = m.id::text AND v.vec IS NOT NULL AND v.part <> m.robot",
        (seq,),
    ).rowcount


# ---------------------------------------------------------------------------- the seam's implementation
class PostgresMemoryVectors(EmbedsWith):
    """Hybrid recall and semantic dedup for experiences on PostgreSQL (implements `MemoryVectors`).
    One per process: it holds this replica's cache and background backfill."""

    def __init__(
        self,
        db: PostgresStore,
        embedder: ResilientEmbedder | None,
        weights: tuple[float, float] = (1.0, 1.0),
        k: int = fusion.DEFAULT_K,
    ) -> None:
        vectorstore.migrate(db)  # a no-op once `PostgresMemories` (or processes) migrated it
        self.db = db
        self.embedder = embedder
        self.weights = weights  # keyword, vector
        self.k = k
        self.cache = VectorCache()
        self.backfiller = vectorstore.backfiller(db, lambda: self.embedder, self.cache, SOURCE)

    # ------------------------------------------------------------------ the seam
    def _index(self, at: Snapshot, query: Embedded) -> ExactIndex | None:
        """The cached index of the query's model up to `at`, or None when `at` holds no vector of
        it (search then runs keyword-only and says so) or it has another dimension."""
        index = self.cache.index(connection_of(at), DOMAIN, query[0])
        return None if index is None or index.dim != query[1].shape[0] else index

    def nearest(self, at: Snapshot, query: Embedded, k: int, within: Sequence[int]) -> list[tuple[int, float]] | None:
        index = self._index(at, query)
        if index is None:
            return None
        return [(int(ref), cos) for ref, cos in index.search_among(query[1], k, map(str, within))]

    def nearest_any(
        self, at: Snapshot, query: Embedded, k: int, robots: Collection[str] | None, ids: KeyFilter | None = None
    ) -> list[tuple[int, float]] | None:
        index = self._index(at, query)
        if index is None:
            return None
        return [(int(ref), cos) for ref, cos in index.search(query[1], k, robots, ids)]

    def write(self, at: Transaction, memory_id: int, embedded: Embedded | None) -> None:
        """In the memory's write transaction: its new vector, or none (an old one would be stale).
        Either way under the feed lock (see the module docstring)."""
        conn = connection_of(at)
        if embedded is None:
            vectorstore.delete(conn, DOMAIN, str(memory_id))
            return
        row = conn.execute("SELECT robot FROM memories WHERE id = %s", (memory_id,)).fetchone()
        vectorstore.upsert(conn, DOMAIN, str(memory_id), row[0] if row else "", embedded[0], embedded[1])

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None:
        """After the commit: nothing to patch (the next recall reads the feed); a memory stored
        without a vector while an embedder is configured gets one from the backfill."""
        if any(e is None for _m, _r, e in changes) and self.embedder is not None and self.embedder.mode != "off":
            self.kick_backfill()

    # ------------------------------------------------------------------ backfill
    def kick_backfill(self) -> None:
        """Fill missing vectors in the background (single-flight); safe to call from any thread."""
        if self.embedder is not None:
            self.backfiller.kick()

    def backfill_blocking(
        self, progress: Progress | None = None, *, stop: threading.Event | None = None, force: bool = False
    ) -> int:
        """Embed every active memory lacking a vector of the current model (all with `force`)."""
        return vectorstore.fill_missing(self.db, self.embedder, SOURCE, progress, stop=stop, force=force)

    def close(self) -> None:
        self.backfiller.stop()


__all__ = ["DOMAIN", "SOURCE", "PostgresMemoryVectors", "drop", "refiled"]
