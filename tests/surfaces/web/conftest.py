"""Fixtures for the REST API: the real `http_app` (MCP + REST + dashboard) in-process over httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.mcp.server import build_server, http_app

ADMIN = "admin-token-1234"
TOKENS = {"a1": "tok-a1-1234", "a2": "tok-a2-1234", "b1": "tok-b1-1234"}
BASE = "http://127.0.0.1:9103"


def settings_for(tmp_path: Path, tokens: bool) -> Settings:
    env = {"MEMORY_DATA_DIR": str(tmp_path / "data"), "MEMORY_EMBEDDER": "hashing", "ROBOT_ID": "tester"}
    env["MEMORY_ALLOWED_HOSTS"] = "testserver"  # the host schemathesis' in-process client sends
    if tokens:
        env["MEMORY_TOKEN"] = ADMIN
        env["MEMORY_ROBOT_TOKENS"] = ",".join(f"{r}:{t}" for r, t in TOKENS.items())
    return Settings.from_env(env)


@pytest.fixture
def secured_memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory.open(settings_for(tmp_path, tokens=True))
    yield m
    m.close()


@pytest.fixture
def open_memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory.open(settings_for(tmp_path, tokens=False))
    yield m
    m.close()


Connect = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def connector(memory: Memory) -> Connect:
    app = http_app(memory, build_server(memory))

    @asynccontextmanager
    async def connect(token: str | None = None, address: str = "127.0.0.1") -> AsyncIterator[httpx.AsyncClient]:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        transport = httpx.ASGITransport(app=app, client=(address, 123))
        async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers) as c:
            yield c

    return connect


@pytest.fixture
def secured(secured_memory: Memory) -> Connect:
    """`secured(token)` → an httpx client against the app with tokens configured."""
    return connector(secured_memory)


@pytest.fixture
def open_app(open_memory: Memory) -> Connect:
    return connector(open_memory)


def doc(pid: str, title: str, robot: str = "", body: str = "## Steps\n1. do it\n", **front: str) -> str:
    lines = [f"id: {pid}", f"title: {title}"] + ([f"robot: {robot}"] if robot else [])
    lines += [f"{k}: {v}" for k, v in front.items()]
    return "---\n" + "\n".join(lines) + "\n---\n\n" + body
