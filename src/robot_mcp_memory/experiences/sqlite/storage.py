"""The experience tables, their writes and their reads (ranking is in `ranking_repo`).

Tables (declared with their kinds; `db` registers them and migrates them in):

- ``memories`` — **definition**: a robot's experience must not silently age out. Time decay is a
  read-time computation on ``updated_at`` (`model.decay_factor`), never a write.
- ``memory_tags`` — **definition**: tags of a memory with their source (``auto`` / ``user``).
- ``sessions`` — **definition**: episodes, their context, outcome score and summary.
- ``memories_fts`` — **derived**: FTS5 over the content and the context text, rowid = memory id,
  written in the same transaction as the row. CJK runs are segmented before they get here
  (`search.segment`); ``remove_diacritics 2`` folds accents.

Recall's ranking SQL lives beside this in `ranking_repo` (one ``SELECT`` per ranked list with every
filter in its ``WHERE``). `ExperienceStore` is the façade: reads on reader threads, writes on the
writer thread (a store opened in `StoreMode.BLOCKING` — a stdio server's — runs them on the
awaiting thread when they need not wait), access counters on the hot path.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.errors import Conflict, NotFound, StorageError
from robot_mcp_memory.experiences import consolidate
from robot_mcp_memory.experiences.access import PendingAccesses
from robot_mcp_memory.experiences.dedup import Candidate, Duplicate
from robot_mcp_memory.experiences.indexing import BM25_WEIGHTS, MAX_CONTEXT_TEXT, MEMORIES_TOKENIZE, context_text
from robot_mcp_memory.experiences.model import (
    PUBLIC_FROM,
    Experience,
    NewMemory,
    Session,
    draw_public_id,
)
from robot_mcp_memory.experiences.ports import Decide, Ended, Probe
from robot_mcp_memory.experiences.sqlite.keyword_repo import (
    CHANGES,
    LENGTHS,
    KeywordCache,
    entry_lengths,
    instances_view,
)
from robot_mcp_memory.search import segment
from robot_mcp_memory.storage.sqlite import Kind, SqliteStore, StoreMode, Table, fts5_table

T = TypeVar("T")

#: Everything ranking needs except the context, keyed by id: a text search joins its matches here
#: (narrow rows, cache-friendly) instead of into the table. Migration 13 adds it to files made
#: before migration 4's DDL had it.
#: The duplicate lookups' one index: by facts digest, robot, collection and lexical key. Learn's
#: exact and lexical lookup names all four (an index on the key alone made each learn walk every
#: row sharing it — one template text learned per episode gives them all one key, so a learn's
#: cost grew with the episodes); the semantic stage's candidates (`same_facts_ids`) name the first
#: three.
#: One index serves both: two (key first, digest alone) cost every learn a leaf page more
#: written, each at a random place (db.py migrations 14, 16 and 18). It keeps the name the
#: lookups of older builds give (``INDEXED BY``), which it serves as well: a server of an older
#: build still running on the file when this one upgrades it goes on learning.
KEY_INDEX = "idx_memories_hash"
KEY_INDEX_COLUMNS = "facts_hash, robot, collection, content_hash"
KEY_INDEX_DDL = f"CREATE INDEX IF NOT EXISTS {KEY_INDEX} ON memories({KEY_INDEX_COLUMNS})"
RANK_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS idx_memories_rank ON memories"
    "(id, collection, status, robot, confidence, updated_at, source_weight, session_id)"
)
#: The CHECK constraints on a memory's status and a tag's source are comparisons joined by OR:
#: the same constraint as ``status IN ('active', 'forgotten', 'superseded')``, but for an IN list
#: of three or more constants SQLite (3.40) builds a temporary b-tree on every row it checks —
#: four per learn (the memory, each tag), which the OR form never builds.
#: (table, the list form files before migration 22 hold, the form db.py rewrites it to)
CHECKS_WITH_LISTS = (
    (
        "memories",
        "status IN ('active', 'forgotten', 'superseded')",
        "status = 'active' OR status = 'forgotten' OR status = 'superseded'",
    ),
    ("memory_tags", "source IN ('auto', 'user', 'import')", "source = 'auto' OR source = 'user' OR source = 'import'"),
)
MEMORIES = Table(
    name="memories",
    kind=Kind.DEFINITION,  # experience never ages out by retention; decay is computed at read time
    ddl=(
        """CREATE TABLE IF NOT EXISTS memories (
            id INTEGER PRIMARY KEY,
            robot TEXT NOT NULL,
            collection TEXT NOT NULL DEFAULT 'default',
            type TEXT NOT NULL CHECK (type IN ('fact', 'perception')),
            content TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT 'observation',
            confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            context TEXT NOT NULL DEFAULT '{}',
            perception_type TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            session_id TEXT,
            status TEXT NOT NULL DEFAULT 'active'
                CHECK (status = 'active' OR status = 'forgotten' OR status = 'superseded'),
            superseded_by INTEGER,
            forget_reason TEXT,
            content_hash TEXT NOT NULL,
            facts_hash TEXT NOT NULL DEFAULT '',
            source_weight REAL NOT NULL DEFAULT 1.0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_accessed REAL,
            data TEXT  -- last: a large blob never has to be read to reach another column
        )""",
        "CREATE INDEX IF NOT EXISTS idx_memories_scope ON memories(robot, collection, status)",
        # Partial: most memories belong to no session, and every lookup is `session_id = …`.
        "CREATE INDEX IF NOT EXISTS idx_memories_session ON memories(session_id) WHERE session_id IS NOT NULL",
        KEY_INDEX_DDL,
        RANK_INDEX_DDL,
    ),
)
MEMORY_TAGS = Table(
    name="memory_tags",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS memory_tags (
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'auto' CHECK (source = 'auto' OR source = 'user' OR source = 'import'),
            PRIMARY KEY (memory_id, tag)
        ) WITHOUT ROWID""",
        # No index on `tag` alone: tags are only ever read by memory id (the primary key). It cost
        # a page write per tag on every learn (db.py migration 6 drops it from older files).
    ),
)
#: Each memory's public id (`model.PUBLIC_FROM`), drawn when it is written; a memory without a
#: row here is shown by its own id. Loaded after `memories` (it points at them) and with them.
#: Not part of migration 4's tables (migration 26 creates it).
MEMORY_PUBLIC = Table(
    name="memory_public",
    kind=Kind.DEFINITION,
    ddl=(
        "CREATE TABLE IF NOT EXISTS memory_public ("
        "id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE, public_id INTEGER NOT NULL UNIQUE)",
    ),
)
SESSIONS = Table(
    name="sessions",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS sessions (
            id TEXT PRIMARY KEY,
            robot TEXT NOT NULL,
            collection TEXT NOT NULL DEFAULT 'default',
            context TEXT NOT NULL DEFAULT '{}',
            started_at REAL NOT NULL,
            ended_at REAL,
            outcome_score REAL,
            summary TEXT
        )""",
        "CREATE INDEX IF NOT EXISTS idx_sessions_scope ON sessions(robot, collection, started_at)",
    ),
)
#: memories_fts's tokenizer (the keyword cache tokenizes with it too).
MEMORIES_FTS = fts5_table("memories_fts", source="memories", columns="content, context", tokenize=MEMORIES_TOKENIZE)
#: The change log of memories_fts: (seq, doc) for each write of a memory's index entry, doc NULL
#: when the whole index was rebuilt. The in-memory keyword cache (`keyword_repo`) reads what was
#: appended since it last looked — whichever process wrote it — and re-reads only those entries.
#: Derived like the index it tracks; it keeps its newest `KEEP_CHANGES` entries (`log_changes`).
MEMORIES_FTS_CHANGES = Table(
    name=CHANGES,
    kind=Kind.DERIVED,
    ddl=(f"CREATE TABLE IF NOT EXISTS {CHANGES} (seq INTEGER PRIMARY KEY, doc INTEGER)",),
    source="memories_fts",
)
#: Each index entry's length in tokens, per column (content, context): the sizes FTS5's bm25
#: takes, which the keyword cache reads here rather than from FTS5's own records. Written with the
#: entry, in the same transaction (`insert_memory`, `update`, `fill_lengths` after a rebuild).
#: A build from before this table writes entries without it; the triggers below (which fire for
#: every build's writes) delete the row of a memory inserted or whose text changes, so a row here
#: is never stale: at worst missing, and then the cache measures the entry itself.
MEMORY_LENGTHS = Table(
    name=LENGTHS,
    kind=Kind.DERIVED,
    ddl=(
        f"CREATE TABLE IF NOT EXISTS {LENGTHS} "
        "(id INTEGER PRIMARY KEY, content INTEGER NOT NULL, context INTEGER NOT NULL)",
    ),
    source="memories_fts",
)
#: Log every write of `memories` that changes what the keyword cache holds of a memory it may
#: rank — collection, robot, whether it is active, source weight, confidence (`KeywordCache.
#: candidates` bounds scores by them) — and the context and updated_at (logged since migrations
#: 20 and 21; nothing reads those entries now but the cache, which re-reads the memory), whichever
#: code or process writes it: an update of those
#: columns of a memory active before or after, and any update of an id (an ``UPDATE OR REPLACE``
#: may take the id of an active memory); a row inserted where an index entry is (an ``INSERT OR
#: REPLACE``, whatever the new row's status: the row it replaced goes without a delete trigger); a
#: delete of an active memory. An entry also tells a reader whose snapshot is older than the
#: cache's to rank in SQL. Every insert, and every update of a content or a context, is logged and
#: drops the memory's `MEMORY_LENGTHS` row (its writer, of this build, writes it again after): so
#: the log misses no write that goes through `memories`, whichever build makes it.
RANK_LOG_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS memories_rank_log AFTER UPDATE OF id, collection, robot, status, "
    "confidence, source_weight, context, updated_at ON memories "
    "WHEN NEW.status = 'active' OR OLD.status = 'active' OR NEW.id IS NOT OLD.id "
    "BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); "
    "INSERT INTO memory_index_log(doc) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; END",
    "CREATE TRIGGER IF NOT EXISTS memories_rank_log_insert AFTER INSERT ON memories "
    "BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); DELETE FROM memory_lengths WHERE id = NEW.id; END",
    "CREATE TRIGGER IF NOT EXISTS memories_text_log AFTER UPDATE OF content, context ON memories "
    "BEGIN DELETE FROM memory_lengths WHERE id = OLD.id OR id = NEW.id; "
    "INSERT INTO memory_index_log(doc) VALUES (NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS memories_rank_log_delete AFTER DELETE ON memories WHEN OLD.status = 'active' "
    "BEGIN INSERT INTO memory_index_log(doc) VALUES (OLD.id); END",
)
#: The log keeps this many of its newest entries; a cache further behind reads everything again.
KEEP_CHANGES = 10_000
#: The log is trimmed once every this many entries.
TRIM_EVERY = 1_000
# Not part of migration 4's tables (migration 15 creates it): steps before 15 rebuild the index
# without it (`log_rebuild`).
TABLES: tuple[Table, ...] = (MEMORIES, MEMORY_TAGS, SESSIONS, MEMORIES_FTS)

#: How long after a write a stdio server brings the keyword cache up to it (`_refresh_soon`).
REFRESH_AFTER_S = 0.0005
#: Access counts wait at most this long before they are written (one transaction for the lot).
ACCESS_FLUSH_S = 0.25

#: A memory's public id, and the one its `superseded_by` names (`model.PUBLIC_FROM`), as SQL.
_PUBLIC_ID = "COALESCE((SELECT p.public_id FROM memory_public p WHERE p.id = m.id), m.id)"
_PUBLIC_SUPERSEDED_BY = (
    "COALESCE((SELECT p.public_id FROM memory_public p WHERE p.id = m.superseded_by), m.superseded_by)"
)
_COLS = (
    "m.id, m.robot, m.collection, m.type, m.content, m.category, m.confidence, m.context, m.perception_type, "
    f"m.metadata, m.session_id, m.status, {_PUBLIC_SUPERSEDED_BY}, m.forget_reason, m.created_at, m.updated_at, "
    f"m.access_count, m.last_accessed, m.data IS NOT NULL, {_PUBLIC_ID}"
)
_N_COLS = 20


def _row(row: Sequence[Any], data: Any = None, tags: tuple[str, ...] = ()) -> Experience:
    return Experience(
        id=row[0],
        robot=row[1],
        collection=row[2],
        type=row[3],
        content=row[4],
        category=row[5],
        confidence=row[6],
        context=json.loads(row[7]),
        perception_type=row[8],
        metadata=json.loads(row[9]),
        session_id=row[10],
        status=row[11],
        superseded_by=row[12],
        forget_reason=row[13],
        created_at=row[14],
        updated_at=row[15],
        access_count=row[16],
        last_accessed=row[17],
        data=data,
        tags=tags,
        has_data=bool(row[18]),
        public_id=row[19],
    )


#: Compact JSON of a stored value (a learn writes two or three): `jsonvalue.dumps`.
_dumps = jsonvalue.dumps


# ---------------------------------------------------------------------------- writes (connection first)
def insert_memory(conn: sqlite3.Connection, new: NewMemory, now: float) -> int:
    """The row, its FTS entry and its tags, in the caller's transaction."""
    cur = conn.execute(
        "INSERT INTO memories(robot, collection, type, content, category, confidence, context, perception_type, "
        "metadata, session_id, content_hash, facts_hash, source_weight, created_at, updated_at, data) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            new.robot,
            new.collection,
            new.type,
            new.content,
            new.category,
            new.confidence,
            _dumps(new.context),
            new.perception_type,
            _dumps(new.metadata),
            new.session_id,
            new.content_hash,
            new.facts_hash,
            new.source_weight,
            now,
            now,
            None if new.data is None else _dumps(new.data),
        ),
    )
    mid = cur.lastrowid
    assert mid is not None
    user = [t for t, src in new.tags if src == "user"]
    entry = (mid, segment.index_text(new.content), context_text(new.context, user))
    try:
        conn.execute("INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, ?)", entry)
    except sqlite3.IntegrityError:
        # The newest memory was deleted by hand (another connection: no cascade), leaving its
        # index entry and tags behind, and its id came round again: every learn failed on it.
        conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (mid,))
        conn.execute("INSERT OR REPLACE INTO memories_fts(rowid, content, context) VALUES (?, ?, ?)", entry)
    write_lengths(conn, (entry,))
    trim_log(conn)  # the insert trigger logged it
    give_public_id(conn, mid)
    if new.tags:
        conn.executemany(
            "INSERT OR IGNORE INTO memory_tags(memory_id, tag, source) VALUES (?, ?, ?)",
            [(mid, tag, src) for tag, src in new.tags],
        )
    return mid


def _session_for_write(conn: sqlite3.Connection, session_id: str, robot: str) -> None:
    row = conn.execute("SELECT robot, ended_at FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None or row[0] != robot:
        raise NotFound(f"no session '{session_id}' of robot {robot}; start_session returns a session_id to use")
    if row[1] is not None:  # its summary is written and its memories consolidated: the episode is over
        raise Conflict(f"session '{session_id}' has ended; start_session for the next episode")


def _candidates(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Candidate]:
    return [Candidate(r[0], r[1]) for r in conn.execute(sql, params)]


def learn(conn: sqlite3.Connection, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate:
    """Insert `new` unless `decide` names a duplicate among the candidates — one transaction, so
    two concurrent learns of the same experience cannot both insert."""
    if new.session_id is not None:
        _session_for_write(conn, new.session_id, new.robot)
    # The planner, without statistics, would walk the (robot, collection, status) index: name the
    # selective one instead (INDEXED BY) in each lookup below.
    scope = "m.robot = ? AND m.collection = ? AND m.type = ? AND m.status = 'active' AND m.facts_hash = ?"
    base: list[Any] = [new.robot, new.collection, new.type, new.facts_hash]
    if probe.same_session:
        scope += " AND m.session_id IS ?"
        base.append(new.session_id)
    # Every exact and lexical candidate shares the key: one indexed lookup finds them, whatever
    # else this robot or another has stored (no full-text query, whose matches grew with every
    # robot's memories sharing the words).
    exact = _candidates(
        conn,
        f"SELECT m.id, m.content FROM memories m INDEXED BY idx_memories_hash "  # noqa: S608
        f"WHERE m.content_hash = ? AND {scope} ORDER BY m.id LIMIT ?",
        [probe.content_hash, *base, probe.hash_limit],
    )
    semantic: list[Candidate] = []
    if probe.semantic:
        cos = dict(probe.semantic)
        marks = ",".join("?" * len(cos))
        rows = conn.execute(
            f"SELECT m.id, m.content FROM memories m WHERE m.id IN ({marks}) AND {scope}",  # noqa: S608
            [*cos, *base],
        ).fetchall()
        semantic = sorted((Candidate(r[0], r[1], cos[r[0]]) for r in rows), key=lambda c: -(c.similarity or 0))
    dup = decide(exact, [], semantic)
    if dup is not None:
        return dup
    return insert_memory(conn, new, now)


def same_facts_ids(conn: sqlite3.Connection, new: NewMemory) -> list[int]:
    """The memories `learn` would accept as candidate duplicates of `new` (same robot, collection,
    type and facts digest, active): what semantic dedup ranks by cosine, and nothing else."""
    rows = conn.execute(
        "SELECT m.id FROM memories m INDEXED BY idx_memories_hash WHERE m.facts_hash = ? AND m.robot = ? "
        "AND m.collection = ? AND m.type = ? AND m.status = 'active'",
        (new.facts_hash, new.robot, new.collection, new.type),
    )
    return [int(r[0]) for r in rows]


def forget(conn: sqlite3.Connection, mid: int, reason: str, now: float) -> bool:
    cur = conn.execute(
        "UPDATE memories SET status = 'forgotten', forget_reason = ?, updated_at = ? "
        "WHERE id = ? AND status = 'active'",
        (reason, now, mid),
    )
    return cur.rowcount > 0


def update(conn: sqlite3.Connection, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool:
    """Replace an active memory's content, classification, context and scope; re-index it.

    The auto tags and ``metadata.scope`` are `new`'s (inferred again from the new content); the
    rest of the metadata (an import's ``imported_from``) is kept. The user's tags are `new`'s —
    unless `keep_user_tags` (the context was kept), when those stored are kept too (a robotmem
    import may hold user tags its context does not list). Tags from an import (``import``) stay.
    The index's context text holds the user's tags, as `insert_memory` and the index rebuild
    (`index_repo`) write it."""
    cur = conn.execute(
        "UPDATE memories SET content = ?, category = ?, confidence = ?, context = ?, content_hash = ?, "
        "facts_hash = ?, source_weight = ?, updated_at = ?, "
        "metadata = json_patch(json_remove(metadata, '$.scope'), ?) WHERE id = ? AND status = 'active'",
        (
            new.content,
            new.category,
            new.confidence,
            _dumps(new.context),
            new.content_hash,
            new.facts_hash,
            new.source_weight,
            now,
            _dumps(new.metadata),
            mid,
        ),
    )
    if not cur.rowcount:
        return False
    conn.execute(
        "DELETE FROM memory_tags WHERE memory_id = ? AND (source = 'auto' OR (source = 'user' AND NOT ?))",
        (mid, keep_user_tags),
    )
    conn.executemany(
        "INSERT OR IGNORE INTO memory_tags(memory_id, tag, source) VALUES (?, ?, ?)",
        [(mid, tag, src) for tag, src in new.tags],
    )
    user = [t for t, src in new.tags if src == "user"]
    if keep_user_tags:
        kept = conn.execute("SELECT tag FROM memory_tags WHERE memory_id = ? AND source = 'user' ORDER BY tag", (mid,))
        user = list(dict.fromkeys([*user, *(r[0] for r in kept)]))
    conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (mid,))
    entry = (mid, segment.index_text(new.content), context_text(new.context, user))
    conn.execute("INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, ?)", entry)
    write_lengths(conn, (entry,))
    trim_log(conn)  # the text trigger logged it
    return True


def write_lengths(conn: sqlite3.Connection, entries: Iterable[tuple[int, str, str]]) -> None:
    """The `MEMORY_LENGTHS` rows of index entries just written: (id, content text, context text)."""
    conn.executemany(
        f"INSERT OR REPLACE INTO {LENGTHS}(id, content, context) VALUES (?, ?, ?)",  # noqa: S608
        entry_lengths(MEMORIES_TOKENIZE, list(entries)),
    )


def fill_lengths(conn: sqlite3.Connection) -> None:
    """Every entry's `MEMORY_LENGTHS` row again, counted from the index itself (its instances,
    through fts5vocab): after a rebuild, and migration 24's backfill. A no-op on a file from before
    the table (the migrations that rebuild the index run before migration 24 creates it)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LENGTHS,)).fetchone():
        return
    view = instances_view(conn)
    conn.execute(f"DELETE FROM {LENGTHS}")  # noqa: S608
    conn.execute(f"INSERT INTO {LENGTHS}(id, content, context) SELECT rowid, 0, 0 FROM memories_fts")  # noqa: S608
    conn.execute(
        f"WITH n AS (SELECT doc, sum(col = 'content') AS a, sum(col = 'context') AS b FROM {view} GROUP BY doc) "  # noqa: S608
        f"UPDATE {LENGTHS} SET content = n.a, context = n.b FROM n WHERE {LENGTHS}.id = n.doc"
    )


def log_changes(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Record, in the writer's transaction, that the index entries of `ids` were (re)written;
    once the log holds `TRIM_EVERY` entries more than `KEEP_CHANGES`, drop the oldest of them
    (looked at once per call, after the last entry).
    (Measured from its oldest entry, not by the new entry's number: the triggers write entries
    too — an update writes two — so the numbers this sees need not ever be round.)"""
    seq = None
    for mid in ids:
        seq = conn.execute(f"INSERT INTO {CHANGES}(doc) VALUES (?)", (mid,)).lastrowid  # noqa: S608
    if seq is None:
        return
    (oldest,) = conn.execute(f"SELECT min(seq) FROM {CHANGES}").fetchone()  # noqa: S608
    if seq - oldest >= KEEP_CHANGES + TRIM_EVERY:
        conn.execute(f"DELETE FROM {CHANGES} WHERE seq <= ?", (seq - KEEP_CHANGES,))  # noqa: S608


def trim_log(conn: sqlite3.Connection) -> None:
    """`log_changes`'s trim, after entries the triggers wrote."""
    (seq,) = conn.execute(f"SELECT max(seq) FROM {CHANGES}").fetchone()  # noqa: S608
    (oldest,) = conn.execute(f"SELECT min(seq) FROM {CHANGES}").fetchone()  # noqa: S608
    if seq is not None and seq - oldest >= KEEP_CHANGES + TRIM_EVERY:
        conn.execute(f"DELETE FROM {CHANGES} WHERE seq <= ?", (seq - KEEP_CHANGES,))  # noqa: S608


def log_rebuild(conn: sqlite3.Connection) -> None:
    """Record that the whole index was rebuilt. A no-op on a file from before the log (the
    migrations that rebuild the index run before migration 15 creates it)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHANGES,)).fetchone():
        conn.execute(f"INSERT INTO {CHANGES}(doc) VALUES (NULL)")  # noqa: S608
        trim_log(conn)  # a `load` inserting every row logged each one (the insert trigger)


def touch(conn: sqlite3.Connection, counts: Mapping[int, int], now: float) -> None:
    """The access counters recall bumps (a hot record write, coalesced by the caller)."""
    conn.executemany(
        "UPDATE memories SET access_count = access_count + ?, last_accessed = ? WHERE id = ?",
        [(n, now, mid) for mid, n in counts.items()],
    )


def insert_session(conn: sqlite3.Connection, s: Session) -> None:
    conn.execute(
        "INSERT INTO sessions(id, robot, collection, context, started_at) VALUES (?, ?, ?, ?, ?)",
        (s.id, s.robot, s.collection, _dumps(s.context), s.started_at),
    )


def end_session(
    conn: sqlite3.Connection,
    sid: str,
    outcome_score: float | None,
    now: float,
    planner: Callable[[list[consolidate.Row]], list[tuple[int, int]]],
) -> Ended | None:
    """Consolidate the session's memories, summarise it and mark it ended — one transaction.
    None when the session does not exist or has already ended."""
    s = select_session(conn, sid)
    if s is None or s.ended_at is not None:
        return None
    rows = [
        consolidate.Row(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8])
        for r in conn.execute(
            "SELECT id, type, content, category, confidence, context, access_count, created_at, collection "
            "FROM memories "
            "WHERE session_id = ? AND status = 'active' ORDER BY id",
            (sid,),
        )
    ]
    pairs = planner(rows)
    conn.executemany(
        "UPDATE memories SET status = 'superseded', superseded_by = ?, updated_at = ? "
        "WHERE id = ? AND status = 'active'",
        [(rep, now, old) for old, rep in pairs],
    )
    summary = consolidate.session_summary(
        conn.execute(
            "SELECT type, category, count(*) FROM memories WHERE session_id = ? AND status = 'active' GROUP BY 1, 2",
            (sid,),
        ),
        consolidated=len(pairs),
        duration_s=now - s.started_at,
        outcome_score=outcome_score,
        previous=s.summary,
    )
    conn.execute(
        "UPDATE sessions SET ended_at = ?, outcome_score = ?, summary = ? WHERE id = ?",
        (now, outcome_score, _dumps(summary), sid),
    )
    ended = Session(s.id, s.robot, s.collection, s.context, s.started_at, now, outcome_score, summary)
    return Ended(ended, pairs, summary)


# ---------------------------------------------------------------------------- reads
def _tags(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    if not ids:
        return {}
    out: dict[int, list[str]] = {}
    marks = ",".join("?" * len(ids))
    for mid, tag in conn.execute(
        f"SELECT memory_id, tag FROM memory_tags WHERE memory_id IN ({marks}) ORDER BY memory_id, source, tag",  # noqa: S608
        list(ids),
    ):
        out.setdefault(mid, []).append(tag)
    return {k: tuple(v) for k, v in out.items()}


def give_public_id(conn: sqlite3.Connection, mid: int) -> None:
    """Draw memory `mid`'s public id (another draw for one already taken), in the caller's
    transaction; a row left by a memory deleted by hand whose id came round again is replaced."""
    while True:  # one writer at a time: what this read finds free stays free until the insert
        pid = draw_public_id()
        if conn.execute("SELECT 1 FROM memory_public WHERE public_id = ?", (pid,)).fetchone() is None:
            conn.execute(
                "INSERT INTO memory_public(id, public_id) VALUES (?, ?) "
                "ON CONFLICT(id) DO UPDATE SET public_id = excluded.public_id",
                (mid, pid),
            )
            return


def stored_id(conn: sqlite3.Connection, public_id: int) -> int | None:
    """The stored id of the memory shown as `public_id`, or None when none is."""
    if public_id >= PUBLIC_FROM:
        row = conn.execute("SELECT id FROM memory_public WHERE public_id = ?", (public_id,)).fetchone()
    else:  # shown by its own id: one without a drawn one
        row = conn.execute(
            "SELECT m.id FROM memories m WHERE m.id = ? "
            "AND NOT EXISTS (SELECT 1 FROM memory_public p WHERE p.id = m.id)",
            (public_id,),
        ).fetchone()
    return None if row is None else int(row[0])


def select_public(conn: sqlite3.Connection, public_id: int) -> Experience | None:
    """The memory shown as `public_id`, or None."""
    mid = stored_id(conn, public_id)
    return None if mid is None else select_one(conn, mid)


def drop_public_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Show the memories `ids` by their own ids again (an archive load writes what it carries)."""
    conn.executemany("DELETE FROM memory_public WHERE id = ?", [(i,) for i in ids])


def public_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, int]:
    """The public id of each stored id in `ids` (its own where it has none drawn)."""
    out = {i: i for i in ids}
    if out:  # one JSON parameter, however many ids (an import's, a long session's)
        out.update(
            conn.execute(
                "SELECT id, public_id FROM memory_public WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(out)),),
            )
        )
    return out


def select_one(conn: sqlite3.Connection, mid: int) -> Experience | None:
    row = conn.execute(f"SELECT {_COLS}, m.data FROM memories m WHERE m.id = ?", (mid,)).fetchone()  # noqa: S608
    if row is None:
        return None
    data = None if row[_N_COLS] is None else json.loads(row[_N_COLS])
    return _row(row, data, _tags(conn, [mid]).get(mid, ()))


def select_session(conn: sqlite3.Connection, sid: str) -> Session | None:
    row = conn.execute(
        "SELECT id, robot, collection, context, started_at, ended_at, outcome_score, summary "
        "FROM sessions WHERE id = ?",
        (sid,),
    ).fetchone()
    if row is None:
        return None
    return Session(
        row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], json.loads(row[7]) if row[7] else None
    )


def session_text(conn: sqlite3.Connection, sid: str, limit: int = 20) -> str:
    """The session's own words (its facts' contents), for proactive recall of related memories."""
    rows = conn.execute(
        "SELECT content FROM memories WHERE session_id = ? AND status = 'active' AND type = 'fact' "
        "ORDER BY confidence DESC, id DESC LIMIT ?",
        (sid, limit),
    ).fetchall()
    return " ".join(r[0] for r in rows)


def rows_of(conn: sqlite3.Connection, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]:
    """Full memories for `ids` (the few a ranking kept), with their tags."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    data_col = "m.data" if include_data else "NULL"
    tags = _tags(conn, ids)
    out = {}
    for r in conn.execute(f"SELECT {_COLS}, {data_col} FROM memories m WHERE m.id IN ({marks})", list(ids)):  # noqa: S608
        data = None if r[_N_COLS] is None else json.loads(r[_N_COLS])
        out[r[0]] = _row(r, data, tags.get(r[0], ()))
    return out


# ---------------------------------------------------------------------------- the store object
class ExperienceStore:
    """Façade over the SQL above.

    Async by default: reads and writes as the store's mode runs them (`StoreMode`: a server's on
    the reader pool and off the event loop, a blocking store's — a stdio server's — on the
    awaiting thread when they need not wait). With
    ``blocking=True`` the same coroutines complete without ever suspending — reads run on the
    calling thread's read-only connection and writes commit before they return (run by the
    calling thread itself when the writer is idle, see `SqliteStore.write_blocking`) — so the
    Python API can drive `ExperienceService` synchronously, with no event loop and no thread hop
    per call (see `api`)."""

    def __init__(self, db: SqliteStore, *, blocking: bool = False, keyword_cache: bool = True) -> None:
        """`keyword_cache` switches the accelerator of keyword ranking; off, SQL ranks every
        keyword list (the plain path, which gives the same answers)."""
        self.db = db
        self.blocking = blocking
        self.access = AccessCounts(db)
        #: Whether idx_memories_rank exists: from migration 13 on it always does (files made by the
        #: first build of migration 4 lacked it); checked all the same, as ranking names it.
        self.covering = db.read_blocking(_has_rank_index)
        #: bm25 from posting lists in memory, kept current through the change log (keyword_repo).
        self.keywords = KeywordCache(MEMORIES_TOKENIZE, BM25_WEIGHTS) if keyword_cache else None
        self._refresh_pending = False
        if not blocking and db.read_blocking(_recent_cjk):
            # Chinese is in use here: load jieba in the background now, not on the event loop
            # during the first call that needs it.
            threading.Thread(target=segment.warm, name="jieba-warm", daemon=True).start()

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self.blocking:
            return self.db.read_blocking(fn)
        return await self.db.read(fn)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self.blocking:
            return self.db.write_blocking(fn)
        result = await self.db.write(fn)
        self._refresh_soon()
        return result

    async def write_then(self, fn: Callable[[sqlite3.Connection], T], after: Callable[[T], None]) -> T:
        """A write, then `after(result)` once it has committed and before the next write begins,
        so the in-memory vector index patched there sees concurrent writes in commit order (two
        updates of one memory finishing out of order left it on the older text). On a worker
        thread over a server's store (or the writer's; or the awaiting thread over a blocking one:
        see `SqliteStore.write`): `after` runs even if the awaiting coroutine is cancelled meanwhile."""
        if self.blocking:
            return self.db.write_blocking(fn, after)
        if self.db.mode is StoreMode.BLOCKING:  # on the awaiting thread when it need not wait
            result = await self.db.write(fn, after)
        else:
            result = await asyncio.to_thread(self.db.write_blocking, fn, after)
        self._refresh_soon()
        return result

    def _refresh_soon(self) -> None:
        """Over a blocking store (a stdio server: one client, reads on the event loop), bring the
        keyword cache up to the write just made while its answer travels back and the client
        sends its next call, time the loop would otherwise sit idle: the next recall finds the
        changed memories tokenized instead of tokenizing them first. `REFRESH_AFTER_S` lets the
        answer go out first. Over a server's store the next recall patches it, on a reader thread."""
        if self.db.mode is not StoreMode.BLOCKING or self._refresh_pending or self.keywords is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven without an event loop: no idle time to use
            return
        self._refresh_pending = True
        loop.call_later(REFRESH_AFTER_S, self._refresh)

    def _refresh(self) -> None:
        self._refresh_pending = False
        keywords = self.keywords
        if keywords is None:
            return
        with contextlib.suppress(StorageError):  # closing: nothing to refresh for
            self.db.read_blocking(keywords.refresh)

    async def offload(self, fn: Callable[[], T]) -> T:
        """Slow work that is not SQL (embedding): off the event loop, or right here when blocking."""
        return fn() if self.blocking else await asyncio.to_thread(fn)

    def touch(self, ids: Iterable[int], now: float) -> None:
        """Count accesses without waiting (see `AccessCounts`)."""
        self.access.add(ids, now)

    def blocking_twin(self) -> ExperienceStore:
        """The same store, blocking; it shares the access counts."""
        twin = ExperienceStore(self.db, blocking=True, keyword_cache=False)
        twin.access = self.access
        twin.covering = self.covering
        twin.keywords = self.keywords
        return twin


def _recent_cjk(conn: sqlite3.Connection) -> bool:
    rows = conn.execute("SELECT content FROM memories ORDER BY id DESC LIMIT 200").fetchall()
    return any(segment.has_cjk(r[0]) for r in rows)


def _has_rank_index(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'idx_memories_rank'").fetchone()
    return row is not None


class AccessCounts(PendingAccesses[concurrent.futures.Future[None]]):
    """Access counters (`experiences.access`) handed to the store's hot path as one transaction
    for the lot. Dropped (and counted by the store) when the hot queue is full, as counters may be."""

    def __init__(self, db: SqliteStore, interval: float = ACCESS_FLUSH_S) -> None:
        super().__init__(interval)
        self._db = db

    def _write(self, counts: dict[int, int], now: float) -> concurrent.futures.Future[None] | None:
        try:
            return self._db.hot(lambda c: touch(c, counts, now))
        except StorageError:  # the store has closed: counters may be lost, never a read
            return None


async def gather_reads(store: ExperienceStore, *fns: Callable[[sqlite3.Connection], Any]) -> list[Any]:
    """Several reads; concurrently on the pool in async mode, in order when blocking."""
    if store.blocking:
        return [await store.read(fn) for fn in fns]
    return list(await asyncio.gather(*(store.read(fn) for fn in fns)))


__all__ = [
    "ACCESS_FLUSH_S",
    "BM25_WEIGHTS",
    "MAX_CONTEXT_TEXT",
    "MEMORIES",
    "MEMORIES_FTS",
    "MEMORIES_TOKENIZE",
    "MEMORY_PUBLIC",
    "MEMORY_TAGS",
    "RANK_LOG_TRIGGERS",
    "SESSIONS",
    "TABLES",
    "AccessCounts",
    "Ended",
    "ExperienceStore",
    "Probe",
    "context_text",
    "drop_public_ids",
    "end_session",
    "forget",
    "give_public_id",
    "insert_memory",
    "insert_session",
    "learn",
    "public_ids",
    "rows_of",
    "same_facts_ids",
    "select_one",
    "select_public",
    "select_session",
    "session_text",
    "stored_id",
    "touch",
    "update",
]
