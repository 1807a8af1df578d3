"""PostgresMemoryVectors: the `MemoryVectors` seam (hybrid recall, semantic dedup) on PostgreSQL.

A memory's vector (its content's embedding, as on SQLite) is a row of ``memory_vectors``
(`tables`; float32, little-endian, as `search.vectors.encode` writes it — pgvector is not assumed), written
in the memory's own transaction. A search reads the vectors of the query's model among the active
memories in the caller's snapshot and ranks them with the in-process exact index SQLite's plain
path uses (`search.vectors.ExactIndex`), so the cosines and their order (ties by id) are SQLite's.

Invariants:

- `nearest` ranks **only among the ids it is given** (those that passed every filter, read in
  the same snapshot); `nearest_any` among the active memories of some robots (and those a mask
  allows) before any other filter — recall checks its answer in the index.
- Nothing is held between calls (each search reads the table: correct under any number of
  replicas, and proportional to the vectors stored — the replica cache of DESIGN §10 is to come).
- No backfill yet: a memory learned while the embedder was off or down has no vector and is found
  by keywords only; an edit's stale vector is deleted with the edit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from robot_mcp_memory.experiences.ports import Embedded, Snapshot, Transaction
from robot_mcp_memory.experiences.postgres.repository import connection_of
from robot_mcp_memory.search import fusion
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.vectors import ExactIndex, KeyFilter, encode
from robot_mcp_memory.storage.postgres import Connection


def load(conn: Connection, model_id: str, ids: Sequence[int] | None = None) -> ExactIndex | None:
    """The vectors of `model_id` of the active memories (of `ids`, when given) as an exact index,
    partitioned by robot; None when there is none."""
    among = "" if ids is None else " AND v.memory_id = ANY(%s::bigint[])"
    params: list[object] = [model_id] if ids is None else [model_id, list(ids)]
    rows = conn.execute(
        "SELECT v.memory_id, m.robot, v.dim, v.vec FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "  # noqa: S608 - fixed text
        f"WHERE v.model_id = %s AND m.status = 'active'{among} ORDER BY v.memory_id",
        params,
    ).fetchall()
    if not rows:
        return None
    dim = int(rows[0][2])
    rows = [r for r in rows if int(r[2]) == dim]  # a model never changes dimension; be safe anyway
    flat = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f4").astype(np.float32, copy=False)
    return ExactIndex.build(
        model_id, dim, [str(r[0]) for r in rows], [r[1] for r in rows], flat.reshape(len(rows), dim)
    )


class PostgresMemoryVectors:
    """Hybrid recall and semantic dedup for experiences on PostgreSQL (implements `MemoryVectors`)."""

    def __init__(
        self, embedder: ResilientEmbedder | None, weights: tuple[float, float] = (1.0, 1.0), k: int = fusion.DEFAULT_K
    ) -> None:
        self.embedder = embedder
        self.weights = weights  # keyword, vector
        self.k = k

    def would_embed(self) -> bool:
        emb = self.embedder
        return emb is not None and emb.would_embed()

    def embed(self, texts: Sequence[str]) -> list[Embedded | None]:
        """One (model id, vector) per text, or None each when the embedder is off or down."""
        emb = self.embedder
        out = emb.embed(list(texts)) if emb is not None and texts else None
        model_id = emb.model_id if emb is not None else None
        if out is None or model_id is None:
            return [None] * len(texts)
        return [(model_id, out[i]) for i in range(len(texts))]

    def nearest(self, at: Snapshot, query: Embedded, k: int, within: Sequence[int]) -> list[tuple[int, float]] | None:
        index = load(connection_of(at), query[0], within)
        if index is None:
            # None only when no vector of the model is stored at all (then recall says keyword-only).
            held = connection_of(at).execute("SELECT 1 FROM memory_vectors WHERE model_id = %s LIMIT 1", (query[0],))
            return None if held.fetchone() is None else []
        if index.dim != query[1].shape[0]:
            return None
        return [(int(ref), cos) for ref, cos in index.search_among(query[1], k, map(str, within))]

    def nearest_any(
        self, at: Snapshot, query: Embedded, k: int, robots: Collection[str] | None, ids: KeyFilter | None = None
    ) -> list[tuple[int, float]] | None:
        index = load(connection_of(at), query[0])
        if index is None or index.dim != query[1].shape[0]:
            return None
        return [(int(ref), cos) for ref, cos in index.search(query[1], k, robots, ids)]

    def write(self, at: Transaction, memory_id: int, embedded: Embedded | None) -> None:
        """In the memory's write transaction: its new vector, or none (an old one would be stale)."""
        conn = connection_of(at)
        if embedded is None:
            conn.execute("DELETE FROM memory_vectors WHERE memory_id = %s", (memory_id,))
            return
        model_id, vec = embedded
        conn.execute(
            "INSERT INTO memory_vectors(memory_id, model_id, dim, vec) VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) "
            "DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, vec = excluded.vec",
            (memory_id, model_id, int(vec.shape[0]), encode(vec)),
        )

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None:
        """Nothing to patch: no index is held between calls."""


__all__ = ["PostgresMemoryVectors", "load"]
