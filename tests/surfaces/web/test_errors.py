"""One JSON error shape, ``{"error": code, "detail": …}``, with the right status — pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import Busy
from robot_mcp_memory.surfaces.web.routing import MAX_BODY
from tests.surfaces.web.conftest import ADMIN, TOKENS, Connect, doc


def shape(body: dict[str, object], code: str) -> None:
    assert body["error"] == code
    assert isinstance(body["detail"], str)
    assert body["detail"]
    assert set(body) <= {"error", "detail", "reference"}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("GET", "/api/processes", {"params": {"limit": "0"}}, 400, "invalid"),
        ("GET", "/api/processes", {"params": {"limit": "lots"}}, 400, "invalid"),
        ("GET", "/api/processes/NOT_A_SLUG", {}, 400, "invalid"),
        ("POST", "/api/processes", {"json": {"markdown": "no frontmatter"}}, 400, "invalid"),
        ("POST", "/api/processes", {"json": {"markdown": "x", "extra": 1}}, 400, "invalid"),
        ("POST", "/api/processes", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400,
         "invalid"),
        ("POST", "/api/processes", {"content": b"[1]", "headers": {"content-type": "application/json"}}, 400,
         "invalid"),
        ("POST", "/api/processes", {"content": b"markdown=x", "headers": {"content-type": "text/plain"}}, 415,
         "unsupported_media_type"),
        ("GET", "/api/processes/missing", {}, 404, "not_found"),
        ("GET", "/api/no-such-endpoint", {}, 404, "not_found"),
        ("GET", "/api/sessions/a%0Ab/memories", {}, 404, "not_found"),  # a newline no route pattern matches
        ("GET", "/api/x%0A", {}, 404, "not_found"),
        ("GET", "/no-such-page", {}, 404, "not_found"),
        ("PATCH", "/api/processes", {}, 405, "method_not_allowed"),
        ("PUT", "/api/fleet/robots/ghost/group", {"json": {"group": ""}}, 404, "not_found"),
    ],
)  # fmt: skip
async def test_refusals_share_one_shape_and_status(
    secured: Connect, method: str, path: str, kwargs: dict[str, object], status: int, code: str
) -> None:
    async with secured(ADMIN) as c:
        r = await c.request(method, path, **kwargs)  # type: ignore[arg-type] # kwargs per row
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    shape(r.json(), code)


async def test_no_token_and_a_wrong_token_are_401_with_www_authenticate(secured: Connect) -> None:
    for token in (None, "wrong-token-123"):
        async with secured(token) as c:
            r = await c.get("/api/processes")
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
        shape(r.json(), "unauthorized")


async def test_forbidden_is_403(secured: Connect) -> None:
    async with secured(TOKENS["a1"]) as c:
        r = await c.put("/api/fleet/self-improve", json={"enabled": True})
    assert r.status_code == 403
    shape(r.json(), "forbidden")


async def test_a_conflict_is_409(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        assert (await c.post("/api/fleet/robots", json={"robot_id": "rap-1"})).status_code == 200
        r = await c.post("/api/fleet/robots", json={"robot_id": "RAP-1"})
    assert r.status_code == 409
    shape(r.json(), "conflict")


async def test_a_body_over_the_limit_is_413(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        big = json.dumps({"markdown": "x" * (MAX_BODY + 1)}).encode()
        r = await c.post("/api/processes", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    shape(r.json(), "too_large")


async def test_busy_is_503_with_retry_after(
    secured: Connect, secured_memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with secured(ADMIN) as c:
        await c.post("/api/processes", json={"markdown": doc("p-1", "One")})

        async def overloaded(*_: object, **__: object) -> None:
            raise Busy("the server is overloaded and did not count this outcome; retry in a few seconds")

        monkeypatch.setattr(secured_memory.process_store, "record_outcome", overloaded)  # where Busy arises
        r = await c.post("/api/processes/p-1/outcomes", json={"success": True})
    assert r.status_code == 503
    assert r.headers["retry-after"]
    shape(r.json(), "busy")


async def test_an_unexpected_error_is_500_with_a_reference_and_no_internals(
    secured: Connect, secured_memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "SELECT * FROM processes -- /srv/data/index.db token=admin-token-1234"

    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError(secret)

    monkeypatch.setattr(secured_memory.processes, "list", broken)
    async with secured(ADMIN) as c:
        r = await c.get("/api/processes")
    assert r.status_code == 500
    body = r.json()
    shape(body, "internal")
    assert isinstance(body["reference"], str)
    assert len(body["reference"]) == 16
    for leak in ("SELECT", "index.db", "admin-token", "RuntimeError"):
        assert leak not in r.text


@pytest.mark.parametrize("path", ["/api/processes", "/api/openapi.json", "/", "/static/js/app.js"])
async def test_a_foreign_host_header_is_refused_like_on_the_mcp_transports(secured: Connect, path: str) -> None:
    """DNS rebinding: a page at attacker.example re-pointed at this server must not read it."""
    async with secured(ADMIN) as c:
        r = await c.get(path, headers={"host": "attacker.example:9103"})
    assert r.status_code == 421
    shape(r.json(), "misdirected")


def test_allowed_hosts_match_by_name_and_port() -> None:
    from robot_mcp_memory.surfaces.web.hosts import HostGuard

    guard = HostGuard(["memory.lan", "10.0.0.5:9103"])
    assert guard.allows("127.0.0.1:9103")
    assert guard.allows("localhost")
    assert guard.allows("[::1]:8080")
    assert guard.allows("memory.lan:9103")
    assert guard.allows("10.0.0.5:9103")
    assert not guard.allows("10.0.0.5:9104")
    assert not guard.allows("memory.lan.evil.example")
    assert not guard.allows(None)


async def test_a_body_nested_thousands_deep_is_invalid_not_internal(secured: Connect) -> None:
    """json.loads raised RecursionError, which the body reader did not catch: a 500 (found by review)."""
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    async with secured(ADMIN) as c:
        for path in ("/api/login", "/api/processes"):
            r = await c.post(path, content=deep, headers={"content-type": "application/json"})
            assert r.status_code == 400, (path, r.text[:200])
            shape(r.json(), "invalid")


async def test_a_refused_login_says_which_scheme_to_use(secured: Connect) -> None:
    async with secured() as c:
        r = await c.post("/api/login", json={"token": "wrong-token-xx"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


async def test_any_method_gets_a_json_405_naming_the_right_ones(secured: Connect) -> None:
    """TRACE or PROPFIND got Starlette's plain-text 405 listing every method (found by review)."""
    async with secured(ADMIN) as c:
        for method, path, allow in [
            ("TRACE", "/api/processes", "GET, POST"),
            ("PROPFIND", "/api/stats", "GET"),
            ("POST", "/api/openapi.json", "GET"),
            ("DELETE", "/api/openapi.json", "GET"),
        ]:
            r = await c.request(method, path)
            assert r.status_code == 405, (method, path, r.text[:200])
            shape(r.json(), "method_not_allowed")
            assert r.headers["allow"] == allow, (method, path)
        assert (await c.head("/api/processes")).status_code == 200
        assert (await c.get("/api/openapi.json")).status_code == 200


def test_the_mcp_transports_read_allowed_hosts_as_the_rest_api_does(tmp_path: Path) -> None:
    """``memory-host:*`` and ``Memory-Host`` let /api in but not /mcp (found by review)."""
    from robot_mcp_memory.config import Settings
    from robot_mcp_memory.surfaces.mcp.server import transport_security

    memory = Memory.open(
        Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_ALLOWED_HOSTS": "memory-host:*,Other-Host"})
    )
    try:
        hosts = transport_security(memory).allowed_hosts
    finally:
        memory.close()
    assert {"memory-host", "memory-host:*", "other-host", "other-host:*"} <= set(hosts)


async def test_a_post_that_needs_no_body_takes_an_empty_one_but_still_only_as_json(secured: Connect) -> None:
    """`curl -X POST -H 'Content-Type: application/json' /api/reindex` got "the body is not
    valid JSON"; the JSON content type stays required (a cross-site form cannot send it)."""
    async with secured(ADMIN) as c:
        r = await c.post("/api/reindex", headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        r = await c.post("/api/reindex")
        assert r.status_code == 415
