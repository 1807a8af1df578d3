"""The composition root: `MEMORY_DATABASE_URL` wires every service to the PostgreSQL adapters, and
without it every service runs on the SQLite files as before."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.postgres.vectors import PostgresMemoryVectors
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.operations import handover, readiness
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle
from robot_mcp_memory.tenancy.principal import ADMIN
from tests.conftest import MAILROOM, doc, eventually


@pytest.fixture
async def pg_memory(pg_url: str, tmp_path: Path) -> AsyncIterator[Memory]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    settings = Settings.from_env(
        {"MEMORY_DATABASE_URL": pg_url, "MEMORY_DATA_DIR": str(tmp_path / "data"), "MEMORY_EMBEDDER": "hashing"}
    )
    memory = Memory.open_postgres(settings, schema=schema)
    try:
        yield memory
    finally:
        memory.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.postgres
async def test_a_database_url_wires_every_domain_to_postgresql(pg_memory: Memory, tmp_path: Path) -> None:
    assert isinstance(pg_memory.process_repo, PostgresProcesses)
    assert isinstance(pg_memory.fleet_repo, PostgresFleet)
    assert isinstance(pg_memory.lesson_repo, PostgresLessons)
    assert isinstance(pg_memory.memories, PostgresMemories)
    assert isinstance(pg_memory.sessions, PostgresSessions)
    assert isinstance(pg_memory.throttle, PostgresThrottle)
    assert pg_memory.sqlite is None

    saved = await pg_memory.processes.save(ADMIN, MAILROOM)
    await pg_memory.processes.record_outcome(ADMIN, saved.doc.id, True, "delivered")
    found = await pg_memory.processes.find(ADMIN, "fetch the package from the mailroom")
    learned = await pg_memory.experiences.learn(ADMIN, "the mailroom door sticks: push twice", collection="mail")
    recalled = await pg_memory.experiences.recall(ADMIN, "mailroom door", collection="mail")

    assert [h.doc.id for h in found.hits] == [saved.doc.id]
    assert [h.memory.id for h in recalled.hits] == [learned.memory_id]
    assert not (tmp_path / "data").exists()  # nothing written under MEMORY_DATA_DIR


@pytest.mark.postgres
async def test_operator_commands_run_on_postgresql_and_readyz_asks_the_database(pg_memory: Memory) -> None:
    await pg_memory.processes.save(ADMIN, MAILROOM)
    counts = await operations.stats(pg_memory)
    assert counts  # the operations adapter is PostgreSQL's, not a refusal
    await operations.reindex(pg_memory, ADMIN)
    await handover.hand_over(pg_memory, ADMIN, "shared", apply=False)
    handover.log_hint(pg_memory)
    ready = await readiness.readiness(pg_memory)
    assert ready.ok
    assert ready.checks[0].name == "postgresql"
    with pytest.raises(StorageError):
        _ = pg_memory.process_store  # SQLite's adapter by its class: there is none


async def test_without_a_database_url_every_service_runs_on_the_sqlite_files(settings: Settings) -> None:
    memory = Memory.open(settings)
    try:
        assert settings.database_url is None
        assert (memory.postgres, memory.sessions, memory.throttle) == (None, None, None)
        assert isinstance(memory.process_repo, ProcessStore)
        assert memory.process_store is memory.process_repo
        assert memory.sqlite is not None
        assert memory.index is memory.sqlite.index
        await memory.processes.save(ADMIN, doc("sqlite-still", "Still on SQLite"))
        assert memory.index.read_blocking(lambda c: c.execute("SELECT count(*) FROM processes").fetchone()) == (1,)
    finally:
        memory.close()
    assert settings.index_path.exists()


@pytest.mark.postgres
async def test_memories_learned_without_an_embedder_are_embedded_once_a_server_on_postgresql_has_one(
    pg_url: str, tmp_path: Path
) -> None:
    """As after a copy or an embedder outage: the server's memory backfill (kicked when its embedder
    is ready) embeds them in the background, and ``reembed``'s call remakes them all with force."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    base = {"MEMORY_DATABASE_URL": pg_url, "MEMORY_DATA_DIR": str(tmp_path / "data")}
    texts = ("the mailroom door sticks: push twice", "the lift skips floor 3", "charge before 20 percent")
    plain = Memory.open_postgres(Settings.from_env({**base, "MEMORY_EMBEDDER": "none"}), schema=schema)
    try:
        ids = [(await plain.experiences.learn(ADMIN, t)).memory_id for t in texts]
    finally:
        plain.close()
    served = Memory.open_postgres(Settings.from_env({**base, "MEMORY_EMBEDDER": "hashing"}), schema=schema)
    try:
        vectors = served.experiences.vectors
        assert isinstance(vectors, PostgresMemoryVectors)
        store = served.postgres
        assert store is not None
        assert eventually(lambda: sum(store.read_blocking(lambda c: vectorstore.counts(c, "memory")).values()) == 3)
        recalled = await served.experiences.recall(ADMIN, "the lift skips floor 3")
        assert recalled.mode == "hybrid"
        assert recalled.hits[0].memory.id == ids[1]
        assert vectors.backfiller.wait_idle(60)
        assert vectors.backfill_blocking(force=True) == 3
    finally:
        served.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
