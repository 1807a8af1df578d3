"""DNS-rebinding protection for the REST API and dashboard, matching the MCP transports': the
``Host`` header must name this server — a loopback name, or one listed in
``MEMORY_ALLOWED_HOSTS``. Without it, a foreign page whose name was re-pointed at 127.0.0.1 could
read an open (token-less) server through the visitor's browser."""

from __future__ import annotations

from collections.abc import Iterable

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def split_host(value: str) -> tuple[str, str | None]:
    """``Name:8080`` → (``name``, ``8080``); ``[::1]`` → (``[::1]``, None)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = value.partition(":")
    return host, port if sep else None


class HostGuard:
    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.rules: list[tuple[str, str | None]] = [(h, None) for h in LOOPBACK]
        for entry in allowed:
            host, port = split_host(entry)
            self.rules.append((host, None if port in (None, "*") else port))

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        host, port = split_host(header)
        return any(host == h and (p is None or p == port) for h, p in self.rules)
