"""The composition root: opens the stores and wires the services. Every surface (MCP server,
REST/dashboard, CLI, Python API) builds one `Memory` and talks only to its services."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from robot_mcp_memory import logs
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.postgres.vectors import PostgresMemoryVectors
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite.repository import SqliteMemories
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.fleet.ports import FleetRepository
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.fleet.service import FleetService
from robot_mcp_memory.fleet.sqlite.store import FleetRegistry
from robot_mcp_memory.lessons.ports import LessonRepository
from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.lessons.service import ScopedParams, Thresholds
from robot_mcp_memory.lessons.sqlite.store import ParamStore
from robot_mcp_memory.operations.ports import Backups, OperatorStore
from robot_mcp_memory.operations.postgres.store import PostgresBackups, PostgresOperations
from robot_mcp_memory.operations.sqlite.store import SqliteBackups, SqliteOperations
from robot_mcp_memory.processes.ports import ProcessRepository
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.ranking import Fusion
from robot_mcp_memory.processes.service import ProcessService
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.storage.postgres import DEFAULT_SCHEMA, PostgresStore
from robot_mcp_memory.storage.sqlite import SqliteStore, StoreMode
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.storage.sqlite.opening import refuse_emptied
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle

_log = logs.get("robot_mcp_memory.app")


@dataclass
class SqliteStores:
    """The SQLite stores and adapters an installation on `MEMORY_DATA_DIR` runs on."""

    index: SqliteStore
    process_store: ProcessStore
    fleet_registry: FleetRegistry
    lesson_store: ParamStore
    #: Tests reach the SQLite store (keyword cache, access counts) here.
    experience_store: ExperienceStore
    memories: SqliteMemories
    memory_vectors: MemoryVectorIndex


@dataclass
class Memory:
    settings: Settings
    policy: Policy
    processes: ProcessService
    fleet: FleetService
    lessons: ScopedParams
    experiences: ExperienceService
    #: The adapters behind the services, typed as their ports (SQLite's or PostgreSQL's).
    process_repo: ProcessRepository
    fleet_repo: FleetRepository
    lesson_repo: LessonRepository
    #: The experiences adapter behind `experiences` (its ports: `MemoryRepository`, and the
    #: `MemoryCatalogue` the dashboard's browser reads).
    memories: SqliteMemories | PostgresMemories
    #: The operations adapter (`operations.ports.OperatorStore`) over these stores: the operator's
    #: use cases (`operations/`) take this `Memory` as their `Installation` and reach storage only there.
    operations: OperatorStore
    embedder: ResilientEmbedder | None = None
    #: Exactly one of the two is set: the installation's backend.
    sqlite: SqliteStores | None = None
    postgres: PostgresStore | None = None
    #: Browser sessions and the token throttle every replica shares (PostgreSQL); None: the web
    #: layer keeps this process's own.
    sessions: Sessions | None = None
    throttle: Throttle | None = None
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def _sqlite(self, what: str) -> SqliteStores:
        if self.sqlite is None:
            raise StorageError(f"{what} is SQLite's and this installation runs on PostgreSQL (MEMORY_DATABASE_URL)")
        return self.sqlite

    # The SQLite adapters by their own classes (the dashboard's index counts, the CLI's SQLite-only
    # commands and tests reach them here); on PostgreSQL each raises `StorageError`.
    @property
    def index(self) -> SqliteStore:
        return self._sqlite("index.db").index

    @property
    def process_store(self) -> ProcessStore:
        return self._sqlite("the SQLite process index").process_store

    @property
    def fleet_registry(self) -> FleetRegistry:
        return self._sqlite("the SQLite fleet registry").fleet_registry

    @property
    def lesson_store(self) -> ParamStore:
        return self._sqlite("lessons.db").lesson_store

    @property
    def experience_store(self) -> ExperienceStore:
        return self._sqlite("the SQLite experience store").experience_store

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        mode: StoreMode = StoreMode.SERVER,
        backfill: bool = True,
        read_only: bool = False,
        keyword_cache: bool = True,
        vector_matrix: bool = True,
    ) -> Memory:
        """Open ``index.db`` (creating or migrating it) and log one ``store_ready`` line.

        `mode` (`StoreMode`, fixed for the store's life): `SERVER` for an event loop serving many
        sessions (the HTTP transports, ``web``, the default), `BLOCKING` for one caller whose
        calls come one after another (the Python API, the CLI, a stdio server).

        With `backfill` (a server), vectors missing for the model are made in the background once
        it is ready. One-shot commands pass False: a backfill racing `reembed` would do its work
        behind its back (and its report would say 0), and `stats` should not start embedding.
        `read_only`: commands that only read, on a data directory they cannot write (see
        `SqliteStore.open`); every write is refused. `keyword_cache` switches the experiences
        adapter's accelerator of keyword ranking (`ExperienceStore`), `vector_matrix` its vectors
        held in memory (`MemoryVectorIndex`); recall answers the same either way.

        With `settings.database_url` every store is PostgreSQL's (`open_postgres`); `read_only`,
        `keyword_cache` and `vector_matrix` are SQLite's and do not apply there."""
        if settings.database_url is not None:
            return cls.open_postgres(settings, mode=mode, backfill=backfill)
        # A 0-byte file beside another database that holds data is refused (storage's
        # `refuse_emptied`) — judged on the directory as found, before opening one store creates its
        # file and makes the other look emptied.
        for path in (settings.index_path, settings.lessons_path):
            if not read_only and path.is_file() and path.stat().st_size == 0:
                refuse_emptied(path)
                # Nothing beside it says data was expected, so it starts empty — said as a warning:
                # an operator who restored into the wrong directory sees it before robots write.
                _log.warning(
                    "store.empty_file",
                    file=path.name,
                    detail="the file was empty (0 bytes); starting a new, empty database in it",
                )
        index = db.open_index(
            settings.index_path,
            mode=mode,
            hot_queue_max=settings.hot_queue_max,
            read_only=read_only,
            refuse_emptied=False,
        )
        try:
            # An existing lessons.db is checked now, before anything is logged as ready: a broken
            # file stops the start with one line on stderr (docs/operations.md), not two.
            params = ParamStore(settings.lessons_path, read_only=read_only, refuse_emptied=False)
        except BaseException:
            index.close()
            raise
        report = index.report
        if report is not None:
            _log.info("store_ready", **report.log_fields())
        registry = FleetRegistry(index)
        policy = Policy(membership=registry)  # process visibility follows the fleet's groups
        thresholds = Thresholds(settings.lesson_min_successes, settings.lesson_min_reliability)
        # Semantic search: the model loads in the background; until then search is keyword-only.
        embedder = ResilientEmbedder.from_settings(settings)
        process_store = ProcessStore(index, embedder, Fusion(settings.process_fusion_weights, settings.fusion_k))
        experience_store = ExperienceStore(index, keyword_cache=keyword_cache)
        memories = SqliteMemories(experience_store)
        memory_vectors = MemoryVectorIndex(
            index, embedder, settings.fusion_weights, settings.fusion_k, matrix=vector_matrix
        )
        experiences = ExperienceService(memories, policy, default_robot=settings.robot_id, vectors=memory_vectors)
        operations = SqliteOperations(
            index,
            index_path=settings.index_path,
            lessons=params,
            processes=process_store,
            fleet=registry,
            experiences=experiences,
        )
        if backfill:
            embedder.on_ready(process_store.kick_backfill)  # vectors missing for this model get made
            embedder.on_ready(memory_vectors.kick_backfill)
        embedder.start()
        stores = SqliteStores(
            index=index,
            process_store=process_store,
            fleet_registry=registry,
            lesson_store=params,
            experience_store=experience_store,
            memories=memories,
            memory_vectors=memory_vectors,
        )
        return cls(
            embedder=embedder,
            settings=settings,
            policy=policy,
            processes=ProcessService(process_store, policy, default_robot=settings.robot_id),
            fleet=FleetService(registry, policy),
            lessons=ScopedParams(params, registry, policy, thresholds),
            experiences=experiences,
            process_repo=process_store,
            fleet_repo=registry,
            lesson_repo=params,
            memories=memories,
            operations=operations,
            sqlite=stores,
        )

    @classmethod
    def open_postgres(
        cls,
        settings: Settings,
        *,
        mode: StoreMode = StoreMode.SERVER,
        schema: str = DEFAULT_SCHEMA,
        backfill: bool = True,
    ) -> Memory:
        """Every domain on the PostgreSQL database `settings.database_url` names, in one `schema`:
        each adapter brings its tables up to date under the store's advisory lock (replicas starting
        together migrate once), and nothing is written under `MEMORY_DATA_DIR`. `backfill` as in
        `open`: process and memory vectors missing for the model are made once it is ready."""
        if settings.database_url is None:
            raise StorageError("no PostgreSQL database is configured: set MEMORY_DATABASE_URL")
        store = PostgresStore.open(settings.database_url, schema=schema, max_size=settings.database_pool_size)
        closers: list[Callable[[], None]] = []
        # Semantic search: the model loads in the background; until then search is keyword-only.
        embedder = ResilientEmbedder.from_settings(settings)
        try:
            fleet = PostgresFleet(store)
            closers.append(fleet.close)
            processes = PostgresProcesses(store, embedder, Fusion(settings.process_fusion_weights, settings.fusion_k))
            closers.append(processes.close)  # its background backfill
            lessons = PostgresLessons(store)
            memories = PostgresMemories(store, blocking=mode is StoreMode.BLOCKING)
            closers.append(memories.close)  # pending access counts, before the pool closes
            vectors = PostgresMemoryVectors(store, embedder, settings.fusion_weights, settings.fusion_k)
            closers.append(vectors.close)  # its background backfill
            sessions = PostgresSessions(store)
            throttle = PostgresThrottle(store)
        except BaseException:
            for close in reversed(closers):
                close()
            store.close()
            raise
        _log.info("store_ready", backend="postgresql", schema=store.schema)
        policy = Policy(membership=fleet)  # process visibility follows the fleet's groups
        thresholds = Thresholds(settings.lesson_min_successes, settings.lesson_min_reliability)
        if backfill:
            embedder.on_ready(processes.kick_backfill)  # vectors missing for this model get made
            embedder.on_ready(vectors.kick_backfill)
        embedder.start()
        return cls(
            embedder=embedder,
            settings=settings,
            policy=policy,
            processes=ProcessService(processes, policy, default_robot=settings.robot_id),
            fleet=FleetService(fleet, policy),
            lessons=ScopedParams(lessons, fleet, policy, thresholds),
            experiences=ExperienceService(memories, policy, default_robot=settings.robot_id, vectors=vectors),
            process_repo=processes,
            fleet_repo=fleet,
            lesson_repo=lessons,
            memories=memories,
            operations=PostgresOperations(store, reload=fleet.refresh),
            postgres=store,
            sessions=sessions,
            throttle=throttle,
            _closers=closers,
        )

    @staticmethod
    def backups(settings: Settings | None = None) -> Backups:
        """Online backups of a data directory's databases, made without opening them (`backup`):
        a copy neither creates nor migrates the files it copies. With `settings.database_url`
        there is no file to copy: `PostgresBackups` refuses, naming pg_dump and ``dump``."""
        if settings is not None and settings.postgres:
            return PostgresBackups()
        return SqliteBackups()

    def close(self) -> None:
        self.processes.close()
        if self.sqlite is not None:
            self._close_sqlite(self.sqlite)
            return
        if self.embedder is not None:
            self.embedder.close()
        for close in reversed(self._closers):
            close()
        if self.postgres is not None:
            self.postgres.close()

    def _close_sqlite(self, stores: SqliteStores) -> None:
        stores.process_store.close()  # stops the vector backfills before the database closes
        stores.memory_vectors.close()
        if self.embedder is not None:
            self.embedder.close()
        stores.lesson_store.close()
        stores.fleet_registry.close()
        stores.experience_store.access.flush()  # pending access counts, before the writer drains
        stores.index.close()
