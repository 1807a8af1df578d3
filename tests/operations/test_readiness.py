"""Readiness (``GET /readyz``) and storage refusals that name the next step (issue 30 #3).

``/healthz`` is liveness and stays ok with a damaged database; ``/readyz`` reads each store and
fails (503) naming the file and what to do. Every storage refusal — REST and MCP — names the next
step (doctor, restore) without a path or SQL. The damage is real: index.db overwritten under an
open server, after another connection checkpointed its WAL into it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.mcp.server import build_server, http_app
from tests.conftest import Client, doc

ADMIN = "admin-token-1234"
BASE = "http://127.0.0.1:9103"
#: What no answer to a client may contain: internals of the store.
LEAKS = ("SELECT", "sqlite", "Traceback", "/data", "index.db-wal", "DatabaseError")


def damage(path: Path) -> None:
    """Fold the WAL into `path` from a connection of our own (as any checkpoint would), then
    overwrite the whole file: the server's readers see a changed WAL and read the file again."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.write(b"\xa5" * size)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    settings = Settings.from_env(
        {
            "MEMORY_DATA_DIR": str(tmp_path / "data"),
            "MEMORY_EMBEDDER": "hashing",
            "ROBOT_ID": "tester",
            "MEMORY_TOKEN": ADMIN,
            "MEMORY_ROBOT_TOKENS": "rap-1:tok-rap-1-1234",
        }
    )
    m = Memory.open(settings)
    yield m
    m.close()


@pytest.fixture
async def http(memory: Memory) -> AsyncIterator[httpx.AsyncClient]:
    app = http_app(memory, build_server(memory))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c


def admin() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


async def test_a_healthy_store_is_ready_without_a_token(http: httpx.AsyncClient) -> None:
    r = await http.get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    assert {c["name"]: c["ok"] for c in body["checks"]} == {"index.db": True, "embedder": True}
    assert "next_step" not in body


async def test_lessons_db_is_checked_once_it_exists(memory: Memory, http: httpx.AsyncClient) -> None:
    assert [c["name"] for c in (await http.get("/readyz")).json()["checks"]] == ["index.db", "embedder"]
    await memory.lesson_store.writable()  # what the first recorded lesson does: creates lessons.db
    names = [c["name"] for c in (await http.get("/readyz")).json()["checks"]]
    assert names == ["index.db", "lessons.db", "embedder"]


async def test_a_damaged_index_fails_readiness_while_healthz_stays_ok(memory: Memory, http: httpx.AsyncClient) -> None:
    assert (await http.post("/api/processes", json={"markdown": doc("p-1", "One")}, headers=admin())).status_code == 200
    damage(memory.settings.index_path)

    assert (await http.get("/healthz")).status_code == 200  # liveness: the process answers
    r = await http.get("/readyz")
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["status"] == "not_ready"
    assert body["failed"] == ["index.db"]
    assert "robot-mcp-memory doctor" in body["next_step"]
    assert "backup" in body["next_step"]
    for leak in (*LEAKS, str(memory.settings.data_dir)):
        assert leak not in r.text


async def test_a_storage_refusal_over_rest_names_the_next_step(memory: Memory, http: httpx.AsyncClient) -> None:
    await http.post("/api/processes", json={"markdown": doc("p-1", "One")}, headers=admin())
    damage(memory.settings.index_path)
    r = await http.get("/api/processes", headers=admin())
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "storage"
    assert "robot-mcp-memory doctor" in r.json()["detail"]
    assert "docs/operations.md" in r.json()["detail"]
    for leak in (*LEAKS, str(memory.settings.data_dir)):
        assert leak not in r.text


async def test_a_storage_refusal_of_a_tool_names_the_next_step(memory: Memory) -> None:
    server = build_server(memory)
    async with create_connected_server_and_client_session(server.lowlevel) as session:
        client = Client(session)
        assert "id" in await client.call("save_process", markdown=doc("p-1", "One"))
        damage(memory.settings.index_path)
        for tool, args in (("list_processes", {}), ("find_processes", {"query": "one"}), ("recall", {"query": "x"})):
            result = await client.call(tool, **args)
            assert result["error"] == "storage", (tool, result)
            assert "robot-mcp-memory doctor" in result["detail"], (tool, result)
            for leak in (*LEAKS, str(memory.settings.data_dir)):
                assert leak not in str(result), (tool, result)
