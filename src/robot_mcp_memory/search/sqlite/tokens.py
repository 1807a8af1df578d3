"""FTS5's own tokenizer, as a library: the tokens (and their positions) an FTS5 index holds for a text.

A backend that ranks with `search.bm25` outside SQLite (PostgreSQL) must count exactly the tokens
FTS5 counts — Porter stems, unicode61's case folding and separators — or its scores would drift
from SQLite's. Rather than re-implement them, the texts go through a private in-memory FTS5
table with the same ``tokenize=`` option and its ``fts5vocab`` 'instance' table is read back: the
tokens are FTS5's by construction. No database file is touched.

Invariants: one private connection, used under a lock (any thread may call); the table is empty
between calls.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

#: (column, offset, token) of one text's instances, in column then offset order.
Instances = list[tuple[int, int, str]]


class Fts5Tokens:
    """Tokens of texts with `columns` columns under FTS5's `tokenize` option."""

    def __init__(self, tokenize: str, columns: int) -> None:
        self.columns = columns
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        names = ", ".join(f"c{i}" for i in range(columns))
        quoted = "'" + tokenize.replace("'", "''") + "'"
        self._conn.execute(f"CREATE VIRTUAL TABLE tok USING fts5({names}, tokenize={quoted})")
        self._conn.execute("CREATE VIRTUAL TABLE tok_i USING fts5vocab(tok, instance)")
        self._names = {f"c{i}": i for i in range(columns)}
        self._insert = f"INSERT INTO tok(rowid, {names}) VALUES (?, {', '.join('?' * columns)})"  # noqa: S608 - our names

    def instances(self, rows: Sequence[Sequence[str]]) -> list[Instances]:
        """Each row's instances (a row is one text per column)."""
        out: list[Instances] = [[] for _ in rows]
        if not rows:
            return out
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany(self._insert, [(n, *r) for n, r in enumerate(rows)])
                for term, doc, col, offset in conn.execute(
                    "SELECT term, doc, col, offset FROM tok_i ORDER BY doc, col, offset"
                ):
                    out[doc].append((self._names[col], int(offset), str(term)))
            finally:
                conn.execute("ROLLBACK")  # nothing is kept: the table is empty for the next call
        for found in out:
            found.sort()
        return out

    def arrays(self, rows: Sequence[Sequence[str]]) -> tuple[list[str], list[int], list[int], list[int], list[int]]:
        """Every instance of `rows` as columns, in no particular order: (the distinct tokens,
        then per instance its token's number among them, its row, its column and its offset).
        `instances` without a tuple per instance: what filling an index in memory reads."""
        if not rows:
            return [], [], [], [], []
        cases = " ".join(f"WHEN '{name}' THEN {i}" for name, i in self._names.items())
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany(self._insert, [(n, *r) for n, r in enumerate(rows)])
                found = conn.execute(f"SELECT term, doc, CASE col {cases} END, offset FROM tok_i").fetchall()  # noqa: S608 - our names
            finally:
                conn.execute("ROLLBACK")
        if not found:
            return [], [], [], [], []
        terms, docs, cols, offsets = zip(*found, strict=True)
        codes: dict[str, int] = {}
        token = [codes.setdefault(t, len(codes)) for t in terms]
        return list(codes), token, list(docs), list(cols), list(offsets)

    def tokens(self, text: str) -> list[str]:
        """The tokens of one text, in order (as FTS5 reads a query phrase)."""
        [found] = self.instances([[text] + [""] * (self.columns - 1)])
        return [t for _, _, t in found]
