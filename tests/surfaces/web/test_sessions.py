"""Browser login: the session cookie, its CSRF token, logout, expiry — and where it is not accepted."""

from __future__ import annotations

import json

import httpx
import pytest

from robot_mcp_memory.tenancy.middleware import CSRF_BODY
from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL
from robot_mcp_memory.tenancy.principal import Principal
from robot_mcp_memory.tenancy.sessions import SessionStore
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


def test_sessions_expire_and_are_capped() -> None:
    now = [1000.0]
    store = SessionStore(ttl_s=60, max_sessions=2, clock=lambda: now[0])
    first, _ = store.create(ADMIN_PRINCIPAL)
    assert store.lookup(first) is not None
    now[0] += 59.999
    assert store.lookup(first) is not None
    now[0] = 1060.0  # the ttl is absolute: at exactly ttl_s the session is over
    assert store.lookup(first) is None
    a, _ = store.create(Principal.robot("a"))
    b, _ = store.create(Principal.robot("b"))
    c, _ = store.create(Principal.robot("c"))
    assert store.lookup(a) is None  # the oldest went first
    assert store.lookup(b) is not None
    assert store.lookup(c) is not None
    assert len(store) == 2


def test_one_robot_logging_in_over_and_over_drops_only_its_own_oldest_sessions() -> None:
    """A robot token logging in 10,000 times logged the admin out (found by review)."""
    store = SessionStore(max_sessions=10, per_robot=3)
    admin, _ = store.create(ADMIN_PRINCIPAL)
    other, _ = store.create(Principal.robot("b"))
    robot = [store.create(Principal.robot("a"))[0] for _ in range(50)]
    assert store.lookup(admin) is not None
    assert store.lookup(other) is not None
    assert [store.lookup(s) is not None for s in robot[-4:]] == [False, True, True, True]
    assert len(store) == 5


def test_sessions_are_stored_by_digest_not_by_id() -> None:
    store = SessionStore()
    sid, session = store.create(ADMIN_PRINCIPAL)
    assert sid not in repr(store._sessions)
    assert session.csrf_token != sid
    assert store.end(sid) is True
    assert store.end(sid) is False


async def test_repeated_failed_logins_from_one_address_are_slowed_down(secured: Connect) -> None:
    async with secured() as c:
        for _ in range(10):
            assert (await c.post("/api/login", json={"token": "guess-guess-guess"})).status_code == 401
        r = await c.post("/api/login", json={"token": ADMIN})
    assert r.status_code == 429
    assert 240 <= int(r.headers["retry-after"]) <= 300  # when the window lets it in again, not a guess
    assert r.json()["error"] == "too_many_requests"


def test_the_throttle_forgets_old_failures_and_a_success_does_not_clear_them() -> None:
    from robot_mcp_memory.tenancy.throttle import AuthThrottle

    now = [0.0]
    t = AuthThrottle(max_failures=2, window_s=10, clock=lambda: now[0])
    assert t.attempt("a", None) == 0
    now[0] = 3
    assert t.attempt("a", None) == 0
    assert not t.allows("a")
    assert t.retry_after("a") == 7  # the first failure leaves the window at 10
    assert t.attempt("a", None) == 7  # held: refused, and not counted
    assert t.allows("b")
    assert t.retry_after("b") == 0
    now[0] = 10
    assert t.allows("a")
    now[0] = 11
    assert t.attempt("a", "robot:a1") == 0  # a success ...
    assert t.attempt("a", None) == 0
    assert not t.allows("a")  # ... left the failure before it counted


def test_a_held_address_still_admits_a_token_trusted_there_and_nothing_else() -> None:
    from robot_mcp_memory.tenancy.throttle import AuthThrottle

    now = [0.0]
    t = AuthThrottle(max_failures=2, window_s=10, trust_s=100, clock=lambda: now[0])
    assert t.attempt("a", "admin") == 0  # the admin got in from a before the guessing
    assert t.attempt("a", None) == t.attempt("a", None) == 0
    now[0] = 4
    assert t.attempt("a", "admin") == 0  # held, but trusted here
    assert t.attempt("a", "robot:a1") == t.attempt("a", None) == 6  # a right guess looks like a wrong one
    assert t.attempt("b", "robot:a1") == 0  # another address is not held by a's guesses
    now[0] = 105  # trust ends trust_s after the last use (4)
    assert t.attempt("a", None) == t.attempt("a", None) == 0
    assert t.attempt("a", "admin") == 10


def test_an_ipv6_host_cannot_rotate_through_its_64_for_more_guesses() -> None:
    from robot_mcp_memory.tenancy.throttle import AuthThrottle

    t = AuthThrottle(max_failures=2, window_s=10, clock=lambda: 0.0)
    assert t.attempt("2001:db8:1:2::1", None) == 0
    assert t.attempt("2001:db8:1:2:ffff:0:0:7", None) == 0
    assert not t.allows("2001:db8:1:2::9")  # the same /64
    assert t.allows("2001:db8:1:3::1")  # the next /64 is someone else
    assert t.attempt("::ffff:192.0.2.1", None) == t.attempt("192.0.2.1", None) == 0
    assert not t.allows("192.0.2.1")  # an IPv4-mapped address is that IPv4 address
    assert t.allows("192.0.2.2")
