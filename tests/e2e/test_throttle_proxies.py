"""The token throttle on the real server (uvicorn on a free port): ``X-Forwarded-For`` names the
client only when the peer is in ``MEMORY_TRUSTED_PROXIES``. By default no proxy is trusted, so a
guesser on the machine cannot rotate the header to escape its address's budget."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from robot_mcp_memory.tenancy.throttle import MAX_FAILURES
from tests.e2e.harness import running

pytestmark = pytest.mark.e2e

ADMIN = "admin-token-throttle-1234"


async def _logins(server_url: str, forwarded_for: list[str]) -> list[int]:
    statuses = []
    async with httpx.AsyncClient(timeout=30) as http:
        for n, address in enumerate(forwarded_for):
            r = await http.post(server_url, json={"token": f"guess-{n:04d}"}, headers={"x-forwarded-for": address})
            statuses.append(r.status_code)
    return statuses


async def test_rotating_x_forwarded_for_does_not_escape_the_throttle(tmp_path: Path) -> None:
    async with running(tmp_path, {"MEMORY_TOKEN": ADMIN, "MEMORY_EMBEDDER": "none"}) as server:
        rotating = [f"198.51.100.{n}" for n in range(1, 41)]
        statuses = await _logins(server.url("/api/login"), rotating)
    assert statuses == [401] * MAX_FAILURES + [429] * (len(rotating) - MAX_FAILURES)


async def test_a_trusted_proxy_s_forwarded_address_is_the_client(tmp_path: Path) -> None:
    env = {"MEMORY_TOKEN": ADMIN, "MEMORY_EMBEDDER": "none", "MEMORY_TRUSTED_PROXIES": "127.0.0.1,::1"}
    async with running(tmp_path, env) as server:
        url = server.url("/api/login")
        one_client = await _logins(url, ["198.51.100.7"] * (MAX_FAILURES + 1))
        others = await _logins(url, [f"203.0.113.{n}" for n in range(1, 21)])
    assert one_client == [401] * MAX_FAILURES + [429]
    assert others == [401] * 20  # each forwarded address has its own budget
