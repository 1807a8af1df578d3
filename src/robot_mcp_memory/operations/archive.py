"""The dump's archive, backend-neutral: where it sits in a dump (`ARCHIVE`), which tables travel
as archive files, how the lessons' files are named, and what a row must hold to be loaded
beyond its columns' types (`loadable`). Every backend writes and reads the same files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from robot_mcp_memory.experiences.model import PUBLIC_FROM

#: Not in the archive: processes travel as markdown, the schema version is the file's own.
NOT_ARCHIVED = ("processes", "store_meta")
ARCHIVE = "archive"
LESSONS_PREFIX = "lessons."


#: The columns holding JSON, by table: an object (or null where the column may be), or any value.
JSON_OBJECTS = {
    "memories": ("context", "metadata"),
    "sessions": ("context", "summary"),
    "fleet_robots": ("meta",),
    "lessons": ("params",),
}
JSON_VALUES = {"memories": ("data",)}
#: The times every reader can show (ISO 8601 needs a year from 1 to 9999), in seconds since 1970.
TIMES = (-62_135_596_800.0, 253_402_300_799.0)


def loadable(table: str, row: Mapping[str, Any]) -> str | None:
    """Why an archive row cannot be loaded beyond what its columns' types say: a JSON column that
    is not JSON (or not an object where every reader expects one) would make each list and page
    showing the row fail, and the index rebuild with them."""
    if table == "memories" and "content" in row and not isinstance(row["content"], str):
        return "has content that is not text (a JSON string)"
    # Stored ids stay below the public ones, which are drawn above (`model.PUBLIC_FROM`): a
    # memory is shown by the one or the other, and a lookup tells them apart by the range.
    if table == "memories" and isinstance(row.get("id"), int | float) and row["id"] >= PUBLIC_FROM:
        return f"has id {row['id']!r}, which is not a stored id (below {PUBLIC_FROM:,})"
    if table == "memory_public":
        value = row.get("public_id")
        if isinstance(value, int | float) and not PUBLIC_FROM <= value < 2 * PUBLIC_FROM:
            return (
                f"has public_id {value!r}, which is not a public id (from {PUBLIC_FROM:,} to {2 * PUBLIC_FROM - 1:,})"
            )
    if table in ("memories", "sessions"):
        for col, value in row.items():
            if col.endswith("_at") and isinstance(value, int | float) and not TIMES[0] <= value <= TIMES[1]:
                return f"has {col} {value!r}, which is not a time (seconds since 1970, years 1 to 9999)"
    for col in (*JSON_OBJECTS.get(table, ()), *JSON_VALUES.get(table, ())):
        value = row.get(col)
        if value is None:
            continue
        if not isinstance(value, str):
            return f"has {col} that is not JSON text (a string holding JSON)"
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return f"has {col} that is not JSON"
        if col in JSON_OBJECTS.get(table, ()) and not isinstance(parsed, dict):
            return f"has {col} that is not a JSON object"
    return None
