"""Read-only SQL for browsing the experience memory on PostgreSQL (the dashboard and REST API):
the queries of `experiences/sqlite/browse_repo.py`, answering the same.

Every query takes the caller's visibility (`visible`: the robots whose memories may be shown, or
None for everyone) and applies it in its ``WHERE``. ``task.success`` counts as SQLite's
``json_extract`` reads it: a number is itself, true 1 and false 0, a string or a list neither,
and "unknown" is a missing path or a JSON null. Days are UTC calendar days of the epoch seconds.
Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from robot_mcp_memory.experiences.model import Experience
from robot_mcp_memory.experiences.ports import Filters, SessionRow
from robot_mcp_memory.experiences.postgres import records
from robot_mcp_memory.storage.postgres import Connection

_X = "({a}.context_doc -> 'task' -> 'success')"
#: The number ``task.success`` compares as (NULL when it is neither a number nor a boolean).
_SUCCESS = (
    "(CASE jsonb_typeof({x}) WHEN 'number' THEN ({x})::numeric "
    "WHEN 'boolean' THEN (CASE WHEN ({x})::boolean THEN 1 ELSE 0 END)::numeric END)"
).replace("{x}", _X)
#: ``task.success`` is missing or null.
_UNKNOWN = "({x} IS NULL OR jsonb_typeof({x}) = 'null')".replace("{x}", _X)


def _success(alias: str = "m") -> str:
    return _SUCCESS.replace("{a}", alias)


def _day(column: str) -> str:
    return f"to_char(to_timestamp({column}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


def _in(column: str, values: Collection[str]) -> tuple[str, list[Any]]:
    if not values:
        return "FALSE", []
    return f"{column} = ANY(%s::text[])", [sorted(values)]


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
            parts.append(f"{alias}.{column} = %s")
            params.append(value)
    if f.status != "all":
        parts.append(f"{alias}.status = %s")
        params.append(f.status)
    if f.since is not None:
        parts.append(f"{alias}.created_at >= %s")
        params.append(f.since)
    if f.until is not None:
        parts.append(f"{alias}.created_at < %s")
        params.append(f.until)
    if f.success is not None:
        parts.append(f"{_success(alias)} = %s")
        params.append(1 if f.success else 0)
    return (" AND ".join(parts) or "TRUE"), params


def _count(conn: Connection, sql: str, params: list[Any]) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def page(conn: Connection, f: Filters, limit: int, offset: int) -> tuple[list[Experience], int]:
    """Memories passing `f`, newest first, and how many pass in all."""
    where, params = _where(f)
    total = _count(conn, f"SELECT count(*) FROM memories m WHERE {where}", params)  # noqa: S608
    ids = [
        int(r[0])
        for r in conn.execute(
            f"SELECT m.id FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC LIMIT %s OFFSET %s",  # noqa: S608
            [*params, limit, offset],
        )
    ]
    rows = records.rows_of(conn, ids)
    return [rows[i] for i in ids if i in rows], total


def sessions(
    conn: Connection, visible: frozenset[str] | None, collection: str, robot: str, limit: int, offset: int
) -> tuple[list[SessionRow], int]:
    parts: list[str] = []
    params: list[Any] = []
    if visible is not None:
        sql, p = _in("s.robot", visible)
        parts.append(sql)
        params += p
    if collection:
        parts.append("s.collection = %s")
        params.append(collection)
    if robot:
        parts.append("s.robot = %s")
        params.append(robot)
    where = " AND ".join(parts) or "TRUE"
    total = _count(conn, f"SELECT count(*) FROM sessions s WHERE {where}", params)  # noqa: S608
    sql = (
        "SELECT s.id, s.robot, s.collection, s.context, s.started_at, s.ended_at, s.outcome_score, s.summary, "  # noqa: S608 - fixed names, values bound
        "(SELECT count(*) FROM memories m WHERE m.session_id = s.id), "
        f"(SELECT count(*) FROM memories m WHERE m.session_id = s.id AND {_success()} = 0) "
        f"FROM sessions s WHERE {where} ORDER BY s.started_at DESC, s.id LIMIT %s OFFSET %s"
    )
    rows = conn.execute(sql, [*params, limit, offset]).fetchall()
    return [SessionRow(records.session_of(r), int(r[8]), int(r[9])) for r in rows], total


def session_counts(conn: Connection, sid: str) -> tuple[int, int]:
    """(memories, failures) of a session, counted as `sessions` counts them for the list."""
    row = conn.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {_success()} = 0) FROM memories m WHERE m.session_id = %s",  # noqa: S608
        (sid,),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def timeline(conn: Connection, sid: str, limit: int) -> list[Experience]:
    """A session's memories in the order they were made (every status: the timeline is history)."""
    ids = [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM memories WHERE session_id = %s ORDER BY created_at, id LIMIT %s", (sid, limit)
        )
    ]
    rows = records.rows_of(conn, ids)
    return [rows[i] for i in ids if i in rows]


def counts_by(conn: Connection, column: str, visible: frozenset[str] | None) -> list[tuple[str, int]]:
    """Active memories per `column` value (``collection`` or ``category``)."""
    if column not in ("collection", "category"):
        raise ValueError(column)
    where, params = _where(Filters(visible))
    rows = conn.execute(
        f"SELECT m.{column}, count(*) FROM memories m WHERE {where} GROUP BY m.{column} "  # noqa: S608
        f"ORDER BY count(*) DESC, m.{column}",
        params,
    )
    return [(str(r[0]), int(r[1])) for r in rows]


def status_counts(conn: Connection, visible: frozenset[str] | None) -> dict[str, int]:
    where, params = _where(Filters(visible, status="all"))
    rows = conn.execute(f"SELECT m.status, count(*) FROM memories m WHERE {where} GROUP BY m.status", params)  # noqa: S608
    out = {"active": 0, "forgotten": 0, "superseded": 0}
    out.update({str(r[0]): int(r[1]) for r in rows})
    out["total"] = sum(out.values())
    return out


def per_day(conn: Connection, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
    """(day, successes, failures, others) of memories created since `since`, by task.success."""
    where, params = _where(Filters(visible, since=since, status="all"))
    s, unknown = _success(), _UNKNOWN.replace("{a}", "m")
    rows = conn.execute(
        f"SELECT {_day('m.created_at')} AS day, count(*) FILTER (WHERE {s} = 1), "  # noqa: S608
        f"count(*) FILTER (WHERE {s} = 0), count(*) FILTER (WHERE {unknown}) "
        f"FROM memories m WHERE {where} GROUP BY day ORDER BY day",
        params,
    )
    return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]


def robot_days(conn: Connection, visible: frozenset[str] | None, since: float) -> list[tuple[str, str, int, int, int]]:
    """(robot, day, memories, successes, failures) of memories created since `since`, every status."""
    where, params = _where(Filters(visible, since=since, status="all"))
    s = _success()
    rows = conn.execute(
        f"SELECT m.robot, {_day('m.created_at')} AS day, count(*), "  # noqa: S608
        f"count(*) FILTER (WHERE {s} = 1), count(*) FILTER (WHERE {s} = 0) "
        f"FROM memories m WHERE {where} GROUP BY m.robot, day ORDER BY m.robot, day",
        params,
    )
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]


def robot_totals(
    conn: Connection, visible: frozenset[str] | None
) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
    """Per robot, over all time and every status: (memories, successes, failures, newest memory's
    created_at, sessions, newest session start or end)."""
    where, params = _where(Filters(visible, status="all"))
    s = _success()
    out: dict[str, tuple[int, int, int, float | None, int, float | None]] = {}
    for r in conn.execute(
        f"SELECT m.robot, count(*), count(*) FILTER (WHERE {s} = 1), count(*) FILTER (WHERE {s} = 0), "  # noqa: S608
        f"max(m.created_at) FROM memories m WHERE {where} GROUP BY m.robot",
        params,
    ):
        out[str(r[0])] = (int(r[1]), int(r[2]), int(r[3]), r[4], 0, None)
    s_where, s_params = ("TRUE", []) if visible is None else _in("s.robot", visible)
    for r in conn.execute(
        "SELECT s.robot, count(*), max(greatest(s.started_at, coalesce(s.ended_at, s.started_at))) "  # noqa: S608
        f"FROM sessions s WHERE {s_where} GROUP BY s.robot",
        s_params,
    ):
        m = out.get(str(r[0]), (0, 0, 0, None, 0, None))
        out[str(r[0])] = (m[0], m[1], m[2], m[3], int(r[1]), r[2])
    return out


def session_days(conn: Connection, visible: frozenset[str] | None, since: float) -> list[tuple[str, int, int, int]]:
    """(day, scored >= 0.5, scored < 0.5, not scored) of sessions started since `since`."""
    parts, params = ["s.started_at >= %s"], [since]
    if visible is not None:
        sql, p = _in("s.robot", visible)
        parts.append(sql)
        params += p
    rows = conn.execute(
        f"SELECT {_day('s.started_at')} AS day, "  # noqa: S608 - fixed names, values bound
        "count(*) FILTER (WHERE s.outcome_score >= 0.5), count(*) FILTER (WHERE s.outcome_score < 0.5), "
        f"count(*) FILTER (WHERE s.outcome_score IS NULL) FROM sessions s WHERE {' AND '.join(parts)} "
        "GROUP BY day ORDER BY day",
        params,
    )
    return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]


__all__ = [
    "counts_by",
    "page",
    "per_day",
    "robot_days",
    "robot_totals",
    "session_counts",
    "sessions",
    "status_counts",
    "timeline",
]
