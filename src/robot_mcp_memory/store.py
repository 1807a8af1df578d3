"""ProcessStore: process documents as rows of `processes`, indexed by `processes_fts`.

The row is the source of truth; the markdown is rendered from it on the way out. A row and its
FTS entry are written in one transaction. Searching ranks by FTS5 relevance times Laplace
reliability — on the *positive* relevance ``-bm25()``, since FTS5's bm25 is negative (smaller is
better) and multiplying it directly would rank a reliable process lower.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

from robot_mcp_memory import docmodel
from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.errors import Busy
from robot_mcp_memory.kit import SqliteStore
from robot_mcp_memory.kit.store import now_iso
from robot_mcp_memory.search import fts

#: bm25 column weights for (id, title, task_pattern, tags, body).
BM25_WEIGHTS = (0.0, 4.0, 2.0, 2.0, 1.0)
_COLUMNS = (
    "id, title, task_pattern, tags, robot, created, updated, success_count, failure_count, "
    "last_used, source_mission_id, extra, body"
)

SaveAction = Literal["created", "updated", "forked"]


@dataclass(frozen=True)
class Hit:
    doc: ProcessDoc
    score: float
    relevance: float


@dataclass(frozen=True)
class Saved:
    doc: ProcessDoc
    action: SaveAction
    requested_id: str


def _row_to_doc(row: sqlite3.Row | tuple[Any, ...]) -> ProcessDoc:
    (pid, title, task_pattern, tags, robot, created, updated, s, f, last_used, mission, extra, body) = row
    return ProcessDoc.model_construct(
        id=pid,
        title=title,
        task_pattern=task_pattern,
        tags=tuple(json.loads(tags)),
        robot=robot,
        created=created,
        updated=updated,
        success_count=s,
        failure_count=f,
        last_used=last_used,
        source_mission_id=mission,
        extra=json.loads(extra),
        body=body,
    )


def _visible_clause(visible: Collection[str] | None, column: str = "robot") -> tuple[str, list[str]]:
    if visible is None:
        return "1", []
    if not visible:
        return "0", []
    marks = ",".join("?" * len(visible))
    return f"{column} IN ({marks})", sorted(visible)


# ---------------------------------------------------------------------------- SQL (connection first)
def select_one(conn: sqlite3.Connection, pid: str) -> ProcessDoc | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM processes WHERE id = ?", (pid,)).fetchone()  # noqa: S608
    return _row_to_doc(row) if row else None


def _index(conn: sqlite3.Connection, doc: ProcessDoc) -> None:
    conn.execute("DELETE FROM processes_fts WHERE id = ?", (doc.id,))
    conn.execute(
        "INSERT INTO processes_fts(id, title, task_pattern, tags, body) VALUES (?, ?, ?, ?, ?)",
        (doc.id, doc.title, doc.task_pattern, " ".join(doc.tags), doc.body),
    )


def upsert(conn: sqlite3.Connection, doc: ProcessDoc) -> None:
    """Write the row and its index entry (the caller holds the transaction)."""
    conn.execute(
        "INSERT INTO processes(id, title, task_pattern, tags, robot, created, updated, success_count, "
        "failure_count, last_used, source_mission_id, extra, body) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET title=excluded.title, task_pattern=excluded.task_pattern, "
        "tags=excluded.tags, robot=excluded.robot, created=excluded.created, updated=excluded.updated, "
        "success_count=excluded.success_count, failure_count=excluded.failure_count, "
        "last_used=excluded.last_used, source_mission_id=excluded.source_mission_id, "
        "extra=excluded.extra, body=excluded.body",
        (
            doc.id,
            doc.title,
            doc.task_pattern,
            json.dumps(list(doc.tags), ensure_ascii=False),
            doc.robot,
            doc.created,
            doc.updated,
            doc.success_count,
            doc.failure_count,
            doc.last_used,
            doc.source_mission_id,
            json.dumps(doc.extra, ensure_ascii=False, sort_keys=True),
            doc.body,
        ),
    )
    _index(conn, doc)


def save_doc(
    conn: sqlite3.Connection, doc: ProcessDoc, now: str, writable: Callable[[str], bool] = lambda _o: True
) -> Saved:
    """Insert, update or fork `doc` by the spec's slug-collision rules (spec §5, save_process).

    - no row with this id → created (counters as given, timestamps filled in);
    - a row with this id and the same (or no new) ``source_mission_id`` → updated: the stored
      counters, ``created`` and ``last_used`` are kept, ``updated`` is bumped;
    - a row with this id from a *different* mission → forked to ``<id>-2`` (``-3`` …), so one
      teaching run never silently overwrites another's document. A document the caller may
      not overwrite (`writable(owner)` is false) forks the same way.
    """
    existing = select_one(conn, doc.id)
    if existing is None:
        stored = doc.model_copy(update={"created": doc.created or now, "updated": now})
        upsert(conn, stored)
        return Saved(stored, "created", doc.id)
    if not writable(existing.robot) or (doc.source_mission_id and doc.source_mission_id != existing.source_mission_id):
        n = 2
        while True:
            candidate = f"{doc.id[: docmodel.MAX_ID - 6]}-{n}"
            other = select_one(conn, candidate)
            if other is None:
                stored = doc.model_copy(update={"id": candidate, "created": now, "updated": now})
                upsert(conn, stored)
                return Saved(stored, "forked", doc.id)
            if other.source_mission_id == doc.source_mission_id and writable(other.robot):
                return _update(conn, other, doc, now, doc.id)
            n += 1
    return _update(conn, existing, doc, now, doc.id)


def _update(conn: sqlite3.Connection, existing: ProcessDoc, doc: ProcessDoc, now: str, asked: str) -> Saved:
    stored = doc.model_copy(
        update={
            "id": existing.id,
            "created": existing.created,
            "updated": now,
            "success_count": existing.success_count,
            "failure_count": existing.failure_count,
            "last_used": existing.last_used,
        }
    )
    upsert(conn, stored)
    return Saved(stored, "updated", asked)


def bump_outcome(conn: sqlite3.Connection, pid: str, success: bool, now: str) -> ProcessDoc | None:
    """The hot counter write: one UPDATE, no index change."""
    column = "success_count" if success else "failure_count"
    cur = conn.execute(
        f"UPDATE processes SET {column} = {column} + 1, last_used = ? WHERE id = ?",  # noqa: S608 - fixed names
        (now, pid),
    )
    return select_one(conn, pid) if cur.rowcount else None


def outcome_with_note(conn: sqlite3.Connection, pid: str, success: bool, note: str, now: str) -> ProcessDoc | None:
    doc = select_one(conn, pid)
    if doc is None:
        return None
    updated = doc.model_copy(
        update={
            "success_count": doc.success_count + (1 if success else 0),
            "failure_count": doc.failure_count + (0 if success else 1),
            "last_used": now,
            "body": docmodel.append_outcome(doc.body, now, success, note),
        }
    )
    upsert(conn, updated)
    return updated


def delete_doc(conn: sqlite3.Connection, pid: str) -> bool:
    conn.execute("DELETE FROM processes_fts WHERE id = ?", (pid,))
    return conn.execute("DELETE FROM processes WHERE id = ?", (pid,)).rowcount > 0


def rebuild_index(conn: sqlite3.Connection) -> int:
    conn.execute("DELETE FROM processes_fts")
    conn.execute(
        "INSERT INTO processes_fts(id, title, task_pattern, tags, body) "
        "SELECT id, title, task_pattern, "
        "(SELECT group_concat(value, ' ') FROM json_each(processes.tags)), body FROM processes"
    )
    n: int = conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    return n


def search(conn: sqlite3.Connection, query: str, k: int, visible: Collection[str] | None) -> list[Hit]:
    expr = fts.match_expression(query)
    if expr is None:
        return []
    where, params = _visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in BM25_WEIGHTS)
    sql = (
        f"SELECT {', '.join('p.' + c.strip() for c in _COLUMNS.split(','))}, "  # noqa: S608 - fixed names
        f"-bm25(processes_fts, {w}) AS relevance "
        "FROM processes_fts JOIN processes p ON p.id = processes_fts.id "
        f"WHERE processes_fts MATCH ? AND {where} "
        "ORDER BY relevance * (p.success_count + 1.0) / (p.success_count + p.failure_count + 2.0) DESC, p.id "
        "LIMIT ?"
    )
    hits = []
    for row in conn.execute(sql, [expr, *params, k]):
        doc = _row_to_doc(row[:-1])
        relevance = float(row[-1])
        hits.append(Hit(doc, relevance * doc.reliability, relevance))
    return hits


def list_docs(
    conn: sqlite3.Connection, limit: int, offset: int, visible: Collection[str] | None
) -> tuple[list[ProcessDoc], int]:
    where, params = _visible_clause(visible)
    total = conn.execute(f"SELECT count(*) FROM processes WHERE {where}", params).fetchone()[0]  # noqa: S608
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM processes WHERE {where} ORDER BY updated DESC, id LIMIT ? OFFSET ?",  # noqa: S608
        [*params, limit, offset],
    ).fetchall()
    return [_row_to_doc(r) for r in rows], int(total)


def count(conn: sqlite3.Connection) -> int:
    n: int = conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    return n


def count_index(conn: sqlite3.Connection) -> int:
    n: int = conn.execute("SELECT count(*) FROM processes_fts").fetchone()[0]
    return n


# ---------------------------------------------------------------------------- the store object
class ProcessStore:
    """Async façade over the SQL above: reads on reader threads, writes on the writer thread."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = lambda _o: True) -> Saved:
        now = now_iso()
        return await self.db.write(lambda c: save_doc(c, doc, now, writable))

    async def get(self, pid: str) -> ProcessDoc | None:
        return await self.db.read(lambda c: select_one(c, pid))

    async def get_markdown(self, pid: str) -> str | None:
        doc = await self.get(pid)
        return doc.render() if doc else None

    async def find(self, query: str, k: int, visible: Collection[str] | None = None) -> list[Hit]:
        return await self.db.read(lambda c: search(c, query, k, visible))

    async def record_outcome(self, pid: str, success: bool, note: str = "") -> ProcessDoc | None:
        """Count an outcome; `None` when the process does not exist.

        Without a note this is a hot record write, executed on the writer thread while the
        caller's thread moves on; when the hot queue is full it is dropped and `Busy` is raised.
        With a note the document body changes too, so it is a definition write."""
        now = now_iso()
        if note.strip():
            return await self.db.write(lambda c: outcome_with_note(c, pid, success, note, now))
        fut = self.db.hot(lambda c: bump_outcome(c, pid, success, now))
        if fut is None:
            raise Busy("the server is overloaded and did not count this outcome; retry in a few seconds")
        return await asyncio.wrap_future(fut)

    async def restore(self, docs: list[ProcessDoc]) -> int:
        """Write documents exactly as given (timestamps and counters included), in one
        transaction: what `load` uses so that a dump loads back identically."""

        def job(c: sqlite3.Connection) -> int:
            for d in docs:
                upsert(c, d)
            return len(docs)

        return await self.db.write(job)

    async def index_counts(self) -> tuple[int, int]:
        """(rows, index entries): they agree unless something is wrong."""
        return await self.db.read(lambda c: (count(c), count_index(c)))

    async def delete(self, pid: str) -> bool:
        return await self.db.write(lambda c: delete_doc(c, pid))

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None
    ) -> tuple[list[ProcessDoc], int]:
        return await self.db.read(lambda c: list_docs(c, limit, offset, visible))

    async def count(self) -> int:
        return await self.db.read(count)

    async def reindex(self) -> int:
        return await self.db.write(rebuild_index)
