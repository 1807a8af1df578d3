"""Rebuilding `memories_fts` (derived) from the `memories` rows, e.g. after an archive load."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from robot_mcp_memory.experiences.storage import MEMORIES_FTS, context_text
from robot_mcp_memory.kit import recreate
from robot_mcp_memory.search import segment

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
    return n
