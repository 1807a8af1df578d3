"""The composition root: opens the stores and wires the services. Every surface (MCP server,
REST/dashboard, CLI, Python API) builds one `Memory` and talks only to its services."""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory import logs
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite.repository import SqliteMemories
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.fleet.service import FleetService
from robot_mcp_memory.fleet.sqlite.store import FleetRegistry
from robot_mcp_memory.lessons.service import ScopedParams, Thresholds
from robot_mcp_memory.lessons.sqlite.store import ParamStore
from robot_mcp_memory.operations.sqlite.store import SqliteBackups, SqliteOperations
from robot_mcp_memory.processes.ranking import Fusion
from robot_mcp_memory.processes.service import ProcessService
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.storage.sqlite import SqliteStore, StoreMode
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.storage.sqlite.opening import refuse_emptied
from robot_mcp_memory.tenancy.policy import Policy

_log = logs.get("robot_mcp_memory.app")


@dataclass
class Memory:
    settings: Settings
    index: SqliteStore
    policy: Policy
    processes: ProcessService
    fleet: FleetService
    lessons: ScopedParams
    experiences: ExperienceService
    #: The processes adapter behind `processes`: the operations adapter, the dashboard's index counts
    #: and tests reach it here.
    process_store: ProcessStore
    #: The fleet and lessons adapters behind `fleet` and `lessons` (the operations adapter and tests
    #: reach them here).
    fleet_registry: FleetRegistry
    lesson_store: ParamStore
    #: The experiences adapter behind `experiences` (its ports: `memories`); tests reach the SQLite
    #: store (keyword cache, access counts) through `experience_store`.
    experience_store: ExperienceStore
    memories: SqliteMemories
    #: The operations adapter (`operations.ports.OperatorStore`) over these stores: the operator's
    #: use cases (`operations/`) take this `Memory` as their `Installation` and reach storage only there.
    operations: SqliteOperations
    embedder: ResilientEmbedder | None = None

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
        held in memory (`MemoryVectorIndex`); recall answers the same either way."""
        # A 0-byte file beside another database that holds data is refused (storage's
        # `refuse_emptied`) — judged on the directory as found, before opening one store creates its
        # file and makes the other look emptied.
        for path in (settings.index_path, settings.lessons_path):
            if not read_only and path.is_file() and path.stat().st_size == 0:
                refuse_emptied(path)
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
        return cls(
            embedder=embedder,
            settings=settings,
            index=index,
            policy=policy,
            processes=ProcessService(process_store, policy, default_robot=settings.robot_id),
            process_store=process_store,
            fleet_registry=registry,
            lesson_store=params,
            fleet=FleetService(registry, policy),
            lessons=ScopedParams(params, registry, policy, thresholds),
            experiences=experiences,
            experience_store=experience_store,
            memories=memories,
            operations=operations,
        )

    @staticmethod
    def backups() -> SqliteBackups:
        """Online backups of a data directory's databases, made without opening them (`backup`):
        a copy neither creates nor migrates the files it copies."""
        return SqliteBackups()

    def close(self) -> None:
        self.processes.close()
        self.process_store.close()  # stops the vector backfills before the database closes
        if isinstance(self.experiences.vectors, MemoryVectorIndex):
            self.experiences.vectors.close()
        if self.embedder is not None:
            self.embedder.close()
        self.lesson_store.close()
        self.fleet_registry.close()
        self.experience_store.access.flush()  # pending access counts, before the writer drains
        self.index.close()
