"""index.db: the DDL, each table's declared kind, and the migrations.

Every table in the file is declared here with its kind (see `kit.kinds`). A test fails for a
table without one. Migrations are append-only: never edit a shipped step, add a new one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.sqlite import index_repo
from robot_mcp_memory.experiences.sqlite import storage as experiences
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.sqlite import postings as process_postings
from robot_mcp_memory.search import segment
from robot_mcp_memory.search.segment import index_text
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.storage.sqlite import (
    Kind,
    Migration,
    Schema,
    SqliteStore,
    StoreMode,
    Table,
    fts5_problem,
    fts5_table,
    recreate,
    schema_edit,
)

PROCESSES = Table(
    name="processes",
    kind=Kind.DEFINITION,  # authored by a person, or a distillation they armed: never ages out
    ddl=(
        """CREATE TABLE IF NOT EXISTS processes (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            task_pattern TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]',
            robot TEXT NOT NULL DEFAULT 'unknown',
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            success_count INTEGER NOT NULL DEFAULT 0,
            failure_count INTEGER NOT NULL DEFAULT 0,
            last_used TEXT NOT NULL DEFAULT '',
            source_mission_id TEXT NOT NULL DEFAULT '',
            extra TEXT NOT NULL DEFAULT '{}',
            body TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX IF NOT EXISTS idx_processes_robot ON processes(robot)",
        "CREATE INDEX IF NOT EXISTS idx_processes_updated ON processes(updated)",
    ),
)
PROCESSES_FTS = fts5_table("processes_fts", source="processes", columns="id UNINDEXED, title, task_pattern, tags, body")
STORE_META = Table(
    name="store_meta",
    kind=Kind.DEFINITION,  # the file's schema version: its identity, not its history
    ddl=("CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",),
)

# The fleet registry (fleet.py). All three are operator-authored: an operator registered the robot,
# arranged the groups and flipped self_improve — nothing here ages out.
FLEET_GROUPS = Table(
    name="fleet_groups",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS fleet_groups (
            group_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            customer TEXT NOT NULL DEFAULT '',
            factory TEXT NOT NULL DEFAULT '',
            self_improve INTEGER CHECK (self_improve IN (0, 1)),  -- NULL: follow the global toggle
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )""",
    ),
)
FLEET_ROBOTS = Table(
    name="fleet_robots",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS fleet_robots (
            robot_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            group_id TEXT REFERENCES fleet_groups(group_id) ON DELETE SET NULL,  -- NULL: ungrouped
            meta TEXT NOT NULL DEFAULT '{}',
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS idx_fleet_robots_group ON fleet_robots(group_id)",
    ),
)
FLEET_SETTINGS = Table(
    name="fleet_settings",
    kind=Kind.DEFINITION,
    ddl=("CREATE TABLE IF NOT EXISTS fleet_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",),
)

TABLES: list[Table] = [STORE_META, PROCESSES, PROCESSES_FTS, FLEET_GROUPS, FLEET_ROBOTS, FLEET_SETTINGS]

# Outcomes are records about a document, kept beside its counters (which they sum, since migration
# 23; outcomes counted before it without a note were never dated). The document's `## Outcome log`
# is rendered from them on every read, so no save can remove one. Never aged out: the counters
# rank by them.
PROCESS_OUTCOMES = Table(
    name="process_outcomes",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS process_outcomes (
            process_id TEXT NOT NULL,
            n INTEGER NOT NULL,  -- 1, 2, ... per process, in the order recorded
            at TEXT NOT NULL,
            success INTEGER NOT NULL CHECK (success = 0 OR success = 1),
            note TEXT NOT NULL DEFAULT '',
            robot TEXT NOT NULL DEFAULT '',  -- the robot; an unscoped caller's kind; '' not known
            tenant TEXT NOT NULL DEFAULT '',  -- group:<G> or solo:<robot> for a robot token, else ''
            PRIMARY KEY (process_id, n)
        ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS idx_process_outcomes_at ON process_outcomes(at)",
    ),
)
# What robot tokens of each group (tenant) counted on fleet-wide `shared` documents: a group sees
# a shared document's counters without the other groups' (`store.tenant_counts`).
PROCESS_TENANT_COUNTS = Table(
    name="process_tenant_counts",
    kind=Kind.DEFINITION,
    ddl=(
        """CREATE TABLE IF NOT EXISTS process_tenant_counts (
            process_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            success_count INTEGER NOT NULL DEFAULT 0,
            failure_count INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (process_id, tenant)
        ) WITHOUT ROWID""",
    ),
)
TABLES += [PROCESS_OUTCOMES, PROCESS_TENANT_COUNTS]


# Embeddings of processes (and, later, memories): a projection of the source row, rebuilt by
# re-embedding (`reembed`), never pruned. Each vector carries the model that made it; rows of
# another model are ignored by search and replaced by the backfill.
VECTORS = Table(
    name="vectors",
    kind=Kind.DERIVED,
    source="processes",
    ddl=(
        """CREATE TABLE IF NOT EXISTS vectors (
            domain TEXT NOT NULL CHECK (domain IN ('process', 'memory')),
            ref TEXT NOT NULL,
            model_id TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim > 0),
            vec BLOB NOT NULL CHECK (length(vec) = 4 * dim),
            PRIMARY KEY (domain, ref)
        )""",
        "CREATE INDEX IF NOT EXISTS idx_vectors_model ON vectors(domain, model_id)",
    ),
)
TABLES.append(VECTORS)

# The experience memory (experiences/storage.py declares them: memories, memory_tags, sessions are
# definitions — a robot's experience never ages out; memories_fts is derived).
TABLES.extend(experiences.TABLES)
TABLES.append(experiences.MEMORY_PUBLIC)  # after the memories it points at: a load writes it after them
TABLES.append(experiences.MEMORIES_FTS_CHANGES)
TABLES.append(experiences.MEMORY_LENGTHS)
TABLES.append(process_postings.PROCESS_INDEX_LOG)


def _create(*tables: Table) -> Migration:
    def step(conn: sqlite3.Connection) -> None:
        for t in tables:
            for stmt in t.ddl:
                conn.execute(stmt)

    return step


def rebuild_process_index(conn: sqlite3.Connection) -> int:
    """Rebuild `processes_fts` from the rows, in a freshly created index (a damaged one is not
    reused); each row's `fts_rowid` points at its entry. Text is indexed as `store` indexes it
    (`segment.index_text`: CJK runs as words)."""
    conn.create_function("index_text", 1, index_text, deterministic=True)
    recreate(conn, PROCESSES_FTS)
    conn.execute(
        "INSERT INTO processes_fts(rowid, id, title, task_pattern, tags, body) "
        "SELECT rowid, id, index_text(title), index_text(task_pattern), "
        "index_text((SELECT coalesce(group_concat(value, ' '), '') FROM json_each(processes.tags))), "
        "index_text(body) FROM processes"
    )
    conn.execute("UPDATE processes SET fts_rowid = rowid")  # logs every row (from migration 25 on)
    if conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (process_postings.CHANGES,)
    ).fetchone():
        process_postings.trim_log(conn)
    n: int = conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    return n


#: Every full-text index of index.db and how it is rebuilt from its source rows (`reindex`).
TEXT_INDEXES: dict[str, Callable[[sqlite3.Connection], int]] = {
    PROCESSES_FTS.name: rebuild_process_index,
    experiences.MEMORIES_FTS.name: index_repo.rebuild_memory_index,
}


@dataclass(frozen=True)
class TextIndexHealth:
    """One full-text index as `doctor` sees it."""

    table: str
    source: str
    rows: int  # rows of the source table
    entries: int  # entries in the index
    problem: str | None  # FTS5's integrity check, when it failed

    @property
    def ok(self) -> bool:
        return self.problem is None and self.rows == self.entries


def text_index_health(conn: sqlite3.Connection, deep: bool = True) -> list[TextIndexHealth]:
    """Rows vs entries and (`deep`) FTS5's integrity check, for every index in `TEXT_INDEXES`.
    The deep check needs the read-write connection (it is an ``INSERT`` that writes nothing) and
    holds the write lock while it reads the whole index (it grows with the store)."""
    found = []
    for name in TEXT_INDEXES:
        table = schema().table(name)
        source = table.source or name
        rows: int = conn.execute(f"SELECT count(*) FROM {source}").fetchone()[0]  # noqa: S608 - declared
        problem = fts5_problem(conn, table) if deep else None
        try:
            entries: int = conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # noqa: S608 - declared
        except sqlite3.DatabaseError as exc:
            entries, problem = -1, problem or str(exc).splitlines()[0]
        found.append(TextIndexHealth(name, source, rows, entries, problem))
    return found


def rebuild_text_indexes(conn: sqlite3.Connection) -> dict[str, int]:
    """Rebuild every full-text index from its rows (one transaction: the caller's). Returns the
    entries made, by index."""
    return {name: rebuild(conn) for name, rebuild in TEXT_INDEXES.items()}


def _fts_rowid(conn: sqlite3.Connection) -> None:
    """Migration 5: processes remember their index entry's rowid (FTS5 cannot index `id`).

    The column may be there already: two processes opening a new data directory at once could
    leave a finished file saying version 4 (a late one re-ran steps 1-4 over it; `SqliteStore`
    now chooses each step under the write lock). Every later step is idempotent — it drops and
    creates an index, or re-derives digests and full-text entries from the rows — so such a file
    is repaired by running them again from here, keeping every row."""
    if "fts_rowid" not in {r[1] for r in conn.execute("PRAGMA table_info(processes)")}:
        conn.execute("ALTER TABLE processes ADD COLUMN fts_rowid INTEGER")
    rebuild_process_index(conn)


def _lean_memory_indexes(conn: sqlite3.Connection) -> None:
    """Migration 6: fewer pages written per learn — drop the never-queried index on tag names and
    make the session index partial (memories outside a session need no entry)."""
    conn.execute("DROP INDEX IF EXISTS idx_memory_tags_tag")
    conn.execute("DROP INDEX IF EXISTS idx_memories_session")
    conn.execute("CREATE INDEX idx_memories_session ON memories(session_id) WHERE session_id IS NOT NULL")


def _facts_digests(conn: sqlite3.Connection) -> None:
    """Migrations 7, 9 and 11: every fact's dedup digest as `dedup.facts_of` computes it now
    (7: numbers after a letter — ``M12``, Han text — and thousands separators count, an outcome
    written ``1`` or ``"true"`` counts; 9, 11: see `MIGRATIONS`). A digest from before would
    keep a stored memory from ever being proposed as the duplicate of the same experience learned
    again."""
    rows = conn.execute("SELECT id, content, context FROM memories WHERE type = 'fact'").fetchall()
    conn.executemany(
        "UPDATE memories SET facts_hash = ? WHERE id = ?",
        [(dedup.facts_hash(dedup.facts_of(text, _object(ctx))), mid) for mid, text, ctx in rows],
    )


def _dedup_keys(conn: sqlite3.Connection) -> None:
    """Migration 12: every fact's facts digest and lexical key (``content_hash``) as dedup computes
    them now (see `MIGRATIONS`); a key from before (the hash of the normalised text) would keep a
    stored memory from being found as the duplicate of the same experience learned again."""
    rows = conn.execute("SELECT id, content, context FROM memories WHERE type = 'fact'").fetchall()
    conn.executemany(
        "UPDATE memories SET content_hash = ?, facts_hash = ? WHERE id = ?",
        [(*dedup.memory_keys("fact", text, _object(ctx)), mid) for mid, text, ctx in rows],
    )


def _dedup_keys_and_index(conn: sqlite3.Connection) -> None:
    """Migration 14: the lexical keys and digests again (see `MIGRATIONS`), and the duplicate
    lookup's index on robot, collection and digest as well as the key, in place of the one on the
    key alone (`_one_key_index`)."""
    _dedup_keys(conn)
    _one_key_index(conn)


def _one_key_index(conn: sqlite3.Connection) -> None:
    """Migrations 14, 16 and 18: the duplicate lookups' one index (`experiences.KEY_INDEX_DDL`:
    digest, robot, collection, key, named as older builds name it) in place of what the file has —
    an index on the key alone (before 14), the key first and one on the digest alone (14–15), or
    the one index under another name (16–17). Made again only when it is not already that."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (experiences.KEY_INDEX,)
    ).fetchone()
    if row is None or f"({experiences.KEY_INDEX_COLUMNS})" not in (row[0] or ""):
        conn.execute(f"DROP INDEX IF EXISTS {experiences.KEY_INDEX}")
    conn.execute("DROP INDEX IF EXISTS idx_memories_facts")
    conn.execute("DROP INDEX IF EXISTS idx_memories_key")
    conn.execute(experiences.KEY_INDEX_DDL)


def _rank_log_triggers(conn: sqlite3.Connection) -> None:
    """Migrations 17 to 21 and 24: `experiences.RANK_LOG_TRIGGERS`, made again as they are now (17's
    logged only updates that left a memory active; 18's missed an active memory replaced by a row
    that is not, by an ``INSERT OR REPLACE`` or by an ``UPDATE OR REPLACE`` of an id; 19's did not
    log an update of a context, 20's one of updated_at)."""
    for name in ("memories_rank_log", "memories_rank_log_insert", "memories_rank_log_delete", "memories_text_log"):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    for stmt in experiences.MEMORY_LENGTHS.ddl:  # the triggers write it: it is there whenever they are
        conn.execute(stmt)
    for ddl in experiences.RANK_LOG_TRIGGERS:
        conn.execute(ddl)


def _checks_without_lists(conn: sqlite3.Connection) -> None:
    """Migration 22: the CHECK constraints on a memory's status and a tag's source as comparisons
    joined by OR (`experiences.CHECKS_WITH_LISTS`): the same constraints, without a temporary
    b-tree built for every row checked. Only the text of the table's definition changes — no row
    is rewritten, and every stored row meets the constraint as before — so it is edited in place
    (`kit.schema_edit`), as SQLite's documentation describes for a change that leaves the stored
    content as it is."""
    edits = []
    for table, before, after in experiences.CHECKS_WITH_LISTS:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if row is not None and before in row[0]:
            edits.append((row[0].replace(before, after), table))
    if not edits:
        return
    with schema_edit(conn):
        conn.executemany("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", edits)


def _outcome_records(conn: sqlite3.Connection) -> None:
    """Migration 23: outcomes as records about their document. Every stored `## Outcome log`
    line becomes a row of `process_outcomes` (in its order; author not known) and the section
    leaves the stored body, which is indexed again without it: the log is rendered from the rows
    from now on, so a save that leaves it out no longer loses it."""
    for t in (PROCESS_OUTCOMES, PROCESS_TENANT_COUNTS):
        for stmt in t.ddl:
            conn.execute(stmt)
    rows = conn.execute("SELECT id, body FROM processes WHERE instr(body, ?) > 0", (docmodel.OUTCOME_HEADING,))
    changed = False
    for pid, body in rows.fetchall():
        rest, entries = docmodel.split_outcome_log(body)
        conn.execute("UPDATE processes SET body = ? WHERE id = ?", (rest, pid))
        conn.executemany(
            "INSERT OR IGNORE INTO process_outcomes(process_id, n, at, success, note, robot, tenant) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(pid, n, e.when, int(e.success), e.note, e.robot, e.tenant) for n, e in enumerate(entries, start=1)],
        )
        changed = True
    if changed:
        rebuild_process_index(conn)


def _triggers_and_key_index_name(conn: sqlite3.Connection) -> None:
    """Migration 18: see `_rank_log_triggers` and `_one_key_index`."""
    _rank_log_triggers(conn)
    _one_key_index(conn)


def _object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _nfc_text_indexes(conn: sqlite3.Connection) -> None:
    """Migration 10: text is indexed in Unicode NFC (`segment.nfc`), as queries are read. An entry
    made from text stored decomposed (Hangul as conjoining jamo, kana with a separate voiced
    mark) held other tokens than its composed form, so no query found it: such an index is
    rebuilt. A store whose text is all NFC — nearly every one — is only read."""
    conn.create_function("is_nfc", 1, segment.is_nfc, deterministic=True)
    if conn.execute(
        "SELECT 1 FROM memories WHERE NOT is_nfc(content) OR NOT is_nfc(context) "
        "UNION ALL SELECT 1 FROM memory_tags WHERE source = 'user' AND NOT is_nfc(tag) LIMIT 1"
    ).fetchone():
        index_repo.rebuild_memory_index(conn)
    if conn.execute(
        "SELECT 1 FROM processes WHERE NOT is_nfc(title) OR NOT is_nfc(task_pattern) "
        "OR NOT is_nfc(tags) OR NOT is_nfc(body) LIMIT 1"
    ).fetchone():
        rebuild_process_index(conn)


def _memory_lengths(conn: sqlite3.Connection) -> None:
    """Migration 24: each index entry's length in a table of our own (`experiences.MEMORY_LENGTHS`),
    backfilled from the index, so the keyword cache no longer reads FTS5's private records; and the
    log's triggers as they are now, which also log every insert and every change of a text (and drop
    that memory's length, which its writer writes again)."""
    _rank_log_triggers(conn)  # creates the table too
    experiences.fill_lengths(conn)


def _rank_index(conn: sqlite3.Connection) -> None:
    """Migration 13: idx_memories_rank on files made by the first build of migration 4, which
    lacked it (the step's DDL gained it later, so files created since have it and this is a no-op
    there): keyword recall ranked without it was 10-25 % slower at 100,000 memories."""
    conn.execute(experiences.RANK_INDEX_DDL)


def _segmented_process_index(conn: sqlite3.Connection) -> None:
    """Migration 8: the process index rebuilt with CJK runs as words — a Chinese title was one
    token, so only the whole title found it in keyword search."""
    rebuild_process_index(conn)


#: Append-only. Step i brings a file from version i to version i + 1.
MIGRATIONS: list[Migration] = [
    _create(STORE_META, PROCESSES, PROCESSES_FTS),
    _create(FLEET_GROUPS, FLEET_ROBOTS, FLEET_SETTINGS),  # 2: the fleet registry (issue 3)
    _create(VECTORS),  # 3: embeddings for hybrid search (issue 6)
    _create(*experiences.TABLES),  # 4: the experience memory (issue 5)
    _fts_rowid,  # 5: processes remember their index entry (saves no longer scan the index)
    _lean_memory_indexes,  # 6: fewer index pages written per learn
    _facts_digests,  # 7: dedup digests that count every number and outcome
    _segmented_process_index,  # 8: process text indexed with CJK runs as words (as memories are)
    # 9: the digests again, as dedup computes them now — numbers with their units and spelled
    # numbers, versions and addresses verbatim, the note's numbers and outcome, other top-level
    # context keys, task.status, spatial names; a digest from before would keep a stored memory
    # from ever being proposed as the duplicate of the same experience learned again
    _facts_digests,
    _nfc_text_indexes,  # 10: indexes of text stored decomposed rebuilt in NFC (only when there is such text)
    # 11: the digests again — a plain-text note with no numbers or negation decides nothing, as no
    # note does; a digest from 9 would keep such a memory from being found as a duplicate
    _facts_digests,
    # 12: the digests again — the whole task (name, reward, steps…), the robot (type, id…) and the
    # environment (a whole env or source string, not its first 32 characters) decide; a digest
    # from 11 left them out, so the same insight learned again with the same task and robot would
    # no longer find its stored copy. And a fact's content_hash becomes its lexical key (the hash
    # of its content words in order), which finds its lexical duplicates without a text search
    _dedup_keys,
    _rank_index,  # 13: the ranking index on files from the first experience-memory release
    # 14: the lexical keys and digests again — a number is kept as a placeholder where it stands
    # (B12 is not 12B), symbols that carry meaning (> <, ✅ ❌, 10:30 / 10/30) and exponents
    # (1e-3) count, contractions are written out ("don't" = "do not"); and the key's index gains
    # robot, collection and digest, so a lookup no longer walks every row sharing the key
    _dedup_keys_and_index,
    # 15: the index's change log, which keeps the in-memory keyword cache current across
    # processes (experiences/keyword_repo.py)
    _create(experiences.MEMORIES_FTS_CHANGES),
    _one_key_index,  # 16: one index for the duplicate lookups instead of two (a page less per learn)
    # 17: every update of an active memory's ranking attributes in the change log, so the keyword
    # cache bounds each match's score by them (experiences/keyword_repo.py)
    _rank_log_triggers,
    # 18: the log's triggers also log a memory leaving the active ones, a row inserted over an
    # index entry and a delete (an older reader then ranks in SQL); the duplicate lookups' index
    # takes back the name older builds' lookups give it
    _triggers_and_key_index_name,
    # 19: the log's triggers again — an active memory replaced by a row that is not active, by an
    # INSERT OR REPLACE or an UPDATE OR REPLACE of an id, is logged too
    _rank_log_triggers,
    # 20: the log's triggers again — an update of an active memory's context is logged too, so
    # the cached sets of memories passing a context_filter followed it (the filter masks, since deleted)
    _rank_log_triggers,
    # 21: the log's triggers again — an update of an active memory's updated_at too, which ranks
    # a filter-only list from those sets
    _rank_log_triggers,
    # 22: the CHECK constraints on a memory's status and a tag's source without an IN list, for
    # which SQLite built a temporary b-tree on every learn, four times
    _checks_without_lists,
    # 23: outcome history as rows beside the counters (`process_outcomes`), backfilled from the
    # stored outcome logs, and per-group counters of fleet-wide documents
    _outcome_records,
    # 24: each index entry's length in tokens in a table of our own, read by the keyword cache
    # instead of FTS5's private records; every insert and change of a text logged
    _memory_lengths,
    # 25: the process index's change log and its triggers, which keep each reader process's
    # posting cache of the processes current (processes/sqlite/postings.py)
    process_postings.create_log,
    # 26: public memory ids (`experiences.model.PUBLIC_FROM`): memories written from now on are
    # shown by a random id; those already stored keep the ids robots were given
    _create(experiences.MEMORY_PUBLIC),
]


def schema() -> Schema:
    return Schema(tuple(TABLES))


#: The whole schema at the last version: a new file is created from it in one step (the migrations
#: take older files there; `tests/storage/sqlite/test_baseline.py` checks the two agree).
BASELINE = Path(__file__).with_name("index_baseline.sql")


def _baseline(conn: sqlite3.Connection) -> None:
    statement = ""
    for line in BASELINE.read_text(encoding="utf-8").splitlines(keepends=True):
        if not statement and line.startswith("--"):
            continue
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""


#: store_meta's record of the dedup rules every fact's keys were computed by (`dedup.RULES_VERSION`).
#: A file without it has keys by version 1: the schema steps up to 14 recomputed them by those rules.
DEDUP_RULES_KEY = "dedup_rules"


def _stored_rules(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (DEDUP_RULES_KEY,)).fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 1


def follow_dedup_rules(store: SqliteStore) -> None:
    """Recompute every fact's dedup keys when they were computed by older rules than this build's,
    and record the rules they follow — once, in one transaction, whichever process gets there first.
    Keys from newer rules (a newer build wrote them) are left as they are."""
    if store.read_blocking(_stored_rules) >= dedup.RULES_VERSION and store.read_blocking(_rules_recorded):
        return

    def job(conn: sqlite3.Connection) -> None:
        if _stored_rules(conn) < dedup.RULES_VERSION:
            _dedup_keys(conn)
        if _stored_rules(conn) <= dedup.RULES_VERSION:
            conn.execute(
                "INSERT INTO store_meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (DEDUP_RULES_KEY, str(dedup.RULES_VERSION)),
            )

    store.write_blocking(job)


def _rules_recorded(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM store_meta WHERE key = ?", (DEDUP_RULES_KEY,)).fetchone() is not None


def open_index(
    path: Path,
    *,
    mode: StoreMode = StoreMode.SERVER,
    hot_queue_max: int = 10_000,
    readers: int = 4,
    read_only: bool = False,
    refuse_emptied: bool = True,
) -> SqliteStore:
    """Open (creating or migrating) index.db, its facts' dedup keys brought to this build's rules;
    `mode`, `read_only`: see `SqliteStore.open`. Raises `SchemaTooNew` / `StoreUnreadable` /
    `StoreNotWritable` / `StoreBusy` / `StoreWriteFailed`."""
    store = SqliteStore.open(
        path,
        schema(),
        MIGRATIONS,
        mode=mode,
        hot_queue_max=hot_queue_max,
        readers=readers,
        read_only=read_only,
        baseline=_baseline,
        refuse_emptied=refuse_emptied,
    )
    if not read_only:
        try:
            follow_dedup_rules(store)
        except BaseException:
            store.close()
            raise
    return store


# ---------------------------------------------------------------------------- provenance hand-over
#: The robot a row carries when nothing said whose it is (spec: ``ROBOT_ID`` unset, an open server).
UNKNOWN_ROBOT = "unknown"
#: The tables of index.db whose rows carry a robot that decides who may read them. Lessons (in
#: lessons.db) never carry ``unknown``: a lesson call needs a registered robot, and ``unknown`` is
#: a reserved id no robot can register.
PROVENANCE_TABLES: tuple[str, ...] = ("processes", "memories", "sessions")


def count_unknown(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows per table of `PROVENANCE_TABLES` whose robot is ``unknown``."""
    return {
        t: int(conn.execute(f"SELECT count(*) FROM {t} WHERE robot = ?", (UNKNOWN_ROBOT,)).fetchone()[0])  # noqa: S608 -- fixed table names
        for t in PROVENANCE_TABLES
    }


def hand_over_unknown(conn: sqlite3.Connection, to: str) -> dict[str, int]:
    """Give every ``unknown`` row of `PROVENANCE_TABLES` to robot `to` (a robot id or ``shared``),
    in the caller's transaction; rows per table changed. Contents, times and counters are kept:
    only who the row belongs to changes. The memories' change-log triggers tell every keyword
    cache; the vector partitions (robot per vector) are restamped so every process's vector cache
    reloads, this one's included once the caller invalidates it."""
    changed = {
        t: int(conn.execute(f"UPDATE {t} SET robot = ? WHERE robot = ?", (to, UNKNOWN_ROBOT)).rowcount)  # noqa: S608 -- fixed table names
        for t in PROVENANCE_TABLES
    }
    if changed["processes"]:
        vectorstore.restamp(conn, "process")
    if changed["memories"]:
        vectorstore.restamp(conn, "memory")
    return changed
