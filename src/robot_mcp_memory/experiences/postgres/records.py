"""Memories and sessions on PostgreSQL: the writes (learn with dedup, forget, update, sessions and
their consolidation) and the reads of whole rows — the rules of `experiences/sqlite/storage.py`,
statement for statement where PostgreSQL allows.

Invariants:

- **A learn decides on rows no other learn changes meanwhile.** Every candidate duplicate of a new
  memory shares its robot, collection, type and facts digest, so learns of one such key take a
  transaction-level advisory lock on it first: two replicas learning the same experience at once
  leave one memory (SQLite's one writer gave that for free).
- **A memory's index entry is written with it** (`keywords.write_entry`), in the same transaction.
- **JSON reads back as written**: context, metadata, data and summaries are stored as the text
  `jsonvalue.dumps` made; ``context_doc`` (jsonb) is only for filtering.
- **U+0000 is refused, not stored**: PostgreSQL's text and jsonb cannot hold it, so a content, a
  context, a tag or a reason holding it is `InvalidInput` naming the field (`storable`) before
  any statement runs — SQLite stores it. JSON-only columns (metadata, data) hold it escaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.errors import Conflict, InvalidInput, NotFound
from robot_mcp_memory.experiences import consolidate
from robot_mcp_memory.experiences.dedup import Candidate, Duplicate
from robot_mcp_memory.experiences.model import PUBLIC_FROM, Experience, NewMemory, Session, draw_public_id
from robot_mcp_memory.experiences.ports import Decide, Ended, Planner, Probe
from robot_mcp_memory.experiences.postgres import keywords
from robot_mcp_memory.storage.postgres import Connection

_dumps = jsonvalue.dumps

#: A memory's public id, and the one its `superseded_by` names (`model.PUBLIC_FROM`), as SQL.
_PUBLIC_ID = "COALESCE((SELECT p.public_id FROM memory_public p WHERE p.id = m.id), m.id)"
_PUBLIC_SUPERSEDED_BY = (
    "COALESCE((SELECT p.public_id FROM memory_public p WHERE p.id = m.superseded_by), m.superseded_by)"
)
COLS = (
    "m.id, m.robot, m.collection, m.type, m.content, m.category, m.confidence, m.context, m.perception_type, "
    f"m.metadata, m.session_id, m.status, {_PUBLIC_SUPERSEDED_BY}, m.forget_reason, m.created_at, m.updated_at, "
    f"m.access_count, m.last_accessed, m.data IS NOT NULL, {_PUBLIC_ID}"
)
_N_COLS = 20
_SESSION_COLS = "id, robot, collection, context, started_at, ended_at, outcome_score, summary"


def _row(row: Sequence[Any], data: Any = None, tags: tuple[str, ...] = ()) -> Experience:
    return Experience(
        id=int(row[0]),
        robot=row[1],
        collection=row[2],
        type=row[3],
        content=row[4],
        category=row[5],
        confidence=row[6],
        context=json.loads(row[7]),
        perception_type=row[8],
        metadata=json.loads(row[9]),
        session_id=row[10],
        status=row[11],
        superseded_by=None if row[12] is None else int(row[12]),
        forget_reason=row[13],
        created_at=row[14],
        updated_at=row[15],
        access_count=None if row[16] is None else int(row[16]),
        last_accessed=row[17],
        data=data,
        tags=tags,
        has_data=bool(row[18]),
        public_id=int(row[19]),
    )


def session_of(row: Sequence[Any]) -> Session:
    return Session(
        row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], json.loads(row[7]) if row[7] else None
    )


# ---------------------------------------------------------------------------- writes
def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def storable(value: Any, what: str) -> None:
    """`InvalidInput` when `value` (a text, or JSON) holds U+0000, which PostgreSQL cannot store."""
    if _holds_nul(value):
        raise InvalidInput(f"{what} holds the character U+0000, which this store (PostgreSQL) cannot keep; remove it")


def _storable_memory(new: NewMemory) -> None:
    storable(new.content, "the memory's text")
    storable(new.context, "the context")
    storable([t for t, _ in new.tags], "a tag")


def insert_memory(conn: Connection, new: NewMemory, now: float) -> int:
    """The row, its index entry and its tags, in the caller's transaction."""
    _storable_memory(new)
    context = _dumps(new.context)
    row = conn.execute(
        "INSERT INTO memories(robot, collection, type, content, category, confidence, context, context_doc, "
        "perception_type, metadata, session_id, content_hash, facts_hash, source_weight, created_at, updated_at, "
        "data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            new.robot,
            new.collection,
            new.type,
            new.content,
            new.category,
            new.confidence,
            context,
            context,
            new.perception_type,
            _dumps(new.metadata),
            new.session_id,
            new.content_hash,
            new.facts_hash,
            new.source_weight,
            now,
            now,
            None if new.data is None else _dumps(new.data),
        ),
    ).fetchone()
    assert row is not None
    mid = int(row[0])
    user = [t for t, src in new.tags if src == "user"]
    keywords.write_entry(conn, mid, keywords.entry(new.content, new.context, user))
    if new.tags:
        _insert_tags(conn, mid, new.tags)
    give_public_id(conn, mid)
    return mid


def give_public_id(conn: Connection, mid: int) -> None:
    """Draw memory `mid`'s public id (another draw for one already taken), in the caller's
    transaction; a row left by a memory deleted by hand whose id came round again is replaced."""
    while True:
        pid = draw_public_id()
        if conn.execute(
            "INSERT INTO memory_public(id, public_id) VALUES (%s, %s) ON CONFLICT DO NOTHING", (mid, pid)
        ).rowcount:
            return
        if conn.execute("UPDATE memory_public SET public_id = %s WHERE id = %s", (pid, mid)).rowcount:
            return  # the left-over row; else the id drawn was taken: draw again


def stored_id(conn: Connection, public_id: int) -> int | None:
    """The stored id of the memory shown as `public_id`, or None when none is."""
    if public_id >= PUBLIC_FROM:
        row = conn.execute("SELECT id FROM memory_public WHERE public_id = %s", (public_id,)).fetchone()
    else:  # shown by its own id: one without a drawn one
        row = conn.execute(
            "SELECT m.id FROM memories m WHERE m.id = %s "
            "AND NOT EXISTS (SELECT 1 FROM memory_public p WHERE p.id = m.id)",
            (public_id,),
        ).fetchone()
    return None if row is None else int(row[0])


def select_public(conn: Connection, public_id: int) -> Experience | None:
    """The memory shown as `public_id`, or None."""
    mid = stored_id(conn, public_id)
    return None if mid is None else select_one(conn, mid)


def public_ids(conn: Connection, ids: Iterable[int]) -> dict[int, int]:
    """The public id of each stored id in `ids` (its own where it has none drawn)."""
    out = {int(i): int(i) for i in ids}
    if out:
        rows = conn.execute("SELECT id, public_id FROM memory_public WHERE id = ANY(%s)", (list(out),))
        out.update((int(i), int(p)) for i, p in rows)
    return out


def _insert_tags(conn: Connection, mid: int, tags: Sequence[tuple[str, str]]) -> None:
    conn.execute(
        "INSERT INTO memory_tags(memory_id, tag, source) SELECT %s, t, s FROM unnest(%s::text[], %s::text[]) "
        "WITH ORDINALITY AS u(t, s, n) ORDER BY n ON CONFLICT DO NOTHING",
        (mid, [t for t, _ in tags], [s for _, s in tags]),
    )


def _session_for_write(conn: Connection, session_id: str, robot: str) -> None:
    row = conn.execute("SELECT robot, ended_at FROM sessions WHERE id = %s FOR SHARE", (session_id,)).fetchone()
    if row is None or row[0] != robot:
        raise NotFound(f"no session '{session_id}' of robot {robot}; start_session returns a session_id to use")
    if row[1] is not None:  # its summary is written and its memories consolidated: the episode is over
        raise Conflict(f"session '{session_id}' has ended; start_session for the next episode")


def learn(conn: Connection, schema: str, new: NewMemory, probe: Probe, decide: Decide, now: float) -> int | Duplicate:
    """Insert `new` unless `decide` names a duplicate among the candidates — under the key's lock,
    so two concurrent learns of the same experience cannot both insert."""
    if new.session_id is not None:
        _session_for_write(conn, new.session_id, new.robot)
    key = "\x1f".join((schema, "experiences.learn", new.robot, new.collection, new.type, new.facts_hash))
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
    scope = "m.robot = %s AND m.collection = %s AND m.type = %s AND m.status = 'active' AND m.facts_hash = %s"
    base: list[Any] = [new.robot, new.collection, new.type, new.facts_hash]
    if probe.same_session:
        scope += " AND m.session_id IS NOT DISTINCT FROM %s"
        base.append(new.session_id)
    exact = [
        Candidate(int(r[0]), r[1])
        for r in conn.execute(
            f"SELECT m.id, m.content FROM memories m WHERE m.content_hash = %s AND {scope} ORDER BY m.id LIMIT %s",  # noqa: S608
            [probe.content_hash, *base, probe.hash_limit],
        )
    ]
    semantic: list[Candidate] = []
    if probe.semantic:
        cos = dict(probe.semantic)
        rows = conn.execute(
            f"SELECT m.id, m.content FROM memories m WHERE m.id = ANY(%s) AND {scope}",  # noqa: S608
            [list(cos), *base],
        ).fetchall()
        semantic = sorted(
            (Candidate(int(r[0]), r[1], cos[int(r[0])]) for r in rows), key=lambda c: -(c.similarity or 0)
        )
    dup = decide(exact, [], semantic)
    if dup is not None:
        return dup
    return insert_memory(conn, new, now)


def same_facts_ids(conn: Connection, new: NewMemory) -> list[int]:
    """The memories `learn` would accept as candidate duplicates of `new` (see the SQLite store)."""
    rows = conn.execute(
        "SELECT m.id FROM memories m WHERE m.facts_hash = %s AND m.robot = %s "
        "AND m.collection = %s AND m.type = %s AND m.status = 'active' ORDER BY m.id",
        (new.facts_hash, new.robot, new.collection, new.type),
    )
    return [int(r[0]) for r in rows]


def forget(conn: Connection, mid: int, reason: str, now: float) -> bool:
    storable(reason, "the reason")
    cur = conn.execute(
        "UPDATE memories SET status = 'forgotten', forget_reason = %s, updated_at = %s "
        "WHERE id = %s AND status = 'active'",
        (reason, now, mid),
    )
    return cur.rowcount > 0


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396's merge patch (SQLite's ``json_patch``): keys of `target` keep their place."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def update(conn: Connection, mid: int, new: NewMemory, now: float, *, keep_user_tags: bool) -> bool:
    """Replace an active memory's content, classification, context and scope; re-index it (the
    rules of the SQLite store's `update`: ``metadata.scope`` is `new`'s, the rest kept)."""
    _storable_memory(new)
    old = conn.execute(
        "SELECT metadata FROM memories WHERE id = %s AND status = 'active' FOR UPDATE", (mid,)
    ).fetchone()
    if old is None:
        return False
    kept = json.loads(old[0])
    if isinstance(kept, dict):
        kept.pop("scope", None)
    metadata = merge_patch(kept, new.metadata)
    context = _dumps(new.context)
    conn.execute(
        "UPDATE memories SET content = %s, category = %s, confidence = %s, context = %s, context_doc = %s::jsonb, "
        "content_hash = %s, facts_hash = %s, source_weight = %s, updated_at = %s, metadata = %s WHERE id = %s",
        (
            new.content,
            new.category,
            new.confidence,
            context,
            context,
            new.content_hash,
            new.facts_hash,
            new.source_weight,
            now,
            _dumps(metadata),
            mid,
        ),
    )
    conn.execute(
        "DELETE FROM memory_tags WHERE memory_id = %s AND (source = 'auto' OR (source = 'user' AND NOT %s))",
        (mid, keep_user_tags),
    )
    if new.tags:
        _insert_tags(conn, mid, new.tags)
    user = [t for t, src in new.tags if src == "user"]
    if keep_user_tags:
        stored = conn.execute(
            "SELECT tag FROM memory_tags WHERE memory_id = %s AND source = 'user' ORDER BY tag", (mid,)
        )
        user = list(dict.fromkeys([*user, *(r[0] for r in stored)]))
    keywords.write_entry(conn, mid, keywords.entry(new.content, new.context, user))
    return True


def touch(conn: Connection, counts: Mapping[int, int], now: float) -> None:
    """The access counters recall bumps (coalesced by the caller), in id order (no deadlocks)."""
    ids = sorted(counts)
    conn.execute(
        "UPDATE memories m SET access_count = m.access_count + u.n, last_accessed = %s "
        "FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, n) WHERE m.id = u.id",
        (now, ids, [counts[i] for i in ids]),
    )


def insert_session(conn: Connection, s: Session) -> None:
    conn.execute(
        "INSERT INTO sessions(id, robot, collection, context, started_at) VALUES (%s, %s, %s, %s, %s)",
        (s.id, s.robot, s.collection, _dumps(s.context), s.started_at),
    )


def end_session(conn: Connection, sid: str, outcome_score: float | None, now: float, planner: Planner) -> Ended | None:
    """Consolidate the session's memories, summarise it and mark it ended — one transaction, the
    session's row locked first (a learn into it waits, then sees it ended). None when the session
    does not exist or has already ended."""
    row = conn.execute(f"SELECT {_SESSION_COLS} FROM sessions WHERE id = %s FOR UPDATE", (sid,)).fetchone()  # noqa: S608
    if row is None:
        return None
    s = session_of(row)
    if s.ended_at is not None:
        return None
    rows = [
        consolidate.Row(int(r[0]), r[1], r[2], r[3], r[4], json.loads(r[5]), int(r[6]), r[7], r[8])
        for r in conn.execute(
            "SELECT id, type, content, category, confidence, context, access_count, created_at, collection "
            "FROM memories WHERE session_id = %s AND status = 'active' ORDER BY id",
            (sid,),
        )
    ]
    pairs = planner(rows)
    for old, rep in pairs:
        conn.execute(
            "UPDATE memories SET status = 'superseded', superseded_by = %s, updated_at = %s "
            "WHERE id = %s AND status = 'active'",
            (rep, now, old),
        )
    summary = consolidate.session_summary(
        conn.execute(
            "SELECT type, category, count(*) FROM memories WHERE session_id = %s AND status = 'active' "
            "GROUP BY 1, 2 ORDER BY 1, 2",
            (sid,),
        ),
        consolidated=len(pairs),
        duration_s=now - s.started_at,
        outcome_score=outcome_score,
        previous=s.summary,
    )
    conn.execute(
        "UPDATE sessions SET ended_at = %s, outcome_score = %s, summary = %s WHERE id = %s",
        (now, outcome_score, _dumps(summary), sid),
    )
    ended = Session(s.id, s.robot, s.collection, s.context, s.started_at, now, outcome_score, summary)
    return Ended(ended, pairs, summary)


# ---------------------------------------------------------------------------- reads
def tags_of(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    if not ids:
        return {}
    out: dict[int, list[str]] = {}
    for mid, tag in conn.execute(
        "SELECT memory_id, tag FROM memory_tags WHERE memory_id = ANY(%s) ORDER BY memory_id, source, tag",
        (list(ids),),
    ):
        out.setdefault(int(mid), []).append(tag)
    return {k: tuple(v) for k, v in out.items()}


def select_one(conn: Connection, mid: int) -> Experience | None:
    row = conn.execute(f"SELECT {COLS}, m.data FROM memories m WHERE m.id = %s", (mid,)).fetchone()  # noqa: S608
    if row is None:
        return None
    data = None if row[_N_COLS] is None else json.loads(row[_N_COLS])
    return _row(row, data, tags_of(conn, [mid]).get(mid, ()))


def select_session(conn: Connection, sid: str) -> Session | None:
    row = conn.execute(f"SELECT {_SESSION_COLS} FROM sessions WHERE id = %s", (sid,)).fetchone()  # noqa: S608
    return None if row is None else session_of(row)


def session_text(conn: Connection, sid: str, limit: int = 20) -> str:
    """The session's own words (its facts' contents), for proactive recall of related memories."""
    rows = conn.execute(
        "SELECT content FROM memories WHERE session_id = %s AND status = 'active' AND type = 'fact' "
        "ORDER BY confidence DESC, id DESC LIMIT %s",
        (sid, limit),
    ).fetchall()
    return " ".join(r[0] for r in rows)


def rows_of(conn: Connection, ids: Sequence[int], include_data: bool = False) -> dict[int, Experience]:
    """Full memories for `ids` (the few a ranking kept), with their tags."""
    if not ids:
        return {}
    data_col = "m.data" if include_data else "NULL"
    tags = tags_of(conn, ids)
    out = {}
    for r in conn.execute(f"SELECT {COLS}, {data_col} FROM memories m WHERE m.id = ANY(%s)", (list(ids),)):  # noqa: S608
        data = None if r[_N_COLS] is None else json.loads(r[_N_COLS])
        out[int(r[0])] = _row(r, data, tags.get(int(r[0]), ()))
    return out


__all__ = [
    "COLS",
    "end_session",
    "forget",
    "give_public_id",
    "insert_memory",
    "insert_session",
    "learn",
    "merge_patch",
    "public_ids",
    "rows_of",
    "same_facts_ids",
    "select_one",
    "select_public",
    "select_session",
    "session_of",
    "session_text",
    "storable",
    "stored_id",
    "tags_of",
    "touch",
    "update",
]
