"""The posting cache of the processes: `processes_fts` in memory (`search.postings`), so a find's
keyword leg is a few array passes over its phrases' lists instead of FTS5's bm25 over every match
and a join of each to its row (figures in docs/benchmarks.md).

Built on public interfaces only: SQL on `processes` and `processes_fts` (their text as FTS5 holds
it), tokenized by FTS5's own tokenizer in a private in-memory table (`search.sqlite.tokens`), and
a table of our own, `CHANGES` — never FTS5's shadow tables.

Invariants:

- **A mirror of the index.** The cache holds one entry per process: the FTS5 entry its row points
  at (``fts_rowid``), keyed by id, owned by its robot, with the tokens FTS5 counts for it. It is
  used only while every process has exactly that one entry and the index has no other (checked
  on every full read): then FTS5's row and token counts are the cache's, and every score is the
  double ``-bm25(processes_fts, 0, 4, 2, 2, 1)`` returns (tests/processes/sqlite/test_postings.py
  compares the rankings with SQL over random corpora and writes).
- **Exact for the caller's snapshot, or silent.** Triggers on `processes` append a process's id
  to `CHANGES` in the writing transaction for every insert, delete and change of its id, robot,
  text or index entry, whichever code or process writes. Before it answers, the cache reads the
  entries appended since it last looked, in the caller's read transaction, and re-reads those
  processes in that snapshot. A snapshot older than the cache's, a log trimmed past the cache's
  place, or a broken mirror, and it answers None: the caller ranks in SQL. Only a write of
  `processes_fts` alone, bypassing `processes` (by hand), is unseen.
- **Outcomes do not touch it.** Counters are not in the cache: `record_outcome` writes none of the
  logged columns, and reliability is read in SQL for the candidates the ranking needs.
- Made, it scores a sample index and compares with this sqlite's bm25(): a build that rounds
  otherwise (GCC fuses multiply-adds by default on aarch64) turns it off. Anything that goes
  wrong inside it empties it, and SQL ranks.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from robot_mcp_memory import logs
from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.ranking import BM25_WEIGHTS
from robot_mcp_memory.search import bm25, fts
from robot_mcp_memory.search.postings import Batch, PostingIndex, Scored, TooLarge
from robot_mcp_memory.search.sqlite.tokens import Fts5Tokens
from robot_mcp_memory.storage.sqlite import Kind, Table

_log = logs.get("robot_mcp_memory.processes.postings")

#: processes_fts's ``tokenize=`` option (`storage.sqlite.fts5_table`'s default).
TOKENIZE = "porter unicode61"
#: The indexed columns of processes_fts after its UNINDEXED id, in order.
COLUMNS = ("title", "task_pattern", "tags", "body")
#: The change log of processes_fts (named as such in `LOG_TRIGGERS`).
CHANGES = "process_index_log"

PROCESS_INDEX_LOG = Table(
    name=CHANGES,
    kind=Kind.DERIVED,
    ddl=(f"CREATE TABLE IF NOT EXISTS {CHANGES} (seq INTEGER PRIMARY KEY, doc TEXT)",),
    source="processes_fts",
)
#: Every write of `processes` that changes what the cache holds of a process: an insert, a delete,
#: and an update of its id, robot, text or index entry (`_index` always sets ``fts_rowid``; a
#: rebuild of the index sets every row's). A row an ``INSERT OR REPLACE`` replaces is logged by
#: the insert (the same id).
LOG_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS processes_index_log_insert AFTER INSERT ON processes "
    "BEGIN INSERT INTO process_index_log(doc) VALUES (NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS processes_index_log_update AFTER UPDATE OF id, robot, fts_rowid, title, "
    "task_pattern, tags, body ON processes BEGIN INSERT INTO process_index_log(doc) VALUES (NEW.id); "
    "INSERT INTO process_index_log(doc) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; END",
    "CREATE TRIGGER IF NOT EXISTS processes_index_log_delete AFTER DELETE ON processes "
    "BEGIN INSERT INTO process_index_log(doc) VALUES (OLD.id); END",
)
#: The log keeps this many of its newest entries; a cache further behind reads everything again.
KEEP_CHANGES = 10_000
#: The log is trimmed once it holds this many entries more than `KEEP_CHANGES`.
TRIM_EVERY = 1_000


def _agreement_texts(rows: Sequence[Sequence[str]]) -> dict[str, str]:
    """`ranking.agreement_text_of` of each `_ENTRIES` row, from its row's title, pattern and tags."""
    return {str(r[0]): ranking.agreement_text_of(r[7], r[8], json.loads(r[9])) for r in rows}


def create_log(conn: sqlite3.Connection) -> None:
    """The log and its triggers (a migration step; idempotent)."""
    for ddl in (*PROCESS_INDEX_LOG.ddl, *LOG_TRIGGERS):
        conn.execute(ddl)


def trim_log(conn: sqlite3.Connection) -> None:
    """Drop the oldest entries once the log holds `TRIM_EVERY` more than `KEEP_CHANGES` (in the
    writer's transaction, after the entries its writes made)."""
    # Two statements: SQLite answers max() and min() from the key alone only one at a time (both
    # in one SELECT scan the whole log).
    (seq,) = conn.execute(f"SELECT max(seq) FROM {CHANGES}").fetchone()  # noqa: S608
    (oldest,) = conn.execute(f"SELECT min(seq) FROM {CHANGES}").fetchone()  # noqa: S608
    if seq is not None and seq - oldest >= KEEP_CHANGES + TRIM_EVERY:
        conn.execute(f"DELETE FROM {CHANGES} WHERE seq <= ?", (seq - KEEP_CHANGES,))  # noqa: S608


_ENTRIES = (
    "SELECT p.id, p.robot, f.id, f.title, f.task_pattern, f.tags, f.body, p.title, p.task_pattern, p.tags "
    "FROM processes p JOIN processes_fts f ON f.rowid = p.fts_rowid"
)


class Answer(NamedTuple):
    """What the cache answers for one snapshot: a query's matches, and every process's
    agreement text (`ranking.agreement_text_of`) as that snapshot holds it."""

    scored: Scored
    texts: Mapping[str, str]


class PostingCache:
    """`processes_fts` in memory for every reader of one store (see the module's docstring).
    Thread-safe: one caller at a time updates and reads it; while one reads everything again,
    the others rank in SQL rather than wait."""

    def __init__(self, *, max_batch: int = 256) -> None:
        #: More changed processes at once than this, or than 1/16 of them if that is more (an
        #: import, a rebuilt index), and everything is read again instead of patched.
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._tokens = Fts5Tokens(TOKENIZE, len(COLUMNS))
        self._index: PostingIndex | None = None
        #: Each process's agreement text at the index's position (replaced, never changed in place).
        self._texts: Mapping[str, str] = {}
        self._seq = 0  # the log position the index is at
        #: The log position at which the mirror was found broken (None: it was not).
        self._broken_at: int | None = None
        self._filling = False
        self._phrases: dict[str, tuple[str, ...]] = {}
        self.loads = 0  # how many times everything was read
        self.enabled = self._agrees()
        if not self.enabled:
            _log.warning("posting_cache.disabled", reason="this sqlite's bm25 rounds differently: SQL ranks")

    def score(self, conn: sqlite3.Connection, phrases: Sequence[str]) -> Answer | None:
        """Every process holding one of `phrases` (OR-ed, as `fts.any_of` writes them) with its
        ``-bm25()``, as `conn`'s open read transaction sees the store; None when the cache
        cannot answer for that snapshot (the caller ranks in SQL)."""
        if not self.enabled or self._filling:
            return None
        with self._lock, self._guarded():
            if not self._sync(conn):
                return None
            assert self._index is not None
            return Answer(self._index.score([self._phrase(p) for p in phrases]), self._texts)
        return None  # something went wrong inside (`_guarded`): SQL ranks

    def invalidate(self) -> None:
        """Forget everything (the file was replaced beneath the store): the next find reads again."""
        with self._lock:
            self._index = None
            self._broken_at = None

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            yield
        except (TooLarge, MemoryError) as exc:
            _log.warning("posting_cache.unavailable", error=type(exc).__name__)
            self._index = None
        except Exception as exc:
            _log.warning("posting_cache.unavailable", error=type(exc).__name__, detail=str(exc).splitlines()[:1])
            self._index = None
        except BaseException:
            self._index = None
            raise

    def _phrase(self, phrase: str) -> tuple[str, ...]:
        got = self._phrases.get(phrase)
        if got is None:
            if len(self._phrases) >= 50_000:
                self._phrases.clear()
            got = self._phrases[phrase] = tuple(self._tokens.tokens(phrase))
        return got

    # ------------------------------------------------------------------ keeping it current
    def _sync(self, conn: sqlite3.Connection) -> bool:
        """Bring the index to `conn`'s snapshot; False when it cannot answer for it."""
        (top,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {CHANGES}").fetchone()  # noqa: S608
        if self._index is None:
            if self._broken_at == top:
                return False  # nothing written since the mirror was found broken
            return self._load(conn, top)
        if top == self._seq:
            return True
        if top < self._seq:
            return False  # a snapshot older than the index's
        news = conn.execute(f"SELECT seq, doc FROM {CHANGES} WHERE seq > ? ORDER BY seq", (self._seq,)).fetchall()  # noqa: S608
        changed = {doc for _, doc in news}
        if (
            news
            and news[0][0] == self._seq + 1  # nothing trimmed in between
            and None not in changed
            and len(changed) <= max(self.max_batch, len(self._index) // 16)
        ):
            marks = ",".join("?" * len(changed))
            rows = conn.execute(f"{_ENTRIES} WHERE p.id IN ({marks})", sorted(changed)).fetchall()
            found = self._entries(rows)
            if found is not None:
                gone = changed - {key for key, _ in found[0]}
                self._index.remove(gone)
                self._index.put_batch(*found)
                # A new mapping, not an update: an answer given before holds the old one.
                texts = {pid: t for pid, t in self._texts.items() if pid not in gone}
                texts.update(_agreement_texts(rows))
                self._texts = texts
                self._seq = top
                return True
        return self._load(conn, top)

    def _load(self, conn: sqlite3.Connection, top: int) -> bool:
        """Everything again, in `conn`'s snapshot (at log position `top`)."""
        self._index = None
        self._filling = True
        try:
            rows = conn.execute(_ENTRIES).fetchall()
            (entries,) = conn.execute("SELECT count(*) FROM processes_fts").fetchone()
            (processes,) = conn.execute("SELECT count(*) FROM processes").fetchone()
            found = self._entries(rows)
            if found is None or not entries == processes == len(found[0]):
                # A process without its entry, an entry without its process, or two processes on
                # one entry (a file edited by hand): FTS5's counts are not the cache's.
                _log.warning("posting_cache.mirror_broken", entries=entries, processes=processes)
                self._broken_at = top
                return False
            index = PostingIndex(BM25_WEIGHTS)
            index.put_batch(*found)
            self.loads += 1
            self._index, self._seq, self._broken_at = index, top, None
            self._texts = _agreement_texts(rows)
            return True
        finally:
            self._filling = False

    def _entries(self, rows: Sequence[Sequence[str]]) -> tuple[list[tuple[str, str]], Batch] | None:
        """The (id, robot) of each `_ENTRIES` row (id, robot, the entry's id and its four texts,
        …) and their instances; None when an entry names another process (the mirror is broken)."""
        if any(r[0] != r[2] for r in rows) or len({r[0] for r in rows}) != len(rows):
            return None
        codes: dict[str, int] = {}
        parts: list[list[bm25.Ids]] = []
        for at in range(0, len(rows), 1000):  # a bounded table (and list of instances) at a time
            names, token, doc, col, offset = self._tokens.arrays(
                [[t or "" for t in r[3:7]] for r in rows[at : at + 1000]]
            )
            ours = np.array([codes.setdefault(n, len(codes)) for n in names], np.int64)
            parts.append(
                [
                    ours[np.array(token, np.int64)] if names else np.empty(0, np.int64),
                    np.array(doc, np.int64) + at,
                    np.array(col, np.int64) + 1,  # the tokenizer numbers the indexed columns from 0; bm25 counts id too
                    np.array(offset, np.int64),
                ]
            )
        empty = [np.empty(0, np.int64)] * 4
        arrays = [np.concatenate(p) for p in zip(*parts, strict=True)] if parts else empty
        return [(str(r[0]), str(r[1])) for r in rows], Batch(list(codes), *arrays)

    def _agrees(self) -> bool:
        """Whether the cache scores a sample index exactly as this sqlite's bm25() does."""
        rng = random.Random(7)
        vocab = ["grasp", "mug", "red", "the", "force", "door", "open", "left", "dock", "charger", "12", "3"]
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute(
                "CREATE VIRTUAL TABLE probe USING fts5(id UNINDEXED, title, task_pattern, tags, body, "
                f"tokenize='{TOKENIZE}')"
            )
            docs = [
                (f"p{i}", *(" ".join(rng.choices(vocab, k=rng.randint(0, n))) for n in (6, 4, 3, 40)))
                for i in range(60)
            ]
            conn.executemany("INSERT INTO probe(id, title, task_pattern, tags, body) VALUES (?, ?, ?, ?, ?)", docs)
            rows = [(d[0], "r", d[0], *d[1:], "", "", "[]") for d in docs]
            found = self._entries(rows)
            assert found is not None
            index = PostingIndex(BM25_WEIGHTS)
            index.put_batch(*found)
            weights = ", ".join(repr(w) for w in BM25_WEIGHTS)
            for query in (["grasp"], ["mug", "red"], ["the", "force", "door"], ["open door", "12", "12 3", "left"]):
                scored = index.score([self._phrase(p) for p in query])
                ours = dict(zip(scored.keys, scored.scores.tolist(), strict=True))
                theirs = dict(
                    conn.execute(
                        f"SELECT id, -bm25(probe, {weights}) FROM probe WHERE probe MATCH ?",  # noqa: S608
                        (fts.any_of(query),),
                    ).fetchall()
                )
                if ours != theirs:
                    return False
            return True
        finally:
            conn.close()
