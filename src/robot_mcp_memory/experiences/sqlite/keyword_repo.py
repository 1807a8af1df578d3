"""The keyword cache: `memories_fts`'s posting lists in memory, so keyword recall's bm25 is a sum
over the query words' lists instead of FTS5's walk over every match (`search.bm25`; figures in
docs/benchmarks.md).

Built on public interfaces only: SQL on `memories_fts`, FTS5's ``fts5vocab``, and tables of our
own — never FTS5's shadow tables (tests/test_architecture.py checks).

A word's list (which memories hold it, how often in each column) is read from the index the first
time a query holds the word — ``fts5vocab`` — and kept, least recently used first out. Each
memory's length in tokens is `LENGTHS`, a table of our own written with the index entry in the
same transaction; rows and tokens are its count and sum, and idf comes from the lists themselves,
so every score is the double ``-bm25(memories_fts, 1.0, 0.4)`` would return
(tests/experiences/test_keyword_cache.py compares them over random corpora and writes).

Writes keep it current through `CHANGES`: triggers on `memories` append a memory's id there in the
writing transaction for every insert, every change of its text and every change of a ranking
attribute, and a rebuild of the index appends a NULL (everything changed). Before it answers, the
cache reads what was appended since it last looked, in the caller's read transaction — whichever
process wrote it — and re-reads only those memories' entries: their text from the index, tokenized
by the same tokenizer in a private in-memory FTS5 table, which gives their counts and lengths. A
list read before such a change ignores the changed memories and takes their current counts from the
overlay instead. So the cache answers for exactly the snapshot the caller reads, or not at all
(`scores` returns None and the caller ranks in SQL): a query whose phrases are not single words, a
reader whose snapshot is older than the cache's.

Writes the log could miss: the triggers fire for every build's writes through `memories` (an older
build's too, which neither logs nor writes `LENGTHS`), and they drop the memory's `LENGTHS` row —
so a row there is never stale, at worst missing, and a cache filling afresh measures the entries
without one itself. Only a write of `memories_fts` alone, bypassing `memories` (by hand), is
unseen. Two guards remain:

- made, the cache scores a sample index and compares with this sqlite's bm25(): a build that
  rounds otherwise (GCC fuses multiply-adds by default on aarch64) turns it off;
- ids are array indexes: a negative id, or ids far sparser than the rows, and SQL ranks.

Anything that goes wrong inside it empties it and lets SQL rank (an interrupt empties it too).
"""

from __future__ import annotations

import contextlib
import random
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.experiences.model import MAX_SOURCE_WEIGHT
from robot_mcp_memory.search import bm25

_log = logs.get("robot_mcp_memory.keywords")

#: The change log of memories_fts (declared in `storage`, which writes it).
CHANGES = "memory_index_log"
#: Each index entry's length in tokens per column (declared in `storage`, which writes it).
LENGTHS = "memory_lengths"
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')
#: unicode61's tokens in ASCII text: runs of ASCII letters and digits (every other ASCII character
#: separates). `_Tokenizer` checks that its tokenizer splits every ASCII character so before using it.
_ASCII_TOKEN = re.compile(r"[0-9A-Za-z]+")
_VOCAB = "temp.memories_fts_instances"


class _Tokenizer:
    """memories_fts's tokenizer, on a private in-memory FTS5 table."""

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        quoted = "'" + tokenize.replace("'", "''") + "'"
        self._conn.execute(f"CREATE VIRTUAL TABLE tok USING fts5(a, b, tokenize={quoted})")
        self._conn.execute("CREATE VIRTUAL TABLE tokc USING fts5vocab(tok, col)")
        self._quoted = quoted
        self._words: dict[str, str | None] = {}
        #: Whether ASCII text is counted as `_ASCII_TOKEN` splits it (`lengths`' fast path).
        self._ascii_exact = self._splits_ascii_as_words()

    def _splits_ascii_as_words(self) -> bool:
        """Whether this tokenizer makes of each ASCII character, between two letters, what
        `_ASCII_TOKEN` does: one token with them if it is a letter or digit, else a separator."""
        probes = [(i, f"x{chr(i)}x", "") for i in range(1, 128)]
        found = {doc: a for doc, a, _ in self._measured(probes)}
        return all(found[i] == len(_ASCII_TOKEN.findall(text)) for i, text, _ in probes)

    def agrees(self, weights: tuple[float, ...]) -> bool:
        """Whether `search.bm25` scores a sample index exactly as this sqlite's bm25() does."""
        conn = self._conn
        rng = random.Random(7)
        vocab = ["grasp", "mug", "red", "the", "force", "door", "open", "slipped", "dock", "charger", "12"]
        docs = [
            (i, " ".join(rng.choices(vocab, k=rng.randint(1, 30))), " ".join(rng.choices(vocab, k=rng.randint(0, 12))))
            for i in range(1, 61)
        ]
        conn.execute(f"CREATE VIRTUAL TABLE probe USING fts5(a, b, tokenize={self._quoted})")
        try:
            conn.executemany("INSERT INTO probe(rowid, a, b) VALUES (?, ?, ?)", docs)
            conn.execute("CREATE VIRTUAL TABLE probev USING fts5vocab(probe, instance)")
            counts: dict[str, dict[int, list[int]]] = {}
            doclen = np.zeros(len(docs) + 1, np.float64)
            for term, doc, col in conn.execute("SELECT term, doc, col FROM probev"):
                counts.setdefault(term, {}).setdefault(doc, [0, 0])[0 if col == "a" else 1] += 1
                doclen[doc] += 1  # a document's length: its token instances over both columns
            rows, tokens = len(docs), int(doclen.sum())
            weight_sql = ", ".join(repr(w) for w in weights)
            for query in (["grasp"], ["mug", "red"], ["the", "force", "door"], ["slipped", "mug", "mug", "12"]):
                terms = []
                for word in query:
                    per = counts.get(self.word(f'"{word}"') or word, {})
                    ids = np.fromiter(per.keys(), np.int64, len(per))
                    f = [bm25.weighted_frequency(tuple(n), weights) for n in per.values()]
                    terms.append(bm25.Term(ids, np.array(f, np.float64)))
                ids, values = bm25.scores(terms, doclen, rows, tokens)
                ours = dict(zip(ids.tolist(), values.tolist(), strict=True))
                match = " OR ".join(f'"{w}"' for w in query)
                theirs = dict(
                    conn.execute(
                        f"SELECT rowid, -bm25(probe, {weight_sql}) FROM probe WHERE probe MATCH ?",  # noqa: S608
                        (match,),
                    ).fetchall()
                )
                if ours != theirs:
                    return False
            return True
        finally:
            conn.execute("DROP TABLE IF EXISTS probev")
            conn.execute("DROP TABLE probe")

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

    def lengths(self, docs: Sequence[tuple[int, str, str]]) -> list[tuple[int, int, int]]:
        """(doc, tokens in the first column, tokens in the second) of each document: the sizes
        FTS5 gives bm25, as the token instances this tokenizer makes of its text. ASCII text is
        counted by `_ASCII_TOKEN` when the tokenizer splits ASCII so (checked when made): porter
        stems a token, never splits or drops one."""
        if not self._ascii_exact:
            return self._measured(docs)
        out, rest = [], []
        for doc, a_text, b_text in docs:
            if a_text.isascii() and b_text.isascii() and "\x00" not in a_text and "\x00" not in b_text:
                out.append((doc, len(_ASCII_TOKEN.findall(a_text)), len(_ASCII_TOKEN.findall(b_text))))
            else:
                rest.append((doc, a_text, b_text))
        return out + self._measured(rest) if rest else out

    def _measured(self, docs: Sequence[tuple[int, str, str]]) -> list[tuple[int, int, int]]:
        """`lengths`, each document put in the private table and its per-column totals read."""
        conn = self._conn
        out = []
        for doc, a_text, b_text in docs:
            conn.execute("BEGIN")
            try:
                conn.execute("INSERT INTO tok(rowid, a, b) VALUES (?, ?, ?)", (doc, a_text, b_text))
                per = dict(conn.execute("SELECT col, sum(cnt) FROM tokc GROUP BY col").fetchall())
            finally:
                conn.execute("ROLLBACK")
            out.append((doc, int(per.get("a", 0)), int(per.get("b", 0))))
        return out

    def counts(self, docs: Sequence[tuple[int, str, str]]) -> dict[int, dict[str, tuple[int, int]]]:
        """Per document: each token and how often it stands in each of the two columns. One
        document at a time in the table, read by FTS5's per-column totals (``fts5vocab`` 'col',
        cheaper than grouping the 'instance' rows in SQL)."""
        conn = self._conn
        out: dict[int, dict[str, tuple[int, int]]] = {}
        for doc, a_text, b_text in docs:
            conn.execute("BEGIN")
            try:
                conn.execute("INSERT INTO tok(rowid, a, b) VALUES (?, ?, ?)", (doc, a_text, b_text))
                per: dict[str, tuple[int, int]] = {}
                for term, col, n in conn.execute("SELECT term, col, cnt FROM tokc"):
                    a, b = per.get(term, (0, 0))
                    per[term] = (a + n, b) if col == "a" else (a, b + n)
                out[doc] = per
            finally:
                conn.execute("ROLLBACK")
        return out


@dataclass(frozen=True)
class _Postings:
    ids: bm25.Ids
    f: bm25.Floats
    as_of: int  # the log position it was read at: later changes are in the overlay


class KeywordCache:
    """Posting lists of `memories_fts` in memory (see the module's docstring). Thread-safe: one
    caller at a time updates and reads it."""

    def __init__(
        self,
        tokenize: str,
        weights: str,
        *,
        max_entries: int = 4_000_000,
        max_changed: int = 20_000,
        max_batch: int = 256,
    ) -> None:
        """`tokenize`: memories_fts's ``tokenize=`` option; `weights`: the column weights bm25 is
        given, as in SQL ("1.0, 0.4")."""
        self.max_entries = max_entries
        #: Changed memories tracked one by one; past this many, every overlay is folded into its list.
        self.max_changed = max_changed
        #: More changes at once than this, or than 1/64 of the rows if that is more (an import, a
        #: batch another process wrote), and everything is read again instead: tokenizing one
        #: changed memory costs far more than reading one row's lengths.
        self.max_batch = max_batch
        #: Set while a caller reads everything again (it grows with the store): others rank in
        #: SQL meanwhile rather than wait.
        self._filling = False
        self._weights = tuple(float(w) for w in weights.split(","))
        self._lock = threading.Lock()
        self._tokenizer = _Tokenizer(tokenize)
        #: Whether this sqlite computes bm25 as `search.bm25` does, to the bit (`_agrees`): a build
        #: that fuses multiply-adds (FMA, as GCC does by default on aarch64) rounds differently.
        self.enabled = self._tokenizer.agrees(self._weights)
        if not self.enabled:
            _log.warning("keyword_cache.disabled", reason="this sqlite's bm25 rounds differently: SQL ranks")
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
        self._present = np.zeros(0, np.bool_)  # which ids have an index entry
        # Each memory's ranking attributes (`bounds`), as its row holds them in the snapshot the
        # cache is at — but for a memory no longer active, whose attributes may be older (below).
        self._active = np.zeros(0, np.bool_)
        self._collection = np.zeros(0, np.int32)  # a code of `_codes`
        self._robot = np.zeros(0, np.int32)
        self._weight = np.zeros(0, np.float64)  # min(source_weight, MAX_SOURCE_WEIGHT)
        self._half = np.zeros(0, np.float64)  # 0.5 + 0.5 × confidence
        self._codes: dict[str, int] = {}
        #: The index's entries and their tokens over all columns at `_seq`: the sums of `_present`
        #: and `_doclen`, which bm25 takes as FTS5's row count and total.
        self._totals = (0, 0)
        #: False while ids are negative or far sparser than the rows (the arrays are indexed by id).
        self._dense = True

    def scores(self, conn: sqlite3.Connection, phrases: Sequence[str]) -> tuple[bm25.Ids, bm25.Floats] | None:
        """(ids, scores) of every memory holding one of `phrases` (FTS5 phrases, OR-ed), each
        score ``-bm25(memories_fts, 1.0, 0.4)`` to the bit; None when the cache cannot answer
        (then the caller ranks in SQL). Runs in `conn`'s open read transaction."""
        if not self._answering():
            return None
        with self._lock, self._guarded():
            return self._scores(conn, phrases)
        return None  # something went wrong inside (`_guarded`): SQL ranks

    def candidates(
        self, conn: sqlite3.Connection, phrases: Sequence[str], collection: str, visible: frozenset[str] | None
    ) -> tuple[bm25.Ids, bm25.Floats, bm25.Floats] | None:
        """`scores`, keeping only the matches that can pass `collection` and `visible` (robots;
        None: every one), each with an upper bound of its score: ``(rel × w) × (0.5 + 0.5 ×
        confidence)``, the ranking's score before time decay, which only lowers it
        (`ranking_repo._ranking_sql`: the same operations, in the same order, on the same doubles
        — so the bound holds to the bit). None when the cache cannot answer.

        Exact: every write that changes one of a memory's ranking attributes while it is active,
        or makes it active or not, is in the change log — a write of its index entry logs it, and
        triggers on `memories` log every other such write (`storage.RANK_LOG_TRIGGERS`) — and is
        read again, in the caller's snapshot, before this answers; a caller whose snapshot is
        older than the cache's is answered by SQL. A memory no longer active may keep older
        attributes here (changed while it was not): it is no candidate until it is active again,
        which is logged."""
        if not self._answering():
            return None
        with self._lock, self._guarded():
            found = self._scores(conn, phrases)
            if found is None:
                return None
            ids, rels = found
            code = self._codes.get(collection)
            if code is None or not len(ids):
                empty = np.empty(0, np.float64)
                return np.empty(0, np.int64), empty, empty
            keep = self._active[ids] & (self._collection[ids] == code)
            if visible is not None:
                robots = np.array([self._codes[r] for r in visible if r in self._codes], np.int32)
                keep &= np.isin(self._robot[ids], robots)
            ids, rels = ids[keep], rels[keep]
            return ids, rels, (rels * self._weight[ids]) * self._half[ids]
        return None

    def _answering(self) -> bool:
        """False while the cache is off, or another reader is filling it (long): SQL ranks."""
        return self.enabled and not self._filling

    def _scores(self, conn: sqlite3.Connection, phrases: Sequence[str]) -> tuple[bm25.Ids, bm25.Floats] | None:
        words = [self._tokenizer.word(p) for p in phrases]
        if any(w is None for w in words) or not self._sync(conn, reload=True) or not self._dense:
            return None
        terms = [self._term(conn, w) for w in words if w is not None]
        rows, tokens = self._totals
        return bm25.scores(terms, self._doclen, rows, tokens)

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Patch a filled cache up to `conn`'s snapshot now (idle time after a write): what
        `scores` would do first, without answering anything — and never a full read, which is
        left to the next recall (it may be long, and more may change before that recall)."""
        if self._seq is None or not self._answering():
            return
        with self._lock, self._guarded():
            self._sync(conn, reload=False)

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """Anything going wrong inside empties the cache: a file without the change log (opened
        read-only before its migration), a read that failed half-way through an update, an
        allocation that failed — it starts again from the index next time, and SQL ranks (and
        reports what is wrong with the file). An interrupt empties it too, and goes on."""
        try:
            yield
        except Exception as exc:
            _log.warning("keyword_cache.unavailable", error=type(exc).__name__, detail=str(exc).splitlines()[:1])
            self._reset(None)
        except BaseException:
            self._reset(None)
            raise

    # ------------------------------------------------------------------ keeping it current
    def _sync(self, conn: sqlite3.Connection, *, reload: bool) -> bool:
        """Bring the cache to `conn`'s snapshot: False when that is older than the cache's, or
        when it would have to read everything again and `reload` is False."""
        if self._seq is not None and self._dense:
            news = logged_since(conn, self._seq)
            if news is not None:
                changed = {doc: seq for seq, doc in news}
                small = len(changed) <= max(self.max_batch, self._totals[0] // 64)
                if news and small and None not in changed and self._apply(conn, changed):
                    self._seq = news[-1][0]
                    news = []
                    if len(self._overlay_docs) > self.max_changed:
                        self._fold_all()
                if not news:
                    return True
        (top,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {CHANGES}").fetchone()  # noqa: S608
        if self._seq is not None and top < self._seq:  # a snapshot older than the cache's
            return False
        if not reload:
            return False
        # First use, the log trimmed past the cache's place, a rebuilt index, too many changes
        # to patch, ids arrays cannot hold: everything from the index again.
        self._filling = True
        try:
            self._load_all(conn, top)
        finally:
            self._filling = False
        return True

    def _load_all(self, conn: sqlite3.Connection, top: int) -> None:
        self._reset(None)  # until it is complete: an interrupt leaves the cache empty, not wrong
        low, high, count = conn.execute(f"SELECT min(id), max(id), count(*) FROM {LENGTHS}").fetchone()  # noqa: S608
        (entries,) = conn.execute("SELECT count(*) FROM memories_fts").fetchone()
        present: set[int] | None = None
        if entries != count:
            # Entries without their lengths — written by a build from before the table, whose
            # write the triggers marked by deleting the row — or lengths without an entry (an
            # entry deleted by hand): the entries decide, and those unmeasured are measured here.
            present = {doc for (doc,) in conn.execute("SELECT rowid FROM memories_fts")}
            low, high, count = (min(present), max(present), len(present)) if present else (None, None, 0)
        self._dense = dense_ids(low, high, count)
        if not self._dense:
            self._totals = (count, 0)
            self._seq = top
            return
        self._grow(high + 1 if high is not None else 0)
        for doc, length in conn.execute(f"SELECT id, content + context FROM {LENGTHS}"):  # noqa: S608
            if present is None or doc in present:
                self._doclen[doc] = length
                self._present[doc] = True
        if present is not None:
            unmeasured = sorted(d for d in present if not self._present[d])
            if unmeasured:
                _log.warning("keyword_cache.lengths_missing", entries=len(unmeasured))
            for at in range(0, len(unmeasured), 500):
                self._measure(conn, unmeasured[at : at + 500])
        self._attributes(conn, "1", [])
        self._totals = (count, int(self._doclen.sum()))  # integers: the double sum is exact
        self._seq = top

    def _measure(self, conn: sqlite3.Connection, docs: Sequence[int]) -> None:
        """The lengths of the entries of `docs` (ids within the arrays), from their text."""
        marks = ",".join("?" * len(docs))
        texts = conn.execute(
            f"SELECT rowid, content, context FROM memories_fts WHERE rowid IN ({marks})",  # noqa: S608
            list(docs),
        ).fetchall()
        for doc, a, b in self._tokenizer.lengths([(d, a or "", b or "") for d, a, b in texts]):
            self._doclen[doc] = a + b
            self._present[doc] = True

    def _grow(self, size: int) -> None:
        if size > len(self._doclen):
            size = max(size, len(self._doclen) * 2, 1024)
            more = size - len(self._doclen)
            for name in _PER_DOC:
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros(more, old.dtype)]))

    def _apply(self, conn: sqlite3.Connection, changed: dict[int, int]) -> bool:
        """Re-read the entries of the `changed` memories (doc → its latest log position); False,
        changing nothing, when their ids do not suit the arrays (then everything is read again)."""
        docs = sorted(changed)
        marks = ",".join("?" * len(docs))
        texts = conn.execute(
            f"SELECT rowid, content, context FROM memories_fts WHERE rowid IN ({marks})",  # noqa: S608
            docs,
        ).fetchall()
        rows, tokens = self._totals
        if not dense_ids(docs[0], docs[-1], rows + len(docs)):
            return False
        counts = self._tokenizer.counts([(d, a or "", b or "") for d, a, b in texts])
        self._grow(docs[-1] + 1)
        self._active[docs] = False  # a memory without a row is no candidate
        self._attributes(conn, f"id IN ({marks})", docs)
        for doc in docs:
            held_now = doc in counts  # the memory has an entry (perhaps of no token)
            length = sum(a + b for a, b in counts.get(doc, {}).values())
            rows += int(held_now) - int(self._present[doc])
            tokens += length - int(self._doclen[doc])
            self._present[doc] = held_now
            for word in self._overlay_docs.pop(doc, ()):
                self._overlay.get(word, {}).pop(doc, None)
            held = {w: n for w, n in counts.get(doc, {}).items() if w in self._terms}
            for word, n in held.items():
                self._overlay.setdefault(word, {})[doc] = bm25.weighted_frequency(n, self._weights)
            self._overlay_docs[doc] = tuple(held)
            self._changed_at[doc] = changed[doc]
            self._doclen[doc] = length
        self._totals = (rows, tokens)
        return True

    def _attributes(self, conn: sqlite3.Connection, where: str, params: Sequence[int]) -> None:
        """Read the ranking attributes of the memories `where` selects (ids within the arrays;
        `candidates`). Column by column: every memory's, on a full read."""
        rows = conn.execute(
            # A weight below 0 (a hand-edited archive) bounds as 0: its score is <= 0 at any age.
            "SELECT id, collection, robot, status = 'active', max(min(source_weight, ?), 0.0), confidence "  # noqa: S608
            f"FROM memories WHERE {where}",
            [MAX_SOURCE_WEIGHT, *params],
        ).fetchall()
        rows = [r for r in rows if 0 <= r[0] < len(self._active)]
        if not rows:
            return
        docs, collections, robots, active, weights, confidences = zip(*rows, strict=True)
        at = np.array(docs, np.int64)
        self._active[at] = np.array(active, np.bool_)
        self._collection[at] = np.array([self._code(c) for c in collections], np.int32)
        self._robot[at] = np.array([self._code(r) for r in robots], np.int32)
        self._weight[at] = np.array(weights, np.float64)
        self._half[at] = 0.5 + 0.5 * np.array(confidences, np.float64)  # two roundings, as in SQL

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self._codes) + 1  # 0: no memory
        return code

    # ------------------------------------------------------------------ a word's list
    def _term(self, conn: sqlite3.Connection, word: str) -> bm25.Term:
        assert self._seq is not None
        got = self._terms.get(word)
        if got is None:
            got = self._read(conn, word)
        else:
            self._terms.move_to_end(word)
        ids, f = self._merged(word, got)
        if len(self._overlay.get(word, ())) > 64:  # fold the overlay into the list: later queries skip the merge
            self._fold(word, ids, f)
        return bm25.Term(ids, f)

    def _merged(self, word: str, got: _Postings) -> tuple[bm25.Ids, bm25.Floats]:
        """`word`'s current list: what was read, less the memories changed since, plus the overlay.
        Every entry of a word's overlay changed after its list was read: `_apply` adds entries
        only for words whose list it holds, and a list read again (folded, or evicted and read
        anew) drops the word's overlay."""
        extra = self._overlay.get(word, {})
        live = self._changed_at[got.ids] <= got.as_of
        ids, f = got.ids[live], got.f[live]
        if extra:
            ids = np.concatenate([ids, np.fromiter(extra.keys(), np.int64, len(extra))])
            f = np.concatenate([f, np.fromiter(extra.values(), np.float64, len(extra))])
        return ids, f

    def _fold(self, word: str, ids: bm25.Ids, f: bm25.Floats) -> None:
        assert self._seq is not None
        order = np.argsort(ids, kind="stable")
        self._store(word, _Postings(ids[order], f[order], self._seq))
        self._overlay.pop(word, None)

    def _fold_all(self) -> None:
        """Every overlay into its list: then no changed memory needs tracking one by one."""
        for word in list(self._overlay):
            got = self._terms.get(word)
            if got is not None:
                self._fold(word, *self._merged(word, got))
        self._overlay.clear()
        self._overlay_docs.clear()

    def _read(self, conn: sqlite3.Connection, word: str) -> _Postings:
        instances_view(conn)
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


#: The cache's arrays indexed by memory id, grown together (`KeywordCache._grow`).
_PER_DOC = ("_doclen", "_changed_at", "_present", "_active", "_collection", "_robot", "_weight", "_half")


def logged_since(conn: sqlite3.Connection, seq: int) -> list[Any] | None:
    """The change-log entries after entry `seq` in `conn`'s snapshot, oldest first; None when they
    cannot be told: the log was trimmed past `seq`, or the snapshot is older than it. Read from
    that entry on, so a trimmed log shows (the log's first entry is 1; `seq` 0: it was empty)."""
    changes = conn.execute(
        f"SELECT seq, doc FROM {CHANGES} WHERE seq >= ? ORDER BY seq",  # noqa: S608
        (seq,),
    ).fetchall()
    anchored = seq == 0 or (bool(changes) and changes[0][0] == seq)
    news: list[Any] = changes if seq == 0 else changes[1:]
    return news if anchored and (not news or news[0][0] == seq + 1) else None


def dense_ids(low: int | None, high: int | None, rows: int) -> bool:
    """Whether ids from `low` to `high` over `rows` rows suit arrays indexed by id: none negative,
    and not far sparser than the rows (an archive loaded with ids in the billions)."""
    return low is None or (low >= 0 and high is not None and high <= 4 * rows + 1_000_000)


def instances_view(conn: sqlite3.Connection) -> str:
    """The connection's own fts5vocab view of memories_fts's instances, made once (a temp table:
    readers are query-only on the file, and a temp table is none of its business, so the pragma
    is lifted around it); its name."""
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'memories_fts_instances'").fetchone():
        return _VOCAB
    (query_only,) = conn.execute("PRAGMA query_only").fetchone()
    conn.execute("PRAGMA query_only=0")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, 'memories_fts', 'instance')")
    finally:
        conn.execute(f"PRAGMA query_only={int(query_only)}")
    return _VOCAB


_measurers = threading.local()  # a tokenizer per thread for `entry_lengths`, by tokenize option


def entry_lengths(tokenize: str, entries: Sequence[tuple[int, str, str]]) -> list[tuple[int, int, int]]:
    """(id, tokens of the content, tokens of the context) of each index entry (id, content text,
    context text) as an FTS5 table with `tokenize` holds it: what the writes keep in `LENGTHS`."""
    tokenizers: dict[str, _Tokenizer] | None = getattr(_measurers, "by_option", None)
    if tokenizers is None:
        tokenizers = _measurers.by_option = {}
    tokenizer = tokenizers.get(tokenize)
    if tokenizer is None:
        tokenizer = tokenizers[tokenize] = _Tokenizer(tokenize)
    return tokenizer.lengths(entries)
