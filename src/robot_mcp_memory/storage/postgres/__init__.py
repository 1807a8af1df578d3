"""The PostgreSQL engine: a connection pool safe behind PgBouncer, one schema, migrations per component."""

from robot_mcp_memory.storage.postgres.engine import DEFAULT_SCHEMA, Connection, Migrated, Migration, PostgresStore

__all__ = ["DEFAULT_SCHEMA", "Connection", "Migrated", "Migration", "PostgresStore"]
