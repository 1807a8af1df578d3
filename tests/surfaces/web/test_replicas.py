"""Two dashboard replicas behind one load balancer, sharing one PostgreSQL schema for the browser
sessions and the token throttle: a request may land on either, and nothing a user did on one is
missing on the other. Each replica is the REST API and dashboard behind the tenancy middleware, as
the ``web`` command serves them, over its own `PostgresStore`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import ASGIApp

from robot_mcp_memory.app import Memory
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.surfaces.web import build_web, problems
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle
from robot_mcp_memory.tenancy.throttle import MAX_FAILURES, WINDOW_S
from robot_mcp_memory.tenancy.tokens import TokenAuth
from tests.surfaces.web.conftest import ADMIN, BASE, TOKENS

pytestmark = pytest.mark.postgres

#: `on(replica, address=…)` → a client whose requests reach that replica (0 or 1) from that address.
On = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def replica(memory: Memory, db: PostgresStore) -> ASGIApp:
    auth = TokenAuth(memory.settings.admin_token, memory.settings.robot_tokens)
    web = build_web(memory, auth, sessions=PostgresSessions(db), throttle=PostgresThrottle(db))
    app = Starlette(routes=web.routes, exception_handlers=problems.EXCEPTION_HANDLERS)
    return web.protect(app, auth)


@pytest.fixture
def on(secured_memory: Memory, pg_store: PostgresStore, pg_url: str) -> Iterator[On]:
    second = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=4)
    apps = [replica(secured_memory, pg_store), replica(secured_memory, second)]

    @asynccontextmanager
    async def client(n: int, address: str = "10.9.0.1") -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=apps[n], client=(address, 41000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            yield c

    try:
        yield client
    finally:
        second.close()


async def test_a_login_on_one_replica_holds_on_the_other_and_a_logout_there_ends_it_on_both(on: On) -> None:
    async with on(0) as first, on(1) as second:
        r = await first.post("/api/login", json={"token": TOKENS["a1"]})
        assert r.status_code == 200
        csrf = r.json()["csrf_token"]
        second.cookies.set("memory_session", first.cookies["memory_session"])
        who = await second.get("/api/session")
        assert who.status_code == 200
        assert (who.json()["robot_id"], who.json()["csrf_token"]) == ("a1", csrf)
        assert (await second.post("/api/logout", json={}, headers={"x-csrf-token": "not-it"})).status_code == 403
        out = await second.post("/api/logout", json={}, headers={"x-csrf-token": csrf})
        assert out.json() == {"logged_out": True}
        assert (await first.get("/api/session")).status_code == 401  # the cookie it still sends is dead


async def test_guesses_on_both_replicas_add_up_to_one_hold_and_the_right_token_still_gets_in(on: On) -> None:
    async with on(0) as first, on(1) as second, on(1, "10.9.0.2") as elsewhere:
        assert (await first.post("/api/login", json={"token": ADMIN})).status_code == 200
        for n in range(MAX_FAILURES):
            if n % 2:
                r = await second.get("/api/processes", headers={"authorization": f"Bearer guess-{n}"})
            else:
                r = await first.post("/api/login", json={"token": f"guess-{n}"})
            assert r.status_code == 401
        for c in (first, second):
            held = await c.post("/api/login", json={"token": "guess-more"})
            assert held.status_code == 429
            assert 1 <= int(held.headers["retry-after"]) <= WINDOW_S
        assert (await second.post("/api/login", json={"token": TOKENS["b1"]})).status_code == 429  # untrusted here
        assert (await second.post("/api/login", json={"token": ADMIN})).status_code == 200  # trusted here, on 0
        assert (await elsewhere.post("/api/login", json={"token": "guess-x"})).status_code == 401  # not held
