"""The storage kit: what the spec takes from the private robot-mcp-kit, written here.

It knows nothing of processes, fleets or memories — only tables, their kinds, one writer
thread, read-only readers, versioned opening and retention. Shaped so it could be lifted out.
"""

from robot_mcp_memory.storage.sqlite.kinds import (
    Kind,
    Retention,
    Schema,
    Table,
    fts5_problem,
    fts5_table,
    recreate,
    schema_edit,
)
from robot_mcp_memory.storage.sqlite.store import Migration, OpenReport, SqliteStore, StoreStats

__all__ = [
    "Kind",
    "Migration",
    "OpenReport",
    "Retention",
    "Schema",
    "SqliteStore",
    "StoreStats",
    "Table",
    "fts5_problem",
    "fts5_table",
    "recreate",
    "schema_edit",
]
