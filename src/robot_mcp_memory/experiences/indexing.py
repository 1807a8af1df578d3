"""What a memory is indexed and scored by, whatever the backend: the tokenizer its text is split
with, the bm25 weights of its two indexed columns, and the searchable text of its context.

Invariants:

- Both adapters index a memory as ``(segment.index_text(content), context_text(context, tags))``
  with FTS5's ``MEMORIES_TOKENIZE`` tokens, and score it with ``BM25_WEIGHTS``: the same memory
  scores the same on SQLite and PostgreSQL (tests/experiences/postgres/test_parity.py).
- A context's keys and numbers are never indexed, only its string values and the user's tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from robot_mcp_memory.search import segment

#: FTS5's tokenizer for the memory index (``memories_fts``), and the one PostgreSQL reproduces.
MEMORIES_TOKENIZE = "porter unicode61 remove_diacritics 2"
#: bm25 column weights for (content, context text).
BM25_WEIGHTS = "1.0, 0.4"
#: The most of a context's text that is indexed, in characters.
MAX_CONTEXT_TEXT = 8_000


def context_text(context: Mapping[str, Any], tags: Iterable[str] = ()) -> str:
    """The searchable text of a context: its string values (task names, places, robot types,
    notes) and the user's tags. Keys and numbers are left out: every memory has ``grip_force``,
    so indexing it would make that word match everything; numbers are what `context_filter` is for."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):  # plain JSON (`jsonvalue.check`): no abstract-class check per leaf
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            parts.append(value)

    walk(context)
    parts.extend(tags)
    return segment.index_text(" ".join(parts)[:MAX_CONTEXT_TEXT])
