"""The keyword cache: `memories_fts`'s posting lists in memory, so keyword recall's bm25 costs
tens of microseconds instead of FTS5's walk over every match (`search.bm25`).

A word's list (which memories hold it, how often in each column) is read from the index the first
time a query holds the word — FTS5's ``fts5vocab`` — and kept, least recently used first out.
Writes keep it current through `CHANGES`: every write of a memory's index entry appends the
memory's id there in the same transaction (`log_changes`), and a rebuild of the index appends a
NULL (everything changed). Before it answers, the cache reads what was appended since it last
looked, in the caller's read transaction — whichever process wrote it — and re-reads only those
memories' entries: their text from the index, tokenized by the same tokenizer in a private
in-memory FTS5 table, their lengths from FTS5's own table. A list read before such a change
ignores the changed memories and takes their current counts from the overlay instead. So the
cache answers for exactly the snapshot the caller reads, or not at all (`scores` returns None
and the caller ranks in SQL): a query whose phrases are not single words, a reader whose
snapshot is older than the cache's.

Row counts and token totals come from FTS5's averages record on every query, and idf from the
lists themselves, so every score is the double ``-bm25(memories_fts, 1.0, 0.4)`` would return
(tests/experiences/test_keyword_cache.py compares them over random corpora and writes).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.search import bm25

_log = logs.get("robot_mcp_memory.keywords")

#: The change log of memories_fts (declared in `storage`, which writes it).
CHANGES = "memory_index_log"
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')
_VOCAB = "temp.memories_fts_instances"


def _varints(blob: bytes) -> list[int]:
    """sqlite's varints, as FTS5 writes its averages and document sizes."""
    out: list[int] = []
    i, n = 0, len(blob)
    while i < n:
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _length(blob: bytes | None) -> int:
    """A document's length in tokens over all columns, from its ``docsize`` entry."""
    if not blob:
        return 0
    if max(blob) < 0x80:  # every column shorter than 128 tokens: one byte each
        return sum(blob)
    return sum(_varints(blob))


class _Tokenizer:
    """memories_fts's tokenizer, on a private in-memory FTS5 table."""

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        quoted = "'" + tokenize.replace("'", "''") + "'"
        self._conn.execute(f"CREATE VIRTUAL TABLE tok USING fts5(a, b, tokenize={quoted})")
        self._conn.execute("CREATE VIRTUAL TABLE tokv USING fts5vocab(tok, instance)")
        self._words: dict[str, str | None] = {}

    def word(self, phrase: str) -> str | None:
        """The one token a query phrase (quoted, as `segment.match_phrases` writes it) stands for,
        or None when it is not exactly one token (a multi-word phrase, a prefix query)."""
        if phrase in self._words:
            return self._words[phrase]
        m = _PHRASE.fullmatch(phrase)
        token = None
        if m is not None:
            found = self.counts([(1, m.group(1).replace('""', '"'), "")]).get(1, {})
            if len(found) == 1 and sum(next(iter(found.values()))) == 1:
                token = next(iter(found))
        if len(self._words) >= 50_000:
            self._words.clear()
        self._words[phrase] = token
        return token

    def counts(self, docs: Sequence[tuple[int, str, str]]) -> dict[int, dict[str, tuple[int, int]]]:
        """Per document: each token and how often it stands in each of the two columns."""
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO tok(rowid, a, b) VALUES (?, ?, ?)", docs)
            out: dict[int, dict[str, tuple[int, int]]] = {}
            for term, doc, col, n in conn.execute("SELECT term, doc, col, count(*) FROM tokv GROUP BY term, doc, col"):
                per = out.setdefault(doc, {})
                a, b = per.get(term, (0, 0))
                per[term] = (a + n, b) if col == "a" else (a, b + n)
            return out
        finally:
            conn.execute("ROLLBACK")


@dataclass(frozen=True)
class _Postings:
    ids: bm25.Ids
    f: bm25.Floats
    as_of: int  # the log position it was read at: later changes are in the overlay


class KeywordCache:
    """Posting lists of `memories_fts` in memory (see the module's docstring). Thread-safe: one
    caller at a time updates and reads it."""

    def __init__(self, tokenize: str, weights: str, *, max_entries: int = 4_000_000, max_changed: int = 20_000) -> None:
        """`tokenize`: memories_fts's ``tokenize=`` option; `weights`: the column weights bm25 is
        given, as in SQL ("1.0, 0.4")."""
        self.max_entries = max_entries
        self.max_changed = max_changed
        self._weights = tuple(float(w) for w in weights.split(","))
        self._lock = threading.Lock()
        self._tokenizer = _Tokenizer(tokenize)
        self._seq: int | None = None
        self._reset(None)

    def _reset(self, seq: int | None) -> None:
        self._seq = seq
        self._terms: OrderedDict[str, _Postings] = OrderedDict()
        self._entries = 0
        self._doclen: bm25.Floats = np.zeros(0, np.float64)
        self._changed_at = np.zeros(0, np.int64)
        self._overlay: dict[str, dict[int, float]] = {}  # cached word → changed doc → f
        self._overlay_docs: dict[int, tuple[str, ...]] = {}  # changed doc → its cached words

    def scores(self, conn: sqlite3.Connection, phrases: Sequence[str]) -> tuple[bm25.Ids, bm25.Floats] | None:
        """(ids, scores) of every memory holding one of `phrases` (FTS5 phrases, OR-ed), each
        score ``-bm25(memories_fts, 1.0, 0.4)`` to the bit; None when the cache cannot answer
        (then the caller ranks in SQL). Runs in `conn`'s open read transaction."""
        with self._lock:
            try:
                words = [self._tokenizer.word(p) for p in phrases]
                if any(w is None for w in words) or not self._sync(conn):
                    return None
                terms = [self._term(conn, w) for w in words if w is not None]
                rows, tokens = _averages(conn)
            except sqlite3.Error as exc:
                # A file without the change log (opened read-only before its migration), or a
                # read that failed half-way through an update: start again from the index next
                # time, and let SQL rank (and report what is wrong with the file).
                _log.warning("keyword_cache.unavailable", error=str(exc).splitlines()[0] if str(exc) else "?")
                self._reset(None)
                return None
            return bm25.scores(terms, self._doclen, rows, tokens)

    # ------------------------------------------------------------------ keeping it current
    def _sync(self, conn: sqlite3.Connection) -> bool:
        (top,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {CHANGES}").fetchone()  # noqa: S608
        if self._seq is None:
            self._load_all(conn, top)
            return True
        if top == self._seq:
            return True
        if top < self._seq:  # a snapshot older than the cache's (another reader moved it on)
            return False
        changes = conn.execute(
            f"SELECT seq, doc FROM {CHANGES} WHERE seq > ? ORDER BY seq",  # noqa: S608
            (self._seq,),
        ).fetchall()
        if (
            not changes
            or changes[0][0] != self._seq + 1  # trimmed past what the cache has seen
            or any(doc is None for _, doc in changes)  # the index was rebuilt
            or len(self._overlay_docs) + len(changes) > self.max_changed
        ):
            self._load_all(conn, top)
            return True
        self._apply(conn, {doc: seq for seq, doc in changes})
        self._seq = top
        return True

    def _load_all(self, conn: sqlite3.Connection, top: int) -> None:
        self._reset(top)
        size = conn.execute("SELECT coalesce(max(id), 0) FROM memories_fts_docsize").fetchone()[0] + 1
        self._grow(size)
        for doc, blob in conn.execute("SELECT id, sz FROM memories_fts_docsize"):
            self._doclen[doc] = _length(blob)

    def _grow(self, size: int) -> None:
        if size > len(self._doclen):
            size = max(size, len(self._doclen) * 2, 1024)
            self._doclen = np.concatenate([self._doclen, np.zeros(size - len(self._doclen), np.float64)])
            self._changed_at = np.concatenate([self._changed_at, np.zeros(size - len(self._changed_at), np.int64)])

    def _apply(self, conn: sqlite3.Connection, changed: dict[int, int]) -> None:
        """Re-read the entries of the `changed` memories (doc → its latest log position)."""
        docs = sorted(changed)
        marks = ",".join("?" * len(docs))
        texts = conn.execute(
            f"SELECT rowid, content, context FROM memories_fts WHERE rowid IN ({marks})",  # noqa: S608
            docs,
        ).fetchall()
        sizes = dict(conn.execute(f"SELECT id, sz FROM memories_fts_docsize WHERE id IN ({marks})", docs).fetchall())  # noqa: S608
        counts = self._tokenizer.counts([(d, a or "", b or "") for d, a, b in texts])
        self._grow(docs[-1] + 1)
        for doc in docs:
            for word in self._overlay_docs.pop(doc, ()):
                self._overlay.get(word, {}).pop(doc, None)
            held = {w: n for w, n in counts.get(doc, {}).items() if w in self._terms}
            for word, n in held.items():
                self._overlay.setdefault(word, {})[doc] = bm25.weighted_frequency(n, self._weights)
            self._overlay_docs[doc] = tuple(held)
            self._changed_at[doc] = changed[doc]
            self._doclen[doc] = _length(sizes.get(doc))

    # ------------------------------------------------------------------ a word's list
    def _term(self, conn: sqlite3.Connection, word: str) -> bm25.Term:
        assert self._seq is not None
        got = self._terms.get(word)
        if got is None:
            got = self._read(conn, word)
        else:
            self._terms.move_to_end(word)
        extra = {d: f for d, f in self._overlay.get(word, {}).items() if self._changed_at[d] > got.as_of}
        live = self._changed_at[got.ids] <= got.as_of
        ids, f = got.ids[live], got.f[live]
        if extra:
            ids = np.concatenate([ids, np.fromiter(extra.keys(), np.int64, len(extra))])
            f = np.concatenate([f, np.fromiter(extra.values(), np.float64, len(extra))])
            if len(extra) > 64:  # fold the overlay into the list: later queries skip the merge
                order = np.argsort(ids, kind="stable")
                self._store(word, _Postings(ids[order], f[order], self._seq))
                self._overlay.pop(word, None)
        return bm25.Term(ids, f)

    def _read(self, conn: sqlite3.Connection, word: str) -> _Postings:
        _ensure_vocab(conn)
        per: dict[int, tuple[int, int]] = {}
        for doc, col, n in conn.execute(
            f"SELECT doc, col, count(*) FROM {_VOCAB} WHERE term = ? GROUP BY doc, col",  # noqa: S608
            (word,),
        ):
            a, b = per.get(doc, (0, 0))
            per[doc] = (a + n, b) if col == "content" else (a, b + n)
        ids = np.fromiter(per.keys(), np.int64, len(per))
        f = np.fromiter((bm25.weighted_frequency(n, self._weights) for n in per.values()), np.float64, len(per))
        if len(ids):
            self._grow(int(ids.max()) + 1)
        postings = _Postings(ids, f, self._seq if self._seq is not None else 0)
        self._store(word, postings)
        return postings

    def _store(self, word: str, postings: _Postings) -> None:
        old = self._terms.pop(word, None)
        if old is not None:
            self._entries -= len(old.ids)
        self._terms[word] = postings
        self._entries += len(postings.ids)
        while self._entries > self.max_entries and len(self._terms) > 1:
            evicted, dropped = self._terms.popitem(last=False)
            self._entries -= len(dropped.ids)
            self._overlay.pop(evicted, None)


def _averages(conn: sqlite3.Connection) -> tuple[int, int]:
    """(rows, tokens over all columns) of memories_fts: FTS5's averages record."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
    values = _varints(row[0]) if row and row[0] else [0]
    return values[0], sum(values[1:])


def _ensure_vocab(conn: sqlite3.Connection) -> None:
    """The connection's own fts5vocab view of memories_fts (a temp table: readers are query-only
    on the file, and a temp table is none of its business, so the pragma is lifted around it)."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'memories_fts_instances'").fetchone():
        return
    (query_only,) = conn.execute("PRAGMA query_only").fetchone()
    conn.execute("PRAGMA query_only=0")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, 'memories_fts', 'instance')")
    finally:
        conn.execute(f"PRAGMA query_only={int(query_only)}")
