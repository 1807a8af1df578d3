"""The search primitives of the SQLite processes adapter: `Snapshot`, a `ports.SearchSnapshot`
on one read transaction of index.db, and the SQL behind it. `processes.ranking` plans a find with
them; nothing here decides how a find ranks.

Invariants:

- The keyword top-n (`search` by relevance × reliability, `keyword_candidates` by relevance) is
  exactly what a plain join over every match of the OR of the phrases returns, up to scores that
  agree to 12 significant digits: its floors (only matches at or above the k-th best visible
  relevance of a pool are joined) and its rarer-phrase restriction (common phrases leave choosing
  matches while they provably cannot reach the top) are plans of the same answer
  (tests/processes/test_search_floor.py, tests/search/test_keyword.py).
- Relevance is ``-bm25`` with `ranking.BM25_WEIGHTS`; reliability is a tenant's view of the
  counters (`tenant_view`): a shared document's counters without other tenants' outcomes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from robot_mcp_memory.processes import docmodel, ranking, rules
from robot_mcp_memory.processes import rows as process_rows
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import NO_PHRASES, Hit, PhraseCounts, Phrases, TenantViewed
from robot_mcp_memory.processes.ranking import BM25_WEIGHTS
from robot_mcp_memory.processes.sqlite.postings import PostingCache
from robot_mcp_memory.search import fts
from robot_mcp_memory.search.postings import Scored
from robot_mcp_memory.search.sqlite.vectorstore import VectorCache
from robot_mcp_memory.search.vectors import SnapshotIndexes, Vector
from robot_mcp_memory.tenancy.principal import SHARED

T = TypeVar("T")


def visible_clause(visible: Collection[str] | None, column: str = "robot") -> tuple[str, list[str]]:
    if visible is None:
        return "1", []
    if not visible:
        return "0", []
    marks = ",".join("?" * len(visible))
    return f"{column} IN ({marks})", sorted(visible)


def other_tenants_counts(conn: sqlite3.Connection, ids: Collection[str], tenant: str) -> dict[str, tuple[int, int]]:
    """(successes, failures) that tenants other than `tenant` counted on each of `ids` (absent: none)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        "SELECT process_id, sum(success_count), sum(failure_count) FROM process_tenant_counts "  # noqa: S608 - fixed names
        f"WHERE process_id IN ({marks}) AND tenant <> ? GROUP BY process_id",
        [*ids, tenant],
    )
    return {pid: (int(s), int(f)) for pid, s, f in rows}


def tenant_view(
    conn: sqlite3.Connection, docs: list[ProcessDoc], tenant: str | None
) -> list[tuple[ProcessDoc, tuple[int, int] | None]]:
    """Each document as `tenant` is shown its counters, with the fleet-wide (successes,
    failures) beside a fleet-wide document's. A tenant's view of a shared document leaves out
    what other tenants' robots counted on it (one group's failures never rank it down for
    another); outcomes of unscoped callers, and those counted before outcomes were attributed,
    count for every tenant. `tenant` None (an unscoped caller): the stored counters."""
    if tenant is None:
        return [(d, None) for d in docs]
    return rules.tenant_view(docs, other_tenants_counts(conn, {d.id for d in docs if d.robot == SHARED}, tenant))


def _few_visible(conn: sqlite3.Connection, where: str, params: list[str], pool: int, k: int) -> bool:
    """Whether the visible robots own so small a share of the documents that fewer than 4k of them
    are expected among the `pool` most relevant matches, where a relevance floor would seldom exist."""
    mine, total = conn.execute(
        f"SELECT (SELECT count(*) FROM processes p WHERE {where}), (SELECT count(*) FROM processes)",  # noqa: S608 - fixed names
        params,
    ).fetchone()
    return bool(mine * pool < 4 * k * total)


def search(
    conn: sqlite3.Connection,
    phrases: Phrases,
    k: int,
    visible: Collection[str] | None,
    tenant: str | None = None,
    counted: PhraseCounts | None = None,
) -> list[Hit]:
    """The `k` best visible matches of the OR of `phrases` by relevance × reliability (then id),
    relevance being ``-bm25``: `SearchSnapshot.keyword_top`, what keyword mode ranks.

    As in `keyword_candidates`, the commonest words (``the`` above all) are first left out of
    choosing matches when together they can add less to a score than the rarest word alone
    (`fts.skippable`); they still count in every score. Reliability is below 1, so a document
    holding only those words scores below their bound: when the `k`-th best score found is above
    it, the list is exact; otherwise the rarest of them chooses matches again, and so on
    (`_by_rarer_phrases`), down to every word. Same rows, same order as a
    plain join, up to scores that agree to 12 significant digits: counting each phrase twice and
    halving back can move a score's last bit (tests/processes/test_search_floor.py).

    With a `tenant`, a fleet-wide document ranks by that tenant's view of its counters
    (`tenant_view`): other groups' outcomes do not move it. `counted`: the phrases' counts, when
    the caller has them already (counted again unless they are these phrases')."""
    found = list(phrases)
    if not found:
        return []
    if len(found) > 1 and k >= 1:
        total, docs = _counts_of(conn, found, counted)
        held = [(t, d) for t, d in zip(found, docs, strict=True) if d > 0]
        found = [t for t, _ in held]

        def exact(expr: str, bound: float) -> list[Hit] | None:
            hits = _search(conn, expr, k, visible, scale=0.5, tenant=tenant)
            return hits if len(hits) == k and hits[-1].score > bound else None

        found_by_rarer = _by_rarer_phrases(held, total, k, exact)
        if found_by_rarer is not None:
            return found_by_rarer
    every = fts.any_of(found)
    return _search(conn, every, k, visible, tenant=tenant) if every is not None else []


def _by_rarer_phrases(
    held: list[tuple[str, int]], total: int, k: int, exact: Callable[[str, float], list[T] | None]
) -> list[T] | None:
    """The `k` best the rarer phrases find alone, or None when every phrase must choose matches.

    `held` pairs each phrase with how many of the `total` documents hold it. The commonest are
    left out of choosing matches (`fts.skippable`); `exact(expression, bound)` runs the
    restricted expression and returns its list when that is exact (`k` long, its last score
    above `bound`: more than the phrases left out can add to any score), else None. On a miss
    the rarest phrase left out chooses matches too, then the next — as recall does
    (`ranking_repo._ranked_numbers`) — while it is held by fewer than half the documents: from
    there the restricted query scores nearly every match, and the plain one costs no more.
    Phrases held by fewer than `k` documents together are not tried alone: a sure miss. A query
    with a version ("2.9.3": 23 of 10,000 documents) and a place word (660) went straight to
    the plain query when the version alone fell short; a version searched as its digits ("2",
    "9", "3", each in thousands) never had that happen."""
    held_by = dict(held)
    rest, _ = fts.skippable([t for t, _ in held], [d for _, d in held], total)
    while rest:  # commonest first
        essential = [t for t, _ in held if t not in rest]
        if sum(held_by[t] for t in essential) >= k:
            found = exact(fts.restricted_expression(essential, rest), fts.bound_of((held_by[t] for t in rest), total))
            if found is not None:
                return found
        *rest, promoted = rest
        if 2 * held_by[promoted] >= total:
            break
    return None


def _search(
    conn: sqlite3.Connection,
    expr: str,
    k: int,
    visible: Collection[str] | None,
    scale: float = 1.0,
    tenant: str | None = None,
) -> list[Hit]:
    """`search` for one FTS5 expression (relevance = ``-bm25`` × `scale`).

    A query with a common word matches nearly every document, so the plan matters (measured in
    docs/benchmarks.md). By default bm25 runs once per match (m) and only matches at or above a
    floor are joined to their rows: reliability is below 1, so score <= relevance, and the k-th
    best visible score among the `pool` most relevant matches is a floor that no top-k document's
    relevance is below (with no floor, or one <= 0, every match is joined). When the visible
    robots own few documents, a plain join is cheaper: bm25 then runs only for visible matches.
    Both rank exactly alike (tests/processes/test_search_floor.py)."""
    where, params = visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in BM25_WEIGHTS)
    columns = ", ".join("p." + c.strip() for c in process_rows.COLUMNS.split(","))
    succ, fail, others, join, oargs = _tenant_counts_sql(tenant)
    score = f"relevance * ({succ} + 1.0) / ({succ} + {fail} + 2.0)"
    pool = max(200, 20 * k)
    if visible is not None and _few_visible(conn, where, params, pool, k):
        sql = (
            f"{'WITH ' + others + ' ' if others else ''}"  # noqa: S608 - fixed names
            f"SELECT {columns}, -bm25(processes_fts, {w}) * ? AS relevance "
            f"FROM processes_fts JOIN processes p ON p.id = processes_fts.id{join} "
            f"WHERE processes_fts MATCH ? AND {where} ORDER BY {score} DESC, p.id LIMIT ?"
        )
        args: list[object] = [*oargs, scale, expr, *params, k]
    else:
        # CROSS JOIN pins the loop order (m, then its row): left to the planner, a robot filter
        # makes it drive from idx_processes_robot and probe m for every visible row.
        rows = "CROSS JOIN processes_fts f ON f.rowid = m.fts_rowid CROSS JOIN processes p ON p.id = f.id" + join
        sql = (
            f"WITH {others + ', ' if others else ''}"  # noqa: S608 - fixed names
            f"m AS MATERIALIZED (SELECT rowid AS fts_rowid, -bm25(processes_fts, {w}) * ? AS relevance "
            "FROM processes_fts WHERE processes_fts MATCH ?), "
            "pool AS (SELECT fts_rowid, relevance FROM m ORDER BY relevance DESC LIMIT ?), "
            f"floor AS (SELECT m.{score} AS score FROM pool m {rows} WHERE {where} "
            "ORDER BY score DESC LIMIT 1 OFFSET ?) "
            f"SELECT {columns}, m.relevance FROM m {rows} "
            "WHERE (m.relevance >= (SELECT score FROM floor) OR coalesce((SELECT score FROM floor), 0) <= 0) "
            f"AND {where} ORDER BY m.{score} DESC, p.id LIMIT ?"
        )
        args = [*oargs, scale, expr, pool, *params, k - 1, *params, k]
    found = [(process_rows.from_row(row[:-1]), float(row[-1])) for row in conn.execute(sql, args)]
    viewed = tenant_view(conn, [d for d, _ in found], tenant)
    return [
        Hit(doc, relevance * doc.reliability, relevance, fleet)
        for (doc, fleet), (_, relevance) in zip(viewed, found, strict=True)
    ]


def _tenant_counts_sql(tenant: str | None) -> tuple[str, str, str, str, list[object]]:
    """(successes, failures, a CTE, a join, its arguments): the counters a ranking query uses —
    with a `tenant`, those of `tenant_view` (a shared document's counters without what other
    tenants counted on it)."""
    if tenant is None:
        return "p.success_count", "p.failure_count", "", "", []
    others = (
        "others AS MATERIALIZED (SELECT process_id, sum(success_count) AS s, sum(failure_count) AS f "
        "FROM process_tenant_counts WHERE tenant <> ? GROUP BY process_id)"
    )
    join = f" LEFT JOIN others o ON o.process_id = p.id AND p.robot = '{SHARED}'"
    return (
        "max(p.success_count - coalesce(o.s, 0), 0)",
        "max(p.failure_count - coalesce(o.f, 0), 0)",
        others,
        join,
        [tenant],
    )


def keyword_candidates(
    conn: sqlite3.Connection,
    phrases: Phrases,
    n: int,
    visible: Collection[str] | None,
    counted: PhraseCounts | None = None,
) -> list[tuple[str, float]]:
    """(id, relevance) of the `n` best visible matches of the OR of `phrases` by relevance alone
    (``-bm25``, higher is better; then id): `SearchSnapshot.keyword_relevant`, the keyword list
    of hybrid search; reliability is applied by the ranking, not here.

    FTS5 computes bm25 for every match, and a query's common words match much of the store. So
    the commonest words that together can add less to a score than its rarest word alone
    (`fts.skippable`) are first left out of choosing matches (`fts.restricted_expression`: they
    still count in the scores). When the `n`-th best score found is above what a document
    holding only those words could reach, the list is exact; otherwise the rarest of them
    chooses matches again, and so on (`_by_rarer_phrases`), down to every word. Phrases no
    document holds are left out altogether: they match nothing and add nothing, but bm25 would
    still loop over them. `counted`: as in `search`."""
    found = list(phrases)
    if not found or n < 1:
        return []
    if len(found) > 1:
        total, docs = _counts_of(conn, found, counted)
        held = [(t, d) for t, d in zip(found, docs, strict=True) if d > 0]
        found = [t for t, _ in held]

        def exact(expr: str, bound: float) -> list[tuple[str, float]] | None:
            rows = conn.execute(*_keyword_sql(expr, n, visible, scale=0.5)).fetchall()
            return [(r[0], float(r[1])) for r in rows] if len(rows) == n and rows[-1][1] > bound else None

        found_by_rarer = _by_rarer_phrases(held, total, n, exact)
        if found_by_rarer is not None:
            return found_by_rarer
    every = fts.any_of(found)
    if every is None:
        return []
    return [(r[0], float(r[1])) for r in conn.execute(*_keyword_sql(every, n, visible))]


def phrase_counts(conn: sqlite3.Connection, phrases: Phrases) -> PhraseCounts:
    """`SearchSnapshot.phrase_counts` (`_doc_counts`), no read for no phrase."""
    if not phrases:
        return NO_PHRASES
    total, docs = _doc_counts(conn, list(phrases))
    return PhraseCounts(phrases, total, tuple(docs))


def _counts_of(conn: sqlite3.Connection, found: list[str], counted: PhraseCounts | None) -> tuple[int, Sequence[int]]:
    """(documents, how many hold each of `found`): from `counted` when it counted these very
    phrases, else read."""
    if counted is not None and counted.phrases == tuple(found):
        return counted.total, counted.docs
    return _doc_counts(conn, found)


def _doc_counts(conn: sqlite3.Connection, found: list[str]) -> tuple[int, list[int]]:
    """(documents, how many hold each phrase of `found`), counted as bm25 counts them: each
    phrase quoted alone. A count walks the phrase's list of documents once, without scoring,
    a small share of what scoring them costs."""
    each = "(SELECT count(*) FROM processes_fts WHERE processes_fts MATCH ?)"
    sql = f"SELECT (SELECT count(*) FROM processes), {', '.join([each] * len(found))}"  # noqa: S608 - fixed text
    total, *docs = conn.execute(sql, [fts.any_of([t]) for t in found]).fetchone()
    return int(total), [int(d) for d in docs]


def _keyword_sql(expr: str, n: int, visible: Collection[str] | None, scale: float = 1.0) -> tuple[str, list[object]]:
    """The top-`n` query behind `keyword_candidates`.

    bm25 runs once per match over FTS5 rowids only (m). Reading a match's `id` costs a lookup in
    FTS5's content table, and its robot a second one in `processes`: done for every match, those
    lookups cost more than bm25 itself (measured in docs/benchmarks.md). So only the matches at or
    above a floor are joined: the `n`-th best visible relevance among the `pool` most relevant
    matches. At least `n` visible matches reach it, so every top-`n` one does; without a floor
    (fewer than `n` visible in the pool) every match is joined, as before. Unscoped, the pool is
    the first `n` matches; scoped, four times that, so a robot owning a quarter of the documents
    still finds its floor there. Same rows, same order as a plain join (tests/search/test_keyword.py)."""
    where, params = visible_clause(visible, "p.robot")
    w = ",".join(str(x) for x in BM25_WEIGHTS)
    # CROSS JOIN pins the loop order (m, then its id, then its row): the floor test, which needs
    # only m, then runs before either lookup.
    rows = "CROSS JOIN processes_fts f ON f.rowid = m.fts_rowid"
    if visible is None:
        floor = "SELECT relevance FROM m ORDER BY relevance DESC LIMIT 1 OFFSET ?"
        floor_args: list[object] = [n - 1]
    else:
        rows += " CROSS JOIN processes p ON p.id = f.id"
        floor = (
            "SELECT m.relevance FROM (SELECT fts_rowid, relevance FROM m ORDER BY relevance DESC LIMIT ?) m "  # noqa: S608 - fixed names
            f"{rows} WHERE {where} ORDER BY m.relevance DESC LIMIT 1 OFFSET ?"
        )
        floor_args = [4 * n, *params, n - 1]
    sql = (
        f"WITH m AS MATERIALIZED (SELECT rowid AS fts_rowid, -bm25(processes_fts, {w}) * ? AS relevance "  # noqa: S608 - fixed names
        f"FROM processes_fts WHERE processes_fts MATCH ?), floor AS ({floor}) "
        f"SELECT f.id, m.relevance FROM m {rows} "
        f"WHERE m.relevance >= coalesce((SELECT relevance FROM floor), m.relevance) AND {where} "
        "ORDER BY m.relevance DESC, f.id LIMIT ?"
    )
    return sql, [scale, expr, *floor_args, *params, n]


def select_many(conn: sqlite3.Connection, ids: Collection[str]) -> dict[str, ProcessDoc]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {process_rows.COLUMNS} FROM processes WHERE id IN ({marks})", list(ids))  # noqa: S608
    return {d.id: d for d in map(process_rows.from_row, rows)}


def select_counters(
    conn: sqlite3.Connection, ids: Collection[str], visible: Collection[str] | None, tenant: str | None = None
) -> dict[str, tuple[int, int]]:
    """(successes, failures) of each of `ids` that exists and is visible, as `tenant` is shown
    them (`tenant_view`)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    # The robot filter is applied here, not in SQL: given `robot IN (...)` too, the planner
    # walks idx_processes_robot over every visible row instead of looking up ~100 ids.
    rows = conn.execute(f"SELECT id, robot, success_count, failure_count FROM processes WHERE id IN ({marks})", [*ids])  # noqa: S608
    counts = {pid: (robot, s, f) for pid, robot, s, f in rows if visible is None or robot in visible}
    if tenant is not None:
        others = other_tenants_counts(conn, [p for p, (robot, _, _) in counts.items() if robot == SHARED], tenant)
        for pid, (os_, of) in others.items():
            robot, s, f = counts[pid]
            counts[pid] = (robot, max(s - os_, 0), max(f - of, 0))
    return {pid: (int(s), int(f)) for pid, (_, s, f) in counts.items()}


def select_reliability(
    conn: sqlite3.Connection, ids: Collection[str], visible: Collection[str] | None, tenant: str | None = None
) -> dict[str, float]:
    """Reliability of each of `ids` that exists and is visible: all the ranking needs of a
    candidate. Whole documents (JSON fields, body) are loaded for the final top k only."""
    return {pid: docmodel.reliability(s, f) for pid, (s, f) in select_counters(conn, ids, visible, tenant).items()}


def search_scored(
    conn: sqlite3.Connection, scored: Scored, k: int, visible: Collection[str] | None, tenant: str | None
) -> list[Hit]:
    """`search` from the posting cache's matches: the `k` best visible by relevance ×
    reliability (then id), the very list a plain join ranks (`ranking.best_by_reliability`, the
    counters read from `select_counters`)."""
    best = ranking.best_by_reliability(scored, k, visible, lambda ids: select_counters(conn, ids, None, tenant))
    docs = select_many(conn, [pid for pid, _ in best])
    viewed = tenant_view(conn, [docs[pid] for pid, _ in best], tenant)
    return [Hit(doc, rel * doc.reliability, rel, fleet) for (doc, fleet), (_, rel) in zip(viewed, best, strict=True)]


def select_agreement_texts(conn: sqlite3.Connection, ids: Collection[str]) -> dict[str, str]:
    """`ranking.agreement_text` of each of `ids` that exists, from its columns alone."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT id, title, task_pattern, tags FROM processes WHERE id IN ({marks})", [*ids])  # noqa: S608
    return {pid: ranking.agreement_text_of(title, pattern, json.loads(tags)) for pid, title, pattern, tags in rows}


class Snapshot:
    """`ports.SearchSnapshot` on one read transaction of index.db (`conn`): what
    `processes.ranking` plans a find with. The keyword primitives come from `postings`, the
    processes' index in memory, when it can answer for this snapshot (exactly as a plain join
    ranks); else from `search` and `keyword_candidates` (their floors and rarer-phrase restriction
    rank as a plain join, up to scores that agree to 12 significant digits). The vectors are
    `cache`'s index of a model, read through `conn` once per snapshot."""

    def __init__(
        self, conn: sqlite3.Connection, cache: VectorCache | None = None, postings: PostingCache | None = None
    ) -> None:
        self.conn = conn
        self.vectors = SnapshotIndexes(lambda m: None if cache is None else cache.index(conn, "process", m))
        self._postings = postings
        self._scored: dict[Phrases, Scored | None] = {}

    def _score(self, phrases: Phrases) -> Scored | None:
        """The posting cache's answer for `phrases` in this snapshot (None: rank in SQL), once."""
        if self._postings is None or not phrases:
            return None
        if phrases not in self._scored:
            self._scored[phrases] = self._postings.score(self.conn, phrases)
        return self._scored[phrases]

    def phrase_counts(self, phrases: Phrases) -> PhraseCounts:
        scored = self._score(phrases)
        if scored is not None:
            return PhraseCounts(phrases, scored.total, scored.docs)
        return phrase_counts(self.conn, phrases)

    def keyword_top(
        self,
        phrases: Phrases,
        counted: PhraseCounts | None,
        k: int,
        visible: Collection[str] | None,
        tenant: str | None,
    ) -> list[Hit]:
        scored = self._score(phrases)
        if scored is not None:
            return search_scored(self.conn, scored, k, visible, tenant)
        return search(self.conn, phrases, k, visible, tenant, counted)

    def keyword_relevant(
        self, phrases: Phrases, counted: PhraseCounts | None, n: int, visible: Collection[str] | None
    ) -> list[tuple[str, float]]:
        scored = self._score(phrases)
        if scored is not None:
            return scored.top(n, visible)
        return keyword_candidates(self.conn, phrases, n, visible, counted)

    def vector_top(
        self, qvec: Vector, model_id: str, n: int, visible: Collection[str] | None
    ) -> list[tuple[str, float]] | None:
        return self.vectors.top(qvec, model_id, n, visible)

    def vector_among(self, qvec: Vector, model_id: str, ids: Sequence[str]) -> dict[str, float]:
        return self.vectors.among(qvec, model_id, ids)

    def reliability(
        self, ids: Collection[str], visible: Collection[str] | None, tenant: str | None
    ) -> dict[str, float]:
        return select_reliability(self.conn, ids, visible, tenant)

    def agreement_texts(self, ids: Collection[str]) -> dict[str, str]:
        return select_agreement_texts(self.conn, ids)

    def documents(self, ids: Sequence[str], tenant: str | None) -> list[TenantViewed]:
        docs = select_many(self.conn, ids)
        return tenant_view(self.conn, [docs[pid] for pid in ids], tenant)
