"""The token throttle over real HTTP (the whole `http_app` in-process through httpx, each client at
its own address): it covers every way a token is presented, a success does not reset it, and the
right token is never locked out — while a right guess from a held address looks like a wrong one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.server import build_server, http_app
from robot_mcp_memory.tenancy.throttle import MAX_FAILURES, WINDOW_S
from tests.surfaces.web.conftest import ADMIN, BASE, TOKENS

From = Callable[[str], AbstractAsyncContextManager[httpx.AsyncClient]]

#: One bearer request per way in: the MCP transports (SSE stream, SSE post, Streamable HTTP) and REST.
ENDPOINTS = [
    ("GET", "/sse"),
    ("POST", "/messages/?session_id=0123456789abcdef0123456789abcdef"),
    ("POST", "/mcp"),
    ("GET", "/api/processes"),
]


@pytest.fixture
def at(secured_memory: Memory) -> From:
    """`at(address)` → a client of one app (one throttle) whose requests come from `address`."""
    app = http_app(secured_memory, build_server(secured_memory))

    @asynccontextmanager
    async def client(address: str) -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            yield c

    return client


async def guess(c: httpx.AsyncClient, method: str, path: str, token: str) -> httpx.Response:
    return await c.request(method, path, headers={"authorization": f"Bearer {token}"}, json={})


def assert_throttled(r: httpx.Response) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_requests"
    assert 1 <= int(r.headers["retry-after"]) <= WINDOW_S


async def test_bearer_guesses_on_every_endpoint_count_and_are_refused_once_over_budget(at: From) -> None:
    async with at("10.0.0.1") as c:
        for n in range(MAX_FAILURES):
            r = await guess(c, *ENDPOINTS[n % len(ENDPOINTS)], f"guess-{n:04d}")
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
        statuses = [(await guess(c, *ENDPOINTS[n % len(ENDPOINTS)], f"guess-{n:04d}")).status_code for n in range(1000)]
        for method, path in ENDPOINTS:
            assert_throttled(await guess(c, method, path, "one-more-guess"))
        assert_throttled(await c.post("/api/login", json={"token": "and-a-login"}))
    assert statuses == [429] * 1000


async def test_a_login_with_another_valid_token_does_not_reset_the_count(at: From) -> None:
    async with at("10.0.0.2") as c:
        for n in range(MAX_FAILURES - 1):
            assert (await c.post("/api/login", json={"token": f"admin-guess-{n}"})).status_code == 401
        assert (await c.post("/api/login", json={"token": TOKENS["a1"]})).status_code == 200
        assert (await guess(c, "GET", "/api/processes", "admin-guess-last")).status_code == 401
        assert_throttled(await c.post("/api/login", json={"token": "admin-guess-after"}))


async def test_the_right_token_still_gets_in_while_guesses_are_refused(at: From) -> None:
    async with at("10.0.0.3") as admin_desk, at("10.0.0.4") as elsewhere, at("10.0.0.5") as fresh:
        assert (await admin_desk.post("/api/login", json={"token": ADMIN})).status_code == 200
        for n in range(MAX_FAILURES):  # guesses from elsewhere, and from the admin's own address
            assert (await elsewhere.post("/api/login", json={"token": f"guess-{n}-x"})).status_code == 401
            assert (await guess(admin_desk, "GET", "/api/processes", f"guess-{n}-y")).status_code == 401
        assert_throttled(await admin_desk.post("/api/login", json={"token": "guess-z"}))
        assert_throttled(await elsewhere.post("/api/login", json={"token": "guess-z"}))

        assert (await admin_desk.post("/api/login", json={"token": ADMIN})).status_code == 200
        assert (await guess(admin_desk, "GET", "/api/processes", ADMIN)).status_code == 200
        assert (await fresh.post("/api/login", json={"token": ADMIN})).status_code == 200
        assert (await guess(fresh, "GET", "/api/processes", "guess-w")).status_code == 401  # not held

        # No oracle: at a held address a right token never used there is refused like a wrong one.
        right_r = await elsewhere.post("/api/login", json={"token": ADMIN})
        wrong_r = await elsewhere.post("/api/login", json={"token": "guess-v"})
        assert_throttled(right_r)
        assert_throttled(wrong_r)
        assert right_r.json() == wrong_r.json()
        assert right_r.headers["retry-after"] == wrong_r.headers["retry-after"]
        bearer_right = await guess(elsewhere, "GET", "/api/processes", TOKENS["b1"])
        bearer_wrong = await guess(elsewhere, "GET", "/api/processes", "guess-u")
        assert_throttled(bearer_right)
        assert bearer_right.content == bearer_wrong.content


async def test_healthz_answers_a_held_address_as_it_answers_anyone(at: From) -> None:
    async with at("10.0.0.6") as c:
        for n in range(MAX_FAILURES + 1):
            await guess(c, "GET", "/api/processes", f"guess-{n}")
        r = await guess(c, "GET", "/healthz", "guess-again")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


async def test_the_openapi_document_lists_429_on_every_protected_endpoint(at: From) -> None:
    async with at("10.0.0.7") as c:
        doc = (await c.get("/api/openapi.json")).json()
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if op.get("security") != []:  # not public
                assert "429" in op["responses"], f"{method.upper()} {path}"
