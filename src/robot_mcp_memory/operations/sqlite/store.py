"""The operations port for SQLite (`ports.OperatorStore`, `ports.Backups`): index.db and
lessons.db of one data directory, reached through their `SqliteStore`s and the domains'
SQLite adapters, which `app.py` hands in.

Restoring spans two files and no transaction spans two: lessons.db's rows are loaded in a
transaction left open until index.db's has committed, so a refusal in either leaves both as they
were. Only a stop between the two commits leaves index.db loaded without the lessons; it is
recorded in index.db (`archive.UNFINISHED`) until a load finishes.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import MemoryError_, StorageError
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite import index_repo, robotmem_import, storage, vector_repo
from robot_mcp_memory.fleet.sqlite.store import FleetRegistry
from robot_mcp_memory.lessons.sqlite.store import ParamStore
from robot_mcp_memory.operations.archive import LESSONS_PREFIX, NOT_ARCHIVED, loadable
from robot_mcp_memory.operations.ports import EachDocument, IndexHealth, Progress, StoreHealth, StoreProbe
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite.store import ProcessStore, restore_rows
from robot_mcp_memory.storage.sqlite import SqliteStore, archive, maintenance
from robot_mcp_memory.storage.sqlite import index_db as db

#: The doctor's name for each full-text index (`db.TEXT_INDEXES`).
INDEX_NAMES = {"processes_fts": "process index", "memories_fts": "memory index"}
#: The database files of a data directory, in the order a backup copies them.
DATABASES = ("index.db", "lessons.db")


def _derive(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """An archive row as it is stored: a memory's dedup keys are recomputed from its text
    (`index_repo.with_dedup_keys`), never taken from the archive, and an id written as a whole
    float (2.0) is the integer the column stores (2), for every step of the load after this."""
    if table != "memories":
        return dict(row)
    out = index_repo.with_dedup_keys(row)
    mid = out.get("id")
    if isinstance(mid, float) and mid.is_integer():
        out["id"] = int(mid)
    return out


#: Columns naming a row without a foreign key (a memory is kept when its session or its successor
#: is not, so none is declared): a loaded row must name one the archive or the store holds — an
#: archive mixing two dumps' files had memories in sessions that exist nowhere.
_LINKS = {"memories": (("session_id", "sessions", "id"), ("superseded_by", "memories", "id"))}


def _before_load(conn: Any, table: str, rows: list[dict[str, Any]]) -> None:
    """Before an archive load writes a table's rows: loaded memories keep only the vectors still
    theirs (`vector_repo.drop_loaded_vectors`) and are shown as the archive shows them — by the
    public id its ``memory_public`` file gives them (loaded after), else (a dump from before public
    ids) by their own id."""
    vector_repo.drop_loaded_vectors(conn, table, rows)
    if table == "memories":
        storage.drop_public_ids(conn, [row["id"] for row in rows if isinstance(row.get("id"), int)])


def _carries(archive_dir: Path | None) -> tuple[bool, bool]:
    """Whether an archive carries lessons (lessons.db's files), and the documents' outcome records."""
    if archive_dir is None:
        return False, False
    lessons = any(archive_dir.glob(f"{LESSONS_PREFIX}*.jsonl"))
    return lessons, (archive_dir / f"{db.PROCESS_OUTCOMES.name}.jsonl").is_file()


class SqliteOperations:
    """`ports.OperatorStore` over index.db (`index`) and lessons.db (`lessons`)."""

    def __init__(
        self,
        index: SqliteStore,
        *,
        index_path: Path,
        lessons: ParamStore,
        processes: ProcessStore,
        fleet: FleetRegistry,
        experiences: ExperienceService,
    ) -> None:
        self.index = index
        self.index_path = index_path
        self.lessons = lessons
        self.processes = processes
        self.fleet = fleet
        self.experiences = experiences

    # ------------------------------------------------------------------ dump and load
    async def export(self, each: EachDocument, folder: Path) -> tuple[int, dict[str, int]]:
        """The processes and the other tables of index.db from one read transaction, lessons.db
        from its own."""
        tables = archive.archivable(self.index, NOT_ARCHIVED)
        processes, archived = await self.processes.snapshot(each, archive.exporter(tables, folder))
        lessons = await self.lessons.readable()
        if lessons is not None:
            got = await asyncio.to_thread(
                archive.export_tables, lessons, archive.archivable(lessons, NOT_ARCHIVED), folder, LESSONS_PREFIX
            )
            archived.update({LESSONS_PREFIX + k: v for k, v in got.items()})
        return processes, archived

    async def restore(
        self, documents: Iterable[ProcessDoc], archive_dir: Path | None, *, source: Path, interrupt: Callable[[], None]
    ) -> tuple[int, dict[str, int]]:
        tables = archive.archivable(self.index, NOT_ARCHIVED)
        index_archive = (
            None
            if archive_dir is None
            else archive.loader(
                tables,
                archive_dir,
                check=loadable,
                derive=_derive,
                before=_before_load,
                links=_LINKS,
                interrupt=interrupt,
            )
        )
        has_lessons, history_archived = await asyncio.to_thread(_carries, archive_dir)
        lessons: tuple[SqliteStore, Callable[[Any], dict[str, int]]] | None = None  # lessons.db, its job
        if has_lessons and archive_dir is not None:
            store = await self.lessons.writable()
            lesson_tables = archive.archivable(store, NOT_ARCHIVED)
            lessons = (store, archive.loader(lesson_tables, archive_dir, LESSONS_PREFIX, loadable, interrupt=interrupt))

        def index_job(conn: Any) -> tuple[int, dict[str, int]]:
            # A dump with outcome records carries each document's history there; an older one (or a
            # folder of documents) in the documents' outcome logs.
            processes = restore_rows(conn, documents, log_is_history=not history_archived)
            counts = {} if index_archive is None else index_archive(conn)
            if {"memories", "memory_tags"} & set(counts):  # the memory index, from the rows as loaded
                index_repo.rebuild_memory_index(conn, interrupt)
            interrupt()
            if lessons is not None:
                archive.mark_unfinished(conn, str(source.resolve()))  # `doctor` may run from anywhere
            return processes, counts

        def run() -> tuple[int, dict[str, int]]:
            if lessons is None:
                return self.index.write_blocking(index_job)
            store, lessons_job = lessons
            committed = False

            def both(conn: Any) -> tuple[int, dict[str, int]]:
                nonlocal committed
                got = lessons_job(conn)
                processes, counts = self.index.write_blocking(index_job)  # index.db commits here
                committed = True
                return processes, {**counts, **{LESSONS_PREFIX + k: v for k, v in got.items()}}

            try:
                done = store.write_blocking(both)
            except StorageError as exc:
                if committed:
                    raise StorageError(
                        f"index.db was loaded, but lessons.db was not: {exc.detail} Run the same load again "
                        "once that is fixed (`doctor` reports the unfinished load until then)"
                    ) from exc
                raise
            self.index.write_blocking(archive.mark_finished)
            return done

        try:
            done = await asyncio.to_thread(run)
        finally:  # whatever committed: caches read again, vectors of what was replaced made again
            self.processes.restored()
            vectors = self.experiences.vectors
            if isinstance(vectors, vector_repo.MemoryVectorIndex):
                vectors.cache.invalidate(vector_repo.DOMAIN)
        await self.fleet.reload()
        return done

    # ------------------------------------------------------------------ doctor, reindex, stats
    @property
    def read_only(self) -> bool:
        return self.index.read_only

    @property
    def hot_writes_dropped(self) -> int:
        return self.index.stats.hot_dropped

    def health(self, *, full: bool = False) -> StoreHealth:
        h = maintenance.health(self.index_path, full=full)
        return StoreHealth(
            name=self.index_path.name,
            integrity=h.integrity,
            schema_version=h.schema_version,
            schema_supported=len(db.MIGRATIONS),
            size_bytes=h.size_bytes,
            wal_bytes=h.wal_bytes,
        )

    async def text_indexes(self, *, deep: bool) -> list[IndexHealth]:
        # FTS5's integrity check is a write-shaped statement: it runs on the writer's connection.
        health = functools.partial(db.text_index_health, deep=deep)
        found = await (self.index.write(health, long=True) if deep else self.index.read(health))
        return [IndexHealth(INDEX_NAMES.get(ix.table, ix.table), ix.rows, ix.entries, ix.problem) for ix in found]

    async def rebuild_text_indexes(self) -> dict[str, int]:
        return await self.index.write(db.rebuild_text_indexes, long=True)  # never on the event loop

    async def unfinished_load(self) -> str | None:
        return await self.index.read(archive.unfinished)

    async def mark_unfinished(self, what: str) -> None:
        await self.index.write(lambda conn: archive.mark_unfinished(conn, what))

    async def mark_finished(self) -> None:
        await self.index.write(archive.mark_finished)

    def row_counts(self) -> dict[str, int]:
        counts = maintenance.count_rows(self.index_path, [t.name for t in db.TABLES])
        lessons_db = self.lessons.path  # lessons live in their own file, made by the first one
        counts["lessons"] = (
            maintenance.count_rows(lessons_db, ["lessons"]).get("lessons", 0) if lessons_db.exists() else 0
        )
        return counts

    # ------------------------------------------------------------------ hand-over
    async def count_unknown(self) -> dict[str, int]:
        return await self.index.read(db.count_unknown)

    def count_unknown_blocking(self) -> dict[str, int]:
        return self.index.read_blocking(db.count_unknown)

    async def hand_over_unknown(self, to: str) -> dict[str, int]:
        return await self.index.write(lambda conn: db.hand_over_unknown(conn, to), after=self._forget_vectors)

    def _forget_vectors(self, _: dict[str, int]) -> None:
        """After a hand-over's commit: this process's vector caches, whose partitions (robots) just changed."""
        self.processes.vectors.invalidate()
        vectors = self.experiences.vectors
        if isinstance(vectors, vector_repo.MemoryVectorIndex):
            vectors.cache.invalidate()

    # ------------------------------------------------------------------ readiness
    async def probe(self) -> list[StoreProbe]:
        found = [await self._index()]
        if self.lessons.path.exists():  # opened lazily: no file until a lesson is recorded
            found.append(await _file(self.lessons.path))
        return found

    async def _index(self) -> StoreProbe:
        try:
            await self.index.read(maintenance.read_each_table)
        except MemoryError_:
            return StoreProbe(
                self.index_path.name, "the server's readers cannot read it (not a database, or a damaged page)"
            )
        return await _file(self.index_path)

    # ------------------------------------------------------------------ robotmem
    async def import_robotmem(
        self, path: Path, *, robot: str | None, collection_prefix: str, progress: Progress | None
    ) -> ImportReport:
        return await robotmem_import.import_robotmem(
            self.experiences, path, robot=robot, collection_prefix=collection_prefix, progress=progress
        )


async def _file(path: Path) -> StoreProbe:
    """`path` read on a connection of its own (`maintenance.probe`), off the event loop."""
    return StoreProbe(path.name, await asyncio.to_thread(maintenance.probe, path))


class SqliteBackups:
    """`ports.Backups`: SQLite's online backup of each database file of a data directory."""

    def databases(self, data_dir: Path) -> list[Path]:
        return [data_dir / name for name in DATABASES if (data_dir / name).exists()]

    def copy(self, src: Path, dest: Path, progress: Progress | None = None) -> None:
        maintenance.backup(src, dest, progress)
