"""An `operations.ports.Installation` on one PostgreSQL schema: the domains' PostgreSQL adapters
(which make their tables) and `PostgresOperations` over them, as `app.py` will wire them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.operations.postgres.store import PostgresOperations
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.postgres import store as process_store
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.tenancy.policy import Policy
from tests.operations.toy_store import ToyEmbedder


@dataclass
class PgInstallation:
    settings: Settings
    db: PostgresStore
    policy: Policy = field(default_factory=Policy)
    embedder: ToyEmbedder | None = field(default_factory=ToyEmbedder)

    def __post_init__(self) -> None:
        self.processes = PostgresProcesses(self.db)
        self.fleet = PostgresFleet(self.db, refresh_s=3600)
        self.lessons = PostgresLessons(self.db)
        self.memories = PostgresMemories(self.db)
        self.operations = PostgresOperations(self.db, reload=self.fleet.refresh)

    def experiences(self, default_robot: str = "tester") -> ExperienceService:
        return ExperienceService(self.memories, Policy(self.fleet), default_robot=default_robot)

    def documents(self) -> dict[str, ProcessDoc]:
        def job(conn: Connection) -> dict[str, ProcessDoc]:
            ids = [str(r[0]) for r in conn.execute("SELECT id FROM processes")]
            return {pid: doc for pid in ids if (doc := process_store.select_one(conn, pid)) is not None}

        return self.db.read_blocking(job)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.db.read_blocking(lambda conn: conn.execute(sql, params).fetchall())

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.db.write_blocking(lambda conn: conn.execute(sql, params))

    def close(self) -> None:
        self.memories.close()
        self.fleet.close()
        self.lessons.close()
