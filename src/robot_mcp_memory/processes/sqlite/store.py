"""ProcessStore: process documents as rows of `processes`, indexed by `processes_fts`.

The row is the source of truth; the markdown is rendered from it on the way out. A row and its
FTS entry are written in one transaction. Searching ranks by FTS5 relevance times Laplace
reliability — on the *positive* relevance ``-bm25()``, since FTS5's bm25 is negative (smaller is
better) and multiplying it directly would rank a reliable process lower.

How a find ranks is `processes.ranking`'s plan, not this module's: its primitives on one read
transaction (`search.Snapshot`, a `ports.SearchSnapshot`: the keyword SQL with its
exactness-preserving plans, the vector index's top-n, reliability, agreement texts, documents)
are in `processes.sqlite.search`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TypeVar

from robot_mcp_memory import logs
from robot_mcp_memory.errors import Busy
from robot_mcp_memory.processes import docmodel, ranking, rules
from robot_mcp_memory.processes import rows as process_rows
from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc
from robot_mcp_memory.processes.ports import (
    NOBODY,
    Author,
    Hit,
    Progress,
    RecordsView,
    Saved,
    SearchMode,
)
from robot_mcp_memory.processes.ports import ORDERS as ORDER_NAMES
from robot_mcp_memory.processes.ranking import EVENTS_PER_PROCESS, HISTORY_LIMIT, LINE_COST, Fusion
from robot_mcp_memory.processes.rows import embed_text as embed_text  # re-exported: benches and tests read it here
from robot_mcp_memory.processes.sqlite import postings
from robot_mcp_memory.processes.sqlite.postings import PostingCache
from robot_mcp_memory.processes.sqlite.search import Snapshot, tenant_view, visible_clause
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.segment import index_text
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.search.sqlite.vectorstore import Backfiller, VectorCache
from robot_mcp_memory.search.vectors import Vector
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.storage.sqlite.store import now_iso
from robot_mcp_memory.tenancy.principal import SHARED

_COLUMNS = (
    "id, title, task_pattern, tags, robot, created, updated, success_count, failure_count, "
    "last_used, source_mission_id, extra, body"
)

BACKFILL_BATCH = vectorstore.BACKFILL_BATCH
T = TypeVar("T")

_log = logs.get("robot_mcp_memory.processes.sqlite.store")


# ---------------------------------------------------------------------------- SQL (connection first)
def select_one(conn: sqlite3.Connection, pid: str) -> ProcessDoc | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM processes WHERE id = ?", (pid,)).fetchone()  # noqa: S608
    return process_rows.from_row(row) if row else None


def _index(conn: sqlite3.Connection, doc: ProcessDoc) -> None:
    """Replace the document's index entry. The row remembers its entry's rowid (`fts_rowid`):
    `id` is UNINDEXED in FTS5, so deleting by id would scan the whole index on every save."""
    _unindex(conn, doc.id)
    cur = conn.execute(
        "INSERT INTO processes_fts(id, title, task_pattern, tags, body) VALUES (?, ?, ?, ?, ?)",
        (doc.id, *(index_text(t) for t in (doc.title, doc.task_pattern, " ".join(doc.tags), doc.body))),
    )
    conn.execute("UPDATE processes SET fts_rowid = ? WHERE id = ?", (cur.lastrowid, doc.id))
    postings.trim_log(conn)  # the triggers logged the write


def _unindex(conn: sqlite3.Connection, pid: str) -> None:
    conn.execute(
        "DELETE FROM processes_fts WHERE rowid = (SELECT fts_rowid FROM processes WHERE id = ?)",
        (pid,),
    )


def restore_rows(conn: sqlite3.Connection, docs: Iterable[ProcessDoc], *, log_is_history: bool = True) -> int:
    """Write documents exactly as given (the caller holds the transaction; `ProcessStore.restored`
    follows its commit); how many. Their vectors were made from what they replace: dropped.

    A document's outcome history is replaced with it: by the lines of its `## Outcome log`
    (`log_is_history`, a dump from before outcome records or a folder of documents), or left
    empty for the archive's `process_outcomes` rows the same transaction loads next."""
    n = 0
    for d in docs:
        body, entries = docmodel.split_outcome_log(d.body)
        d = d.model_copy(update={"body": body})
        upsert(conn, d)
        conn.execute("DELETE FROM process_outcomes WHERE process_id = ?", (d.id,))
        conn.execute("DELETE FROM process_tenant_counts WHERE process_id = ?", (d.id,))
        if log_is_history:
            insert_history(conn, d.id, entries)
        vectorstore.delete(conn, "process", d.id)  # re-made by the backfill
        n += 1
    return n


def insert_history(conn: sqlite3.Connection, pid: str, entries: Iterable[OutcomeEntry]) -> None:
    """Append `entries` to the outcome records of `pid` (counters untouched: a document brings
    its own)."""
    for e in entries:
        _insert_outcome(conn, pid, e)


def _insert_outcome(conn: sqlite3.Connection, pid: str, e: OutcomeEntry) -> None:
    conn.execute(
        "INSERT INTO process_outcomes(process_id, n, at, success, note, robot, tenant) VALUES "
        "(?, coalesce((SELECT max(n) FROM process_outcomes WHERE process_id = ?), 0) + 1, ?, ?, ?, ?, ?)",
        (pid, pid, e.when, int(e.success), e.note, e.robot, e.tenant),
    )


def upsert(conn: sqlite3.Connection, doc: ProcessDoc, *, index: bool = True) -> None:
    """Write the row and its index entry (the caller holds the transaction). ``index=False``
    skips the FTS entry, for bulk loads that end with `rebuild_index` in the same transaction
    (one bulk rebuild beats thousands of single index updates)."""
    conn.execute(
        "INSERT INTO processes(id, title, task_pattern, tags, robot, created, updated, success_count, "
        "failure_count, last_used, source_mission_id, extra, body) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET title=excluded.title, task_pattern=excluded.task_pattern, "
        "tags=excluded.tags, robot=excluded.robot, created=excluded.created, updated=excluded.updated, "
        "success_count=excluded.success_count, failure_count=excluded.failure_count, "
        "last_used=excluded.last_used, source_mission_id=excluded.source_mission_id, "
        "extra=excluded.extra, body=excluded.body",
        process_rows.to_row(doc),
    )
    if index:
        _index(conn, doc)


def save_doc(
    conn: sqlite3.Connection, doc: ProcessDoc, now: str, writable: Callable[[str], bool] = lambda _o: True
) -> Saved:
    """Insert, update or fork `doc` (`rules.plan_save`), deciding on this transaction's rows.

    The stored body never holds an `## Outcome log`: the log is rendered from the outcome
    records. A save that creates a document (or forks one) brings the lines of its log as the
    new document's history; a save that updates one leaves its history as recorded and ignores
    whatever log the document carries (edited, shortened or left out).
    """
    body, carried = docmodel.split_outcome_log(doc.body)
    saved = rules.plan_save(doc.model_copy(update={"body": body}), now, lambda pid: select_one(conn, pid), writable)
    upsert(conn, saved.doc)
    if saved.action != "updated":
        insert_history(conn, saved.doc.id, carried)
    return saved


def add_outcome(
    conn: sqlite3.Connection, pid: str, success: bool, note: str, now: str, by: Author = NOBODY
) -> ProcessDoc | None:
    """Count an outcome and record it beside the counters (no index change: the stored body does
    not hold the log). A robot token's outcome on a fleet-wide document is also counted for its
    tenant, so other groups can be shown the document without it."""
    column = "success_count" if success else "failure_count"
    cur = conn.execute(
        f"UPDATE processes SET {column} = {column} + 1, last_used = ? WHERE id = ?",  # noqa: S608 - fixed names
        (now, pid),
    )
    if not cur.rowcount:
        return None
    _insert_outcome(conn, pid, OutcomeEntry(now, success, " ".join(note.split()), by.robot, by.tenant))
    doc = select_one(conn, pid)
    if by.tenant and doc is not None and doc.robot == SHARED:
        conn.execute(
            f"INSERT INTO process_tenant_counts(process_id, tenant, {column}) VALUES (?, ?, 1) "  # noqa: S608 - fixed names
            f"ON CONFLICT(process_id, tenant) DO UPDATE SET {column} = {column} + 1",
            (pid, by.tenant),
        )
    return doc


def outcomes_of(
    conn: sqlite3.Connection, ids: Collection[str], *, with_note: bool = False
) -> dict[str, list[OutcomeEntry]]:
    """The newest outcome records of each of `ids`, oldest first: with `with_note`, those with a
    note that together could fit the rendered log (`docmodel.MAX_BODY`); else the newest
    `HISTORY_LIMIT`. Bounded, so a document used by every mission for years reads no slower."""
    out: dict[str, list[OutcomeEntry]] = {pid: [] for pid in ids}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    noted = " AND note <> ''" if with_note else ""
    bound = "size <= ?" if with_note else "k <= ?"
    rows = conn.execute(
        "SELECT process_id, at, success, note, robot, tenant FROM ("  # noqa: S608 - fixed names
        "SELECT *, row_number() OVER w AS k, sum(length(note) + ?) OVER w AS size FROM process_outcomes "
        f"WHERE process_id IN ({marks}){noted} WINDOW w AS (PARTITION BY process_id ORDER BY n DESC)) "
        f"WHERE {bound} ORDER BY process_id, n",
        [LINE_COST, *ids, docmodel.MAX_BODY if with_note else HISTORY_LIMIT],
    )
    for pid, at, success, note, robot, tenant in rows:
        out[pid].append(OutcomeEntry(at, bool(success), note, robot, tenant))
    return out


def outcome_events(
    conn: sqlite3.Connection, visible: Collection[str] | None, per_process: int = EVENTS_PER_PROCESS
) -> list[tuple[str, str, bool, str, str, str]]:
    """(process id, time, success, its owner, the recording tenant, the recording robot) of each
    visible document's newest `per_process` outcome records, oldest first within a process."""
    where, params = visible_clause(visible, "p.robot")
    rows = conn.execute(
        "SELECT o.process_id, o.at, o.success, p.robot, o.tenant, o.robot FROM process_outcomes o "  # noqa: S608 - fixed names
        f"JOIN processes p ON p.id = o.process_id WHERE {where} AND o.n > ("
        "SELECT coalesce(max(n), 0) FROM process_outcomes WHERE process_id = o.process_id) - ? "
        "ORDER BY o.process_id, o.n",
        [*params, per_process],
    )
    return [(pid, at, bool(ok), owner, tenant, by) for pid, at, ok, owner, tenant, by in rows]


def outcome_days(
    conn: sqlite3.Connection, since: str, visible: Collection[str] | None
) -> list[tuple[str, bool, str, str, str, int]]:
    """(day, success, process id, its owner, the recording tenant, how many) over the outcome
    records since `since` (UTC ``YYYY-MM-DD``) of the visible robots' documents."""
    where, params = visible_clause(visible, "p.robot")
    rows = conn.execute(
        "SELECT substr(o.at, 1, 10) AS day, o.success, o.process_id, p.robot, o.tenant, count(*) "  # noqa: S608 - fixed names
        f"FROM process_outcomes o JOIN processes p ON p.id = o.process_id WHERE o.at >= ? AND {where} "
        "GROUP BY day, o.success, o.process_id, p.robot, o.tenant",
        [since, *params],
    )
    return [(day, bool(ok), pid, owner, tenant, int(n)) for day, ok, pid, owner, tenant, n in rows]


def delete_doc(conn: sqlite3.Connection, pid: str) -> bool:
    _unindex(conn, pid)
    conn.execute("DELETE FROM process_outcomes WHERE process_id = ?", (pid,))
    conn.execute("DELETE FROM process_tenant_counts WHERE process_id = ?", (pid,))
    deleted = conn.execute("DELETE FROM processes WHERE id = ?", (pid,)).rowcount > 0
    postings.trim_log(conn)  # the delete trigger logged it
    return deleted


def rebuild_index(conn: sqlite3.Connection) -> int:
    return db.rebuild_process_index(conn)


#: How `list_docs` orders: most recently updated first, or most used (outcomes recorded) first.
#: SQL for each order the port names.
ORDERS = {"updated": "updated DESC, id", "used": "success_count + failure_count DESC, updated DESC, id"}
assert tuple(ORDERS) == ORDER_NAMES


def list_docs(
    conn: sqlite3.Connection, limit: int, offset: int, visible: Collection[str] | None, order: str = "updated"
) -> tuple[list[ProcessDoc], int]:
    where, params = visible_clause(visible)
    total = conn.execute(f"SELECT count(*) FROM processes WHERE {where}", params).fetchone()[0]  # noqa: S608
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM processes WHERE {where} ORDER BY {ORDERS[order]} LIMIT ? OFFSET ?",  # noqa: S608
        [*params, limit, offset],
    ).fetchall()
    return [process_rows.from_row(r) for r in rows], int(total)


def each_doc(conn: sqlite3.Connection) -> Iterator[ProcessDoc]:
    """Every document, in id order, streamed (not held in memory at once)."""
    for row in conn.execute(f"SELECT {_COLUMNS} FROM processes ORDER BY id"):  # noqa: S608 - our columns
        yield process_rows.from_row(row)


#: A document as a tenant is shown its counters, the fleet-wide ones beside a shared document's
#: (`tenant_view`), and its outcome records, oldest first.
Viewed = RecordsView


def viewed(conn: sqlite3.Connection, docs: list[ProcessDoc], tenant: str | None, *, with_note: bool) -> list[Viewed]:
    """`tenant_view` of `docs` with each one's outcome records (only those with a note: `with_note`)."""
    records = outcomes_of(conn, [d.id for d in docs], with_note=with_note)
    return [(d, fleet, records[d.id]) for d, fleet in tenant_view(conn, docs, tenant)]


def with_history(conn: sqlite3.Connection, doc: ProcessDoc) -> ProcessDoc:
    """`doc` with the outcome log of every outcome record it has (what an operator is shown)."""
    entries = outcomes_of(conn, [doc.id], with_note=True)[doc.id]
    return doc.model_copy(update={"body": docmodel.with_outcome_log(doc.body, entries)}) if entries else doc


def count(conn: sqlite3.Connection) -> int:
    n: int = conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    return n


def count_index(conn: sqlite3.Connection) -> int:
    n: int = conn.execute("SELECT count(*) FROM processes_fts").fetchone()[0]
    return n


# ---------------------------------------------------------------------------- hybrid search (SQL side)
def missing_vectors(conn: sqlite3.Connection, model_id: str, after: str, limit: int) -> list[ProcessDoc]:
    """Processes (ordered by id, past `after`) with no vector of `model_id`."""
    rows = conn.execute(
        f"SELECT {', '.join('p.' + c.strip() for c in _COLUMNS.split(','))} FROM processes p "  # noqa: S608
        "LEFT JOIN vectors v ON v.domain = 'process' AND v.ref = p.id AND v.model_id = ? "
        "WHERE v.ref IS NULL AND p.id > ? ORDER BY p.id LIMIT ?",
        (model_id, after, limit),
    )
    return [process_rows.from_row(r) for r in rows]


def count_missing_vectors(conn: sqlite3.Connection, model_id: str) -> int:
    n: int = conn.execute(
        "SELECT count(*) FROM processes p LEFT JOIN vectors v "
        "ON v.domain = 'process' AND v.ref = p.id AND v.model_id = ? WHERE v.ref IS NULL",
        (model_id,),
    ).fetchone()[0]
    return n


def current_row(conn: sqlite3.Connection, pid: str) -> vectorstore.Row | None:
    doc = select_one(conn, pid)
    return None if doc is None else (doc.id, doc.robot, embed_text(doc))


def _missing_rows(conn: sqlite3.Connection, model_id: str, after: str, limit: int) -> list[vectorstore.Row]:
    return [(d.id, d.robot, embed_text(d)) for d in missing_vectors(conn, model_id, after, limit)]


#: How the shared backfill (`vectorstore.fill_missing`) reads processes.
VECTOR_SOURCE = vectorstore.Source("process", _missing_rows, count_missing_vectors, current_row)


# ---------------------------------------------------------------------------- the store object
class ProcessStore:
    """The SQLite `ProcessRepository`: reads on reader threads, writes on the writer thread."""

    def __init__(self, db: SqliteStore, embedder: ResilientEmbedder | None = None, fuse: Fusion | None = None) -> None:
        self.db = db
        self.embedder = embedder
        self.fuse = fuse or Fusion()
        self.vectors = VectorCache(db.instance)
        #: The keyword leg's index in memory, shared by every reader (`postings.PostingCache`).
        self.postings = PostingCache()
        self.backfiller = Backfiller(vectorstore.backfill_job(db, lambda: self.embedder, self.vectors, VECTOR_SOURCE))

    # ------------------------------------------------------------------ vectors
    def _embed(self, text: str) -> tuple[str, Vector] | None:
        """(model_id, vector) for `text`, or None when the embedder is off or unavailable."""
        if self.embedder is None:
            return None
        out = self.embedder.embed([text])
        model_id = self.embedder.model_id
        return None if out is None or model_id is None else (model_id, out[0])

    async def _embed_off_loop(self, text: str) -> tuple[str, Vector] | None:
        """`_embed` on a worker thread — or None at once when the embedder would not try (off,
        loading, backing off): no thread hop for nothing."""
        if self.embedder is None or not self.embedder.would_embed():
            return None
        return await asyncio.to_thread(self._embed, text)

    async def _embed_query(self, query: str) -> tuple[str, Vector] | None:
        """(model_id, vector) of a query (`ResilientEmbedder.query_vector`), a miss on a worker thread."""
        return None if self.embedder is None else await self.embedder.query_vector(query, asyncio.to_thread)

    async def _write_then(self, job: Callable[[sqlite3.Connection], T], after: Callable[[T], None]) -> T:
        """A definition write, then `after(result)` once it has committed and before the next
        write begins (the cache sees writes in commit order) — on a worker thread, so the cache
        is patched even if the awaiting coroutine is cancelled meanwhile."""
        return await asyncio.to_thread(self.db.write_blocking, job, after)

    def _saved_vector(self, conn: sqlite3.Connection, pid: str, embedded: tuple[str, Vector] | None) -> None:
        if embedded is None:
            vectorstore.delete(conn, "process", pid)  # stale now; the backfill makes a new one
        else:
            vectorstore.upsert(conn, "process", pid, embedded[0], embedded[1])

    def _patch(self, doc: ProcessDoc, embedded: tuple[str, Vector] | None) -> None:
        if embedded is None:
            self.vectors.after_write("process", removes=[doc.id])
        else:
            self.vectors.after_write("process", upserts=[(doc.id, doc.robot, embedded[0], embedded[1])])

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = lambda _o: True) -> Saved:
        now = now_iso()
        # Embed before queueing: the writer thread serves every write and must never wait on a model.
        embedded = await self._embed_off_loop(embed_text(doc))

        def job(c: sqlite3.Connection) -> Saved:
            saved = save_doc(c, doc, now, writable)
            self._saved_vector(c, saved.doc.id, embedded)
            return saved

        saved = await self._write_then(job, lambda s: self._patch(s.doc, embedded))
        if embedded is None and self.embedder is not None and self.embedder.mode != "off":
            self.kick_backfill()
        return saved

    async def find_hybrid(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> tuple[list[Hit], SearchMode]:
        """Hybrid search when a query vector and stored vectors exist; keyword-only otherwise.
        The mode says which one actually ran."""
        embedded = await self._embed_query(query.text) if query.searchable else None
        if embedded is not None:
            model_id, qvec = embedded
            fuse, cache, held = self.fuse, self.vectors, self.postings
            hits = await self.db.read(
                lambda c: ranking.hybrid_search(
                    Snapshot(c, cache, held), query, qvec, model_id, visible, fuse, k, tenant
                )
            )
            if hits is not None:
                return hits, "hybrid"
        return await self.find(query, k, visible, tenant), "keyword"

    def kick_backfill(self) -> None:
        """Fill missing vectors in the background (single-flight); safe to call from any thread."""
        if self.embedder is not None:
            self.backfiller.kick()

    def backfill_blocking(
        self, progress: Progress | None = None, *, stop: threading.Event | None = None, force: bool = False
    ) -> int:
        """Embed every process that has no vector of the current model (all of them with
        `force`), in batches, each written in its own short transaction. Returns how many were
        written. Raises `EmbedderUnavailable` when the model is not ready or fails midway."""
        return vectorstore.fill_missing(
            self.db, self.embedder, self.vectors, VECTOR_SOURCE, progress, stop=stop, force=force
        )

    async def reembed(self, progress: Progress | None = None, *, force: bool = False) -> int:
        """Embed what lacks a vector of the current model (after a model change: everything);
        `force` re-embeds every process. `progress(done, total)` is called per batch."""
        return await asyncio.to_thread(lambda: self.backfill_blocking(progress, force=force))

    async def vector_status(self) -> dict[str, object]:
        emb = self.embedder
        model_id = emb.model_id if emb is not None else None
        stored = await self.db.read(lambda c: vectorstore.counts(c, "process"))
        missing = await self.db.read(lambda c: count_missing_vectors(c, model_id)) if model_id else None
        return {**(emb.status() if emb else {"mode": "off"}), "stored": stored, "missing": missing}

    def close(self) -> None:
        self.backfiller.stop()

    async def get(self, pid: str) -> ProcessDoc | None:
        return await self.db.read(lambda c: select_one(c, pid))

    async def get_markdown(self, pid: str) -> str | None:
        """The document with its whole outcome log (`with_history`), or None."""

        def job(c: sqlite3.Connection) -> str | None:
            doc = select_one(c, pid)
            return with_history(c, doc).render() if doc else None

        return await self.db.read(job)

    async def find(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> list[Hit]:
        """The keyword answer (`ranking.keyword_search`), in one read snapshot."""
        held = self.postings
        return await self.db.read(lambda c: ranking.keyword_search(Snapshot(c, None, held), query, k, visible, tenant))

    async def viewed(
        self, docs: list[ProcessDoc], tenant: str | None
    ) -> list[tuple[ProcessDoc, tuple[int, int] | None]]:
        """`tenant_view` of `docs`: each as `tenant` is shown it."""
        return await self.db.read(lambda c: tenant_view(c, docs, tenant))

    async def outcomes(self, ids: Collection[str], *, with_note: bool = False) -> dict[str, list[OutcomeEntry]]:
        """The outcome records of each of `ids`, oldest first (only those with a note: `with_note`)."""
        return await self.db.read(lambda c: outcomes_of(c, ids, with_note=with_note))

    async def view(self, pid: str, tenant: str | None, *, with_note: bool = False) -> Viewed | None:
        """The document as `tenant` is shown its counters, with its outcome records (`outcomes`),
        in one read snapshot; None when it does not exist."""

        def job(c: sqlite3.Connection) -> Viewed | None:
            doc = select_one(c, pid)
            return None if doc is None else viewed(c, [doc], tenant, with_note=with_note)[0]

        return await self.db.read(job)

    async def views(self, docs: list[ProcessDoc], tenant: str | None, *, with_note: bool = False) -> list[Viewed]:
        """`viewed` of documents read before (their counters as they were then), in one read."""
        return await self.db.read(lambda c: viewed(c, docs, tenant, with_note=with_note))

    async def outcome_events(self, visible: Collection[str] | None) -> list[tuple[str, str, bool, str, str, str]]:
        return await self.db.read(lambda c: outcome_events(c, visible))

    async def outcome_days(
        self, since: str, visible: Collection[str] | None
    ) -> list[tuple[str, bool, str, str, str, int]]:
        return await self.db.read(lambda c: outcome_days(c, since, visible))

    async def record_outcome(self, pid: str, success: bool, note: str = "", by: Author = NOBODY) -> ProcessDoc | None:
        """Count an outcome and record it (`add_outcome`); `None` when the process does not exist.

        Without a note this is a hot record write, executed on the writer thread while the
        caller's thread moves on; when the hot queue is full it is dropped and `Busy` is raised.
        With a note it is a definition write: the note is part of the document as rendered."""
        now = now_iso()
        if note.strip():  # the note lands in the outcome log, which `embed_text` leaves out
            return await self.db.write(lambda c: add_outcome(c, pid, success, note, now, by))
        fut = self.db.hot(lambda c: add_outcome(c, pid, success, "", now, by))
        if fut is None:
            raise Busy("the server is overloaded and did not count this outcome; retry in a few seconds")
        return await asyncio.wrap_future(fut)

    async def restore(self, docs: list[ProcessDoc]) -> int:
        """Write documents exactly as given (timestamps and counters included), in one
        transaction, so that a dump loads back identically."""
        n = await self._write_then(lambda c: restore_rows(c, docs), lambda _n: self.restored())
        return n

    def restored(self) -> None:
        """After a commit of `restore_rows` (`load` runs it inside its own transaction): the
        cached vectors are read again and the ones dropped are made again."""
        self.vectors.invalidate("process")
        self.postings.invalidate()  # the log says so too: this only spares the patch
        self.kick_backfill()

    async def index_counts(self) -> tuple[int, int]:
        """(rows, index entries): they agree unless something is wrong."""
        return await self.db.read(lambda c: (count(c), count_index(c)))

    async def delete(self, pid: str) -> bool:
        def job(c: sqlite3.Connection) -> bool:
            vectorstore.delete(c, "process", pid)
            return delete_doc(c, pid)

        return await self._write_then(job, lambda _ok: self.vectors.after_write("process", removes=[pid]))

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None, order: str = "updated"
    ) -> tuple[list[ProcessDoc], int]:
        return await self.db.read(lambda c: list_docs(c, limit, offset, visible, order))

    async def count(self) -> int:
        return await self.db.read(count)

    async def snapshot(
        self, each: Callable[[ProcessDoc, int, int], None], also: Callable[[sqlite3.Connection], T]
    ) -> tuple[int, T]:
        """Hand every document to `each` (its outcome log rendered from every record: `with_history`;
        with its position and the total), then run `also`, all
        in one read transaction: one consistent snapshot of the file while writers go on (`dump`).
        Returns (documents, what `also` returned)."""

        def job(c: sqlite3.Connection) -> tuple[int, T]:
            total, n = count(c), 0
            for n, doc in enumerate(each_doc(c), start=1):
                each(with_history(c, doc), n, total)
            return n, also(c)

        return await self.db.read(job)

    async def reindex(self) -> int:
        return await self.db.write(rebuild_index, long=True)  # seconds at size: never on the event loop
