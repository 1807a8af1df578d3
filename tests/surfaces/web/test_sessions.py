"""Browser login over HTTP: the session cookie, its CSRF token, logout, the login throttle — and where
the cookie is not accepted. The stores' own rules are tests/tenancy/test_sessions.py and test_throttle.py."""

from __future__ import annotations

import json

import httpx
import pytest

from robot_mcp_memory.tenancy.middleware import CSRF_BODY
from tests.surfaces.web.conftest import ADMIN, TOKENS, Connect, doc


async def login(c: httpx.AsyncClient, token: str) -> str:
    r = await c.post("/api/login", json={"token": token})
    assert r.status_code == 200, r.text
    csrf: str = r.json()["csrf_token"]
    return csrf


async def test_login_sets_an_httponly_samesite_strict_cookie_and_never_echoes_the_token(secured: Connect) -> None:
    async with secured() as c:
        r = await c.post("/api/login", json={"token": ADMIN})
    assert r.status_code == 200
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("memory_session=")
    for attr in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="):
        assert attr in cookie
    assert ADMIN not in cookie
    assert ADMIN not in r.text
    value = cookie.split(";")[0].split("=", 1)[1]
    assert len(value) >= 43  # 32 random bytes, base64url


async def test_a_wrong_token_at_login_is_401_and_sets_no_cookie(secured: Connect) -> None:
    async with secured() as c:
        r = await c.post("/api/login", json={"token": "nope-nope-nope"})
    assert r.status_code == 401
    assert r.json()["error"] == "unauthorized"
    assert "set-cookie" not in r.headers


async def test_a_cookie_read_needs_no_csrf_token(secured: Connect) -> None:
    async with secured() as c:
        await login(c, ADMIN)
        r = await c.get("/api/processes")
        assert r.status_code == 200
        who = (await c.get("/api/session")).json()
        assert who["cookie"] is True
        assert who["csrf_token"]


async def test_a_cookie_write_without_the_csrf_header_is_403_and_with_it_ok(secured: Connect) -> None:
    async with secured() as c:
        csrf = await login(c, ADMIN)
        refused = await c.put("/api/fleet/self-improve", json={"enabled": True})
        assert refused.status_code == 403
        assert refused.json()["error"] == "forbidden"
        wrong = await c.put("/api/fleet/self-improve", json={"enabled": True}, headers={"x-csrf-token": "guess"})
        assert wrong.status_code == 403
        done = await c.put("/api/fleet/self-improve", json={"enabled": True}, headers={"x-csrf-token": csrf})
        assert done.status_code == 200
        assert done.json()["global_self_improve"] is True
        assert (await c.get("/api/fleet/groups")).json()["global_self_improve"] is True


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_every_unsafe_method_with_a_cookie_needs_the_csrf_header(secured: Connect, method: str) -> None:
    """Refused before the app runs, whatever the route: a DELETE is a write too."""
    async with secured() as c:
        csrf = await login(c, ADMIN)
        made = await c.post("/api/processes", json={"markdown": doc("p-csrf", "Kept")}, headers={"x-csrf-token": csrf})
        assert made.status_code == 200
        refused = await c.request(method, "/api/processes/p-csrf", json={})
        assert refused.status_code == 403
        assert refused.json()["detail"] == json.loads(CSRF_BODY)["detail"]
        assert (await c.get("/api/processes/p-csrf")).status_code == 200  # still there


async def test_a_bearer_write_needs_no_csrf_token(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        r = await c.put("/api/fleet/self-improve", json={"enabled": True})
    assert r.status_code == 200


async def test_a_robot_session_is_scoped_like_its_token(secured: Connect) -> None:
    async with secured() as c:
        csrf = await login(c, TOKENS["a1"])
        who = (await c.get("/api/session")).json()
        assert (who["robot_id"], who["scoped"], who["can_administer"]) == ("a1", True, False)
        r = await c.put("/api/fleet/self-improve", json={"enabled": True}, headers={"x-csrf-token": csrf})
        assert r.status_code == 403


async def test_logout_ends_the_session(secured: Connect) -> None:
    async with secured() as c:
        csrf = await login(c, ADMIN)
        r = await c.post("/api/logout", json={}, headers={"x-csrf-token": csrf})
        assert r.status_code == 200
        assert r.json() == {"logged_out": True}
        assert "Max-Age=0" in r.headers["set-cookie"]
        c.cookies.clear()
        assert (await c.get("/api/session")).status_code == 401


async def test_a_stale_cookie_is_401_even_when_sent_again(secured: Connect) -> None:
    async with secured() as c:
        csrf = await login(c, ADMIN)
        stale = c.cookies["memory_session"]
        await c.post("/api/logout", json={}, headers={"x-csrf-token": csrf})
    async with secured() as c:
        c.cookies.set("memory_session", stale)
        assert (await c.get("/api/processes")).status_code == 401


async def test_the_cookie_is_not_accepted_on_the_mcp_transports_or_metrics(secured: Connect) -> None:
    async with secured() as c:
        await login(c, ADMIN)
        for method, path in (("GET", "/metrics"), ("POST", "/mcp"), ("POST", "/messages/")):
            r = await c.request(method, path, json={})
            assert r.status_code == 401, path


async def test_a_bearer_header_wins_over_the_cookie(secured: Connect) -> None:
    async with secured() as c:
        await login(c, ADMIN)
        r = await c.get("/api/session", headers={"authorization": "Bearer wrong-token-999"})
        assert r.status_code == 401
        r = await c.get("/api/session", headers={"authorization": f"Bearer {TOKENS['b1']}"})
        assert r.json()["robot_id"] == "b1"


async def test_logging_in_again_with_a_cookie_and_no_csrf_header_works(secured: Connect) -> None:
    async with secured() as c:
        await login(c, ADMIN)
        csrf = await login(c, TOKENS["a1"])
        assert csrf
        assert (await c.get("/api/session")).json()["robot_id"] == "a1"


async def test_with_no_tokens_everything_is_open_and_login_needs_no_cookie(open_app: Connect) -> None:
    async with open_app() as c:
        who = (await c.get("/api/session")).json()
        assert (who["auth_enabled"], who["via"], who["scoped"]) == (False, "open", False)
        r = await c.post("/api/login", json={"token": "anything"})
        assert r.status_code == 200
        assert "set-cookie" not in r.headers
        assert (await c.put("/api/fleet/self-improve", json={"enabled": True})).status_code == 200


async def test_with_no_tokens_a_form_post_cannot_change_anything(open_app: Connect) -> None:
    async with open_app() as c:
        r = await c.post("/api/reindex", content=b"x=1", headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415


async def test_repeated_failed_logins_from_one_address_are_slowed_down(secured: Connect) -> None:
    async with secured() as c:
        for _ in range(10):
            assert (await c.post("/api/login", json={"token": "guess-guess-guess"})).status_code == 401
        r = await c.post("/api/login", json={"token": ADMIN})
    assert r.status_code == 429
    assert 240 <= int(r.headers["retry-after"]) <= 300  # when the window lets it in again, not a guess
    assert r.json()["error"] == "too_many_requests"
