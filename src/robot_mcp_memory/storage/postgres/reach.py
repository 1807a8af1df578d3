"""Reaching a PostgreSQL server once, before a command opens its pool: the operator learns at once
*why* it cannot be used — the URL is malformed, nothing answers, the password is refused, the
database does not exist — instead of a pool waiting out its timeout with one generic line.

Invariant: **no message carries the password.** A server is named by `where` (user, host, port,
database, from the parsed URL without its password); the driver's own text is never shown, since
a parse error may quote the URL.
"""

from __future__ import annotations

import psycopg
from psycopg import conninfo

from robot_mcp_memory.errors import StoreFailed

#: SQLSTATEs of a server that answered and refused: a wrong user or password, a missing database.
_AUTH = ("28P01", "28000")
_NO_DATABASE = "3D000"


def where(url: str) -> str:
    """``user@host:port/database`` of `url` — never its password — or ``the URL`` when it does not parse."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the URL"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"{user}{host}:{port}/{parts.get('dbname') or '(default database)'}"


def reach(url: str, *, timeout_s: float = 10.0) -> None:
    """Open and close one connection to `url`; `StoreFailed` saying what to fix when it cannot."""
    try:
        conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise StoreFailed(
            "the PostgreSQL URL cannot be read (check its host, port and options: "
            "postgresql://user:password@host:5432/database)"
        ) from exc
    at = where(url)
    try:
        psycopg.connect(url, connect_timeout=max(1, round(timeout_s)), autocommit=True).close()
    except psycopg.Error as exc:
        state = getattr(exc, "sqlstate", None)
        if state in _AUTH:
            raise StoreFailed(f"PostgreSQL at {at} refused the user or its password; check both in the URL") from exc
        if state == _NO_DATABASE:
            raise StoreFailed(
                f"PostgreSQL at {at} has no such database; create it (createdb) or name an existing one"
            ) from exc
        raise StoreFailed(
            f"could not reach PostgreSQL at {at} within {timeout_s:.0f} s; check that the server is up "
            "and listens there, and the URL's port and options"
        ) from exc
