"""The storage kit: what the spec takes from the private robot-mcp-kit, written here.

It knows nothing of processes, fleets or memories — only tables, their kinds, one writer
thread, read-only readers (run as a server's or as one blocking caller's), versioned opening and
retention. Shaped so it could be lifted out.
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
from robot_mcp_memory.storage.sqlite.opening import Migration, OpenReport
from robot_mcp_memory.storage.sqlite.store import SqliteStore, StoreMode, StoreStats

__all__ = [
    "Kind",
    "Migration",
    "OpenReport",
    "Retention",
    "Schema",
    "SqliteStore",
    "StoreMode",
    "StoreStats",
    "Table",
    "fts5_problem",
    "fts5_table",
    "recreate",
    "schema_edit",
]
