"""Memory vectors: the `MemoryVectors` seam of `ExperienceService`, over the shared machinery of
processes — the ``vectors`` table (domain ``'memory'``, ref = memory id), `VectorCache`, the
`Backfiller` with `vectorstore.fill_missing`, and the `ResilientEmbedder`.

What is embedded is a memory's content (an insight, a perception's description): what a recall
query is phrased like. The context is left to filters and keyword search (its text is in the FTS
index), as processes leave their step lists out of their vectors.

- `embed` runs before a write is queued (never on the writer thread); `write` stores the vector
  in the memory's own transaction — or deletes the old one when there is no new vector (stale),
  the backfill making it later; `written` patches the in-memory index after the commit.
- `nearest` ranks by cosine **only among the given ids** (those that passed every filter in SQL,
  read in the same snapshot), so a filter is never a post-filter over a global top n.
- Only active memories are searched, loaded and backfilled; forgetting a memory deletes its vector.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Sequence
from typing import Any

from robot_mcp_memory import logs
from robot_mcp_memory.experiences.embedding import EmbedsWith
from robot_mcp_memory.experiences.ports import Embedded, Snapshot, Transaction
from robot_mcp_memory.experiences.sqlite.repository import connection_of
from robot_mcp_memory.search import fusion
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.search.sqlite.vectorstore import Backfiller, Progress, VectorCache
from robot_mcp_memory.search.vectors import ExactIndex, KeyFilter
from robot_mcp_memory.storage.sqlite import SqliteStore

DOMAIN: vectorstore.Domain = "memory"

_log = logs.get("robot_mcp_memory.experiences.vectors")


# ---------------------------------------------------------------------------- SQL (connection first)
def _missing(conn: sqlite3.Connection, model_id: str, after: str, limit: int) -> list[vectorstore.Row]:
    rows = conn.execute(
        "SELECT m.id, m.robot, m.content FROM memories m "
        "LEFT JOIN vectors v ON v.domain = 'memory' AND v.ref = CAST(m.id AS TEXT) AND v.model_id = ? "
        "WHERE v.ref IS NULL AND m.status = 'active' AND m.id > ? ORDER BY m.id LIMIT ?",
        (model_id, int(after or 0), limit),
    )
    return [(str(mid), robot, content) for mid, robot, content in rows]


def _count_missing(conn: sqlite3.Connection, model_id: str) -> int:
    n: int = conn.execute(
        "SELECT count(*) FROM memories m LEFT JOIN vectors v "
        "ON v.domain = 'memory' AND v.ref = CAST(m.id AS TEXT) AND v.model_id = ? "
        "WHERE v.ref IS NULL AND m.status = 'active'",
        (model_id,),
    ).fetchone()[0]
    return n


def _current(conn: sqlite3.Connection, ref: str) -> vectorstore.Row | None:
    row = conn.execute("SELECT robot, content FROM memories WHERE id = ? AND status = 'active'", (int(ref),)).fetchone()
    return None if row is None else (ref, row[0], row[1])


SOURCE = vectorstore.Source(DOMAIN, _missing, _count_missing, _current)


# ---------------------------------------------------------------------------- the seam's implementation
class MemoryVectorIndex(EmbedsWith):
    """Hybrid recall and semantic dedup for experiences (implements `service.MemoryVectors`)."""

    def __init__(
        self,
        db: SqliteStore,
        embedder: ResilientEmbedder | None,
        weights: tuple[float, float] = (1.0, 1.0),
        k: int = fusion.DEFAULT_K,
        *,
        matrix: bool = True,
    ) -> None:
        """`matrix`: hold each model's vectors in memory (`VectorCache`); off, every search reads
        them from the table again (the plain path, which gives the same answers)."""
        self.db = db
        self.matrix = matrix
        self.embedder = embedder
        self.weights = weights  # keyword, vector
        self.k = k
        self.cache = VectorCache(db.instance)
        self.backfiller = Backfiller(
            vectorstore.backfill_job(db, lambda: self.embedder, self.cache, SOURCE), name="memory-vector-backfill"
        )

    # ------------------------------------------------------------------ the seam
    def _index(self, conn: sqlite3.Connection, query: Embedded) -> ExactIndex | None:
        """The cached index of the query's model, or None when no vector of it is stored yet."""
        if self.matrix:
            index = self.cache.index(conn, DOMAIN, query[0])
        else:
            refs, parts, matrix, dim = vectorstore.load(conn, DOMAIN, query[0])
            index = ExactIndex.build(query[0], dim, refs, parts, matrix) if refs else None
        return None if index is None or index.dim != query[1].shape[0] else index

    def nearest(self, at: Snapshot, query: Embedded, k: int, within: Sequence[int]) -> list[tuple[int, float]] | None:
        """Top `k` (memory id, cosine) among `within` only; None when no vector of the query's
        model is stored yet (search then runs keyword-only and says so)."""
        index = self._index(connection_of(at), query)
        if index is None:
            return None
        return [(int(ref), cos) for ref, cos in index.search_among(query[1], k, map(str, within))]

    def nearest_any(
        self,
        at: Snapshot,
        query: Embedded,
        k: int,
        robots: Collection[str] | None,
        ids: KeyFilter | None = None,
    ) -> list[tuple[int, float]] | None:
        """Top `k` (memory id, cosine) among the memories of `robots` (all with None) — and,
        with `ids`, those it allows (`ports.Mask.allowing`) — before any other filter; None
        when no vector of the query's model is stored yet."""
        index = self._index(connection_of(at), query)
        if index is None:
            return None
        return [(int(ref), cos) for ref, cos in index.search(query[1], k, robots, ids)]

    def write(self, at: Transaction, memory_id: int, embedded: Embedded | None) -> None:
        """In the memory's write transaction: its new vector, or none (an old one would be stale)."""
        conn = connection_of(at)
        if embedded is None:
            vectorstore.delete(conn, DOMAIN, str(memory_id))
        else:
            vectorstore.upsert(conn, DOMAIN, str(memory_id), embedded[0], embedded[1])

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None:
        """After the commit: (memory id, robot, vector or None) into the in-memory index, and the
        forgotten ids out of it. A memory stored without a vector while an embedder is configured
        gets one from the backfill."""
        upserts = [(str(m), robot, e[0], e[1]) for m, robot, e in changes if e is not None]
        missing = [str(m) for m, _r, e in changes if e is None]
        self.cache.after_write(DOMAIN, upserts=upserts, removes=[*missing, *map(str, forgotten)])
        if missing and self.embedder is not None and self.embedder.mode != "off":
            self.kick_backfill()

    def forgotten(self, conn: sqlite3.Connection, memory_id: int) -> None:
        """In the forget's transaction: a forgotten memory is out of every recall; so is its vector."""
        vectorstore.delete(conn, DOMAIN, str(memory_id))

    # ------------------------------------------------------------------ backfill
    def kick_backfill(self) -> None:
        """Fill missing vectors in the background (single-flight); safe to call from any thread."""
        if self.embedder is not None:
            self.backfiller.kick()

    def backfill_blocking(
        self, progress: Progress | None = None, *, stop: threading.Event | None = None, force: bool = False
    ) -> int:
        """Embed every active memory lacking a vector of the current model (all with `force`)."""
        return vectorstore.fill_missing(self.db, self.embedder, self.cache, SOURCE, progress, stop=stop, force=force)

    def close(self) -> None:
        self.backfiller.stop()


def drop_loaded_vectors(conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Before an archive load writes memories (`kit.archive.loader`'s ``before``): a memory's
    vector is kept only while it is still the embedding of the memory's text — the row is there
    with the same content, and the line keeps it active (a forgotten memory has no vector). Any
    other loaded memory's vector, if any, was made from another text (another deployment's memory
    of that id, or this one's text before an edit): it is dropped in the load's transaction, and
    `reembed` (or the next start's backfill) makes one from the loaded text, so no memory is
    ranked by another text's embedding. Dropping every loaded memory's vector threw away
    thousands of valid ones on loading a dump back, and hybrid recall lost them until a restart."""
    if table != "memories":
        return
    for row in rows:
        mid = row.get("id")  # an integer, as the loader's derive made it (2.0 is the id 2)
        if not isinstance(mid, int):
            continue  # a new row, given the next id: no vector was made for it
        stored = conn.execute("SELECT content FROM memories WHERE id = ?", (mid,)).fetchone()
        if stored is not None and stored[0] == row.get("content") and row.get("status", "active") == "active":
            continue
        vectorstore.delete(conn, DOMAIN, str(mid))


__all__ = ["DOMAIN", "SOURCE", "MemoryVectorIndex", "drop_loaded_vectors"]
