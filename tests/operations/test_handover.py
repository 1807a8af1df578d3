"""Handing rows saved without provenance (robot ``unknown``) to ``shared`` or to a robot.

The scenario of issue 30 #2: a trial server without tokens (and without ``ROBOT_ID``) stores
everything as robot ``unknown``; once ``MEMORY_ROBOT_TOKENS`` is set no robot token sees any of
it. Each test writes through the services on a real index.db, reopens it with tokens and reads as
a robot would.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import structlog

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import Forbidden, InvalidInput, NotFound
from robot_mcp_memory.operations import handover
from robot_mcp_memory.surfaces import cli
from robot_mcp_memory.surfaces.mcp.server import build_server, http_app
from robot_mcp_memory.tenancy.principal import LOCAL, OPEN, Principal
from tests.conftest import doc

ADMIN_TOKEN = "admin-token-1234"
ROBOT_TOKENS = {"rap-1": "tok-rap-1-1234", "rap-2": "tok-rap-2-1234"}
RAP1 = Principal("robot", "rap-1")
RAP2 = Principal("robot", "rap-2")
MAIL = doc("mail-room", "Fetch a package from the mailroom", "## Steps\n1. go to the mailroom\n")


def settings(data: Path, *, tokens: bool) -> Settings:
    env = {"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "hashing"}  # no ROBOT_ID: provenance 'unknown'
    if tokens:
        env["MEMORY_TOKEN"] = ADMIN_TOKEN
        env["MEMORY_ROBOT_TOKENS"] = ",".join(f"{r}:{t}" for r, t in ROBOT_TOKENS.items())
    return Settings.from_env(env)


async def trial(data: Path) -> str:
    """What a trial without tokens leaves behind: a process, a memory and a session, all 'unknown'.
    Returns the session id."""
    memory = Memory.open(settings(data, tokens=False))
    try:
        saved = await memory.processes.save(OPEN, MAIL)
        assert saved.doc.robot == "unknown"
        session = await memory.experiences.start_session(OPEN)
        await memory.experiences.learn(OPEN, "the mailroom door sticks; push it hard", session_id=session.id)
        return session.id
    finally:
        memory.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def tokened(data: Path) -> Iterator[Memory]:
    memory = Memory.open(settings(data, tokens=True))
    yield memory
    memory.close()


async def robot_sees(memory: Memory, who: Principal, session_id: str) -> tuple[int, int, int, bool]:
    """(processes listed, processes found, memories recalled, whether the session is visible)."""
    _, listed = await memory.processes.list(who, 50, 0)
    found = await memory.processes.find(who, "fetch a package from the mailroom", 3)
    recalled = await memory.experiences.recall(who, "mailroom door", n=5, min_confidence=0.0)
    try:
        await memory.experiences.get_session(who, session_id)
        session = True
    except NotFound:
        session = False
    return listed, len(found.hits), len(recalled.hits), session


async def test_unknown_rows_handed_to_shared_become_visible_to_every_robot(data: Path) -> None:
    sid = await trial(data)
    memory = Memory.open(settings(data, tokens=True))
    try:
        assert await robot_sees(memory, RAP1, sid) == (0, 0, 0, False)  # the finding: looks like data loss

        counted = await handover.hand_over(memory, LOCAL, "shared", apply=False)
        assert (counted.applied, counted.processes, counted.memories, counted.sessions) == (False, 1, 1, 1)
        assert await robot_sees(memory, RAP1, sid) == (0, 0, 0, False)  # a dry run changes nothing

        moved = await handover.hand_over(memory, LOCAL, "shared", apply=True)
        assert (moved.applied, moved.to, moved.total) == (True, "shared", 3)
        for robot in (RAP1, RAP2):
            listed, found, recalled, _ = await robot_sees(memory, robot, sid)
            assert (listed, found, recalled) == (1, 1, 1)
        assert (await memory.processes.get(RAP1, "mail-room")).robot == "shared"
        again = await handover.hand_over(memory, LOCAL, "shared", apply=False)
        assert again.total == 0
    finally:
        memory.close()


async def test_unknown_rows_handed_to_one_robot_are_its_own_and_no_one_elses(data: Path) -> None:
    sid = await trial(data)
    memory = Memory.open(settings(data, tokens=True))
    try:
        await handover.hand_over(memory, LOCAL, " rap-1 ", apply=True)
        assert await robot_sees(memory, RAP1, sid) == (1, 1, 1, True)
        assert await robot_sees(memory, RAP2, sid) == (0, 0, 0, False)
        ended = await memory.experiences.end_session(RAP1, sid, 1.0)  # its own session now
        assert ended is not None
    finally:
        memory.close()


async def test_the_vector_index_follows_the_new_owner_at_once(data: Path) -> None:
    """The in-RAM vector index holds each vector's robot: loaded before the hand-over, it must not
    keep 'unknown' (a robot's semantic search would miss the document)."""
    await trial(data)
    memory = Memory.open(settings(data, tokens=True))
    try:
        embedder = memory.embedder
        assert embedder is not None
        assert embedder.wait_settled(10.0)
        store = memory.process_store
        assert store.backfiller.wait_idle(10.0)
        model = embedder.model_id
        assert model is not None
        query = embedder.embed(["fetch a package from the mailroom"])
        assert query is not None

        def nearest(within: str) -> list[str]:
            def read(conn: sqlite3.Connection) -> list[str]:
                index = store.vectors.index(conn, "process", model)
                assert index is not None
                return [ref for ref, _ in index.search(query[0], 3, {within})]

            return memory.index.read_blocking(read)

        assert nearest("unknown") == ["mail-room"]  # the index is loaded (cached) before
        await handover.hand_over(memory, LOCAL, "shared", apply=True)
        assert nearest("shared") == ["mail-room"]
        assert nearest("unknown") == []
    finally:
        memory.close()


async def test_only_an_operator_hands_over_and_only_to_shared_or_a_robot(tokened: Memory) -> None:
    with pytest.raises(Forbidden):
        await handover.hand_over(tokened, RAP1, "rap-1", apply=False)
    for bad in ("unknown", "Unknown", "", "two words", "x" * 65):
        with pytest.raises(InvalidInput):
            await handover.hand_over(tokened, LOCAL, bad, apply=False)


async def test_the_rest_endpoint_counts_then_hands_over_for_the_admin_only(data: Path) -> None:
    await trial(data)
    memory = Memory.open(settings(data, tokens=True))
    try:
        app = http_app(memory, build_server(memory))
        transport = httpx.ASGITransport(app=app)

        def client(token: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1:9103", headers={"authorization": f"Bearer {token}"}
            )

        async with client(ROBOT_TOKENS["rap-1"]) as robot:
            r = await robot.post("/api/hand-over", json={"to": "rap-1", "apply": True})
            assert r.status_code == 403, r.text
            assert (await robot.get("/api/processes")).json()["total"] == 0
        async with client(ADMIN_TOKEN) as admin:
            r = await admin.post("/api/hand-over", json={"to": "unknown"})
            assert r.status_code == 400, r.text
            r = await admin.post("/api/hand-over", json={"to": "shared"})
            assert r.status_code == 200, r.text
            assert r.json() == {"to": "shared", "applied": False, "processes": 1, "memories": 1, "sessions": 1}
            r = await admin.post("/api/hand-over", json={"to": "shared", "apply": True})
            assert r.json()["applied"] is True
            assert r.json()["processes"] == 1
        async with client(ROBOT_TOKENS["rap-1"]) as robot:
            assert (await robot.get("/api/processes")).json()["total"] == 1
    finally:
        memory.close()


def test_the_command_counts_first_and_hands_over_with_apply(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(trial(data))
    for var in ("MEMORY_TOKEN", "MEMORY_ROBOT_TOKENS", "ROBOT_ID", "MEMORY_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMORY_EMBEDDER", "hashing")
    assert cli.main(["hand-over", "--data-dir", str(data), "--to", "shared"]) == 0
    assert "would hand 1 processes, 1 memories, 1 sessions" in capsys.readouterr().out
    assert cli.main(["hand-over", "--data-dir", str(data), "--to", "unknown"]) == cli.EXIT_FAILED
    assert "'shared'" in capsys.readouterr().err
    assert cli.main(["hand-over", "--data-dir", str(data), "--to", "shared", "--apply"]) == 0
    assert "handed 1 processes, 1 memories, 1 sessions" in capsys.readouterr().out
    assert cli.main(["hand-over", "--data-dir", str(data), "--to", "shared"]) == 0
    assert "nothing to hand over" in capsys.readouterr().out


async def test_a_start_with_robot_tokens_names_the_unknown_rows_and_the_command(data: Path) -> None:
    await trial(data)
    memory = Memory.open(settings(data, tokens=True))
    try:
        with structlog.testing.capture_logs() as logged:
            handover.log_hint(memory)
        hints = [e for e in logged if e["event"] == "provenance.unknown"]
        assert len(hints) == 1
        assert (hints[0]["processes"], hints[0]["memories"], hints[0]["sessions"]) == (1, 1, 1)
        assert handover.COMMAND in hints[0]["message"]
        await handover.hand_over(memory, LOCAL, "shared", apply=True)
        with structlog.testing.capture_logs() as logged:
            handover.log_hint(memory)
        assert [e for e in logged if e["event"] == "provenance.unknown"] == []
    finally:
        memory.close()
    open_memory = Memory.open(settings(data, tokens=False))  # no robot tokens: unscoped callers see everything
    try:
        with structlog.testing.capture_logs() as logged:
            handover.log_hint(open_memory)
        assert logged == []
    finally:
        open_memory.close()
