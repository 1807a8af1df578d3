"""The pure-ASGI bearer middleware, in-process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.tenancy.middleware import TenantAuthMiddleware, bearer
from robot_mcp_memory.tenancy.principal import ADMIN, OPEN, Principal
from robot_mcp_memory.tenancy.tokens import TokenAuth

AUTH = TokenAuth("adminadmin", {"rap-1": "tokA1234", "rap-2": "tokB1234"})


class Recorder:
    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


async def never_receive() -> Message:
    raise AssertionError("the middleware must not read the request body")


async def run(app: Any, headers: list[tuple[bytes, bytes]], path: str = "/mcp") -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    await app(scope, never_receive, send)
    return sent


async def test_no_token_gets_401_with_www_authenticate_and_a_json_body_without_reading_the_body() -> None:
    inner = Recorder()
    sent = await run(TenantAuthMiddleware(inner, AUTH), [])
    start, body = sent
    assert start["status"] == 401
    headers = dict(start["headers"])
    assert headers[b"www-authenticate"].startswith(b"Bearer")
    assert json.loads(body["body"])["error"] == "unauthorized"
    assert inner.scopes == []


@pytest.mark.parametrize(
    "value", [b"Bearer wrongtoken", b"Basic YWRtaW46YWRtaW4=", b"Bearer", b"bearer  ", b"tokA1234"]
)
async def test_wrong_or_malformed_credentials_get_401(value: bytes) -> None:
    inner = Recorder()
    sent = await run(TenantAuthMiddleware(inner, AUTH), [(b"authorization", value)])
    assert sent[0]["status"] == 401
    assert inner.scopes == []


@pytest.mark.parametrize(
    ("token", "principal", "client_id"),
    [(b"adminadmin", ADMIN, "admin"), (b"tokA1234", Principal.robot("rap-1"), "robot:rap-1")],
)
async def test_a_valid_token_binds_the_principal_and_the_sdk_user(
    token: bytes, principal: Principal, client_id: str
) -> None:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    inner = Recorder()
    sent = await run(TenantAuthMiddleware(inner, AUTH), [(b"authorization", b"Bearer " + token)])
    assert sent[0]["status"] == 200
    scope = inner.scopes[0]
    assert scope["principal"] == principal
    assert isinstance(scope["user"], AuthenticatedUser)
    assert scope["user"].access_token.client_id == client_id
    assert scope["user"].access_token.token == "redacted"


async def test_public_paths_pass_without_a_principal() -> None:
    inner = Recorder()
    sent = await run(TenantAuthMiddleware(inner, AUTH, public_paths={"/healthz"}), [], path="/healthz")
    assert sent[0]["status"] == 200
    assert "principal" not in inner.scopes[0]


async def test_with_no_tokens_configured_every_request_is_the_open_principal() -> None:
    inner = Recorder()
    await run(TenantAuthMiddleware(inner, TokenAuth(None, {})), [])
    assert inner.scopes[0]["principal"] == OPEN


async def test_lifespan_scopes_pass_straight_through() -> None:
    inner = Recorder()

    async def send(_: Message) -> None:
        return None

    await TenantAuthMiddleware(inner, AUTH)({"type": "lifespan"}, never_receive, send)
    assert inner.scopes == [{"type": "lifespan"}]


def test_bearer_parsing_reads_only_the_authorization_header() -> None:
    assert bearer({"headers": [(b"authorization", b"Bearer  abc  ")]}) == "abc"
    assert bearer({"headers": [(b"x-authorization", b"Bearer abc")]}) is None
    assert bearer({"headers": []}) is None
