"""PostgreSQL installations for the operations tests: each on a schema of its own, dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from robot_mcp_memory.config import Settings
from robot_mcp_memory.storage.postgres import PostgresStore
from tests.operations.pg_installation import PgInstallation

PgFactory = Callable[[], PgInstallation]


@pytest.fixture
def pg_installations(pg_url: str, tmp_path: Path) -> Iterator[PgFactory]:
    """Make as many fresh `PgInstallation`s as a test needs (one schema each)."""
    import psycopg

    made: list[tuple[PgInstallation, str]] = []
    (tmp_path / "pg-data").mkdir(exist_ok=True)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "pg-data")})

    def make() -> PgInstallation:
        schema = f"t_{uuid.uuid4().hex[:16]}"
        installation = PgInstallation(settings, PostgresStore.open(pg_url, schema=schema, max_size=4))
        made.append((installation, schema))
        return installation

    try:
        yield make
    finally:
        for installation, schema in made:
            installation.close()
            installation.db.close()
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
