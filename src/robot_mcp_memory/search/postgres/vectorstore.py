"""The ``vectors`` table on PostgreSQL, its change feed, each replica's cache of the in-process
index built from it, and the backfill that embeds rows lacking a vector. It knows no domain: a
domain's adapter names its rows (`Source`) and writes their vectors in its own transactions.

pgvector is not assumed: a vector is a row (domain, ref, partition, model id, dim, little-endian
float32 bytes) and search ranks in process with `search.vectors.ExactIndex`, as on SQLite. As
there, a vector row is a *derived* projection of its source row, written and removed in the
source row's transaction; search reads only the current model's rows.

Invariants:

- **One feed per domain, in commit order.** Every vector write (upsert, removal, clear) first
  bumps the domain's counter in ``vector_feed`` (``INSERT … ON CONFLICT DO UPDATE … RETURNING``)
  and stamps the rows it changes with the new value (``seq``). The counter's row lock is held to
  the commit, so a domain's vector writes are serialized and commit in ``seq`` order: a snapshot
  that holds a write of ``seq`` n holds every write below n. A removal keeps its row as a
  tombstone (``vec`` NULL) so that the other replicas learn of it from the feed.
- **A check under the lock sees every earlier write.** Since each write takes the counter's lock
  before it reads or changes a vector, the backfill's "is the row still the text I embedded"
  (`Source.current`, READ COMMITTED) runs after every earlier save of it committed or before it
  wrote: an older vector never overwrites a newer one, and a removal never misses a vector.
- **Replicas stay right.** `VectorCache.index` runs inside the caller's read snapshot (REPEATABLE
  READ) and applies, with one indexed query, the rows whose ``seq`` is above the highest it has
  applied. So a find on any replica ranks by every vector committed before its snapshot was
  taken, whichever replica wrote it — nothing committed earlier is missed, for any time. It may
  also rank by a few committed after (another find of this replica, on a newer snapshot, applied
  them first): a vector of a row its snapshot does not hold finds no row and is dropped by the
  plan (after taking a place among the nearest it was asked for), and a row removed since loses
  its vector rank a little early.
- **Tombstones stay.** One row per (domain, ref) ever vectorised; a ref saved again reuses it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.errors import EmbedderUnavailable
from robot_mcp_memory.search.backfill import Backfiller
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.vectors import ExactIndex, Vector, decode, encode
from robot_mcp_memory.storage.postgres import Connection, Migrated, Migration, PostgresStore

_log = logs.get("robot_mcp_memory.vectors")

COMPONENT = "vectors"
BACKFILL_BATCH = 64
Progress = Callable[[int, int], None]
#: (ref, partition, the text its vector is made from) of one source row.
Row = tuple[str, str, str]


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE vectors (
            domain TEXT NOT NULL,
            ref TEXT NOT NULL,
            part TEXT NOT NULL DEFAULT '',
            model_id TEXT NOT NULL DEFAULT '',
            dim INTEGER NOT NULL DEFAULT 0,
            vec BYTEA,  -- NULL: removed, a tombstone the feed carries to the other replicas
            seq BIGINT NOT NULL,
            PRIMARY KEY (domain, ref)
        )"""
    )
    conn.execute("CREATE INDEX vectors_feed ON vectors (domain, seq)")
    conn.execute("CREATE TABLE vector_feed (domain TEXT PRIMARY KEY, seq BIGINT NOT NULL)")


#: Append-only. Step i brings the vectors tables from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create]


def migrate(db: PostgresStore) -> Migrated:
    """Create or upgrade the vectors tables (every adapter that stores vectors calls it)."""
    return db.migrate(COMPONENT, MIGRATIONS)


# ---------------------------------------------------------------------------- writes (connection first)
def lock(conn: Connection, domain: str) -> int:
    """Take `domain`'s feed lock (held to the commit) and its next ``seq``."""
    row = conn.execute(
        "INSERT INTO vector_feed(domain, seq) VALUES (%s, 1) "
        "ON CONFLICT (domain) DO UPDATE SET seq = vector_feed.seq + 1 RETURNING seq",
        (domain,),
    ).fetchone()
    assert row is not None  # INSERT … RETURNING returns its row
    return int(row[0])


def upsert(conn: Connection, domain: str, ref: str, partition: str, model_id: str, vec: Vector) -> None:
    seq = lock(conn, domain)
    conn.execute(
        "INSERT INTO vectors(domain, ref, part, model_id, dim, vec, seq) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (domain, ref) DO UPDATE SET part = excluded.part, model_id = excluded.model_id, "
        "dim = excluded.dim, vec = excluded.vec, seq = excluded.seq",
        (domain, ref, partition, model_id, int(vec.shape[0]), encode(vec), seq),
    )


def delete(conn: Connection, domain: str, ref: str) -> bool:
    """Remove `ref`'s vector (a tombstone); whether it had one."""
    seq = lock(conn, domain)
    return (
        conn.execute(
            "UPDATE vectors SET vec = NULL, model_id = '', dim = 0, seq = %s "
            "WHERE domain = %s AND ref = %s AND vec IS NOT NULL",
            (seq, domain, ref),
        ).rowcount
        > 0
    )


def clear(conn: Connection, domain: str) -> int:
    seq = lock(conn, domain)
    return conn.execute(
        "UPDATE vectors SET vec = NULL, model_id = '', dim = 0, seq = %s WHERE domain = %s AND vec IS NOT NULL",
        (seq, domain),
    ).rowcount


# ---------------------------------------------------------------------------- reads
def feed_at(conn: Connection, domain: str) -> int:
    row = conn.execute("SELECT seq FROM vector_feed WHERE domain = %s", (domain,)).fetchone()
    return int(row[0]) if row else 0


def load(conn: Connection, domain: str, model_id: str) -> tuple[list[str], list[str], Vector, int, int]:
    """Every vector of `model_id` in `domain`, ordered by ref: (refs, partitions, matrix, dim,
    the feed's ``seq`` the snapshot holds them at)."""
    seen = feed_at(conn, domain)
    rows = conn.execute(
        "SELECT ref, part, dim, vec FROM vectors WHERE domain = %s AND model_id = %s AND vec IS NOT NULL "
        'ORDER BY ref COLLATE "C"',
        (domain, model_id),
    ).fetchall()
    if not rows:
        return [], [], np.zeros((0, 0), np.float32), 0, seen
    dim = int(rows[0][2])
    rows = [r for r in rows if r[2] == dim]  # a model never changes dimension; be safe anyway
    flat = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f4").astype(np.float32, copy=False)
    return [r[0] for r in rows], [r[1] for r in rows], flat.reshape(len(rows), dim), dim, seen


def changes(conn: Connection, domain: str, after: int) -> list[tuple[str, str, str, int, bytes | None, int]]:
    """The rows of `domain` written after feed ``seq`` `after`, in feed order:
    (ref, partition, model id, dim, vec or None for a removal, seq)."""
    rows = conn.execute(
        "SELECT ref, part, model_id, dim, vec, seq FROM vectors WHERE domain = %s AND seq > %s ORDER BY seq",
        (domain, after),
    ).fetchall()
    return [(r, p, m, int(d), None if v is None else bytes(v), int(s)) for r, p, m, d, v, s in rows]


def counts(conn: Connection, domain: str) -> dict[str, int]:
    """Stored vectors per model id."""
    rows = conn.execute(
        "SELECT model_id, count(*) FROM vectors WHERE domain = %s AND vec IS NOT NULL "
        'GROUP BY model_id ORDER BY model_id COLLATE "C"',
        (domain,),
    )
    return {m: int(n) for m, n in rows}


# ---------------------------------------------------------------------------- the cache
class VectorCache:
    """One in-RAM `ExactIndex` per domain for the model in use, brought up to the caller's
    snapshot from the feed at each use (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[str, ExactIndex] = {}
        self._seen: dict[str, int] = {}  # the highest feed seq each index holds
        self.loads = 0  # full reads of a domain's vectors
        self.applied = 0  # feed rows applied since

    def index(self, conn: Connection, domain: str, model_id: str) -> ExactIndex | None:
        """The index for `model_id`, holding at least every vector `conn`'s snapshot holds; None
        when that snapshot has no vector of that model."""
        with self._lock:
            idx = self._indexes.get(domain)
            if idx is None or idx.model_id != model_id:
                refs, parts, matrix, dim, seen = load(conn, domain, model_id)
                self.loads += 1
                if not refs:
                    self._indexes.pop(domain, None)
                    return None
                idx = self._indexes[domain] = ExactIndex.build(model_id, dim, refs, parts, matrix)
                self._seen[domain] = seen
                return idx
            seen = self._seen[domain]
            for ref, part, mid, dim, vec, seq in changes(conn, domain, seen):
                if vec is None or mid != idx.model_id or dim != idx.dim:
                    idx.remove(ref)
                else:
                    idx.upsert(ref, part, decode(vec, dim))
                seen = max(seen, seq)
                self.applied += 1
            self._seen[domain] = seen
            return idx if len(idx) else None

    def invalidate(self, domain: str | None = None) -> None:
        with self._lock:
            for d in [domain] if domain else list(self._indexes):
                self._indexes.pop(d, None)


# ---------------------------------------------------------------------------- filling missing vectors
@dataclass(frozen=True)
class Source:
    """How the backfill reads one domain's rows: `missing(conn, model_id, after, limit)` — rows
    past ref `after` ("" first) with no vector of `model_id`, in key order (C collation);
    `count_missing(conn, model_id)`; `current(conn, ref)` — the row as it is now (None when gone)."""

    domain: str
    missing: Callable[[Connection, str, str, int], list[Row]]
    count_missing: Callable[[Connection, str], int]
    current: Callable[[Connection, str], Row | None]


def _missing_batch(conn: Connection, source: Source, model_id: str, after: str) -> list[Row]:
    return source.missing(conn, model_id, after, BACKFILL_BATCH)


def store_batch(conn: Connection, source: Source, model_id: str, items: list[tuple[str, str, Vector]]) -> int:
    """Store (ref, embedded text, vector) items whose row still has that text, under the feed
    lock taken first (so a save of the row commits wholly before this check or after this
    write); how many were written."""
    lock(conn, source.domain)
    written = 0
    for ref, text, vec in items:
        row = source.current(conn, ref)
        if row is None or row[2] != text:
            continue  # deleted or edited since it was read: its own write handled the vector
        upsert(conn, source.domain, ref, row[1], model_id, vec)
        written += 1
    return written


def fill_missing(
    db: PostgresStore,
    embedder: ResilientEmbedder | None,
    source: Source,
    progress: Progress | None = None,
    *,
    stop: threading.Event | None = None,
    force: bool = False,
) -> int:
    """Embed every row of `source` that has no vector of the current model (all of them with
    `force`), in batches, each written in its own short transaction. Returns how many were
    written. Raises `EmbedderUnavailable` when the model is not ready or fails midway."""
    emb = embedder
    model_id = emb.model_id if emb is not None else None
    if emb is None or model_id is None or emb.mode != "ready":
        raise EmbedderUnavailable("the embedder is not ready; search stays keyword-only until it is")
    domain = source.domain
    if force:
        db.write_blocking(lambda c: clear(c, domain))
    total = db.read_blocking(lambda c: source.count_missing(c, model_id))
    done, after = 0, ""
    if progress:
        progress(0, total)
    while stop is None or not stop.is_set():
        rows = db.read_blocking(functools.partial(_missing_batch, source=source, model_id=model_id, after=after))
        if not rows:
            break
        after = rows[-1][0]
        out = emb.embed([r[2] for r in rows])
        if out is None or emb.model_id != model_id:
            raise EmbedderUnavailable("the embedder failed during the backfill; it resumes when it recovers")
        items = [(ref, text, out[i]) for i, (ref, _p, text) in enumerate(rows)]
        done += db.write_blocking(functools.partial(store_batch, source=source, model_id=model_id, items=items))
        if progress:
            progress(min(done, total), total)
    if done:
        _log.info("vectors.backfilled", domain=domain, model_id=model_id, written=done)
    return done


def backfiller(
    db: PostgresStore, embedder: Callable[[], ResilientEmbedder | None], cache: VectorCache, source: Source
) -> Backfiller:
    """The background backfill of one domain: fill what lacks a vector of the current model, then
    bring the cached index up to date so the next find does not read the rows just written.
    `embedder` is read at each run (it can be swapped, e.g. after a model change)."""

    def job(stop: threading.Event) -> int:
        current = embedder()
        try:
            done = fill_missing(db, current, source, stop=stop)
        except EmbedderUnavailable:
            return 0
        model_id = current.model_id if current is not None else None
        if model_id is not None and not stop.is_set():
            db.read_blocking(lambda c: cache.index(c, source.domain, model_id))
        return done

    return Backfiller(job, name=f"vector-backfill-{source.domain}")


__all__ = [
    "BACKFILL_BATCH",
    "COMPONENT",
    "MIGRATIONS",
    "Row",
    "Source",
    "VectorCache",
    "backfiller",
    "changes",
    "clear",
    "counts",
    "delete",
    "fill_missing",
    "load",
    "lock",
    "migrate",
    "store_batch",
    "upsert",
]
