"""The ``vectors`` table, the per-process cache of the in-memory index built from it, and the
backfill that embeds rows lacking a vector.

A vector row is a *derived* projection of its source row (a process or a memory): written
in the same transaction as the row, deleted with it, and rebuildable by re-embedding. Each
carries the model that made it; search reads only the current model's rows, so a model change
never meets a dimension mismatch — the backfill replaces the old rows instead.

`VectorCache` keeps one `ExactIndex` per domain for the current model. It loads lazily on the
first search (inside that search's read snapshot) and is patched after each committed write;
a load that overlapped a write is used once and not kept (a generation counter decides).

Other processes may write the same file (a training loop's `RobotMemory` beside a server). Every
change to a domain's vectors replaces its *stamp* (a ``store_meta`` row) in the same transaction,
with a value only the writing store makes (`SqliteStore.instance`, ``store_stamp()``), and this
process remembers which stamp each of its own writes replaced. A search reads the stamp in its
snapshot: if the chain of replacements leads back to the stamp the cached index was loaded or
last checked at through this store's own writes only, the index is current (its own writes patch
it); if another process's stamp is on the way, the index is loaded again in that snapshot — a
memory another process updated was ranked by its old vector, and its new ones were never found.
"""

from __future__ import annotations

import functools
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.errors import EmbedderUnavailable
from robot_mcp_memory.search.backfill import Backfiller
from robot_mcp_memory.search.vectors import ExactIndex, Vector, encode

if TYPE_CHECKING:
    from robot_mcp_memory.search.resilient import ResilientEmbedder
    from robot_mcp_memory.storage.sqlite import SqliteStore

_log = logs.get("robot_mcp_memory.vectors")

Domain = Literal["process", "memory"]
#: (model id, unit vector): what an embedder made for one text.
Embedded = tuple[str, Vector]
Progress = Callable[[int, int], None]
BACKFILL_BATCH = 64

#: domain → (source table, its key column, its partition column, which of its rows are searched).
#: Fixed identifiers only. A forgotten or superseded memory is out of every recall: not loaded.
_SOURCES: dict[str, tuple[str, str, str, str]] = {
    "process": ("processes", "id", "robot", "1"),
    "memory": ("memories", "id", "robot", "s.status = 'active'"),
}


# ---------------------------------------------------------------------------- SQL (connection first)
def upsert(conn: sqlite3.Connection, domain: Domain, ref: str, model_id: str, vec: Vector) -> None:
    conn.execute(
        "INSERT INTO vectors(domain, ref, model_id, dim, vec) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(domain, ref) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, vec = excluded.vec",
        (domain, ref, model_id, int(vec.shape[0]), encode(vec)),
    )
    _restamp(conn, domain)


def delete(conn: sqlite3.Connection, domain: Domain, ref: str) -> None:
    if conn.execute("DELETE FROM vectors WHERE domain = ? AND ref = ?", (domain, ref)).rowcount:
        _restamp(conn, domain)  # only a real change: a learn without vectors deletes nothing


def clear(conn: sqlite3.Connection, domain: Domain) -> int:
    n: int = conn.execute("DELETE FROM vectors WHERE domain = ?", (domain,)).rowcount
    if n:
        _restamp(conn, domain)
    return n


#: The shortest time between two reloads of an index for another process's writes (seconds).
RELOAD_EVERY_S = 1.0

#: own stamp → the stamp it replaced, for every vector write of this process (stamps are unique
#: across stores, so one map serves them all). Bounded: past the bound it is emptied, and each
#: cache then loads once more.
_REPLACED: dict[str, str | None] = {}
_REPLACED_LOCK = threading.Lock()
MAX_REMEMBERED = 100_000


def _stamp_key(domain: Domain) -> str:
    return f"vectors_stamp:{domain}"


def stamp_of(conn: sqlite3.Connection, domain: Domain) -> str | None:
    """The stamp of `domain`'s vectors as `conn`'s snapshot holds it (None: never written)."""
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (_stamp_key(domain),)).fetchone()
    return None if row is None else str(row[0])


def _restamp(conn: sqlite3.Connection, domain: Domain) -> None:
    """Replace `domain`'s stamp in the writing transaction, remembering which one it replaced."""
    before = stamp_of(conn, domain)
    try:
        (stamp,) = conn.execute("SELECT store_stamp()").fetchone()
    except sqlite3.OperationalError:  # a connection no SqliteStore opened: a write no cache owns
        stamp = f"-:{secrets.token_hex(8)}"
    conn.execute(
        "INSERT INTO store_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_stamp_key(domain), stamp),
    )
    with _REPLACED_LOCK:
        if len(_REPLACED) >= MAX_REMEMBERED:
            _REPLACED.clear()
        _REPLACED[str(stamp)] = before


def restamp(conn: sqlite3.Connection, domain: Domain) -> None:
    """Mark `domain`'s vectors changed in the writing transaction without writing one: for a write
    that changes the rows' partitions (their robot). Another process's cache reloads at its next
    search; this process's caches must be `VectorCache.invalidate`d after the commit (its own
    stamp tells them their patches are current)."""
    _restamp(conn, domain)


def _own_since(instance: str, checked: str | None, now: str | None) -> bool:
    """Whether every vector write between stamps `checked` and `now` was made by the store
    `instance` (this process's, whose writes patch its index), walking `now`'s replacements."""
    mine = f"{instance}:"
    stamp = now
    with _REPLACED_LOCK:
        for _ in range(MAX_REMEMBERED):
            if stamp == checked:
                return True
            if stamp is None or not stamp.startswith(mine) or stamp not in _REPLACED:
                return False
            stamp = _REPLACED[stamp]
    return False


def load(conn: sqlite3.Connection, domain: Domain, model_id: str) -> tuple[list[str], list[str], Vector, int]:
    """Every vector of `model_id` in `domain` with its source row's partition:
    (refs, partitions, matrix, dim). Orphans (no source row) are skipped."""
    table, key, part, searched = _SOURCES[domain]
    rows = conn.execute(
        f"SELECT v.ref, s.{part}, v.dim, v.vec FROM vectors v JOIN {table} s ON s.{key} = v.ref "  # noqa: S608
        f"WHERE v.domain = ? AND v.model_id = ? AND {searched} ORDER BY v.rowid",
        (domain, model_id),
    ).fetchall()
    if not rows:
        return [], [], np.zeros((0, 0), np.float32), 0
    dim = int(rows[0][2])
    rows = [r for r in rows if r[2] == dim]  # a model never changes dimension; be safe anyway
    flat = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").astype(np.float32, copy=False)
    return [r[0] for r in rows], [r[1] for r in rows], flat.reshape(len(rows), dim), dim


def counts(conn: sqlite3.Connection, domain: Domain) -> dict[str, int]:
    """Stored vectors per model id."""
    rows = conn.execute(
        "SELECT model_id, count(*) FROM vectors WHERE domain = ? GROUP BY model_id ORDER BY model_id", (domain,)
    )
    return {m: int(n) for m, n in rows}


# ---------------------------------------------------------------------------- the cache
class VectorCache:
    """One in-RAM `ExactIndex` per domain, for the model currently in use, kept current with the
    writes of the store `instance` (`SqliteStore.instance`) and loaded again after anyone else's."""

    def __init__(self, instance: str = "") -> None:
        self.instance = instance or secrets.token_hex(6)
        self._lock = threading.Lock()
        self._indexes: dict[str, ExactIndex] = {}
        self._generation: dict[str, int] = {}
        self._checked: dict[str, str | None] = {}  # the stamp each index is known current at
        self._loaded_at: dict[str, float] = {}  # when each index was last read from the table
        self.clock: Callable[[], float] = time.monotonic
        self.loads = 0  # how many times an index was read from the table

    def index(self, conn: sqlite3.Connection, domain: Domain, model_id: str) -> ExactIndex | None:
        """The index for `model_id`, loading it through `conn` (the caller's read snapshot) when
        absent, built for another model, or behind another process's writes. None when no vector
        of that model exists yet."""
        stamp = stamp_of(conn, domain)
        with self._lock:
            idx = self._indexes.get(domain)
            generation = self._generation.get(domain, 0)
            checked = self._checked.get(domain)
            if idx is not None and idx.model_id == model_id:
                if _own_since(self.instance, checked, stamp):
                    self._checked[domain] = stamp  # writes since: this process's own, all patched in
                    return idx
                if _own_since(self.instance, stamp, checked):
                    # A snapshot taken before writes this index already holds (a search that began
                    # before a newer one checked): the index is current; reloading from this older
                    # snapshot would drop those writes.
                    return idx
                if self.clock() - self._loaded_at.get(domain, 0.0) < RELOAD_EVERY_S:
                    # Another process keeps writing (a training loop with its embedder on): at most
                    # one reload per interval, this index meanwhile — a reload reads every vector.
                    return idx
                del self._indexes[domain]  # another process wrote vectors: read them again
        refs, parts, matrix, dim = load(conn, domain, model_id)
        self.loads += 1
        self._loaded_at[domain] = self.clock()
        if not refs:
            return None
        idx = ExactIndex.build(model_id, dim, refs, parts, matrix)
        with self._lock:
            # Kept only if nothing changed meanwhile: no write of this process (generation) and no
            # search that checked a newer stamp (whose snapshot this one may predate).
            if self._generation.get(domain, 0) == generation and self._checked.get(domain) == checked:
                self._indexes[domain] = idx
                self._checked[domain] = stamp
        return idx

    def after_write(
        self,
        domain: Domain,
        upserts: Iterable[tuple[str, str, str, Vector]] = (),
        removes: Iterable[str] = (),
    ) -> None:
        """Apply a committed write: (ref, partition, model_id, vec) upserts and removed refs."""
        with self._lock:
            self._generation[domain] = self._generation.get(domain, 0) + 1
            idx = self._indexes.get(domain)
            if idx is None:
                return
            for ref, partition, model_id, vec in upserts:
                if model_id == idx.model_id and vec.shape[0] == idx.dim:
                    idx.upsert(ref, partition, vec)
                else:
                    idx.remove(ref)
            for ref in removes:
                idx.remove(ref)

    def invalidate(self, domain: Domain | None = None) -> None:
        with self._lock:
            for d in [domain] if domain else list(self._indexes):
                self._indexes.pop(d, None)
                self._generation[d] = self._generation.get(d, 0) + 1


# ---------------------------------------------------------------------------- filling missing vectors
#: (ref, partition, the text its vector is made from) of one source row.
Row = tuple[str, str, str]


@dataclass(frozen=True)
class Source:
    """How the backfill reads one domain's rows: `missing(conn, model_id, after, limit)` — rows
    past ref `after` ("" first) with no vector of `model_id`, in key order; `count_missing(conn,
    model_id)`; `current(conn, ref)` — the row as it is now (None when gone or no longer searched)."""

    domain: Domain
    missing: Callable[[sqlite3.Connection, str, str, int], list[Row]]
    count_missing: Callable[[sqlite3.Connection, str], int]
    current: Callable[[sqlite3.Connection, str], Row | None]


def _missing_batch(conn: sqlite3.Connection, source: Source, model_id: str, after: str) -> list[Row]:
    return source.missing(conn, model_id, after, BACKFILL_BATCH)


def _store_batch(
    conn: sqlite3.Connection, source: Source, model_id: str, items: list[tuple[str, str, Vector]]
) -> list[tuple[str, str, str, Vector]]:
    """Store (ref, embedded text, vector) items whose row still has that text; returns the
    (ref, partition, model_id, vec) actually written, for the cache."""
    written = []
    for ref, text, vec in items:
        row = source.current(conn, ref)
        if row is None or row[2] != text:
            continue  # deleted or edited since it was read: its own write handled the vector
        upsert(conn, source.domain, ref, model_id, vec)
        written.append((ref, row[1], model_id, vec))
    return written


def fill_missing(
    db: SqliteStore,
    embedder: ResilientEmbedder | None,
    cache: VectorCache,
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
        cache.invalidate(domain)
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
        written = db.write_blocking(
            functools.partial(_store_batch, source=source, model_id=model_id, items=items),
            lambda w: cache.after_write(domain, upserts=w),  # in commit order with every other write
        )
        done += len(written)
        if progress:
            progress(min(done, total), total)
    if done:
        _log.info("vectors.backfilled", domain=domain, model_id=model_id, written=done)
    return done


def backfill_job(
    db: SqliteStore,
    embedder: Callable[[], ResilientEmbedder | None],
    cache: VectorCache,
    source: Source,
) -> Callable[[threading.Event], int]:
    """The background job for one domain's `Backfiller`: fill what lacks a vector of the current
    model, then warm the cached index so the first search does not pay for reading the BLOBs.
    `embedder` is read at each run (it can be swapped, e.g. after a model change)."""

    def job(stop: threading.Event) -> int:
        current = embedder()
        try:
            done = fill_missing(db, current, cache, source, stop=stop)
        except EmbedderUnavailable:
            return 0
        model_id = current.model_id if current is not None else None
        if model_id is not None and not stop.is_set():
            db.read_blocking(lambda c: cache.index(c, source.domain, model_id))
        return done

    return job


__all__ = [
    "BACKFILL_BATCH",
    "Backfiller",
    "Domain",
    "Embedded",
    "Row",
    "Source",
    "VectorCache",
    "clear",
    "counts",
    "delete",
    "fill_missing",
    "load",
    "upsert",
]
