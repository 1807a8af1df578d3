"""Bearer tokens: the token-map grammar and the constant-time check. Pure (no I/O, no web).

Grammar of ``MEMORY_ROBOT_TOKENS``::

    map    := entry ("," entry)*
    entry  := robot ":" token          (whitespace around either part is ignored)
    robot  := [A-Za-z0-9][A-Za-z0-9_.-]{0,63}
    token  := 8 or more characters, none of them whitespace or ","

Fail-fast: an empty entry, a missing ``:``, an empty or malformed robot, a short token, a robot
listed twice, a token listed twice, or a robot token equal to ``MEMORY_TOKEN`` is a startup
error. Messages name the entry by position and robot, never the token.

`TokenAuth.resolve` hashes the presented token and compares its SHA-256 digest against the digest
of **every** known token with `hmac.compare_digest`, without an early exit, so neither the
position of a match nor a prefix leaks through timing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from robot_mcp_memory.tenancy.principal import ADMIN, Principal

ROBOT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
MIN_TOKEN = 8


#: Robot ids no robot may hold (`fleet.RESERVED_ROBOT_IDS` is this set).
RESERVED_ROBOT_IDS = frozenset({"shared", "unknown"})


def parse_robot_tokens(raw: str | None, admin_token: str | None = None) -> dict[str, str]:
    """Parse the token map into ``{robot_id: token}``; returns a list of problems via ValueError."""
    if raw is None or not raw.strip():
        return {}
    problems: list[str] = []
    out: dict[str, str] = {}
    seen_tokens: dict[str, str] = {}
    for n, entry in enumerate(raw.split(","), start=1):
        entry = entry.strip()
        where = f"MEMORY_ROBOT_TOKENS entry #{n}"
        if not entry:
            problems.append(f"{where} is empty (check for a doubled or trailing comma)")
            continue
        if ":" not in entry:
            problems.append(f"{where} has no ':' — write robot:token")
            continue
        robot, token = (p.strip() for p in entry.split(":", 1))
        if not robot:
            problems.append(f"{where} has an empty robot id")
            continue
        if not ROBOT_RE.match(robot):
            problems.append(f"{where}: robot id must be letters, digits, '_', '.', '-' (max 64)")
            continue
        if robot.lower() in RESERVED_ROBOT_IDS:
            problems.append(
                f"{where}: '{robot}' is reserved ('shared' marks fleet-wide documents, 'unknown' no provenance); "
                "a token for it would write fleet-wide advice"
            )
            continue
        if not token:
            problems.append(f"{where} (robot {robot}) has an empty token")
            continue
        if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
            problems.append(f"{where} (robot {robot}): token must be {MIN_TOKEN}+ characters without spaces")
            continue
        if robot in out:
            problems.append(f"{where}: robot {robot} is listed twice")
            continue
        if token in seen_tokens:
            problems.append(f"{where} (robot {robot}) reuses the token of robot {seen_tokens[token]}")
            continue
        if admin_token is not None and hmac.compare_digest(token.encode(), admin_token.encode()):
            problems.append(f"{where} (robot {robot}) uses the admin MEMORY_TOKEN; give each robot its own")
            continue
        seen_tokens[token] = robot
        out[robot] = token
    if problems:
        raise ValueError(problems)
    return out


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    principal: Principal


class TokenAuth:
    """Resolves a presented bearer token to a principal, in constant time over all entries."""

    def __init__(self, admin_token: str | None, robot_tokens: dict[str, str]) -> None:
        entries = [_Entry(_digest(t), Principal.robot(r)) for r, t in robot_tokens.items()]
        if admin_token is not None:
            entries.append(_Entry(_digest(admin_token), ADMIN))
        self._entries = tuple(entries)
        #: The comparison used for every entry; a test wraps it to pin that all are compared.
        self.compare: Callable[[bytes, bytes], bool] = hmac.compare_digest

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def resolve(self, presented: str) -> Principal | None:
        digest = _digest(presented)
        found: Principal | None = None
        for entry in self._entries:  # no early exit: every entry is compared
            if self.compare(digest, entry.digest):
                found = entry.principal
        return found


def generate_token() -> str:
    """A fresh random token (32 bytes, URL-safe)."""
    return secrets.token_urlsafe(32)
