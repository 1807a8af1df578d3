"""The operations port on PostgreSQL (`ports.OperatorStore`): one schema of one database, reached
through its `PostgresStore`; the domains' adapters (which `app.py` builds) have made their tables.

Invariants:

- **A dump is one snapshot.** `export` reads every document, every archived table and the
  lessons in one ``REPEATABLE READ, READ ONLY`` transaction (lessons share the schema here, so
  unlike SQLite they are of the same snapshot). Files are `archive`'s: SQLite's, row for row.
- **A load is one transaction.** Documents, archive rows, lessons and every derived value
  (postings, lexemes, lengths, dedup keys, the identity) commit together or not at all; nothing
  spans two commits, so a load never stays unfinished (`unfinished_load` reports only a copy
  that failed its verification, `copy.copy_installation`).
- **Integrity means the derived tables agree with the rows.** `health` reports each component's
  schema version against this build's, a document whose lexemes or length disagree with its
  postings, a memory whose length disagrees with its postings, and soft links (a memory's
  session or successor) naming nothing; `full` also reads every row of every table. The page-level
  checks are PostgreSQL's own (``amcheck``, checksums): the operator's, not ours.
- **Backups are the database's.** There is no file to copy: `PostgresBackups` refuses, naming
  ``pg_dump`` and the ``dump`` command (a backend-neutral snapshot) instead of faking one.
- **The robotmem import writes SQLite.** On PostgreSQL it is refused with the way round: import
  into a fresh SQLite data directory, then ``copy-to-postgres`` (`copy.copy_installation`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import InvalidInput, MemoryError_, StorageError
from robot_mcp_memory.experiences.postgres import keywords
from robot_mcp_memory.experiences.postgres import tables as experience_tables
from robot_mcp_memory.experiences.postgres import vectors as memory_vectors
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.fleet.postgres import store as fleet_store
from robot_mcp_memory.lessons.postgres import store as lessons_store
from robot_mcp_memory.operations.ports import EachDocument, IndexHealth, Progress, StoreHealth, StoreProbe
from robot_mcp_memory.operations.postgres import archive
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes import rows as process_rows
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.postgres import store as process_store
from robot_mcp_memory.storage.postgres import Connection, PostgresStore

#: Each component's name and its migrations: the schema this build writes.
COMPONENTS = {
    process_store.COMPONENT: process_store.MIGRATIONS,
    fleet_store.COMPONENT: fleet_store.MIGRATIONS,
    lessons_store.COMPONENT: lessons_store.MIGRATIONS,
    experience_tables.COMPONENT: experience_tables.MIGRATIONS,
}
#: The tables `row_counts` reports (SQLite's names where both have the table).
COUNTED = (
    "processes",
    "process_postings",
    "process_outcomes",
    "process_tenant_counts",
    "fleet_groups",
    "fleet_robots",
    "fleet_settings",
    "memories",
    "memory_tags",
    "memory_public",
    "memory_postings",
    "vectors",
    "sessions",
)
PROVENANCE_TABLES = ("processes", "memories", "sessions")
UNFINISHED = "load_unfinished"  # the key SQLite's store_meta uses for the same state
INDEX_NAMES = ("process index", "memory index")
#: Soft links (no foreign key on either backend): a memory's session and successor.
_DANGLING = (
    "SELECT count(*) FROM memories m WHERE (m.session_id IS NOT NULL AND NOT EXISTS "
    "(SELECT 1 FROM sessions s WHERE s.id = m.session_id)) OR (m.superseded_by IS NOT NULL AND NOT EXISTS "
    "(SELECT 1 FROM memories o WHERE o.id = m.superseded_by))"
)
_PROCESS_ENTRIES = (
    "SELECT count(*) FROM processes p WHERE p.doclen = coalesce((SELECT sum(cardinality(positions)) FROM "
    "process_postings x WHERE x.process_id = p.id), 0) AND p.lexemes = array_to_tsvector(coalesce((SELECT "
    "array_agg(DISTINCT term) FROM process_postings x WHERE x.process_id = p.id), '{}'::text[]))"
)
_MEMORY_ENTRIES = (
    "SELECT count(*) FROM memories m WHERE m.doclen = coalesce((SELECT sum(cardinality(positions)) FROM "
    "memory_postings x WHERE x.memory_id = m.id), 0)"
)


class PostgresOperations:
    """`ports.OperatorStore` over one PostgreSQL schema; `reload` is what a load makes this
    process read again (the fleet adapter's snapshot)."""

    def __init__(self, db: PostgresStore, *, reload: Callable[[], Any] | None = None) -> None:
        self.db = db
        self._reload = reload

    @property
    def name(self) -> str:
        """How the operator names the store (never the URL: it may hold a password)."""
        return f"PostgreSQL schema {self.db.schema}"

    # ------------------------------------------------------------------ dump and load
    async def export(self, each: EachDocument, folder: Path) -> tuple[int, dict[str, int]]:
        def job(conn: Connection) -> tuple[int, dict[str, int]]:
            ids = [str(r[0]) for r in conn.execute('SELECT id FROM processes ORDER BY id COLLATE "C"')]
            for n, pid in enumerate(ids, start=1):
                doc = process_store.select_one(conn, pid)
                assert doc is not None  # the same snapshot listed it
                entries = process_store.outcomes_of(conn, [pid], with_note=True)[pid]
                if entries:
                    doc = doc.model_copy(update={"body": docmodel.with_outcome_log(doc.body, entries)})
                each(doc, n, len(ids))
            return len(ids), archive.export_tables(conn, folder)

        return await self.db.read(job)

    async def restore(
        self, documents: Iterable[ProcessDoc], archive_dir: Path | None, *, source: Path, interrupt: Callable[[], None]
    ) -> tuple[int, dict[str, int]]:
        history_archived = archive_dir is not None and (archive_dir / "process_outcomes.jsonl").is_file()

        def job(conn: Connection) -> tuple[int, dict[str, int]]:
            n = 0
            for doc in documents:
                body, entries = docmodel.split_outcome_log(doc.body)
                doc = doc.model_copy(update={"body": body})
                process_store.upsert(conn, doc)
                conn.execute("DELETE FROM process_outcomes WHERE process_id = %s", (doc.id,))
                conn.execute("DELETE FROM process_tenant_counts WHERE process_id = %s", (doc.id,))
                if not history_archived:  # an older dump, or a folder of documents: the log is the history
                    process_store.insert_history(conn, doc.id, entries)
                n += 1
            counts = {} if archive_dir is None else archive.load_tables(conn, archive_dir, interrupt)
            interrupt()
            return n, counts

        try:
            return await self.db.write(job)
        finally:  # whatever committed: this process's fleet snapshot read again
            if self._reload is not None:
                await asyncio.to_thread(self._reload)

    # ------------------------------------------------------------------ doctor, reindex, stats
    @property
    def read_only(self) -> bool:
        return False  # a role without write grants fails its writes; the deep checks here only read

    @property
    def hot_writes_dropped(self) -> int:
        return 0  # no write queue to overflow: every write is its caller's own transaction

    def health(self, *, full: bool = False) -> StoreHealth:
        def job(conn: Connection) -> StoreHealth:
            found = 0
            problems: list[str] = []
            for component, steps in COMPONENTS.items():
                row = conn.execute("SELECT value FROM store_meta WHERE key = %s", (f"schema_version:{component}",))
                got = row.fetchone()
                version = int(got[0]) if got else 0
                found += version
                if version != len(steps):
                    problems.append(f"{component} tables at version {version}, this server writes {len(steps)}")
            rows = conn.execute("SELECT count(*) FROM processes").fetchone()
            entries = conn.execute(_PROCESS_ENTRIES).fetchone()
            if rows and entries and rows[0] != entries[0]:
                problems.append(f"{rows[0] - entries[0]} documents' index entries disagree with their postings")
            rows = conn.execute("SELECT count(*) FROM memories").fetchone()
            entries = conn.execute(_MEMORY_ENTRIES).fetchone()
            if rows and entries and rows[0] != entries[0]:
                problems.append(f"{rows[0] - entries[0]} memories' lengths disagree with their postings")
            dangling = conn.execute(_DANGLING).fetchone()
            if dangling and dangling[0]:
                problems.append(f"{dangling[0]} memories name a session or successor that does not exist")
            if full:  # every row of every table read, past any index
                for table in (*COUNTED, "lessons"):
                    conn.execute(f"SELECT count(*) FROM (SELECT * FROM {table}) AS t").fetchone()  # noqa: S608 - fixed names
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (self.db.schema,),
            ).fetchone()
            return StoreHealth(
                name=self.name,
                integrity=problems,
                schema_version=found,
                schema_supported=sum(len(steps) for steps in COMPONENTS.values()),
                size_bytes=int(size[0]) if size else 0,
                wal_bytes=0,  # the server's WAL is the cluster's, not this schema's
            )

        try:
            return self.db.read_blocking(job)
        except StorageError as exc:
            return StoreHealth(self.name, [exc.detail], None, sum(len(s) for s in COMPONENTS.values()), 0, 0)

    async def text_indexes(self, *, deep: bool) -> list[IndexHealth]:
        return await self.db.read(lambda conn: _text_indexes(conn, deep=deep))

    async def rebuild_text_indexes(self) -> dict[str, int]:
        def job(conn: Connection) -> dict[str, int]:
            return {
                INDEX_NAMES[0]: process_store.reindex_all(conn),
                INDEX_NAMES[1]: archive.reindex_memories(conn, None, lambda: None),
            }

        return await self.db.write(job)

    async def unfinished_load(self) -> str | None:
        def job(conn: Connection) -> str | None:
            row = conn.execute("SELECT value FROM store_meta WHERE key = %s", (UNFINISHED,)).fetchone()
            return None if row is None else str(row[0])

        return await self.db.read(job)

    async def mark_unfinished(self, what: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO store_meta(key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (UNFINISHED, what),
            )
        )

    async def mark_finished(self) -> None:
        await self.db.write(lambda conn: conn.execute("DELETE FROM store_meta WHERE key = %s", (UNFINISHED,)))

    def row_counts(self) -> dict[str, int]:
        def job(conn: Connection) -> dict[str, int]:
            counts = {}
            for table in (*COUNTED, "lessons"):
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 - fixed names
                counts[table] = int(row[0]) if row else 0
            return counts

        return self.db.read_blocking(job)

    # ------------------------------------------------------------------ hand-over
    async def count_unknown(self) -> dict[str, int]:
        return await self.db.read(_count_unknown)

    def count_unknown_blocking(self) -> dict[str, int]:
        return self.db.read_blocking(_count_unknown)

    async def hand_over_unknown(self, to: str) -> dict[str, int]:
        def job(conn: Connection) -> dict[str, int]:
            moved = {
                t: conn.execute(f"UPDATE {t} SET robot = %s WHERE robot = 'unknown'", (to,)).rowcount  # noqa: S608 - fixed names
                for t in PROVENANCE_TABLES
            }
            if moved["memories"]:
                memory_vectors.refiled(conn)  # recall finds their vectors under the new robot
            return moved

        return await self.db.write(job)

    # ------------------------------------------------------------------ readiness
    async def probe(self) -> list[StoreProbe]:
        def job(conn: Connection) -> None:
            for table in (*COUNTED, "lessons"):
                conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()  # noqa: S608 - fixed names

        try:
            await self.db.read(job)
        except MemoryError_:
            return [StoreProbe("postgresql", "the server cannot read its tables (see the server log)")]
        return [StoreProbe("postgresql", None)]

    # ------------------------------------------------------------------ robotmem
    async def import_robotmem(
        self, path: Path, *, robot: str | None, collection_prefix: str, progress: Progress | None
    ) -> ImportReport:
        raise InvalidInput(
            "the robotmem import writes to a SQLite data directory: import into a fresh SQLite dir "
            "(`robot-mcp-memory import-robotmem --data-dir <new dir> <memory.db>`), then copy-to-postgres "
            "(`robot-mcp-memory copy-to-postgres --data-dir <new dir> --to <url>`)"
        )


def _count_unknown(conn: Connection) -> dict[str, int]:
    counts = {}
    for t in PROVENANCE_TABLES:
        row = conn.execute(f"SELECT count(*) FROM {t} WHERE robot = 'unknown'").fetchone()  # noqa: S608 - fixed names
        counts[t] = int(row[0]) if row else 0
    return counts


def _text_indexes(conn: Connection, *, deep: bool) -> list[IndexHealth]:
    """Each keyword index: its rows, the rows whose entry agrees with its postings, and (`deep`)
    how many rows' postings differ from what their text makes now."""
    found: list[IndexHealth] = []
    for name, count, entries, check in (
        (INDEX_NAMES[0], "SELECT count(*) FROM processes", _PROCESS_ENTRIES, _stale_processes),
        (INDEX_NAMES[1], "SELECT count(*) FROM memories", _MEMORY_ENTRIES, _stale_memories),
    ):
        rows, agreeing = conn.execute(count).fetchone(), conn.execute(entries).fetchone()
        stale = check(conn) if deep else 0
        problem = f"{stale} entries differ from their rows' text" if stale else None
        found.append(IndexHealth(name, int(rows[0]) if rows else 0, int(agreeing[0]) if agreeing else 0, problem))
    return found


def _postings(conn: Connection, sql: str) -> dict[Any, dict[tuple[str, int], list[int]]]:
    stored: dict[Any, dict[tuple[str, int], list[int]]] = {}
    for owner, term, col, positions in conn.execute(sql):
        stored.setdefault(owner, {})[(str(term), int(col))] = list(positions)
    return stored


def _stale_processes(conn: Connection) -> int:
    stored = _postings(conn, "SELECT process_id, term, col, positions FROM process_postings")
    stale = 0
    for row in conn.execute(f"SELECT {process_rows.COLUMNS} FROM processes"):  # noqa: S608 - fixed names
        doc = process_rows.from_row(row)
        expected, _ = process_store.postings_of(doc)
        stale += expected != stored.get(doc.id, {})
    return stale


def _stale_memories(conn: Connection) -> int:
    stored = _postings(conn, "SELECT memory_id, term, col, positions FROM memory_postings")
    tags: dict[int, list[str]] = {}
    user_tags = "SELECT memory_id, tag FROM memory_tags WHERE source = 'user' ORDER BY memory_id, tag"
    for mid, tag in conn.execute(user_tags):
        tags.setdefault(int(mid), []).append(str(tag))
    stale = 0
    for mid, content, context in conn.execute("SELECT id, content, context FROM memories"):
        parsed = archive.parse_json(context)
        entry = keywords.entry(content, parsed if isinstance(parsed, dict) else {}, tags.get(int(mid), []))
        expected, _ = keywords.postings_of(entry)
        # Frequencies, not positions: a learn indexes user tags in the order given, a rebuild by name.
        got = stored.get(int(mid), {})
        stale += {k: len(v) for k, v in expected.items()} != {k: len(v) for k, v in got.items()}
    return stale


class PostgresBackups:
    """`ports.Backups` on PostgreSQL: there is no database file to copy, so none is faked."""

    def databases(self, data_dir: Path) -> list[Path]:
        raise InvalidInput(
            "on PostgreSQL the backups are the database's: use pg_dump (or your provider's snapshots) "
            "for the schema, or `robot-mcp-memory dump` for a snapshot that loads into either backend"
        )

    def copy(self, src: Path, dest: Path, progress: Progress | None = None) -> None:
        self.databases(src)


__all__ = ["PostgresBackups", "PostgresOperations"]
