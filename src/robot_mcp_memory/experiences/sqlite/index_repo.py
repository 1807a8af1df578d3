"""What is derived from the `memories` rows, remade from them after an archive load:
`memories_fts`, and each row's dedup keys (`with_dedup_keys`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.sqlite.storage import MEMORIES_FTS, context_text, fill_lengths, log_rebuild
from robot_mcp_memory.search import segment
from robot_mcp_memory.storage.sqlite import recreate

#: How many memories the rebuild indexes between two calls of its `interrupt`.
INTERRUPT_EVERY = 1000


def rebuild_memory_index(conn: sqlite3.Connection, interrupt: Callable[[], None] | None = None) -> int:
    """Re-create every memory's full-text entry exactly as a write makes it (CJK runs segmented,
    user tags in the context text), in a freshly created index: a damaged one is not reused.
    `interrupt` is called every `INTERRUPT_EVERY` memories: what it raises stops the rebuild
    (a `load` stopped by Ctrl-C; the caller's transaction rolls back)."""
    recreate(conn, MEMORIES_FTS)
    user_tags: dict[int, list[str]] = {}
    for mid, tag in conn.execute("SELECT memory_id, tag FROM memory_tags WHERE source = 'user' ORDER BY tag"):
        user_tags.setdefault(mid, []).append(tag)
    n = 0
    for mid, content, context in conn.execute("SELECT id, content, context FROM memories").fetchall():
        if interrupt is not None and n % INTERRUPT_EVERY == 0:
            interrupt()
        try:  # a row loaded before archives were checked may hold anything: index its text alone
            parsed = json.loads(context) if context else {}
        except (ValueError, TypeError, RecursionError):
            parsed = {}
        conn.execute(
            "INSERT INTO memories_fts(rowid, content, context) VALUES (?, ?, ?)",
            (
                mid,
                segment.index_text(content),
                context_text(parsed if isinstance(parsed, dict) else {}, user_tags.get(mid, [])),
            ),
        )
        n += 1
    fill_lengths(conn)
    log_rebuild(conn)  # in-memory keyword caches read everything again
    return n


def _json(text: Any) -> Any:
    """A stored JSON column's value; text that is not JSON (perception data of an older
    release) is the text itself, as `model.parse_data` keeps it."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def with_dedup_keys(row: Mapping[str, Any]) -> dict[str, Any]:
    """A `memories` row (an archive line: columns as stored, a missing one at its default) with
    ``content_hash`` and ``facts_hash`` computed from its own type, content, context and data as a
    write computes them (`dedup.memory_keys`) — whatever the line said: an archive of another
    version holds keys that meant something else, a hand-edited line the keys of the text it
    replaced, and dedup finds a duplicate only through them. A row whose type or content cannot
    be read is left as it is, for the database to refuse."""
    kind, content = row.get("type"), row.get("content")
    if kind not in ("fact", "perception") or not isinstance(content, str):
        return dict(row)
    context = _json(row.get("context", "{}"))
    perception_type = row.get("perception_type")
    content_hash, facts_hash = dedup.memory_keys(
        kind,
        content,
        context if isinstance(context, dict) else {},
        perception_type if isinstance(perception_type, str) else None,
        _json(row.get("data")),
    )
    return {**row, "content_hash": content_hash, "facts_hash": facts_hash}
