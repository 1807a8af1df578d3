"""Read-only SQL for browsing the experience memory (the dashboard and REST API): filtered,
paged lists, sessions and their timelines, collections, categories and per-day counts.

Every query takes the caller's visibility (`visible`: the robots whose memories may be shown, or
None for everyone) and applies it in its ``WHERE``, like recall does. Nothing here writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from typing import Any

from robot_mcp_memory.experiences.model import Experience, Session
from robot_mcp_memory.experiences.ports import Filters, SessionRow
from robot_mcp_memory.experiences.sqlite import storage

#: ``task.success`` as the context stores it (JSON true/false → 1/0 from json_extract).
_SUCCESS = "json_extract(m.context, '$.task.success')"


def _in(column: str, values: Collection[str]) -> tuple[str, list[Any]]:
    if not values:
        return "0", []
    return f"{column} IN ({','.join('?' * len(values))})", sorted(values)


def _where(f: Filters, alias: str = "m") -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    if f.visible is not None:
        sql, p = _in(f"{alias}.robot", f.visible)
        parts.append(sql)
        params += p
    for column, value in (
        ("collection", f.collection),
        ("robot", f.robot),
        ("category", f.category),
        ("type", f.type),
        ("session_id", f.session_id),
    ):
        if value:
            parts.append(f"{alias}.{column} = ?")
            params.append(value)
    if f.status != "all":
        parts.append(f"{alias}.status = ?")
        params.append(f.status)
    if f.since is not None:
        parts.append(f"{alias}.created_at >= ?")
        params.append(f.since)
    if f.until is not None:
        parts.append(f"{alias}.created_at < ?")
        params.append(f.until)
    if f.success is not None:
        parts.append(f"{_SUCCESS.replace('m.', alias + '.')} = ?")
        params.append(1 if f.success else 0)
    return (" AND ".join(parts) or "1"), params


def page(conn: sqlite3.Connection, f: Filters, limit: int, offset: int) -> tuple[list[Experience], int]:
    """Memories passing `f`, newest first, and how many pass in all."""
    where, params = _where(f)
    total = int(conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])  # noqa: S608
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT m.id FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC LIMIT ? OFFSET ?",  # noqa: S608
            [*params, limit, offset],
        )
    ]
    rows = storage.rows_of(conn, ids)
    return [rows[i] for i in ids if i in rows], total


def sessions(
    conn: sqlite3.Connection, visible: frozenset[str] | None, collection: str, robot: str, limit: int, offset: int
) -> tuple[list[SessionRow], int]:
    parts, params = [], []
    if visible is not None:
        sql, p = _in("s.robot", visible)
        parts.append(sql)
        params += p
    if collection:
        parts.append("s.collection = ?")
        params.append(collection)
    if robot:
        parts.append("s.robot = ?")
        params.append(robot)
    where = " AND ".join(parts) or "1"
    total = int(conn.execute(f"SELECT count(*) FROM sessions s WHERE {where}", params).fetchone()[0])  # noqa: S608
    sql = (
        "SELECT s.id, s.robot, s.collection, s.context, s.started_at, s.ended_at, s.outcome_score, s.summary, "  # noqa: S608 - fixed names, values bound
        "(SELECT count(*) FROM memories m WHERE m.session_id = s.id), "
        f"(SELECT count(*) FROM memories m WHERE m.session_id = s.id AND {_SUCCESS} = 0) "
        f"FROM sessions s WHERE {where} ORDER BY s.started_at DESC, s.id LIMIT ? OFFSET ?"
    )
    rows = conn.execute(sql, [*params, limit, offset]).fetchall()
    out = [
        SessionRow(
            Session(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6], json.loads(r[7]) if r[7] else None),
            int(r[8]),
            int(r[9]),
        )
        for r in rows
    ]
    return out, total


def session(conn: sqlite3.Connection, sid: str) -> Session | None:
    return storage.select_session(conn, sid)


def session_counts(conn: sqlite3.Connection, sid: str) -> tuple[int, int]:
    """(memories, failures) of a session, counted as `sessions` counts them for the list."""
    row = conn.execute(
        f"SELECT count(*), coalesce(sum({_SUCCESS} = 0), 0) FROM memories m WHERE m.session_id = ?",  # noqa: S608
        (sid,),
    ).fetchone()
    return int(row[0]), int(row[1])


def timeline(conn: sqlite3.Connection, sid: str, limit: int) -> list[Experience]:
    """A session's memories in the order they were made (every status: the timeline is history)."""
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE session_id = ? ORDER BY created_at, id LIMIT ?", (sid, limit)
        )
    ]
    rows = storage.rows_of(conn, ids)
    return [rows[i] for i in ids if i in rows]


def counts_by(conn: sqlite3.Connection, column: str, visible: frozenset[str] | None) -> list[tuple[str, int]]:
    """Active memories per `column` value (``collection`` or ``category``)."""
    if column not in ("collection", "category"):
        raise ValueError(column)
    where, params = _where(Filters(visible))
    rows = conn.execute(
        f"SELECT m.{column}, count(*) FROM memories m WHERE {where} GROUP BY m.{column} ORDER BY count(*) DESC, 1",  # noqa: S608
        params,
    )
    return [(str(r[0]), int(r[1])) for r in rows]


def status_counts(conn: sqlite3.Connection, visible: frozenset[str] | None) -> dict[str, int]:
    where, params = _where(Filters(visible, status="all"))
    rows = conn.execute(f"SELECT m.status, count(*) FROM memories m WHERE {where} GROUP BY m.status", params)  # noqa: S608
    out = {"active": 0, "forgotten": 0, "superseded": 0}
    out.update({str(r[0]): int(r[1]) for r in rows})
    out["total"] = sum(out.values())
    return out


def per_day(conn: sqlite3.Connection, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
    """(day, successes, failures, others) of memories created since `since`, by task.success."""
    where, params = _where(Filters(visible, since=since, status="all"))
    rows = conn.execute(
        f"SELECT date(m.created_at, 'unixepoch') AS day, "  # noqa: S608
        f"sum({_SUCCESS} = 1), sum({_SUCCESS} = 0), sum({_SUCCESS} IS NULL) "
        f"FROM memories m WHERE {where} GROUP BY day ORDER BY day",
        params,
    )
    return [(str(r[0]), int(r[1] or 0), int(r[2] or 0), int(r[3] or 0)) for r in rows]


def robot_days(
    conn: sqlite3.Connection, visible: frozenset[str] | None, since: float
) -> list[tuple[str, str, int, int, int]]:
    """(robot, day, memories, successes, failures) of memories created since `since`, every
    status: what each robot wrote per calendar day (UTC), by task.success."""
    where, params = _where(Filters(visible, since=since, status="all"))
    rows = conn.execute(
        f"SELECT m.robot, date(m.created_at, 'unixepoch') AS day, count(*), "  # noqa: S608
        f"coalesce(sum({_SUCCESS} = 1), 0), coalesce(sum({_SUCCESS} = 0), 0) "
        f"FROM memories m WHERE {where} GROUP BY m.robot, day ORDER BY m.robot, day",
        params,
    )
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]


def robot_totals(
    conn: sqlite3.Connection, visible: frozenset[str] | None
) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
    """Per robot, over all time and every status: (memories, successes, failures, newest memory's
    created_at, sessions, newest session start or end)."""
    where, params = _where(Filters(visible, status="all"))
    out: dict[str, tuple[int, int, int, float | None, int, float | None]] = {}
    for r in conn.execute(
        f"SELECT m.robot, count(*), coalesce(sum({_SUCCESS} = 1), 0), coalesce(sum({_SUCCESS} = 0), 0), "  # noqa: S608
        f"max(m.created_at) FROM memories m WHERE {where} GROUP BY m.robot",
        params,
    ):
        out[str(r[0])] = (int(r[1]), int(r[2]), int(r[3]), r[4], 0, None)
    s_where, s_params = ("1", []) if visible is None else _in("s.robot", visible)
    for r in conn.execute(
        f"SELECT s.robot, count(*), max(max(s.started_at, coalesce(s.ended_at, s.started_at))) "  # noqa: S608
        f"FROM sessions s WHERE {s_where} GROUP BY s.robot",
        s_params,
    ):
        m = out.get(str(r[0]), (0, 0, 0, None, 0, None))
        out[str(r[0])] = (m[0], m[1], m[2], m[3], int(r[1]), r[2])
    return out


def session_days(
    conn: sqlite3.Connection, visible: frozenset[str] | None, since: float
) -> list[tuple[str, int, int, int]]:
    """(day, scored >= 0.5, scored < 0.5, not scored) of sessions started since `since`."""
    parts, params = ["s.started_at >= ?"], [since]
    if visible is not None:
        sql, p = _in("s.robot", visible)
        parts.append(sql)
        params += p
    rows = conn.execute(
        "SELECT date(s.started_at, 'unixepoch') AS day, "  # noqa: S608 - fixed names, values bound
        "coalesce(sum(s.outcome_score >= 0.5), 0), coalesce(sum(s.outcome_score < 0.5), 0), "
        f"coalesce(sum(s.outcome_score IS NULL), 0) FROM sessions s WHERE {' AND '.join(parts)} "
        "GROUP BY day ORDER BY day",
        params,
    )
    return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]
