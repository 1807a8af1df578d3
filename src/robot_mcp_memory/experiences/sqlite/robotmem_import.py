"""Import a robotmem ``memory.db`` (robotmem 0.1.x; 0.1.3 tested) into the experience memory.

A storage module (it talks to sqlite3): it reads the robotmem file **read-only** (``mode=ro`` — the
file is never modified) and writes what it read into ``index.db`` on the writer thread, 500
memories per transaction, each row through `storage.insert_memory` (row, FTS entry and tags
together) and then given what a fresh learn would not have: its original times, status, access
counts and superseded link.

What comes across, per robotmem table:

- ``memories`` → memories: facts and perceptions with their content, ``category`` and
  ``confidence`` as robotmem stored them, collection (optionally prefixed), ``created_at`` /
  ``updated_at`` / ``last_accessed`` / ``access_count``, session, status — ``invalidated``
  (robotmem's forget) becomes ``forgotten`` with its reason, ``superseded`` keeps its link,
  remapped to the new id. A fact's context JSON is kept (minus robotmem's own ``"source":
  "learn_tool"`` marker; its ``user_context`` text becomes ``note``, as plain-text context is here);
  a perception's ``perception_metadata`` becomes its context and ``perception_data`` its data.
  Everything is attributed to one robot (``robot``: the CLI's ``--robot``, else ``ROBOT_ID``).
  Our classifier adds its tags and scope; dedup digests are computed so later learns dedup
  against imported memories. Embeddings are not copied (another model): the vector index's
  backfill makes ours for memories that have none.
- ``sessions`` + ``session_outcomes`` → sessions (same id, robotmem's UUID), context, start, end
  (``status = ended``: its last update), outcome score (the last one recorded).
- ``memory_tags`` → tags (robotmem ``user`` tags stay ``user`` and are searchable; the rest are
  ``import``). ``tag_meta`` (robotmem's taxonomy) is code here, not data: not imported.

Idempotent: each imported memory carries ``metadata.imported_from`` = ``{"source": "robotmem",
"id", "created_at"}``; robotmem's id with its creation time names a memory across copies of the
file, so importing the same file (or a later copy of it) again skips what is already here.
Sessions keep their ids, so an existing one is skipped too.

A file that is not a robotmem database, or has a schema this importer does not know (a column
or a ``user_version`` robotmem 0.1.3 does not have), raises `RobotmemUnreadable` before anything
is written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import InvalidInput, StorageError
from robot_mcp_memory.experiences import classify, dedup
from robot_mcp_memory.experiences.lexicon import Analysis
from robot_mcp_memory.experiences.model import (
    MAX_CONTEXT_BYTES,
    MAX_DATA_BYTES,
    MAX_INSIGHT,
    MAX_METADATA_BYTES,
    REAL_WEIGHT,
    NewMemory,
    Session,
    check_collection,
    check_perception_type,
    parse_data,
    parse_object,
)
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.experiences.sqlite.repository import SqliteMemories
from robot_mcp_memory.tenancy.tokens import ROBOT_RE

Progress = Callable[[int, int], None]
SOURCE = "robotmem"
PAGE = 500
MAX_SESSION_ID = 64
MAX_TAG = 64
#: Perception data longer than this (bytes) is not even read: it would be left behind anyway.
MAX_DATA_READ = 4 * MAX_DATA_BYTES

#: robotmem 0.1.3's columns. Required ones must be there; a column outside the known set means a
#: schema this importer has not been written for.
MEMORY_REQUIRED = frozenset(
    {"id", "session_id", "collection", "type", "content", "context", "category", "confidence", "status", "created_at"}
)
MEMORY_KNOWN = MEMORY_REQUIRED | {
    "human_summary", "perception_type", "perception_data", "perception_metadata", "concept", "decay_rate",
    "source", "scope", "superseded_by", "invalidated_reason", "invalidated_at", "content_hash", "media_hash",
    "access_count", "return_count", "last_accessed", "last_validated", "embedding", "scope_files",
    "scope_entities", "updated_at",
}  # fmt: skip
SESSION_REQUIRED = frozenset({"id", "external_id", "collection", "context", "status", "created_at"})
SESSION_KNOWN = SESSION_REQUIRED | {"session_count", "client_type", "updated_at"}
OUTCOME_REQUIRED = frozenset({"session_id", "score"})
OUTCOME_KNOWN = OUTCOME_REQUIRED | {"id", "created_at"}
TAG_REQUIRED = frozenset({"memory_id", "tag"})
TAG_KNOWN = TAG_REQUIRED | {"source", "created_at"}

# Skip reasons (the summary counts memories and sessions by these).
ALREADY = "already imported"
EMPTY = "empty content"
TOO_LONG = f"content longer than {MAX_INSIGHT:,} characters"
BAD_TYPE = "not a fact or a perception"
BAD_STATUS = "unknown status"
BAD_CONTEXT = "context not importable (over 64 KB, nested too deeply, or NaN/Infinity or a lone surrogate in it)"
BAD_PERCEPTION_TYPE = "perception type not usable here"
# Notes: imported, with a caveat.
DATA_LEFT = "perception data over 256 KB left behind (memory imported without it)"
DATA_UNREADABLE = "perception data not importable as JSON (NaN/Infinity, too deep, a lone surrogate): left behind"
DATA_BASE64 = "perception data not UTF-8 (imported as base64 text)"
NO_TIME = "no readable creation time (import time used)"
ORPHAN_SESSION = "sessions recreated from their memories (robotmem had no row for them)"


class RobotmemBusy(StorageError):
    """The file is a database another process holds locked (robotmem mid-write): try again."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is locked by another process (robotmem writing to it?); run the import again in a "
            "moment. Nothing was written."
        )
        self.path = path


class RobotmemUnreadable(StorageError):
    """The file is not a robotmem database this importer can read. Names the file (an operator
    error, like `errors.StoreUnreadable`); nothing was written anywhere."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path} is not a robotmem memory.db this importer can read ({reason}). Point it at robotmem's "
            "database (~/.robotmem/memory.db, or memory.db in $ROBOTMEM_HOME). The file was not modified."
        )
        self.path = path
        self.reason = reason


# ---------------------------------------------------------------------------- reading robotmem (read-only)
@dataclass(frozen=True)
class SourceMemory:
    id: int
    session_id: str | None
    collection: str
    type: str
    content: str
    context: str | None
    perception_type: str | None
    perception_data: bytes | str | None
    perception_metadata: str | None
    category: str | None
    confidence: float | None
    status: str
    superseded_by: int | None
    reason: str | None
    created_at: str | None
    updated_at: str | None
    access_count: int
    last_accessed: str | None
    tags: tuple[tuple[str, str], ...] = ()
    #: The data was longer than `MAX_DATA_READ` and not read (``perception_data`` is then None).
    data_too_large: bool = False


@dataclass(frozen=True)
class SourceSession:
    id: int
    external_id: str | None
    collection: str
    context: str | None
    status: str | None
    created_at: str | None
    updated_at: str | None
    session_count: int | None
    client_type: str | None
    outcome: float | None


def _columns(conn: sqlite3.Connection, table: str) -> set[str] | None:
    rows = conn.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()
    return {r[0] for r in rows} or None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _str(value: Any) -> str | None:
    """A text column's value as text: robotmem never checks what it stores, so a column may hold
    a BLOB (decoded as UTF-8 with replacement characters, as invalid TEXT is) or a number."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return _text(value)
    return str(value)


def usable_collection(name: str) -> str:
    """A collection name this store accepts for a robotmem one (robotmem takes any string): the
    name itself when it is usable; else its usable characters, runs of the others made ``-``,
    with a digest of the original so two names never fold into one; a name with nothing usable
    (``实验室``) becomes ``c-`` and the digest."""
    try:
        return check_collection(name)
    except InvalidInput:
        pass
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    kept = re.sub(r"[^A-Za-z0-9_.:-]+", "-", name).strip("-_.:")[:48]
    return f"{kept}-{digest}" if kept else f"c-{digest}"


class RobotmemFile:
    """A robotmem ``memory.db`` opened read-only, its schema checked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.is_file():
            raise InvalidInput(f"no robotmem database at {path} (robotmem keeps it in ~/.robotmem/memory.db)")
        self.conn = self._open("mode=ro")
        try:
            try:
                self._check()
            except sqlite3.OperationalError as exc:
                if "unable to open" not in str(exc) or not self._read_only_place():
                    raise
                # A WAL database on a read-only mount: SQLite cannot make its -shm index there.
                # Nothing can be writing it, so it is read as an immutable file — unless its WAL
                # holds commits not yet in the file, which that would silently leave out.
                self.close()
                wal = path.with_name(path.name + "-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise RobotmemUnreadable(
                        str(path),
                        "it is on a read-only location with an unmerged -wal file; copy both somewhere writable",
                    ) from exc
                self.conn = self._open("mode=ro&immutable=1")
                self._check()
        except sqlite3.OperationalError as exc:
            self.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise RobotmemBusy(str(path)) from exc
            raise RobotmemUnreadable(str(path), f"cannot read it: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            self.close()
            raise RobotmemUnreadable(str(path), f"not an SQLite database: {exc}") from exc
        except RobotmemUnreadable:
            self.close()
            raise

    #: How long opening waits for robotmem to finish a write that holds the file locked.
    busy_timeout_s = 5.0

    def _open(self, mode: str) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?{mode}", uri=True, check_same_thread=False, timeout=self.busy_timeout_s
            )
        except sqlite3.Error as exc:
            raise RobotmemUnreadable(str(self.path), f"cannot open it: {exc}") from exc
        conn.text_factory = _text  # a robotmem file may hold invalid UTF-8; never fail on it
        return conn

    def _read_only_place(self) -> bool:
        return not os.access(self.path.parent, os.W_OK)

    def _check(self) -> None:
        self.conn.execute("PRAGMA query_only = 1")
        if _columns(self.conn, "store_meta") is not None:
            raise RobotmemUnreadable(str(self.path), "it is a robot-mcp-memory database, not robotmem's")
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version:
            raise RobotmemUnreadable(
                str(self.path), f"user_version {version}: a newer robotmem schema than the 0.1.x this importer reads"
            )
        memories = _columns(self.conn, "memories")
        if memories is None:
            raise RobotmemUnreadable(str(self.path), "it has no memories table")
        self.memory_columns = self._known("memories", memories, MEMORY_REQUIRED, MEMORY_KNOWN)
        self.session_columns = self._optional("sessions", SESSION_REQUIRED, SESSION_KNOWN)
        self.outcome_columns = self._optional("session_outcomes", OUTCOME_REQUIRED, OUTCOME_KNOWN)
        self._outcomes: dict[str, tuple[float, str | None]] | None = None  # read once (`outcomes`)
        self.tag_columns = self._optional("memory_tags", TAG_REQUIRED, TAG_KNOWN)

    def _known(self, table: str, cols: set[str], required: frozenset[str], known: frozenset[str]) -> set[str]:
        missing = required - cols
        if missing:
            raise RobotmemUnreadable(str(self.path), f"{table} lacks {', '.join(sorted(missing))}")
        unknown = cols - known
        if unknown:
            raise RobotmemUnreadable(
                str(self.path),
                f"{table} has columns robotmem 0.1.3 does not: {', '.join(sorted(unknown))} — another "
                "application's database, or a newer robotmem schema than this importer reads",
            )
        return cols

    def _optional(self, table: str, required: frozenset[str], known: frozenset[str]) -> set[str]:
        cols = _columns(self.conn, table)
        return set() if cols is None else self._known(table, cols, required, known)

    def close(self) -> None:
        self.conn.close()

    def snapshot(self) -> None:
        """Read everything from here on as of one moment (robotmem may keep writing): the counts
        and every page agree."""
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        self._outcomes = None  # read again, in it

    # ------------------------------------------------------------------ counts and pages
    def count_memories(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM memories").fetchone()[0])

    def memories(self, page: int = PAGE) -> Iterator[list[SourceMemory]]:
        """Every memory, by id, a page at a time (with its tags)."""

        def col(name: str, default: str = "NULL") -> str:
            return name if name in self.memory_columns else default

        # Data far over what a perception may hold here is never read: a page of 8 MB trajectories
        # would otherwise be in memory at once, only to be left behind.
        if "perception_data" in self.memory_columns:
            data = f"CASE WHEN length(perception_data) > {MAX_DATA_READ} THEN NULL ELSE perception_data END"
            too_large = f"coalesce(length(perception_data) > {MAX_DATA_READ}, 0)"
        else:
            data, too_large = "NULL", "0"
        sql = (
            "SELECT id, session_id, collection, type, content, context, "  # noqa: S608 - known column names
            f"{col('perception_type')}, {data}, {col('perception_metadata')}, category, "
            f"confidence, status, {col('superseded_by')}, {col('invalidated_reason')}, created_at, "
            f"{col('updated_at')}, {col('access_count', '0')}, {col('last_accessed')}, {too_large} "
            "FROM memories WHERE id > ? ORDER BY id LIMIT ?"
        )
        after: float = -math.inf  # every id, 0 and negative ones too (they were left out, uncounted)
        while True:
            rows = self.conn.execute(sql, (after, page)).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            tags = self._tags([r[0] for r in rows])
            yield [
                SourceMemory(
                    id=int(r[0]),
                    session_id=_str(r[1]),
                    collection=_str(r[2]) or "default",
                    type=_str(r[3]) or "fact",
                    content=_str(r[4]) or "",
                    context=_str(r[5]),
                    perception_type=_str(r[6]),
                    # a number when robotmem stored one (a column's type is only a preference in SQLite)
                    perception_data=repr(r[7]) if isinstance(r[7], int | float) else r[7],
                    perception_metadata=_str(r[8]),
                    category=_str(r[9]),
                    confidence=r[10] if isinstance(r[10], int | float) else None,
                    status=_str(r[11]) or "active",
                    superseded_by=r[12] if isinstance(r[12], int) else None,
                    reason=_str(r[13]),
                    created_at=_str(r[14]),
                    updated_at=_str(r[15]),
                    access_count=int(r[16]) if isinstance(r[16], int) else 0,
                    last_accessed=_str(r[17]),
                    data_too_large=bool(r[18]),
                    tags=tags.get(int(r[0]), ()),
                )
                for r in rows
            ]

    def _tags(self, ids: Sequence[int]) -> dict[int, tuple[tuple[str, str], ...]]:
        if not self.tag_columns or not ids:
            return {}
        source = "source" if "source" in self.tag_columns else "'auto'"
        marks = ",".join("?" * len(ids))
        out: dict[int, list[tuple[str, str]]] = {}
        for mid, tag, src in self.conn.execute(
            f"SELECT memory_id, tag, {source} FROM memory_tags WHERE memory_id IN ({marks}) "  # noqa: S608
            "ORDER BY memory_id",
            list(ids),
        ):
            text = _str(tag)
            if text is not None:
                out.setdefault(int(mid), []).append((text, _str(src) or "auto"))
        return {k: tuple(v) for k, v in out.items()}

    def outcomes(self) -> dict[str, tuple[float, str | None]]:
        """robotmem's session id → (its last outcome score, when it was recorded). robotmem
        records one for any id ``end_session`` is given, also one it never started (a custom
        id memories were learned under), which has no ``sessions`` row. Read once: the sessions
        and the orphans recreated from memories both ask."""
        if self._outcomes is not None:
            return self._outcomes
        outcomes: dict[str, tuple[float, str | None]] = {}
        if self.outcome_columns:
            order = "id" if "id" in self.outcome_columns else "rowid"
            when = "created_at" if "created_at" in self.outcome_columns else "NULL"
            for sid, score, at in self.conn.execute(
                f"SELECT session_id, score, {when} FROM session_outcomes ORDER BY {order}"  # noqa: S608
            ):
                if isinstance(score, int | float) and math.isfinite(score):
                    outcomes[_str(sid) or ""] = (float(score), _str(at))  # the last one recorded wins
        self._outcomes = outcomes
        return outcomes

    def sessions(self) -> list[SourceSession]:
        if not self.session_columns:
            return []
        outcomes = {sid: score for sid, (score, _) in self.outcomes().items()}

        def col(name: str) -> str:
            return name if name in self.session_columns else "NULL"

        rows = self.conn.execute(
            "SELECT id, external_id, collection, context, status, created_at, "  # noqa: S608
            f"{col('updated_at')}, {col('session_count')}, {col('client_type')} FROM sessions ORDER BY id"
        ).fetchall()
        out = []
        for r in rows:
            ext = _str(r[1])
            out.append(
                SourceSession(
                    id=int(r[0]),
                    external_id=ext,
                    collection=_str(r[2]) or "default",
                    context=_str(r[3]),
                    status=_str(r[4]),
                    created_at=_str(r[5]),
                    updated_at=_str(r[6]),
                    session_count=r[7] if isinstance(r[7], int) else None,
                    client_type=_str(r[8]),
                    outcome=outcomes.get(ext) if ext is not None else None,
                )
            )
        return out


# ---------------------------------------------------------------------------- mapping (pure)
def epoch(text: str | None) -> float | None:
    """robotmem's times (``strftime('%Y-%m-%dT%H:%M:%f','now')``: UTC, no zone) as epoch seconds."""
    if text is None or not str(text).strip():
        return None
    try:
        dt = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def session_id_of(raw: str) -> str:
    """Our id for a robotmem session id: the same when it fits, else a stable digest."""
    if 1 <= len(raw) <= MAX_SESSION_ID and raw.isprintable():
        return raw
    return "robotmem-" + hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:32]


def context_of(raw: str | None) -> dict[str, Any]:
    """A robotmem context column as our context: JSON objects kept (without robotmem's own
    ``source: learn_tool`` marker; ``user_context`` → ``note``), anything else as ``note``."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit:
        return {"note": raw.strip()}  # text, as robotmem itself kept it when its json.loads failed
    if not isinstance(value, dict):
        return {"note": raw.strip()}
    ctx = dict(value)
    if ctx.get("source") == "learn_tool":
        del ctx["source"]
    if "user_context" in ctx and "note" not in ctx:
        ctx["note"] = ctx.pop("user_context")
    return ctx


def _source_weight(ctx: Mapping[str, Any]) -> float:
    return REAL_WEIGHT if dedup.source_of(ctx) == "real" else 1.0


def _tags(src: SourceMemory, ours: Sequence[str], user: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """robotmem's tags first (their source kept as ``user`` for user tags, else ``import``), then
    our classifier's and the context's; one source per tag, the first wins."""
    out: dict[str, str] = {}
    for tag, source in src.tags:
        name = tag.strip()[:MAX_TAG]
        if name:
            out.setdefault(name, "user" if source == "user" else "import")
    for t in ours:
        out.setdefault(t, "auto")
    for t in user:
        out.setdefault(t, "user")
    return tuple(out.items())


@dataclass(frozen=True)
class Prepared:
    """One robotmem memory, ready to write."""

    source_id: int
    new: NewMemory
    created_at: float
    updated_at: float
    status: str  # active | forgotten | superseded
    forget_reason: str | None
    superseded_by: int | None  # robotmem id
    access_count: int
    last_accessed: float | None
    source_tags: int = 0


def key_of(source_id: int, created_at: str | None) -> tuple[int, str]:
    return (source_id, created_at or "")


def prepare(src: SourceMemory, robot: str, prefix: str, now: float, notes: Counter[str]) -> Prepared | str:
    """Our memory for a robotmem one, or the reason it is skipped."""
    text = src.content.strip()
    if not text:
        return EMPTY
    if len(text) > MAX_INSIGHT:
        return TOO_LONG
    if src.type not in ("fact", "perception"):
        return BAD_TYPE
    status = {"active": "active", "invalidated": "forgotten", "forgotten": "forgotten", "superseded": "superseded"}
    if src.status not in status:
        return BAD_STATUS
    collection = usable_collection(prefix + src.collection)
    marker: dict[str, Any] = {"source": SOURCE, "id": src.id, "created_at": src.created_at}
    if src.status == "superseded" and src.reason:
        marker["reason"] = src.reason
    created = epoch(src.created_at)
    if created is None:
        notes[NO_TIME] += 1
        created = now
    updated = epoch(src.updated_at) or created
    session = None if not src.session_id else session_id_of(src.session_id)
    confidence = src.confidence if src.confidence is not None and math.isfinite(src.confidence) else 0.9
    confidence = min(1.0, max(0.0, float(confidence)))
    if src.type == "fact":
        try:
            ctx = _context(src.context)
        except InvalidInput:
            return BAD_CONTEXT
        a = Analysis(text)
        c = classify.classify(a, ctx)
        keys = dedup.fact_keys(text, ctx, a)
        category = (src.category or "").strip()[:64] or c.category  # robotmem's, as it stored it
        new = NewMemory(
            robot=robot,
            collection=collection,
            type="fact",
            content=text,
            category=category,
            confidence=confidence,
            context=ctx,
            content_hash=keys.content_hash,
            source_weight=_source_weight(ctx),
            facts_hash=keys.facts_hash,
            session_id=session,
            metadata={**({"scope": c.scope} if c.scope else {}), "imported_from": marker},
            tags=_tags(src, classify.tags_of(a, category), c.user_tags),
        )
    else:
        try:
            ptype = check_perception_type((src.perception_type or "visual").strip().lower())
        except InvalidInput:
            return BAD_PERCEPTION_TYPE
        try:
            ctx = {**context_of(src.context), **context_of(src.perception_metadata)}
            ctx = parse_object(ctx, "metadata", max(MAX_METADATA_BYTES, MAX_CONTEXT_BYTES))
        except InvalidInput:
            return BAD_CONTEXT
        payload: Any = None
        raw: str | None
        if isinstance(src.perception_data, bytes):
            try:
                raw = src.perception_data.decode("utf-8")
            except UnicodeDecodeError:
                raw = base64.b64encode(src.perception_data).decode("ascii")
                marker["data_encoding"] = "base64"
                notes[DATA_BASE64] += 1
        else:
            raw = src.perception_data
        if src.data_too_large:
            notes[DATA_LEFT] += 1
            marker["data_left_behind"] = True
        elif raw is not None and raw.strip():
            try:
                payload = parse_data(raw)
            except InvalidInput:
                notes[DATA_LEFT if len(raw.encode("utf-8", "surrogatepass")) > MAX_DATA_BYTES else DATA_UNREADABLE] += 1
                marker["data_left_behind"] = True
        c = classify.classify_perception(text, ptype, ctx)
        new = NewMemory(
            robot=robot,
            collection=collection,
            type="perception",
            content=text,
            category=(src.category or "").strip()[:64] or c.category,
            confidence=confidence,
            context=ctx,
            content_hash=dedup.perception_hash(text, ptype, payload, ctx),
            source_weight=_source_weight(ctx),
            session_id=session,
            perception_type=ptype,
            data=payload,
            metadata={**({"scope": c.scope} if c.scope else {}), "imported_from": marker},
            tags=_tags(src, c.tags, c.user_tags),
        )
    reason = None
    if status[src.status] == "forgotten":
        reason = (src.reason or "").strip()[:1000] or "forgotten in robotmem"
    return Prepared(
        source_id=src.id,
        new=new,
        created_at=created,
        updated_at=updated,
        status=status[src.status],
        forget_reason=reason,
        superseded_by=src.superseded_by if src.status == "superseded" else None,
        access_count=max(0, src.access_count),
        last_accessed=epoch(src.last_accessed),
        source_tags=len({t.strip()[:MAX_TAG] for t, _ in src.tags if t.strip()}),
    )


def _context(raw: str | None) -> dict[str, Any]:
    """`context_of(raw)` checked as a learn checks a context; a JSON object that fails the check
    (nested deeper than we keep, NaN) comes across as its text, a `note`, as text that is not JSON
    does. `InvalidInput` only when even that cannot be kept (over 64 KB, a lone surrogate)."""
    try:
        return parse_object(context_of(raw), "context", MAX_CONTEXT_BYTES)
    except InvalidInput:
        if raw is None or not raw.strip():
            raise
        return parse_object({"note": raw.strip()}, "context", MAX_CONTEXT_BYTES)


def session_of(src: SourceSession, robot: str, prefix: str, now: float) -> Session | str:
    collection = usable_collection(prefix + src.collection)
    try:
        ctx = _context(src.context)
    except InvalidInput:
        return BAD_CONTEXT
    started = epoch(src.created_at) or now
    ended = (epoch(src.updated_at) or started) if src.status == "ended" else None
    score = src.outcome if src.outcome is not None and 0.0 <= src.outcome <= 1.0 else None
    marker = {"source": SOURCE, "id": src.id, "status": src.status}
    if src.session_count is not None:
        marker["session_count"] = src.session_count
    if src.client_type:
        marker["client_type"] = src.client_type
    sid = session_id_of(src.external_id if src.external_id else f"robotmem-session-{src.id}")
    return Session(sid, robot, collection, ctx, started, ended, score, {"imported_from": marker})


# ---------------------------------------------------------------------------- writes (connection first)
def imported_keys(conn: sqlite3.Connection, after: int = 0) -> dict[tuple[int, str], int]:
    """(robotmem id, robotmem created_at) → our id, for every memory imported before (with an
    id above `after`)."""
    rows = conn.execute(
        "SELECT id, json_extract(metadata, '$.imported_from.id'), "
        "coalesce(json_extract(metadata, '$.imported_from.created_at'), '') FROM memories "
        "WHERE id > ? AND metadata LIKE '%\"imported_from\"%' AND json_extract(metadata, '$.imported_from.source') = ?",
        (after, SOURCE),
    ).fetchall()
    return {(int(r[1]), str(r[2])): int(r[0]) for r in rows if isinstance(r[1], int)}


def last_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM memories").fetchone()[0])


def existing_sessions(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """Which of `ids` are sessions here already: id → (robot, whether an import from robotmem made it)."""
    found: dict[str, tuple[str, bool]] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT id, robot, coalesce(json_extract(summary, '$.imported_from.source') = ?, 0) "  # noqa: S608
            f"FROM sessions WHERE id IN ({marks})",
            [SOURCE, *chunk],
        )
        found.update((r[0], (r[1], bool(r[2]))) for r in rows)
    return found


def _in_session(p: Prepared, remap: Mapping[str, str]) -> Prepared:
    sid = p.new.session_id
    if sid is None or sid not in remap:
        return p
    return replace(p, new=replace(p.new, session_id=remap[sid]))


def own_session_id(sid: str, robot: str) -> str:
    """Our id for an imported session whose id another robot's session holds here already:
    stable, so importing the same file again finds it (its memories joined that other robot's
    session, and its summary counted a memory the owner could not see)."""
    return "robotmem-" + hashlib.sha256(f"{robot}\0{sid}".encode("utf-8", "replace")).hexdigest()[:32]


@dataclass
class _Remaps:
    """Where this import's memories go when another robot holds their session's id here.

    `now`: the id is another robot's own session — the memories go to `own_session_id` instead.
    `later`: the id is another robot's *import* of the same robotmem session. Its memories were
    imported then (a memory is imported once, whoever for), so the session counts as imported
    too; a memory new since then goes to `own_session_id`, made when one needs it."""

    now: dict[str, str] = field(default_factory=dict)
    later: dict[str, str] = field(default_factory=dict)


async def _own_target(store: storage.ExperienceStore, sid: str, robot: str) -> tuple[str, bool]:
    """`own_session_id(sid, robot)`, derived again while another robot holds that id too (only a
    file crafted to collide gets there): never a session of another robot. And whether `robot`
    holds it already (an earlier import made it)."""
    target = own_session_id(sid, robot)
    for _ in range(8):
        held = (await store.read(partial(existing_sessions, ids=[target]))).get(target)
        if held is None or held[0] == robot:
            return target, held is not None
        target = own_session_id(target, robot)
    raise StorageError(f"no free session id for robotmem's session {sid!r}; import it for another robot")


async def _settle_sessions(
    store: storage.ExperienceStore, sessions: Sequence[Session], robot: str, remaps: _Remaps, *, lazy: bool
) -> tuple[list[Session], int]:
    """`sessions` not yet present (ids another robot holds replaced as `remaps` says; with `lazy`
    another robot's imported ones are left for `remaps.later`), and how many count as present."""
    owners = await store.read(partial(existing_sessions, ids=[s.id for s in sessions]))
    fresh: list[Session] = []
    present = 0
    for s in sessions:
        held = owners.get(s.id)
        if held is None:
            fresh.append(s)
        elif held[0] == robot:
            present += 1
        else:
            target, ours = await _own_target(store, s.id, robot)
            if lazy and held[1]:  # another robot's import of it: imported, and a copy only when needed
                remaps.later[s.id] = target
                present += 1
            else:
                remaps.now[s.id] = target
                if ours:
                    present += 1
                else:
                    fresh.append(replace(s, id=target))
    return fresh, present


def insert_sessions(conn: sqlite3.Connection, sessions: Sequence[Session]) -> list[str]:
    """The sessions not already present, inserted; returns their ids."""
    written = []
    for s in sessions:
        cur = conn.execute(
            "INSERT OR IGNORE INTO sessions(id, robot, collection, context, started_at, ended_at, outcome_score, "
            "summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                s.id,
                s.robot,
                s.collection,
                json.dumps(s.context, ensure_ascii=False, separators=(",", ":")),
                s.started_at,
                s.ended_at,
                s.outcome_score,
                None if s.summary is None else json.dumps(s.summary, ensure_ascii=False, separators=(",", ":")),
            ),
        )
        if cur.rowcount:
            written.append(s.id)
    return written


@dataclass
class Inserted:
    """What `insert_imported` did with a page: ``(our id, whether inserted now)`` per memory, the
    memories other imports brought since the last look (``key → id``), and the largest id now."""

    ids: list[tuple[int, bool]]
    others: dict[tuple[int, str], int]
    last: int


def insert_imported(
    conn: sqlite3.Connection, items: Sequence[Prepared], keys: Sequence[tuple[int, str]], after: int
) -> Inserted:
    """Each memory through `storage.insert_memory` (row + FTS + tags), then its original times,
    status and counters. One transaction for the page (the caller's, which holds the write lock),
    so the check is race-free: a memory another import of the same file inserted since the
    caller last looked (an id above `after`) is not inserted again — its id comes back, marked
    not new. Each memory is looked at once however many pages follow (the caller moves `after`
    on to `Inserted.last`)."""
    present = imported_keys(conn, after)
    ids: list[tuple[int, bool]] = []
    for p, key in zip(items, keys, strict=True):
        if key in present:
            ids.append((present[key], False))
            continue
        mid = storage.insert_memory(conn, p.new, p.created_at)
        conn.execute(
            "UPDATE memories SET updated_at = ?, status = ?, forget_reason = ?, access_count = ?, "
            "last_accessed = ? WHERE id = ?",
            (p.updated_at, p.status, p.forget_reason, p.access_count, p.last_accessed, mid),
        )
        ids.append((mid, True))
    return Inserted(ids, present, last_id(conn))


def link_superseded(conn: sqlite3.Connection, links: Sequence[tuple[int, int]]) -> None:
    """(memory, the memory that superseded it), both our ids — where no link is set yet (a run
    that stopped partway, or another import, may have set it)."""
    conn.executemany(
        "UPDATE memories SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
        [(to, mid) for mid, to in links],
    )


# ---------------------------------------------------------------------------- the use case
async def import_robotmem(
    svc: ExperienceService,
    path: Path,
    *,
    robot: str | None = None,
    collection_prefix: str = "",
    progress: Progress | None = None,
    page: int = PAGE,
) -> ImportReport:
    """Bring a robotmem ``memory.db`` across (see the module docstring). The caller checks the
    principal may (fleet administration); `robot` defaults to the service's robot (``ROBOT_ID``)."""
    who = robot or svc.default_robot
    if not ROBOT_RE.match(who):
        raise InvalidInput(f"robot id {who!r} must be letters, digits, '_', '.', '-' (max 64)")
    if collection_prefix:
        try:
            check_collection(collection_prefix + "default")
        except InvalidInput as exc:
            raise InvalidInput(f"collection prefix {collection_prefix!r}: {exc.detail}") from exc
    source = RobotmemFile(path)
    try:
        return await _run(svc, source, who, collection_prefix, progress, page)
    except sqlite3.Error as exc:  # before any memory was read: a damaged page of its sessions
        raise RobotmemUnreadable(str(path), f"reading it failed: {exc}") from exc
    finally:
        source.close()


def _sqlite_store(svc: ExperienceService) -> storage.ExperienceStore:
    """The SQLite store behind `svc`: the import writes its rows (and keeps their ids) directly."""
    if not isinstance(svc.store, SqliteMemories):
        raise TypeError("the robotmem import writes to the SQLite experience store")
    return svc.store.store


async def _run(
    svc: ExperienceService, source: RobotmemFile, robot: str, prefix: str, progress: Progress | None, page: int
) -> ImportReport:
    now = time.time()
    source.snapshot()
    report = ImportReport(str(source.path), robot, total_memories=source.count_memories())
    store = _sqlite_store(svc)

    # Sessions first: memories point at them.
    src_sessions = source.sessions()
    report.total_sessions = len(src_sessions)
    sessions: list[Session] = []
    for s in src_sessions:
        made = session_of(s, robot, prefix, now)
        if isinstance(made, str):
            report.skipped_sessions[made] += 1
        else:
            sessions.append(made)
            if made.collection != prefix + s.collection:
                report.renamed[prefix + s.collection] = made.collection
    remaps = _Remaps()  # robotmem's session id → ours, where another robot holds it here
    fresh, present = await _settle_sessions(store, sessions, robot, remaps, lazy=True)
    if present:
        report.skipped_sessions[ALREADY] += present
    if fresh:
        report.sessions += len(await store.write(lambda c: insert_sessions(c, fresh)))
    session_ids = {s.id for s in sessions}
    originals = {s.id: s for s in sessions}  # robotmem's sessions, by their ids here before any remap

    after = await store.read(last_id)
    done = await store.read(imported_keys)
    outcomes = source.outcomes()
    created_of: dict[int, str | None] = {}  # robotmem id → its created_at (its key)
    links: list[tuple[int, int]] = []  # (our id, robotmem id it was superseded by)
    orphans: dict[str, Session] = {}
    copies: dict[str, Session] = {}  # this robot's own copies of sessions another robot imported
    seen = 0
    pages = source.memories(page)
    while True:
        try:
            rows = next(pages, None)
        except sqlite3.DatabaseError as exc:  # a damaged page: keep what was read before it
            report.failed = f"reading {source.path} failed after {seen} memories ({exc})"
            break
        if rows is None:
            break
        batch: list[Prepared] = []
        for src in rows:
            created_of[src.id] = src.created_at
            key = key_of(src.id, src.created_at)
            if key in done:
                report.skipped_memories[ALREADY] += 1
                report.memory_ids[src.id] = done[key]
                if src.status == "superseded" and src.superseded_by is not None:
                    links.append((done[key], src.superseded_by))  # a run that stopped before linking it
                continue
            p = prepare(src, robot, prefix, now, report.notes)
            if isinstance(p, str):
                report.skipped_memories[p] += 1
                continue
            if p.new.collection != prefix + src.collection:
                report.renamed[prefix + src.collection] = p.new.collection
            sid = p.new.session_id
            if sid is not None and sid in remaps.later:  # new since another robot's import of its session
                p = _in_session(p, remaps.later)  # … into this robot's own copy of that session
                own = remaps.later[sid]
                if own not in session_ids:
                    copies[own] = replace(originals[sid], id=own)
                    session_ids.add(own)
                sid = own
            if sid is not None and sid not in session_ids and sid not in orphans:
                marker = {"imported_from": {"source": SOURCE, "recreated": True}}
                ended = outcomes.get(src.session_id or "")  # robotmem ended it without starting it
                score = ended[0] if ended is not None and 0.0 <= ended[0] <= 1.0 else None
                end = (epoch(ended[1]) or p.created_at) if ended is not None else None
                orphans[sid] = Session(sid, robot, p.new.collection, {}, p.created_at, end, score, marker)
            batch.append(p)
        if copies:
            own_copies, _ = await _settle_sessions(store, list(copies.values()), robot, remaps, lazy=False)
            copies.clear()
            if own_copies:
                copied = len(await store.write(partial(insert_sessions, sessions=own_copies)))
                report.sessions += copied  # imported now, for this robot: no longer counted as skipped
                report.skipped_sessions[ALREADY] -= copied
                if report.skipped_sessions[ALREADY] <= 0:
                    del report.skipped_sessions[ALREADY]
        if orphans:
            pending = list(orphans.values())
            session_ids.update(orphans)
            orphans.clear()
            new_orphans, _ = await _settle_sessions(store, pending, robot, remaps, lazy=False)
            if new_orphans:
                recreated = await store.write(partial(insert_sessions, sessions=new_orphans))
                report.notes[ORPHAN_SESSION] += len(recreated)
        if remaps.now:
            batch = [_in_session(p, remaps.now) for p in batch]
        if batch:
            keys = [key_of(p.source_id, created_of[p.source_id]) for p in batch]
            inserted = await store.write(partial(insert_imported, items=batch, keys=keys, after=after))
            done.update(inserted.others)
            after = inserted.last
            for p, key, (mid, new) in zip(batch, keys, inserted.ids, strict=True):
                done[key] = mid
                report.memory_ids[p.source_id] = mid
                if p.status == "superseded" and p.superseded_by is not None:
                    links.append((mid, p.superseded_by))
                if not new:  # another import of the same file brought it meanwhile
                    report.skipped_memories[ALREADY] += 1
                    continue
                report.memories += 1
                report.tags += p.source_tags
                report.inferred_tags += len(p.new.tags) - p.source_tags
                if p.new.type == "fact":
                    report.facts += 1
                else:
                    report.perceptions += 1
                if p.status == "forgotten":
                    report.forgotten += 1
                elif p.status == "superseded":
                    report.superseded += 1
        seen += len(rows)
        if progress is not None:
            progress(seen, report.total_memories)
    resolved = []
    for mid, target in links:
        ours = done.get(key_of(target, created_of.get(target)))
        if ours is not None:
            resolved.append((mid, ours))
    if resolved:
        await store.write(lambda c: link_superseded(c, resolved))
    # Vectors: imported memories have none yet; the vector index's backfill embeds memories that
    # lack one (at a server's start, or now when this process has an index that can be kicked).
    kick = getattr(svc.vectors, "kick_backfill", None)
    if report.memories and callable(kick):
        kick()
    if progress is not None and report.total_memories == 0:
        progress(0, 0)
    if report.memory_ids:  # as every caller is shown them (`model.PUBLIC_FROM`)
        stored = set(report.memory_ids.values())
        shown = await store.read(lambda c: storage.public_ids(c, stored))
        report.memory_ids = {rid: shown[mid] for rid, mid in report.memory_ids.items()}
    return report


__all__ = [
    "ImportReport",
    "RobotmemBusy",
    "RobotmemFile",
    "RobotmemUnreadable",
    "context_of",
    "epoch",
    "import_robotmem",
    "prepare",
    "session_id_of",
    "usable_collection",
]
