"""PostgresProcesses: process documents (`ProcessRepository`) as rows of the shared PostgreSQL schema.

Tables (component ``processes``): ``processes`` (the SQLite columns, plus ``lexemes``, a literal
``tsvector`` of the document's index tokens with a GIN index, and ``doclen``, its token count),
``process_postings`` (each token's positions per column), ``process_outcomes`` and
``process_tenant_counts`` (as in SQLite).

Invariants:

- **Scores are SQLite's.** A document is indexed as FTS5 indexes it (`segment.index_text` on
  title, task pattern, tags and body; FTS5's own ``porter unicode61`` tokens, from
  `search.sqlite.tokens`), and a query is scored by `search.bm25` over those postings — FTS5's
  arithmetic, with the bm25 column weights `ranking.BM25_WEIGHTS` — so relevance is the double
  ``-bm25()`` gives. `find` is `processes.ranking`'s plan on this backend's `Snapshot`, so it
  answers as SQLite's keyword mode (calibrated relevance, agreement re-ranking; hits and scores:
  tests/processes/postgres/test_parity.py). ``lexemes @@ tsquery`` chooses the
  candidates (every document holding all tokens of one phrase); the postings decide phrase
  instances, document frequencies and the weighted frequencies.
- **The posting cache.** Each replica holds every process's postings in memory
  (`postings.PostingCache`), kept exact for each find's snapshot from the change feed a trigger
  on ``processes`` writes in every writer's transaction (migration 2); a find's keyword
  primitives rank from it — the same hits, order and doubles as ``_Scored`` — and from the
  postings in SQL when it cannot answer for the snapshot (older than the cache's, a mirror broken
  by hand). A replica's saves and deletes prune the feed past `postings.FEED_HORIZON` now and
  then (`postings.PRUNE_EVERY_S`); a cache further behind reads everything again.
- **Hybrid as on SQLite.** A save embeds `rows.embed_text` before its transaction and writes the
  vector (or removes the stale one) in it, as does a delete; `find_hybrid` is `ranking`'s hybrid
  plan with the vectors from this replica's `vectorstore.VectorCache`, brought up to the read
  snapshot from the vectors' change feed (`search.postgres.vectorstore`: a find on any replica
  ranks by every vector committed before its snapshot). With no query vector or no stored vector
  of the model it answers in keyword mode and says so. Rows saved while the embedder was off are
  embedded by the backfill (`reembed`, or in the background once it is back).
- **Saves are serialized** under a transaction-level advisory lock, so `rules.plan_save` decides
  (update, or fork to a free id) on rows no other replica changes meanwhile; outcome counters move
  in SQL (``count = count + 1``), each with its record in the same transaction.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import json
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np

from robot_mcp_memory.processes import docmodel, ranking, rules
from robot_mcp_memory.processes import rows as process_rows
from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc
from robot_mcp_memory.processes.ports import (
    NO_PHRASES,
    NOBODY,
    Author,
    Hit,
    PhraseCounts,
    Phrases,
    Progress,
    RecordsView,
    Saved,
    SearchMode,
    TenantViewed,
)
from robot_mcp_memory.processes.postgres import postings as posting_cache
from robot_mcp_memory.processes.postgres.postings import PostingCache
from robot_mcp_memory.processes.ranking import BM25_WEIGHTS, EVENTS_PER_PROCESS, HISTORY_LIMIT, LINE_COST, Fusion
from robot_mcp_memory.processes.rows import embed_text
from robot_mcp_memory.search import bm25
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.search.postgres.postings import PruneClock
from robot_mcp_memory.search.postgres.vectorstore import VectorCache
from robot_mcp_memory.search.postings import Scored
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.segment import index_text
from robot_mcp_memory.search.sqlite.tokens import Fts5Tokens
from robot_mcp_memory.search.vectors import SnapshotIndexes, Vector
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.storage.postgres import Connection, Migration, PostgresStore, changes
from robot_mcp_memory.tenancy.principal import SHARED

COMPONENT = "processes"
#: The processes' domain in the shared ``vectors`` table.
DOMAIN = "process"
#: The SQLite index's tokenizer (``processes_fts``): the tokens must be the very ones it counts.
TOKENIZE = "porter unicode61"
_INDEXED = 4  # title, task_pattern, tags, body

_TOKENS = Fts5Tokens(TOKENIZE, _INDEXED)


@functools.lru_cache(maxsize=50_000)
def _tokens_of(phrase: str) -> tuple[str, ...]:
    """A query phrase's tokens, as FTS5 reads it (a find's phrases repeat: kept)."""
    return tuple(_TOKENS.tokens(phrase))


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE processes (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            task_pattern TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]',
            robot TEXT NOT NULL DEFAULT 'unknown',
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            success_count BIGINT NOT NULL DEFAULT 0,
            failure_count BIGINT NOT NULL DEFAULT 0,
            last_used TEXT NOT NULL DEFAULT '',
            source_mission_id TEXT NOT NULL DEFAULT '',
            extra TEXT NOT NULL DEFAULT '{}',
            body TEXT NOT NULL DEFAULT '',
            lexemes TSVECTOR NOT NULL DEFAULT ''::tsvector,
            doclen INTEGER NOT NULL DEFAULT 0
        )"""
    )
    conn.execute("CREATE INDEX processes_lexemes ON processes USING GIN (lexemes)")
    conn.execute("CREATE INDEX processes_robot ON processes (robot)")
    conn.execute("CREATE INDEX processes_updated ON processes (updated)")
    conn.execute(
        """CREATE TABLE process_postings (
            process_id TEXT NOT NULL REFERENCES processes(id) ON DELETE CASCADE,
            term TEXT NOT NULL,
            col SMALLINT NOT NULL,  -- 0 title, 1 task_pattern, 2 tags, 3 body
            positions INTEGER[] NOT NULL,
            PRIMARY KEY (process_id, term, col)
        )"""
    )
    conn.execute(
        """CREATE TABLE process_outcomes (
            process_id TEXT NOT NULL,
            n INTEGER NOT NULL,
            at TEXT NOT NULL,
            success BOOLEAN NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            robot TEXT NOT NULL DEFAULT '',
            tenant TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (process_id, n)
        )"""
    )
    conn.execute("CREATE INDEX process_outcomes_at ON process_outcomes (at)")
    conn.execute(
        """CREATE TABLE process_tenant_counts (
            process_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            success_count BIGINT NOT NULL DEFAULT 0,
            failure_count BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (process_id, tenant)
        )"""
    )


#: Append-only. Step i brings the processes tables from version i to version i + 1. Step 2 (the
#: change feed's trigger, `postings.create_feed_trigger`) writes the feed's tables: the adapter
#: migrates `changes` first.
MIGRATIONS: list[Migration] = [_create, posting_cache.create_feed_trigger]

#: SQLite's orders (BINARY collation), whatever the database's locale.
ORDERS = {
    "updated": 'updated DESC, id COLLATE "C"',
    "used": 'success_count + failure_count DESC, updated DESC, id COLLATE "C"',
}


def _visible(visible: Collection[str] | None, column: str = "robot") -> tuple[str, list[Any]]:
    if visible is None:
        return "TRUE", []
    return f"{column} = ANY(%s)", [sorted(visible)]


def _tsquery_lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


# ---------------------------------------------------------------------------- SQL (connection first)
def select_one(conn: Connection, pid: str) -> ProcessDoc | None:
    row = conn.execute(f"SELECT {process_rows.COLUMNS} FROM processes WHERE id = %s", (pid,)).fetchone()  # noqa: S608
    return process_rows.from_row(row) if row else None


def _columns_of(doc: ProcessDoc) -> list[str]:
    return [index_text(t) for t in (doc.title, doc.task_pattern, " ".join(doc.tags), doc.body)]


def postings_of(doc: ProcessDoc) -> tuple[dict[tuple[str, int], list[int]], int]:
    """The postings the document's text makes — each (term, column)'s positions — and its length
    in tokens: what `_index` stores, and what a health check compares the stored ones with."""
    [found] = _TOKENS.instances([_columns_of(doc)])
    positions: dict[tuple[str, int], list[int]] = {}
    for col, offset, term in found:
        positions.setdefault((term, col), []).append(offset)
    return positions, len(found)


def _index(conn: Connection, doc: ProcessDoc) -> None:
    """Replace the document's postings, lexemes and length (the caller holds the transaction)."""
    positions, length = postings_of(doc)
    conn.execute("DELETE FROM process_postings WHERE process_id = %s", (doc.id,))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO process_postings(process_id, term, col, positions) VALUES (%s, %s, %s, %s)",
            [(doc.id, term, col, offs) for (term, col), offs in positions.items()],
        )
    lexemes = sorted({term for term, _ in positions})
    conn.execute(
        "UPDATE processes SET lexemes = array_to_tsvector(%s::text[]), doclen = %s WHERE id = %s",
        (lexemes, length, doc.id),
    )


def upsert(conn: Connection, doc: ProcessDoc) -> None:
    conn.execute(
        f"INSERT INTO processes({process_rows.COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "  # noqa: S608
        "ON CONFLICT (id) DO UPDATE SET title = excluded.title, task_pattern = excluded.task_pattern, "
        "tags = excluded.tags, robot = excluded.robot, created = excluded.created, updated = excluded.updated, "
        "success_count = excluded.success_count, failure_count = excluded.failure_count, "
        "last_used = excluded.last_used, source_mission_id = excluded.source_mission_id, "
        "extra = excluded.extra, body = excluded.body",
        process_rows.to_row(doc),
    )
    _index(conn, doc)


def _insert_outcome(conn: Connection, pid: str, e: OutcomeEntry) -> None:
    conn.execute(
        "INSERT INTO process_outcomes(process_id, n, at, success, note, robot, tenant) VALUES "
        "(%s, coalesce((SELECT max(n) FROM process_outcomes WHERE process_id = %s), 0) + 1, %s, %s, %s, %s, %s)",
        (pid, pid, e.when, e.success, e.note, e.robot, e.tenant),
    )


def insert_history(conn: Connection, pid: str, entries: Iterable[OutcomeEntry]) -> None:
    for e in entries:
        _insert_outcome(conn, pid, e)


def save_doc(conn: Connection, schema: str, doc: ProcessDoc, now: str, writable: Callable[[str], bool]) -> Saved:
    """Insert, update or fork `doc` (`rules.plan_save`) under the saves' lock; see the SQLite store."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{schema}.processes.save",))
    body, carried = docmodel.split_outcome_log(doc.body)
    saved = rules.plan_save(doc.model_copy(update={"body": body}), now, lambda pid: select_one(conn, pid), writable)
    upsert(conn, saved.doc)
    if saved.action != "updated":
        insert_history(conn, saved.doc.id, carried)
    return saved


def add_outcome(conn: Connection, pid: str, success: bool, note: str, now: str, by: Author) -> ProcessDoc | None:
    column = "success_count" if success else "failure_count"
    row = conn.execute(
        f"UPDATE processes SET {column} = {column} + 1, last_used = %s WHERE id = %s RETURNING {process_rows.COLUMNS}",  # noqa: S608
        (now, pid),
    ).fetchone()
    if row is None:
        return None
    doc = process_rows.from_row(row)
    _insert_outcome(conn, pid, OutcomeEntry(now, success, " ".join(note.split()), by.robot, by.tenant))
    if by.tenant and doc.robot == SHARED:
        conn.execute(
            f"INSERT INTO process_tenant_counts(process_id, tenant, {column}) VALUES (%s, %s, 1) "  # noqa: S608
            f"ON CONFLICT (process_id, tenant) DO UPDATE SET {column} = process_tenant_counts.{column} + 1",
            (pid, by.tenant),
        )
    return doc


def delete_doc(conn: Connection, pid: str) -> bool:
    conn.execute("DELETE FROM process_outcomes WHERE process_id = %s", (pid,))
    conn.execute("DELETE FROM process_tenant_counts WHERE process_id = %s", (pid,))
    return conn.execute("DELETE FROM processes WHERE id = %s", (pid,)).rowcount > 0


def list_docs(
    conn: Connection, limit: int, offset: int, visible: Collection[str] | None, order: str
) -> tuple[list[ProcessDoc], int]:
    where, params = _visible(visible)
    total = conn.execute(f"SELECT count(*) FROM processes WHERE {where}", params).fetchone()  # noqa: S608
    rows = conn.execute(
        f"SELECT {process_rows.COLUMNS} FROM processes WHERE {where} ORDER BY {ORDERS[order]} LIMIT %s OFFSET %s",  # noqa: S608
        [*params, limit, offset],
    ).fetchall()
    return [process_rows.from_row(r) for r in rows], int(total[0]) if total else 0


def outcomes_of(conn: Connection, ids: Collection[str], *, with_note: bool = False) -> dict[str, list[OutcomeEntry]]:
    """The newest outcome records of each of `ids`, oldest first, bounded as in SQLite."""
    out: dict[str, list[OutcomeEntry]] = {pid: [] for pid in ids}
    if not ids:
        return out
    noted = " AND note <> ''" if with_note else ""
    bound = "size <= %s" if with_note else "k <= %s"
    rows = conn.execute(
        "SELECT process_id, at, success, note, robot, tenant FROM ("  # noqa: S608 - fixed names
        "SELECT *, row_number() OVER w AS k, sum(length(note) + %s) OVER w AS size FROM process_outcomes "
        f"WHERE process_id = ANY(%s){noted} WINDOW w AS (PARTITION BY process_id ORDER BY n DESC)) AS o "
        f"WHERE {bound} ORDER BY process_id, n",
        [LINE_COST, sorted(ids), docmodel.MAX_BODY if with_note else HISTORY_LIMIT],
    )
    for pid, at, success, note, robot, tenant in rows:
        out[pid].append(OutcomeEntry(at, bool(success), note, robot, tenant))
    return out


def other_tenants_counts(conn: Connection, ids: Collection[str], tenant: str) -> dict[str, tuple[int, int]]:
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT process_id, sum(success_count), sum(failure_count) FROM process_tenant_counts "
        "WHERE process_id = ANY(%s) AND tenant <> %s GROUP BY process_id",
        (sorted(ids), tenant),
    )
    return {pid: (int(s), int(f)) for pid, s, f in rows}


def tenant_view(
    conn: Connection, docs: list[ProcessDoc], tenant: str | None
) -> list[tuple[ProcessDoc, tuple[int, int] | None]]:
    """Each document as `tenant` is shown its counters (see the SQLite store's `tenant_view`)."""
    if tenant is None:
        return [(d, None) for d in docs]
    return rules.tenant_view(docs, other_tenants_counts(conn, {d.id for d in docs if d.robot == SHARED}, tenant))


def viewed(conn: Connection, docs: list[ProcessDoc], tenant: str | None, *, with_note: bool) -> list[RecordsView]:
    records = outcomes_of(conn, [d.id for d in docs], with_note=with_note)
    return [(d, fleet, records[d.id]) for d, fleet in tenant_view(conn, docs, tenant)]


def outcome_events(
    conn: Connection, visible: Collection[str] | None, per_process: int = EVENTS_PER_PROCESS
) -> list[tuple[str, str, bool, str, str, str]]:
    where, params = _visible(visible, "p.robot")
    rows = conn.execute(
        "SELECT o.process_id, o.at, o.success, p.robot, o.tenant, o.robot FROM process_outcomes o "  # noqa: S608
        f"JOIN processes p ON p.id = o.process_id WHERE {where} AND o.n > ("
        "SELECT coalesce(max(n), 0) FROM process_outcomes WHERE process_id = o.process_id) - %s "
        'ORDER BY o.process_id COLLATE "C", o.n',
        [*params, per_process],
    )
    return [(pid, at, bool(ok), owner, tenant, by) for pid, at, ok, owner, tenant, by in rows]


def outcome_days(
    conn: Connection, since: str, visible: Collection[str] | None
) -> list[tuple[str, bool, str, str, str, int]]:
    where, params = _visible(visible, "p.robot")
    rows = conn.execute(
        "SELECT substr(o.at, 1, 10) AS day, o.success, o.process_id, p.robot, o.tenant, count(*) "  # noqa: S608
        f"FROM process_outcomes o JOIN processes p ON p.id = o.process_id WHERE o.at >= %s AND {where} "
        "GROUP BY day, o.success, o.process_id, p.robot, o.tenant",
        [since, *params],
    )
    return [(day, bool(ok), pid, owner, tenant, int(n)) for day, ok, pid, owner, tenant, n in rows]


def reindex_all(conn: Connection) -> int:
    docs = [process_rows.from_row(r) for r in conn.execute(f"SELECT {process_rows.COLUMNS} FROM processes")]  # noqa: S608
    for d in docs:
        _index(conn, d)
    return len(docs)


# ---------------------------------------------------------------------------- vectors (SQL side)
def missing_rows(conn: Connection, model_id: str, after: str, limit: int) -> list[vectorstore.Row]:
    """(id, robot, `embed_text`) of the processes past `after` (in id order) with no vector of `model_id`."""
    rows = conn.execute(
        "SELECT p.id, p.robot, p.title, p.task_pattern, p.tags FROM processes p "
        "LEFT JOIN vectors v ON v.domain = %s AND v.ref = p.id AND v.model_id = %s AND v.vec IS NOT NULL "
        'WHERE v.ref IS NULL AND p.id > %s COLLATE "C" ORDER BY p.id COLLATE "C" LIMIT %s',
        (DOMAIN, model_id, after, limit),
    )
    return [(pid, robot, _embed_text_of(title, pattern, tags)) for pid, robot, title, pattern, tags in rows]


def count_missing(conn: Connection, model_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM processes p LEFT JOIN vectors v "
        "ON v.domain = %s AND v.ref = p.id AND v.model_id = %s AND v.vec IS NOT NULL WHERE v.ref IS NULL",
        (DOMAIN, model_id),
    ).fetchone()
    return int(row[0]) if row else 0


def current_row(conn: Connection, pid: str) -> vectorstore.Row | None:
    row = conn.execute("SELECT id, robot, title, task_pattern, tags FROM processes WHERE id = %s", (pid,)).fetchone()
    return None if row is None else (row[0], row[1], _embed_text_of(row[2], row[3], row[4]))


def _embed_text_of(title: str, pattern: str, tags: str) -> str:
    return embed_text(ProcessDoc.model_construct(title=title, task_pattern=pattern, tags=tuple(json.loads(tags))))


#: How the backfill (`vectorstore.fill_missing`) reads processes.
VECTOR_SOURCE = vectorstore.Source(DOMAIN, missing_rows, count_missing, current_row)


def saved_vector(conn: Connection, doc: ProcessDoc, embedded: tuple[str, Vector] | None) -> None:
    """The vector of `doc` as just saved, in the save's transaction: `embedded`, or none (the
    old one is stale now; the backfill makes a new one)."""
    if embedded is None:
        vectorstore.delete(conn, DOMAIN, doc.id)
    else:
        vectorstore.upsert(conn, DOMAIN, doc.id, doc.robot, embedded[0], embedded[1])


# ---------------------------------------------------------------------------- keyword primitives
class _Scored:
    """The phrases' postings among their matches: each phrase's bm25 term, in query order, with
    the matches' lengths and the index's row and token counts (FTS5's averages record)."""

    def __init__(self, conn: Connection, phrases: Phrases) -> None:
        tokenized = [_tokens_of(p) for p in phrases]
        stats = conn.execute("SELECT count(*), coalesce(sum(doclen), 0) FROM processes").fetchone()
        self.rows, self.tokens = (int(stats[0]), int(stats[1])) if stats else (0, 0)
        self.names: list[str] = []
        self.lengths: list[float] = []
        #: Each phrase's term (None: a phrase with no token, which matches nothing).
        self.terms: list[bm25.Term | None] = [None] * len(tokenized)
        wanted = sorted({t for p in tokenized for t in p})
        held = [p for p in tokenized if p]
        if not held:
            return
        tsquery = " | ".join("(" + " & ".join(_tsquery_lexeme(t) for t in dict.fromkeys(p)) + ")" for p in held)
        docs: dict[str, int] = {}
        for pid, doclen in conn.execute("SELECT id, doclen FROM processes WHERE lexemes @@ %s::tsquery", (tsquery,)):
            docs[pid] = len(self.lengths)
            self.lengths.append(float(doclen))
        self.names = list(docs)
        postings: dict[tuple[str, str], list[tuple[int, list[int]]]] = {}
        if docs:
            for pid, term, col, positions in conn.execute(
                "SELECT process_id, term, col, positions FROM process_postings "
                "WHERE process_id = ANY(%s) AND term = ANY(%s)",
                (self.names, wanted),
            ):
                postings.setdefault((pid, term), []).append((int(col), list(positions)))
        for i, phrase in enumerate(tokenized):
            if not phrase:
                continue
            ids: list[int] = []
            freqs: list[float] = []
            for pid, d in docs.items():  # in increasing d
                counts = _instances(phrase, postings, pid)
                if any(counts):
                    ids.append(d)
                    freqs.append(bm25.weighted_frequency((0, *counts), BM25_WEIGHTS))
            self.terms[i] = bm25.Term(np.array(ids, np.int64), np.array(freqs, np.float64))

    def counts(self) -> list[int]:
        """How many documents hold each phrase, as FTS5 counts a phrase quoted alone."""
        return [0 if t is None else len(t.ids) for t in self.terms]

    @functools.cached_property
    def relevance(self) -> dict[str, float]:
        """Each match's ``-bm25()`` for the OR of the phrases."""
        terms = [t for t in self.terms if t is not None]
        if not self.names or not terms:
            return {}
        found, scores = bm25.scores(terms, np.array(self.lengths, np.float64), self.rows, self.tokens)
        return {self.names[int(i)]: float(s) for i, s in zip(found, scores, strict=True)}


def relevance(conn: Connection, phrases: Phrases) -> dict[str, float]:
    """Each matching document's relevance (``-bm25()`` of the SQLite index for the OR of
    `phrases`), over every document: idf counts every match."""
    return _Scored(conn, phrases).relevance


def _instances(
    phrase: Sequence[str], postings: dict[tuple[str, str], list[tuple[int, list[int]]]], pid: str
) -> tuple[int, ...]:
    """How many times `phrase` occurs in each indexed column of document `pid` (its tokens at
    consecutive positions of one column, as FTS5 counts a phrase's instances)."""

    def of(term: str) -> list[tuple[int, list[int]]]:
        return postings.get((pid, term), [])

    first = of(phrase[0])
    counts = [0] * _INDEXED
    for col, starts in first:
        if len(phrase) == 1:
            counts[col] = len(starts)
            continue
        rest = [{p for c, ps in of(t) if c == col for p in ps} for t in phrase[1:]]
        counts[col] = sum(1 for s in starts if all(s + i + 1 in held for i, held in enumerate(rest)))
    return tuple(counts)


def _counters(
    conn: Connection, ids: Collection[str], visible: Collection[str] | None, tenant: str | None
) -> dict[str, tuple[int, int]]:
    """(successes, failures) of each of `ids` that exists and is visible, as `tenant` sees them."""
    if not ids:
        return {}
    where, params = _visible(visible)
    light = conn.execute(
        f"SELECT id, robot, success_count, failure_count FROM processes WHERE id = ANY(%s) AND {where}",  # noqa: S608
        [sorted(ids), *params],
    ).fetchall()
    others = (
        other_tenants_counts(conn, {pid for pid, robot, _, _ in light if robot == SHARED}, tenant) if tenant else {}
    )
    out = {}
    for pid, _robot, s, f in light:
        o_s, o_f = others.get(pid, (0, 0))
        out[pid] = (max(int(s) - o_s, 0), max(int(f) - o_f, 0))
    return out


def search(
    conn: Connection,
    phrases: Phrases,
    k: int,
    visible: Collection[str] | None,
    tenant: str | None = None,
    scored: dict[str, float] | None = None,
) -> list[Hit]:
    """The `k` best visible matches of the OR of `phrases` by relevance × reliability (then
    id), as SQLite's `search` (`SearchSnapshot.keyword_top`); `scored`: their relevance, when
    the caller has it."""
    if scored is None:
        scored = relevance(conn, phrases)
    if not scored or k < 1:
        return []
    # Rank on the counters alone; only the k best rows are read whole.
    counters = _counters(conn, scored, visible, tenant)

    def rank(pid: str) -> tuple[float, str]:
        s, f = counters[pid]
        return -(scored[pid] * (s + 1.0) / (s + f + 2.0)), pid

    best = sorted(counters, key=rank)[:k]
    views = documents(conn, best, tenant)
    return [Hit(d, scored[d.id] * d.reliability, scored[d.id], fleet) for d, fleet in views]


def search_scored(
    conn: Connection, scored: Scored, k: int, visible: Collection[str] | None, tenant: str | None
) -> list[Hit]:
    """`search` from the posting cache's matches (`ranking.best_by_reliability`, the counters
    read with `_counters` a batch at a time): the same hits, order and scores."""
    best = ranking.best_by_reliability(scored, k, visible, lambda ids: _counters(conn, ids, None, tenant))
    views = documents(conn, [pid for pid, _ in best], tenant)
    return [Hit(d, rel * d.reliability, rel, fleet) for (d, fleet), (_, rel) in zip(views, best, strict=True)]


def documents(conn: Connection, ids: Sequence[str], tenant: str | None) -> list[TenantViewed]:
    """The documents `ids`, in that order, as `tenant` is shown them."""
    if not ids:
        return []
    rows = conn.execute(f"SELECT {process_rows.COLUMNS} FROM processes WHERE id = ANY(%s)", (list(ids),))  # noqa: S608
    by_id = {d.id: d for d in (process_rows.from_row(r) for r in rows)}
    return tenant_view(conn, [by_id[pid] for pid in ids], tenant)


class Snapshot:
    """`ports.SearchSnapshot` on one read transaction. The keyword primitives come from
    `postings`, this replica's posting cache, when it can answer for this snapshot (exactly the
    SQL path's answer); else from the postings in SQL (`_Scored`: each phrase list scored once
    per snapshot). The vectors are `cache`'s index of a model, brought up to this snapshot once
    (none without a cache)."""

    def __init__(
        self, conn: Connection, cache: VectorCache | None = None, postings: PostingCache | None = None
    ) -> None:
        self.conn = conn
        self._scored: dict[tuple[str, ...], _Scored] = {}
        self._postings = postings
        self._cached: dict[Phrases, Scored | None] = {}
        self.vectors = SnapshotIndexes(lambda m: None if cache is None else cache.index(conn, DOMAIN, m))

    def _of(self, phrases: Phrases) -> _Scored:
        key = phrases
        if key not in self._scored:
            self._scored[key] = _Scored(self.conn, key)
        return self._scored[key]

    def _cache(self, phrases: Phrases) -> Scored | None:
        """The posting cache's answer for `phrases` in this snapshot (None: rank in SQL), once."""
        if self._postings is None or not phrases:
            return None
        if phrases not in self._cached:
            self._cached[phrases] = self._postings.score(self.conn, [_tokens_of(p) for p in phrases])
        return self._cached[phrases]

    def phrase_counts(self, phrases: Phrases) -> PhraseCounts:
        if not phrases:
            return NO_PHRASES
        cached = self._cache(phrases)
        if cached is not None:
            return PhraseCounts(phrases, cached.total, cached.docs)
        scored = self._of(phrases)
        return PhraseCounts(phrases, scored.rows, tuple(scored.counts()))

    def keyword_top(
        self,
        phrases: Phrases,
        counted: PhraseCounts | None,
        k: int,
        visible: Collection[str] | None,
        tenant: str | None,
    ) -> list[Hit]:
        cached = self._cache(phrases)
        if cached is not None:
            return search_scored(self.conn, cached, k, visible, tenant)
        return search(self.conn, phrases, k, visible, tenant, self._of(phrases).relevance)

    def keyword_relevant(
        self, phrases: Phrases, counted: PhraseCounts | None, n: int, visible: Collection[str] | None
    ) -> list[tuple[str, float]]:
        cached = self._cache(phrases)
        if cached is not None:
            return cached.top(n, visible)
        scored = self._of(phrases).relevance
        if not scored or n < 1:
            return []
        if visible is not None:
            where, params = _visible(visible)
            rows = self.conn.execute(
                f"SELECT id FROM processes WHERE id = ANY(%s) AND {where}",  # noqa: S608
                [sorted(scored), *params],
            )
            shown = {pid for (pid,) in rows}
            scored = {pid: r for pid, r in scored.items() if pid in shown}
        return sorted(scored.items(), key=lambda p: (-p[1], p[0]))[:n]

    def vector_top(
        self, qvec: Vector, model_id: str, n: int, visible: Collection[str] | None
    ) -> list[tuple[str, float]] | None:
        return self.vectors.top(qvec, model_id, n, visible)

    def vector_among(self, qvec: Vector, model_id: str, ids: Sequence[str]) -> dict[str, float]:
        return self.vectors.among(qvec, model_id, ids)

    def reliability(
        self, ids: Collection[str], visible: Collection[str] | None, tenant: str | None
    ) -> dict[str, float]:
        return {pid: docmodel.reliability(s, f) for pid, (s, f) in _counters(self.conn, ids, visible, tenant).items()}

    def agreement_texts(self, ids: Collection[str]) -> dict[str, str]:
        if not ids:
            return {}
        rows = self.conn.execute(
            "SELECT id, title, task_pattern, tags FROM processes WHERE id = ANY(%s)", (sorted(ids),)
        )
        return {pid: ranking.agreement_text_of(t, p, json.loads(tags)) for pid, t, p, tags in rows}

    def documents(self, ids: Sequence[str], tenant: str | None) -> list[TenantViewed]:
        return documents(self.conn, ids, tenant)


# ---------------------------------------------------------------------------- the repository
class PostgresProcesses:
    """The processes tables on a `PostgresStore` (implements `ProcessRepository`); hybrid search
    with an `embedder`, keyword-only without one."""

    def __init__(
        self, db: PostgresStore, embedder: ResilientEmbedder | None = None, fuse: Fusion | None = None
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.fuse = fuse or Fusion()
        vectorstore.migrate(db)  # before the processes' tables: the missing-vector joins read it
        changes.migrate(db)  # before them too: their trigger writes the change feed
        db.migrate(COMPONENT, MIGRATIONS)
        self.vectors = VectorCache()
        #: This replica's posting cache (kept exact for each find's snapshot from the change feed).
        self.postings = PostingCache()
        self._prune = PruneClock()
        self.backfiller = vectorstore.backfiller(db, lambda: self.embedder, self.vectors, VECTOR_SOURCE)

    # ------------------------------------------------------------------ vectors
    def _embed(self, text: str) -> tuple[str, Vector] | None:
        """(model_id, vector) for `text`, or None when the embedder is off or unavailable."""
        if self.embedder is None:
            return None
        out = self.embedder.embed([text])
        model_id = self.embedder.model_id
        return None if out is None or model_id is None else (model_id, out[0])

    async def _embed_off_loop(self, text: str) -> tuple[str, Vector] | None:
        """`_embed` on a worker thread, or None at once when the embedder would not try."""
        if self.embedder is None or not self.embedder.would_embed():
            return None
        return await asyncio.to_thread(self._embed, text)

    async def _embed_query(self, query: str) -> tuple[str, Vector] | None:
        """(model_id, vector) of a query (`ResilientEmbedder.query_vector`), a miss on a worker thread."""
        return None if self.embedder is None else await self.embedder.query_vector(query, asyncio.to_thread)

    def kick_backfill(self) -> None:
        """Fill missing vectors in the background (single-flight); safe to call from any thread."""
        if self.embedder is not None:
            self.backfiller.kick()

    def backfill_blocking(
        self, progress: Progress | None = None, *, stop: threading.Event | None = None, force: bool = False
    ) -> int:
        """Embed every process that has no vector of the current model (all of them with
        `force`), in batches of short transactions; how many were written. Raises
        `EmbedderUnavailable` when the model is not ready or fails midway."""
        return vectorstore.fill_missing(self.db, self.embedder, VECTOR_SOURCE, progress, stop=stop, force=force)

    def close(self) -> None:
        self.backfiller.stop()

    def _prune_due(self) -> bool:
        """Whether this write prunes the change feed too (at most every `PRUNE_EVERY_S` per replica)."""
        return self._prune.due(posting_cache.PRUNE_EVERY_S)

    async def get(self, pid: str) -> ProcessDoc | None:
        return await self.db.read(lambda c: select_one(c, pid))

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = lambda _o: True) -> Saved:
        now = now_iso()
        # Embed before the transaction: the saves' lock is never held while a model runs.
        embedded = await self._embed_off_loop(embed_text(doc))

        prune = self._prune_due()

        def job(c: Connection) -> Saved:
            saved = save_doc(c, self.db.schema, doc, now, writable)
            saved_vector(c, saved.doc, embedded)
            if prune:
                posting_cache.prune_feed(c)
            return saved

        saved = await self.db.write(job)
        if embedded is None and self.embedder is not None and self.embedder.mode != "off":
            self.kick_backfill()
        return saved

    async def record_outcome(self, pid: str, success: bool, note: str = "", by: Author = NOBODY) -> ProcessDoc | None:
        now = now_iso()
        return await self.db.write(lambda c: add_outcome(c, pid, success, note, now, by))

    async def delete(self, pid: str) -> bool:
        prune = self._prune_due()

        def job(c: Connection) -> bool:
            gone = delete_doc(c, pid)  # the row first, then the feed lock: the order a save takes them
            vectorstore.delete(c, DOMAIN, pid)
            if prune:
                posting_cache.prune_feed(c)
            return gone

        return await self.db.write(job)

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None, order: str = "updated"
    ) -> tuple[builtins.list[ProcessDoc], int]:
        return await self.db.read(lambda c: list_docs(c, limit, offset, visible, order))

    async def find(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> builtins.list[Hit]:
        """The keyword answer (`ranking.keyword_search`), as SQLite's, in one read snapshot."""
        postings = self.postings
        return await self.db.read(
            lambda c: ranking.keyword_search(Snapshot(c, None, postings), query, k, visible, tenant)
        )

    async def find_hybrid(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> tuple[builtins.list[Hit], SearchMode]:
        """Hybrid search (`ranking.hybrid_search`) when a query vector and stored vectors of its
        model exist; keyword-only otherwise. The mode says which one ran."""
        embedded = await self._embed_query(query.text) if query.searchable else None
        if embedded is not None:
            model_id, qvec = embedded
            fuse, cache, postings = self.fuse, self.vectors, self.postings
            hits = await self.db.read(
                lambda c: ranking.hybrid_search(
                    Snapshot(c, cache, postings), query, qvec, model_id, visible, fuse, k, tenant
                )
            )
            if hits is not None:
                return hits, "hybrid"
        return await self.find(query, k, visible, tenant), "keyword"

    async def viewed(
        self, docs: builtins.list[ProcessDoc], tenant: str | None
    ) -> builtins.list[tuple[ProcessDoc, tuple[int, int] | None]]:
        return await self.db.read(lambda c: tenant_view(c, docs, tenant))

    async def view(self, pid: str, tenant: str | None, *, with_note: bool = False) -> RecordsView | None:
        def job(c: Connection) -> RecordsView | None:
            doc = select_one(c, pid)
            return None if doc is None else viewed(c, [doc], tenant, with_note=with_note)[0]

        return await self.db.read(job)

    async def views(
        self, docs: builtins.list[ProcessDoc], tenant: str | None, *, with_note: bool = False
    ) -> builtins.list[RecordsView]:
        return await self.db.read(lambda c: viewed(c, docs, tenant, with_note=with_note))

    async def outcomes(
        self, ids: Collection[str], *, with_note: bool = False
    ) -> dict[str, builtins.list[OutcomeEntry]]:
        return await self.db.read(lambda c: outcomes_of(c, ids, with_note=with_note))

    async def outcome_days(
        self, since: str, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, bool, str, str, str, int]]:
        return await self.db.read(lambda c: outcome_days(c, since, visible))

    async def outcome_events(
        self, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, str, bool, str, str, str]]:
        return await self.db.read(lambda c: outcome_events(c, visible))

    async def reembed(self, progress: Progress | None = None, *, force: bool = False) -> int:
        """Embed what lacks a vector of the current model (after a model change: everything);
        `force` re-embeds every process. `progress(done, total)` is called per batch."""
        return await asyncio.to_thread(lambda: self.backfill_blocking(progress, force=force))

    async def vector_status(self) -> dict[str, object]:
        emb = self.embedder
        model_id = emb.model_id if emb is not None else None
        stored = await self.db.read(lambda c: vectorstore.counts(c, DOMAIN))
        missing = await self.db.read(lambda c: count_missing(c, model_id)) if model_id else None
        return {**(emb.status() if emb else {"mode": "off"}), "stored": stored, "missing": missing}

    async def reindex(self) -> int:
        return await self.db.write(reindex_all)


__all__ = ["COMPONENT", "MIGRATIONS", "PostgresProcesses", "postings_of", "relevance", "search"]
