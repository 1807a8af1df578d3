"""The operator's commands, run in-process through `cli.main`."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.surfaces import cli
from robot_mcp_memory.tenancy.principal import ADMIN, LOCAL
from robot_mcp_memory.tenancy.tokens import parse_robot_tokens
from tests.conftest import MAILROOM, doc

T = TypeVar("T")


def _fill(data: Path, n: int) -> None:
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data)}))
    try:

        async def go() -> None:
            await memory.processes.save(ADMIN, MAILROOM)
            await memory.processes.record_outcome(ADMIN, "fetch-package-mailroom", False, "door locked")
            for i in range(n):
                await memory.processes.save(ADMIN, doc(f"task-{i}", f"Task {i} — déjà vu 取包裹", "## Steps\n1. go"))

        asyncio.run(go())
    finally:
        memory.close()


def test_a_dump_loads_back_identically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 5)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "dump1")]) == 0
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(tmp_path / "dump1")]) == 0
    assert cli.main(["dump", "--data-dir", str(tmp_path / "b"), str(tmp_path / "dump2")]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "dump1" / "processes").iterdir()}
    second = {p.name: p.read_bytes() for p in (tmp_path / "dump2" / "processes").iterdir()}
    assert len(first) == 6
    assert first == second
    assert "## Outcome log" in first["fetch-package-mailroom.md"].decode()
    assert "loaded 6 processes" in capsys.readouterr().out


def test_a_command_opens_its_store_for_one_blocking_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's calls come one after another: its store runs them on its own thread
    (`StoreMode.BLOCKING`), read-only opening included."""
    modes: list[StoreMode] = []
    real_open = Memory.open

    def recording(settings: Settings, **kwargs: Any) -> Memory:
        memory = real_open(settings, **kwargs)
        modes.append(memory.index.mode)
        return memory

    _fill(tmp_path / "a", 1)
    monkeypatch.setattr(Memory, "open", recording)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "dump")]) == 0
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(tmp_path / "dump")]) == 0
    assert modes == [StoreMode.BLOCKING, StoreMode.BLOCKING]


def test_load_reports_bad_files_and_exits_nonzero_but_keeps_the_good_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "good.md").write_text(MAILROOM)
    (src / "bad.md").write_text("no frontmatter here")
    assert cli.main(["load", "--data-dir", str(tmp_path / "d"), str(src)]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "bad.md" in err
    assert cli.main(["stats", "--data-dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert '"processes": 1' in out
    assert "hot_writes_dropped" not in out  # the command's own counter says nothing of a server's


def test_backup_taken_during_writes_restores_to_a_consistent_database(tmp_path: Path) -> None:
    data = tmp_path / "live"
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data)}))
    stop = threading.Event()

    def writer() -> None:
        async def go() -> None:
            i = 0
            while not stop.is_set():
                await memory.processes.save(ADMIN, doc(f"bulk-{i}", f"Bulk task {i}", "## Steps\n" + "x " * 200))
                i += 1

        asyncio.run(go())

    t = threading.Thread(target=writer)
    t.start()
    try:
        for n in range(3):
            assert cli.main(["backup", "--data-dir", str(data), str(tmp_path / f"bk{n}")]) == 0
    finally:
        stop.set()
        t.join()
        memory.close()
    for n in range(3):
        conn = sqlite3.connect(tmp_path / f"bk{n}" / "index.db")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT count(*) FROM processes").fetchone()[0]
        indexed = conn.execute("SELECT count(*) FROM processes_fts").fetchone()[0]
        conn.close()
        assert rows == indexed
        restored = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / f"bk{n}")}))
        restored.close()


def test_backup_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 1)
    (tmp_path / "bk").mkdir()
    (tmp_path / "bk" / "index.db").write_text("precious")
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(tmp_path / "bk")]) == cli.EXIT_FAILED
    assert (tmp_path / "bk" / "index.db").read_text() == "precious"
    assert "already exists" in capsys.readouterr().err


def test_doctor_passes_on_a_healthy_store_and_fails_when_index_and_rows_disagree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "a", 3)
    assert cli.main(["doctor", "--data-dir", str(tmp_path / "a")]) == 0
    conn = sqlite3.connect(tmp_path / "a" / "index.db")
    conn.execute("DELETE FROM processes_fts WHERE id = 'task-0'")
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert cli.main(["doctor", "--data-dir", str(tmp_path / "a")]) == cli.EXIT_FAILED
    assert "FAIL process index" in capsys.readouterr().out
    assert cli.main(["reindex", "--data-dir", str(tmp_path / "a")]) == 0
    assert cli.main(["doctor", "--data-dir", str(tmp_path / "a")]) == 0


def _sql(data: Path, *statements: str) -> None:
    conn = sqlite3.connect(data / "index.db")
    try:
        with conn:
            for stmt in statements:
                conn.execute(stmt)
    finally:
        conn.close()


def _learn(data: Path, *insights: str) -> None:
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}))
    try:

        async def go() -> None:
            for text in insights:
                await memory.experiences.learn(LOCAL, text)

        asyncio.run(go())
    finally:
        memory.close()


def _in_memory(data: Path, fn: Callable[[Memory], Coroutine[Any, Any, T]]) -> T:
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}), backfill=False)
    try:
        return asyncio.run(fn(memory))
    finally:
        memory.close()


def _recall(data: Path, query: str) -> list[str]:
    async def go(memory: Memory) -> list[str]:
        return [h.memory.content for h in (await memory.experiences.recall(LOCAL, query)).hits]

    return _in_memory(data, go)


def _find(data: Path, query: str) -> list[str]:
    async def go(memory: Memory) -> list[str]:
        return [h.doc.id for h in (await memory.processes.find(LOCAL, query)).hits]

    return _in_memory(data, go)


def test_doctor_fails_on_a_damaged_process_index_and_reindex_rebuilds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage in the index's pages passes SQLite's quick_check (they are well-formed b-tree
    pages) while every FTS5 query fails; a ``DELETE`` of the index's rows could not repair it.
    A find still answers: its keyword leg ranks from the posting cache, which reads the
    entries' text, not the damaged pages (processes/sqlite/postings.py)."""
    data = tmp_path / "a"
    _fill(data, 3)
    _sql(data, "UPDATE processes_fts_data SET block = CAST(printf('%.50c', 'z') AS BLOB) WHERE id > 10")
    with pytest.raises(sqlite3.DatabaseError):
        _sql(data, "SELECT id FROM processes_fts WHERE processes_fts MATCH 'package'")
    assert _find(data, "package mailroom")[0] == "fetch-package-mailroom"
    capsys.readouterr()

    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "process index" in ln)
    assert line.startswith("FAIL")
    assert "run robot-mcp-memory reindex" in line
    assert "ok   integrity" in out  # SQLite's own check sees nothing wrong: that was the trap

    assert cli.main(["reindex", "--data-dir", str(data)]) == 0
    assert json.loads(capsys.readouterr().out) == {"indexed": 4, "memories_indexed": 0}
    assert _find(data, "package mailroom")[0] == "fetch-package-mailroom"
    assert _find(data, "取包裹")  # CJK segmentation kept
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0


def test_doctor_checks_the_memory_index_and_reindex_rebuilds_it_with_cjk_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "a"
    _learn(data, "door in lab 3 sticks, push hard", "仓库的门卡住了，需要用力推")
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0
    assert "ok   memory index: 2 rows, 2 index entries" in capsys.readouterr().out
    expected = {q: _recall(data, q) for q in ("door", "仓库")}
    assert all(expected.values())

    _sql(data, "DELETE FROM memories_fts")
    assert _recall(data, "door") == []
    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    assert "FAIL memory index: 2 rows, 0 index entries: run robot-mcp-memory reindex" in capsys.readouterr().out

    assert cli.main(["reindex", "--data-dir", str(data)]) == 0
    assert json.loads(capsys.readouterr().out) == {"indexed": 0, "memories_indexed": 2}
    assert {q: _recall(data, q) for q in expected} == expected
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0


def test_doctor_fails_on_a_damaged_memory_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "a"
    _learn(data, *(f"gripper {i} slipped on the wet mug number {i}" for i in range(40)))
    _sql(data, "UPDATE memories_fts_data SET block = CAST(printf('%.50c', 'z') AS BLOB) WHERE id > 10")
    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "memory index" in ln)
    assert line.startswith("FAIL")
    assert "damaged" in line
    assert "run robot-mcp-memory reindex" in line
    assert cli.main(["reindex", "--data-dir", str(data)]) == 0
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0
    assert _recall(data, "wet mug")


@pytest.mark.parametrize(
    "damage", ["DELETE FROM memories_fts_data", "DELETE FROM memories_fts_config", "DROP TABLE memories_fts_idx"]
)
def test_reindex_repairs_an_index_too_damaged_to_be_dropped(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With its _data or _config rows gone FTS5 cannot open the table, so DROP TABLE failed and
    reindex answered "the database could not be accessed" to the doctor's own advice."""
    data = tmp_path / "a"
    _learn(data, *(f"gripper {i} slipped on the wet mug number {i}" for i in range(40)))
    _sql(data, damage)
    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    assert cli.main(["reindex", "--data-dir", str(data)]) == 0
    capsys.readouterr()
    assert cli.main(["doctor", "--full", "--data-dir", str(data)]) == 0, capsys.readouterr().out
    assert _recall(data, "wet mug")


def test_every_full_text_index_is_checked_and_rebuilt() -> None:
    declared = {t.name for t in db.schema().tables if t.is_fts5}
    assert declared == {"processes_fts", "memories_fts"}
    assert set(db.TEXT_INDEXES) == declared


def test_doctor_on_a_database_that_cannot_be_opened_reports_a_fail_line_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "a"
    _fill(data, 40)
    path = data / "index.db"
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    before = path.read_bytes()
    capsys.readouterr()

    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    line = next(ln for ln in captured.out.splitlines() if ln.startswith("FAIL integrity:"))
    assert "index.db" in line
    assert "Restore it from a backup" in line
    assert captured.err == ""
    assert path.read_bytes() == before


def test_doctor_on_a_database_from_a_newer_version_reports_a_fail_line_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "a"
    _fill(data, 1)
    _sql(data, "UPDATE store_meta SET value = '99' WHERE key = 'schema_version'")
    before = (data / "index.db").read_bytes()
    capsys.readouterr()

    assert cli.main(["doctor", "--data-dir", str(data)]) == cli.EXIT_FAILED
    assert f"FAIL schema: version 99 (this server: {len(db.MIGRATIONS)})" in capsys.readouterr().out
    assert (data / "index.db").read_bytes() == before


def test_token_generate_prints_a_map_the_server_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["token", "generate", "rap-1", "rap-2"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert set(parse_robot_tokens(lines["MEMORY_ROBOT_TOKENS"], lines["MEMORY_TOKEN"])) == {"rap-1", "rap-2"}
    Settings.from_env(lines)


def test_an_unusable_database_is_one_line_and_exit_65(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "index.db").write_bytes(b"this is not sqlite" * 100)
    assert cli.main(["stats", "--data-dir", str(data)]) == cli.EXIT_DATA
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("robot-mcp-memory:"))
    assert str(data / "index.db") in line
    assert "backup" in line
    assert (data / "index.db").read_bytes() == b"this is not sqlite" * 100


def test_an_index_db_that_is_a_directory_is_one_line_and_exit_65(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d"
    (data / "index.db").mkdir(parents=True)
    assert cli.main(["stats", "--data-dir", str(data)]) == cli.EXIT_DATA
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("robot-mcp-memory:"))
    assert str(data / "index.db") in line
    assert "directory" in line
    assert (data / "index.db").is_dir()


def test_bad_configuration_exits_78_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_PORT", "0")
    assert cli.main(["serve"]) == cli.EXIT_CONFIG
    assert "MCP_PORT" in capsys.readouterr().err


def test_several_workers_on_sqlite_exit_78_before_anything_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    monkeypatch.setenv("MEMORY_WORKERS", "2")
    assert cli.main(["serve", "--transport", "sse", "--data-dir", str(tmp_path / "data")]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "MEMORY_WORKERS above 1 needs MEMORY_DATABASE_URL" in err
    assert "Traceback" not in err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("command", ["serve", "web"])
def test_a_port_in_use_exits_69_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("MCP_TRANSPORT", "sse")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [command, "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path / "d")]
        assert cli.main(args) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in err
    assert "serve.http" not in err
    assert "serve.web" not in err
    assert not (tmp_path / "d").exists()


def test_without_a_command_the_flags_are_serves(capsys: pytest.CaptureFixture[str]) -> None:
    """`scripts/serve --port …` runs `robot-mcp-memory --port …`: no command means serve, flags
    included (a port of 0 is refused by the configuration, before anything is served)."""
    assert cli.main(["--port", "0"]) == cli.EXIT_CONFIG
    assert "--port must be" in capsys.readouterr().err  # named as given: the flag
    assert cli.main(["--debug", "--host", "0.0.0.0", "--port", "0"]) == cli.EXIT_CONFIG
    assert "--port must be" in capsys.readouterr().err
    assert cli._with_default_command([]) == ["serve"]
    assert cli._with_default_command(["--debug"]) == ["--debug", "serve"]
    assert cli._with_default_command(["stats", "--data-dir", "d"]) == ["stats", "--data-dir", "d"]
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    assert "import-robotmem" in capsys.readouterr().out  # the program's own help, not serve's


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ["serve", "dump", "load", "backup", "reindex", "reembed", "doctor", "stats", "token"]:
        with pytest.raises(SystemExit) as info:
            cli.main([command, "--help"])
        assert info.value.code == 0
        assert "usage:" in capsys.readouterr().out


def test_reembed_embeds_every_process_for_the_current_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "hashing")
    _fill(tmp_path / "a", 3)
    capsys.readouterr()
    assert cli.main(["reembed", "--force", "--data-dir", str(tmp_path / "a")]) == 0
    assert '"embedded": 4' in capsys.readouterr().out


def test_reembed_without_force_embeds_what_was_missing_and_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "none")
    _fill(tmp_path / "a", 3)  # saved without vectors
    monkeypatch.setenv("MEMORY_EMBEDDER", "hashing")
    capsys.readouterr()
    # No background backfill in a command: the count is the work this command did (a server's
    # startup backfill used to race it and leave "embedded": 0).
    assert cli.main(["reembed", "--data-dir", str(tmp_path / "a")]) == 0
    assert '"embedded": 4' in capsys.readouterr().out


def test_a_command_starts_no_background_backfill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "none")
    _fill(tmp_path / "a", 3)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "a"), "MEMORY_EMBEDDER": "hashing"})
    for backfill, missing in ((False, 4), (True, 0)):
        memory = Memory.open(settings, backfill=backfill)
        try:
            assert memory.process_store.backfiller.wait_idle(60)
            assert asyncio.run(memory.processes.search_status())["missing"] == missing
        finally:
            memory.close()


def test_reembed_with_the_embedder_off_says_so_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_EMBEDDER", "none")
    _fill(tmp_path / "a", 1)
    assert cli.main(["reembed", "--data-dir", str(tmp_path / "a")]) == cli.EXIT_FAILED
    assert "MEMORY_EMBEDDER" in capsys.readouterr().err


def test_a_dump_carries_the_fleet_memories_sessions_and_lessons_and_loads_back_identically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp.shared.memory import create_connected_server_and_client_session

    from robot_mcp_memory.surfaces.mcp.server import build_server
    from tests.conftest import Client

    def fill(data: Path) -> None:
        memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "hashing"}))

        async def go() -> None:
            async with create_connected_server_and_client_session(build_server(memory).lowlevel) as session:
                c = Client(session)
                await c.call("save_process", markdown=MAILROOM)
                await c.call("upsert_group", group_id="line-a", customer="acme")
                await c.call("register_robot", robot_id="rap-1", group="line-a")
                await c.call("set_self_improve", enabled=True)
                await c.call("record_params", robot="rap-1", key="grip", params={"force": 12.5}, success=True)
                sid = (await c.call("start_session", context={"task": {"name": "pick"}}))["session_id"]
                await c.call("learn", insight="grip force 12.5 N holds the wet mug", session_id=sid)
                await c.call("learn", insight="去收发室取包裹要先敲门", context={"task": {"success": True}})
                await c.call("end_session", session_id=sid, outcome_score=0.8)

        try:
            asyncio.run(go())
        finally:
            memory.close()

    fill(tmp_path / "a")
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "d1")]) == 0
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(tmp_path / "d1")]) == 0
    assert cli.main(["dump", "--data-dir", str(tmp_path / "b"), str(tmp_path / "d2")]) == 0

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    first, second = files(tmp_path / "d1"), files(tmp_path / "d2")
    assert first == second
    assert {"archive/fleet_robots.jsonl", "archive/memories.jsonl", "archive/sessions.jsonl"} <= set(first)
    assert "archive/lessons.lessons.jsonl" in first
    assert b"rap-1" in first["archive/fleet_robots.jsonl"]

    loaded = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "b"), "MEMORY_EMBEDDER": "hashing"}))

    async def check() -> None:
        async with create_connected_server_and_client_session(build_server(loaded).lowlevel) as session:
            c = Client(session)
            found = await c.call("recall", query="收发室 包裹")
            assert [m["content"] for m in found["memories"]] == ["去收发室取包裹要先敲门"]
            lessons = await c.call("recall_params", robot="rap-1", key="grip")
            assert [lesson["params"] for lesson in lessons["lessons"]] == [{"force": 12.5}]
            robots = await c.call("list_robots", group="line-a")
            assert [r["robot_id"] for r in robots["robots"]] == ["rap-1"]

    try:
        asyncio.run(check())
    finally:
        loaded.close()


@pytest.mark.parametrize("robots", [["rap-1", "rap-1"], ["shared"], ["Unknown"], ["a:b"], ["a,b"]])
def test_token_generate_refuses_ids_the_server_would_refuse(
    robots: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["token", "generate", *robots]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("robot-mcp-memory:")


def test_token_generate_does_not_read_unrelated_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_TOKEN", "short")
    monkeypatch.setenv("MCP_PORT", "not-a-port")
    assert cli.main(["token", "generate", "rap-1"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert set(parse_robot_tokens(lines["MEMORY_ROBOT_TOKENS"], lines["MEMORY_TOKEN"])) == {"rap-1"}


def test_load_skips_and_names_files_it_cannot_read_as_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "good.md").write_text(MAILROOM, encoding="utf-8")
    (src / "latin1.md").write_bytes(b"---\ntitle: caf\xe9\n---\nx\n")
    (src / ".#good.md").symlink_to("root@host.4242:1700000000")  # an editor's lock: a dangling symlink
    (src / "folder.md").mkdir()
    with (src / "huge.md").open("wb") as fh:  # sparse: the size is known without writing it
        fh.truncate(operations.MAX_DOCUMENT_BYTES + 1)
    assert cli.main(["load", "--data-dir", str(tmp_path / "d"), str(src)]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out.startswith("loaded 1 process, ")
    assert captured.out.rstrip().endswith("; skipped 4")
    skipped = [line for line in captured.err.splitlines() if line.startswith("skipped ")]
    assert sorted(line.split(":", 1)[0] for line in skipped) == [
        "skipped .#good.md",
        "skipped folder.md",
        "skipped huge.md",
        "skipped latin1.md",
    ]
    assert "Traceback" not in captured.err


def test_load_refuses_two_files_with_one_id_naming_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.md").write_text("---\ntitle: Make coffee\n---\nfirst version\n", encoding="utf-8")
    (src / "b.md").write_text("---\ntitle: Make coffee\n---\nsecond, different\n", encoding="utf-8")
    assert cli.main(["load", "--data-dir", str(tmp_path / "d"), str(src)]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out.startswith("loaded 1 process, ")
    assert captured.out.rstrip().endswith("; skipped 1")
    line = next(line for line in captured.err.splitlines() if line.startswith("skipped "))
    assert "a.md" in line
    assert "b.md" in line


def test_a_file_system_refusal_is_one_line_and_exit_74(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 1)
    (tmp_path / "afile").write_text("x")
    capsys.readouterr()
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "afile" / "sub")]) == cli.EXIT_IOERR
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("robot-mcp-memory:")
    assert str(tmp_path / "afile") in err
    assert "Errno" not in err


def test_a_dump_is_one_snapshot_even_while_documents_are_updated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path / "a", 5)  # 6 documents
    writer = sqlite3.connect(tmp_path / "a" / "index.db", isolation_level=None, check_same_thread=False)
    last = writer.execute("SELECT id FROM processes ORDER BY updated, id DESC LIMIT 1").fetchone()[0]
    calls: list[int] = []

    def update_during_the_dump(done: int, total: int) -> None:
        if not calls:  # another process makes the least recently updated document the newest
            writer.execute("UPDATE processes SET updated = '2999-01-01T00:00:00Z', title = 'new' WHERE id = ?", (last,))
        calls.append(done)

    monkeypatch.setattr(cli, "_progress", lambda _label: update_during_the_dump)
    try:
        assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "d")]) == 0
    finally:
        writer.close()
    dumped = {p.stem: p.read_text(encoding="utf-8") for p in (tmp_path / "d" / "processes").iterdir()}
    assert len(dumped) == 6
    assert "title: new" not in dumped[last]  # the document as it was when the dump began


def test_a_dump_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    _fill(tmp_path / "a", 1)
    precious = tmp_path / "precious.txt"
    precious.write_text("operator notes")
    (tmp_path / "d" / "processes").mkdir(parents=True)
    (tmp_path / "d" / "archive").mkdir()
    (tmp_path / "d" / "processes" / "task-0.md").symlink_to(precious)
    (tmp_path / "d" / "archive" / "memories.jsonl").symlink_to(precious)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "d")]) == 0
    assert precious.read_text() == "operator notes"
    for path in (tmp_path / "d" / "processes" / "task-0.md", tmp_path / "d" / "archive" / "memories.jsonl"):
        assert not path.is_symlink()
        assert path.is_file()
    assert not [p for p in (tmp_path / "d").rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("folder", ["processes", "archive"])
def test_a_dump_refuses_a_folder_that_is_a_link_elsewhere(
    tmp_path: Path, folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Robots choose process ids, so they choose the file names: a planted ``processes`` link
    had the dump write every document, and replace files, in the folder it pointed to."""
    _fill(tmp_path / "a", 2)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "fleet_robots.jsonl").write_text("kept")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / folder).symlink_to(victim, target_is_directory=True)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "d")]) != 0
    assert "symbolic link" in capsys.readouterr().err
    assert sorted(p.name for p in victim.iterdir()) == ["fleet_robots.jsonl"]
    assert (victim / "fleet_robots.jsonl").read_text() == "kept"


def test_a_dump_into_an_earlier_dump_removes_the_files_it_wrote_and_no_longer_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process deleted since the last dump would come back with the next load — but a document
    an operator added to the dump by hand (one `load` skipped for a typo) is not the dump's to
    remove: only what the earlier dump wrote (its manifest) goes."""
    _fill(tmp_path / "a", 2)
    dest = tmp_path / "d"
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(dest)]) == 0
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "a")}))
    try:
        asyncio.run(memory.processes.delete(ADMIN, "task-1"))
    finally:
        memory.close()
    (dest / "processes" / "hand-written.md").write_text("---\nid: hand-written\ntitle oops\n---\n")
    (dest / "archive" / "lessons.lessons.jsonl").write_text("")  # not written by the dump either
    (dest / "processes" / "notes.txt").write_text("kept: not a dump file")
    capsys.readouterr()
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(dest)]) == 0
    assert "removed 1 files" in capsys.readouterr().out
    assert sorted(p.name for p in (dest / "processes").iterdir()) == [
        "fetch-package-mailroom.md",
        "hand-written.md",
        "notes.txt",
        "task-0.md",
    ]
    assert (dest / "archive" / "lessons.lessons.jsonl").exists()
    (dest / "processes" / "hand-written.md").unlink()
    (dest / "archive" / "lessons.lessons.jsonl").unlink()
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(dest)]) == 0
    assert cli.main(["stats", "--data-dir", str(tmp_path / "b")]) == 0
    assert '"processes": 2' in capsys.readouterr().out


def _archive_dir(tmp_path: Path, robots: bytes) -> Path:
    src = tmp_path / "dump"
    (src / "processes").mkdir(parents=True)
    (src / "archive").mkdir()
    (src / "archive" / "fleet_groups.jsonl").write_text(
        '{"created": "2026-01-01T00:00:00Z", "group_id": "lab", "updated": "2026-01-01T00:00:00Z"}\n\n'
    )
    (src / "archive" / "fleet_robots.jsonl").write_bytes(robots)
    return src


ROBOT = (
    b'{"created": "2026-01-01T00:00:00Z", "group_id": "lab", "robot_id": "rap-1", "updated": "2026-01-01T00:00:00Z"}\n'
)


def test_an_archive_with_blank_lines_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _archive_dir(tmp_path, b"\n" + ROBOT + b"\n\n")
    assert cli.main(["load", "--data-dir", str(tmp_path / "d"), str(src)]) == 0
    assert cli.main(["stats", "--data-dir", str(tmp_path / "d")]) == 0
    assert '"fleet_robots": 1' in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad",
    [
        ROBOT.replace(b'"lab"', b'"nope"'),  # a group that does not exist
        ROBOT.replace(b'"created": "2026-01-01T00:00:00Z", ', b""),  # a required field missing
        ROBOT.replace(b'"lab"', b'"caf\xe9"'),  # not UTF-8
    ],
)
def test_a_bad_archive_row_is_refused_naming_the_file_and_line(
    bad: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _archive_dir(tmp_path, ROBOT.replace(b"rap-1", b"rap-0") + bad)
    assert cli.main(["load", "--data-dir", str(tmp_path / "d"), str(src)]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("robot-mcp-memory:"))
    assert "fleet_robots.jsonl line 2 " in line
    assert "Traceback" not in err


def _with_lessons_db(data: Path, content: bytes | None = None) -> None:
    if content is not None:
        (data / "lessons.db").write_bytes(content)
        return
    conn = sqlite3.connect(data / "lessons.db")
    conn.execute("CREATE TABLE t (x)")
    conn.close()


def test_backup_checks_every_target_before_writing_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 1)
    _with_lessons_db(tmp_path / "a")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "lessons.db").write_text("an older lessons.db")
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(tmp_path / "old")]) == cli.EXIT_FAILED
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["lessons.db"]
    assert (tmp_path / "old" / "lessons.db").read_text() == "an older lessons.db"


def test_a_failed_backup_removes_what_it_wrote_and_the_directory_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "a", 1)
    _with_lessons_db(tmp_path / "a", b"not a database" * 512)  # index.db copies, then lessons.db fails
    dest = tmp_path / "new" / "bk"
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(dest)]) == cli.EXIT_FAILED
    assert not (tmp_path / "new").exists()


def test_an_interrupted_backup_leaves_nothing_that_blocks_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path / "a", 1)
    dest = tmp_path / "bk"

    def interrupt(_done: int, _total: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_progress", lambda _label: interrupt)
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(dest)]) == 130
    assert not dest.exists()
    monkeypatch.undo()
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(dest)]) == 0
    assert [p.name for p in dest.iterdir()] == ["index.db"]


def test_backup_into_a_path_that_is_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 1)
    (tmp_path / "afile").write_text("x")
    assert cli.main(["backup", "--data-dir", str(tmp_path / "a"), str(tmp_path / "afile")]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("robot-mcp-memory:")
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["doctor", "stats", "reindex", "reembed", "dump"])
def test_a_command_on_a_directory_without_a_database_says_so_and_creates_none(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --data-dir made an empty index.db that passed doctor ("all ok") and dumped 0."""
    typo = tmp_path / "dta"
    extra = [str(tmp_path / "out")] if command == "dump" else []
    assert cli.main([command, *extra, "--data-dir", str(typo)]) == cli.EXIT_FAILED
    assert "no database in" in capsys.readouterr().err
    assert not (typo / "index.db").exists()


def test_a_serving_doctor_checks_inside_the_indexes_only_when_asked(tmp_path: Path) -> None:
    """FTS5's own check holds the write lock while it reads a whole index (~170 ms at 100,000
    memories): GET /api/doctor ran it each time, and every write of the fleet waited."""
    _fill(tmp_path / "a", 2)
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "a")}))
    try:
        seen: list[str] = []
        memory.index.on_writer(lambda c: c.set_trace_callback(seen.append))
        report = asyncio.run(operations.doctor(memory))
        assert report.ok
        assert not [s for s in seen if "integrity-check" in s]
        asyncio.run(operations.doctor(memory, full=True))
        assert [s for s in seen if "integrity-check" in s]
    finally:
        memory.close()


def test_a_stdio_server_reads_on_its_event_loop_and_the_http_surfaces_on_reader_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stdio has one client, whose calls come one at a time; HTTP (and `web`, whose MCP_TRANSPORT
    is left at its stdio default) serve many at once (found by review: `web` ran every read on
    its loop, and /healthz waited seconds behind the dashboard's charts)."""
    from robot_mcp_memory.surfaces import serve

    env = {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_EMBEDDER": "none"}
    opened: list[Memory] = []
    real_open = serve.open_memory

    def recording(settings: Settings, sockets: list[socket.socket], mode: StoreMode = StoreMode.SERVER) -> Memory:
        opened.append(real_open(settings, sockets, mode))
        return opened[-1]

    async def no_session(*_: object) -> None:
        assert opened[-1].index.mode is StoreMode.BLOCKING  # while serving stdio

    monkeypatch.setattr(serve, "open_memory", recording)
    monkeypatch.setattr(serve, "run_stdio", no_session)
    monkeypatch.setattr(serve, "_ignore_stop_signals", lambda: None)  # this is the test process
    serve.serve(Settings.from_env(env))
    assert len(opened) == 1
    web = real_open(Settings.from_env(env), [])  # what `web` opens, with MCP_TRANSPORT at its stdio default
    try:
        assert web.index.mode is StoreMode.SERVER
    finally:
        web.close()


def test_folders_the_server_and_its_commands_make_are_for_their_user_only(tmp_path: Path) -> None:
    """A data directory, a dump and a backup hold every memory: made by us, others cannot read
    them, whatever the umask (found by review: 0755 under the usual 022)."""
    _fill(tmp_path / "data", 1)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "data"), str(tmp_path / "dump")]) == 0
    assert cli.main(["backup", "--data-dir", str(tmp_path / "data"), str(tmp_path / "backup")]) == 0
    for made in ("data", "dump", "dump/processes", "dump/archive", "backup"):
        assert (tmp_path / made).stat().st_mode & 0o077 == 0, made
    existing = tmp_path / "shared-folder"
    existing.mkdir()
    existing.chmod(0o755)
    assert cli.main(["dump", "--data-dir", str(tmp_path / "data"), str(existing)]) == 0
    assert existing.stat().st_mode & 0o777 == 0o755  # a folder that existed is left as it was
    assert (existing / "processes").stat().st_mode & 0o077 == 0


def _dumped_memories(tmp_path: Path, texts: list[str], name: str) -> Path:
    """A dump of a store holding `texts` as memories (ids 1, 2, …) with the hashing embedder."""
    from robot_mcp_memory.api import RobotMemory

    with RobotMemory(tmp_path / f"{name}-data", robot_id="rap-1", embedder="hashing", wait_for_model=5) as mem:
        for t in texts:
            mem.learn(t)
    dest = tmp_path / f"{name}-dump"
    assert cli.main(["dump", "--data-dir", str(tmp_path / f"{name}-data"), str(dest)]) == 0
    return dest


def test_a_load_over_memories_of_the_same_ids_drops_their_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loaded rows replace those of the same ids; the vectors made from the replaced texts
    stayed, so hybrid recall ranked each loaded memory by another text's embedding."""
    src = _dumped_memories(tmp_path, ["the hall conveyor is stuck", "the dock door jams in the rain"], "a")
    target = tmp_path / "b-data"
    _dumped_memories(tmp_path, ["camera saw a red mug", "never lift over 5 kg"], "b")
    assert cli.main(["load", "--data-dir", str(target), str(src)]) == 0

    def vectors(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT count(*) FROM vectors WHERE domain = 'memory'").fetchone()[0])

    with sqlite3.connect(target / "index.db") as conn:
        assert vectors(conn) == 0  # made again by the backfill, from the loaded texts
        texts = [r[0] for r in conn.execute("SELECT content FROM memories ORDER BY id")]
    assert texts == ["the hall conveyor is stuck", "the dock door jams in the rain"]


@pytest.mark.parametrize(
    ("table", "row", "says"),
    [
        ("memories", {"created_at": "yesterday"}, 'created_at "yesterday", which is not a number'),
        ("memories", {"context": "[1, 2]"}, "context that is not a JSON object"),
        ("memories", {"context": "not json at all"}, "context that is not JSON"),
        ("sessions", {"context": "nope"}, "context that is not JSON"),
        ("sessions", {"started_at": "1"}, "which is not a number"),
        ("memories", {"access_count": 10**400}, "not a whole number SQLite can hold"),
        ("memories", {"access_count": 2**63}, "not a whole number SQLite can hold"),
        ("memories", {"created_at": float("inf")}, "not a finite number"),
        ("memories", {"created_at": 1e300}, "which is not a time"),
        ("fleet_robots", {"meta": "[1]"}, "meta that is not a JSON object"),
        ("lessons.lessons", {"params": "nope"}, "params that is not JSON"),
    ],
)
def test_an_archive_row_the_readers_could_not_read_is_refused(
    table: str, row: dict[str, Any], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows of the wrong types got in (exit 0) and then made every list showing them fail (500), or
    the load itself died with a traceback on a context that is not JSON."""
    src = _dumped_memories(tmp_path, ["the hall conveyor is stuck"], "a")
    bases: dict[str, dict[str, Any]] = {
        "sessions": {"id": "s-1", "robot": "rap-1", "started_at": 1.0, "context": "{}"},
        "fleet_robots": json.loads(ROBOT),
        "lessons.lessons": {"scope": "robot:rap-1", "key": "grip", "params": "{}", "created": "x", "updated": "x"},
    }
    base = bases.get(table) or json.loads((src / "archive" / "memories.jsonl").read_text().splitlines()[0])
    if table == "fleet_robots":
        (src / "archive" / "fleet_groups.jsonl").write_text(
            '{"created": "2026-01-01T00:00:00Z", "group_id": "lab", "updated": "2026-01-01T00:00:00Z"}\n'
        )
    (src / "archive" / f"{table}.jsonl").write_text(json.dumps({**base, **row}) + "\n")
    assert cli.main(["load", "--data-dir", str(tmp_path / "c"), str(src)]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("robot-mcp-memory:"))
    assert f"{table}.jsonl line 1 " in line
    assert says in line


def test_a_load_drops_the_vector_of_a_memory_whose_id_is_written_as_a_float(tmp_path: Path) -> None:
    """ "id": 2.0 replaces memory 2, but the vector dropped was that of a memory "2.0"."""
    src = _dumped_memories(tmp_path, ["the hall conveyor is stuck", "the dock door jams in the rain"], "a")
    lines = (src / "archive" / "memories.jsonl").read_text().splitlines()
    floats = [json.dumps({**json.loads(ln), "id": float(json.loads(ln)["id"])}) for ln in lines]
    (src / "archive" / "memories.jsonl").write_text("\n".join(floats) + "\n")
    target = tmp_path / "b-data"
    _dumped_memories(tmp_path, ["camera saw a red mug", "never lift over 5 kg"], "b")
    assert cli.main(["load", "--data-dir", str(target), str(src)]) == 0
    with sqlite3.connect(target / "index.db") as conn:
        assert conn.execute("SELECT count(*) FROM vectors WHERE domain = 'memory'").fetchone()[0] == 0


def _older_store(data: Path, memories: int) -> None:
    """A store at version 11 holding `memories` facts: its first open here upgrades it, which needs
    the write lock, and disk room — migration 12 rewrites every fact's digest."""
    from robot_mcp_memory.api import RobotMemory

    with RobotMemory(data, robot_id="rap-1") as mem:
        mem.learn_many([f"bin {i} jams at {i} N with the gripper closed halfway" for i in range(memories)])
    _sql(
        data,
        "UPDATE memories SET facts_hash = ''",  # as digests from before look: each one changes
        "UPDATE store_meta SET value = '11' WHERE key = 'schema_version'",
    )


def test_a_store_another_process_keeps_locked_during_its_upgrade_is_busy_exit_75_not_a_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server upgrading the store while `doctor` (or a second server, a training loop) opened it:
    "not a usable database (database is locked) — restore it from a backup", exit 65, which the
    service manager does not restart, and `doctor` said FAIL integrity. 75 is restarted."""
    from robot_mcp_memory.storage.sqlite import SqliteStore

    data = tmp_path / "d"
    _older_store(data, 3)
    before = (data / "index.db").read_bytes()

    def impatient(path: Path, **_: Any) -> SqliteStore:  # the real open, waiting 0.2 s instead of 30 s
        return SqliteStore.open(path, db.schema(), db.MIGRATIONS, busy_timeout_ms=20, write_patience_s=0.2)

    monkeypatch.setattr(db, "open_index", impatient)
    other = sqlite3.connect(data / "index.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        capsys.readouterr()
        for command in ("doctor", "stats"):  # a server exits through the same line (main)
            assert cli.main([command, "--data-dir", str(data)]) == cli.EXIT_TEMPFAIL, command
            captured = capsys.readouterr()
            assert captured.out == ""
            line = _the_line(captured.err, data / "index.db")
            assert "busy" in line
            assert "start again in a moment" in line
    finally:
        other.close()
    assert (data / "index.db").read_bytes() == before
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0  # the lock gone, it upgrades


def _the_line(stderr: str, path: Path) -> str:
    """The one ``robot-mcp-memory:`` line of `stderr`: it names `path`, and no backup (the file
    is fine)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("robot-mcp-memory:")]
    assert len(lines) == 1, stderr
    assert str(path) in lines[0]
    assert "backup" not in lines[0]
    return lines[0]


_LIMIT_FILE_SIZE = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.argv = ["robot-mcp-memory", *sys.argv[2:]]
from robot_mcp_memory.surfaces.cli import main
sys.exit(main())
"""


@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE (POSIX): run the tests on Linux or macOS")
def test_a_disk_that_refuses_the_upgrade_is_exit_74_naming_the_disk_not_a_broken_file(tmp_path: Path) -> None:
    """The upgrade's WAL could not grow (a full disk; here a file-size limit): SQLite rolled back by
    itself, the unconditional ROLLBACK failed, and the store was reported corrupt — "restore it
    from a backup, or move it aside to start empty" (exit 65) — while it was fine."""
    from tests.storage.sqlite.test_store_open import child_env

    data = tmp_path / "d"
    _older_store(data, 1000)
    before = (data / "index.db").read_bytes()
    assert len(before) > 64 * 1024

    done = subprocess.run(
        [sys.executable, "-c", _LIMIT_FILE_SIZE, str(64 * 1024), "doctor"],
        env={**child_env(), "MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == cli.EXIT_IOERR, done.stderr[-800:]
    line = _the_line(done.stderr, data / "index.db")
    assert "could not be written" in line
    assert "Free space" in line
    assert (data / "index.db").read_bytes() == before
    assert cli.main(["doctor", "--data-dir", str(data)]) == 0  # with room, the same file upgrades


@pytest.mark.e2e  # runs chattr (as root) to make a directory read-only
def test_commands_that_only_read_work_on_a_read_only_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot or a read-only mount of a stopped server's data directory: `backup` failed with
    "unable to open database file" (no cause named), and `doctor`, `stats` and `dump` refused it
    as not writable although they only read. Commands that write still refuse it."""
    from tests.storage.sqlite.test_opening import read_only

    data = tmp_path / "d"
    _learn(data, "the red bin opens at 12 N")
    capsys.readouterr()

    with read_only(data):
        assert cli.main(["backup", "--data-dir", str(data), str(tmp_path / "bk")]) == 0
        assert cli.main(["doctor", "--data-dir", str(data)]) == 0
        doctor = capsys.readouterr().out
        assert "FTS5's own check skipped: the directory is read-only" in doctor
        assert cli.main(["stats", "--data-dir", str(data)]) == 0
        assert json.loads(capsys.readouterr().out)["memories"] == 1
        assert cli.main(["dump", "--data-dir", str(data), str(tmp_path / "dump")]) == 0
        capsys.readouterr()
        assert cli.main(["reindex", "--data-dir", str(data)]) == cli.EXIT_DATA
        assert "cannot be written" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["index.db"]

    assert _recall(tmp_path / "bk", "red bin") == ["the red bin opens at 12 N"]
    dumped = (tmp_path / "dump" / "archive" / "memories.jsonl").read_text()
    assert "the red bin opens at 12 N" in dumped


def _fill_every_kind(data: Path) -> None:
    """One of each kind a dump moves: a process, a memory in a session, a robot in a group, a lesson."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from robot_mcp_memory.surfaces.mcp.server import build_server
    from tests.conftest import Client

    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "hashing"}))

    async def go() -> None:
        async with create_connected_server_and_client_session(build_server(memory).lowlevel) as session:
            c = Client(session)
            await c.call("save_process", markdown=MAILROOM)
            await c.call("upsert_group", group_id="line-a")
            await c.call("register_robot", robot_id="rap-1", group="line-a")
            await c.call("set_self_improve", enabled=True)
            await c.call("record_params", robot="rap-1", key="grip", params={"force": 12.5}, success=True)
            sid = (await c.call("start_session"))["session_id"]
            await c.call("learn", insight="grip force 12.5 N holds the wet mug", session_id=sid)

    try:
        asyncio.run(go())
    finally:
        memory.close()


def test_dump_load_and_stats_report_every_kind_of_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They reported processes only, though they move memories, sessions, robots, groups and lessons."""
    _fill_every_kind(tmp_path / "a")
    every = "1 process, 1 memory, 1 session, 1 robot, 1 group, 1 lesson"
    assert cli.main(["dump", "--data-dir", str(tmp_path / "a"), str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == f"dumped {every} to {tmp_path / 'd'}"
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == f"loaded {every}; skipped 0"
    assert cli.main(["stats", "--data-dir", str(tmp_path / "b")]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["lessons"] == 1
    assert counts["processes"] == counts["memories"] == counts["fleet_robots"] == 1


def test_stats_counts_no_lessons_before_lessons_db_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "a", 0)
    assert not (tmp_path / "a" / "lessons.db").exists()
    assert cli.main(["stats", "--data-dir", str(tmp_path / "a")]) == 0
    assert json.loads(capsys.readouterr().out)["lessons"] == 0


def test_a_bad_port_flag_is_named_by_the_flag_and_a_bad_variable_by_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_PORT", raising=False)
    assert cli.main(["serve", "--port", "70000"]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "--port must be between 1 and 65535" in err
    assert "MCP_PORT" not in err
    monkeypatch.setenv("MCP_PORT", "70000")
    assert cli.main(["serve"]) == cli.EXIT_CONFIG
    assert "MCP_PORT must be between 1 and 65535" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["backup", "out"], ["import-robotmem", "memory.db"]],
)
def test_sqlite_only_commands_say_what_to_do_on_postgresql_before_opening_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # An address nothing listens on: the command must answer without trying to connect.
    monkeypatch.setenv("MEMORY_DATABASE_URL", "postgresql://fleet:hunter2secret@127.0.0.1:1/memory")
    monkeypatch.chdir(tmp_path)
    assert cli.main([argv[0], "--data-dir", str(tmp_path / "data"), *argv[1:]]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert ("pg_dump" if argv[0] == "backup" else "copy-to-postgres") in err
    assert "Traceback" not in err
    assert "hunter2secret" not in err
    assert not (tmp_path / "data").exists()


def test_a_copy_target_that_is_not_a_postgresql_url_is_named_by_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    argv = ["copy-to-postgres", "--data-dir", str(tmp_path), "--to", "mysql://u:hunter2@h/db"]
    assert cli.main(argv) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "--to must be a PostgreSQL URL" in err
    assert "hunter2" not in err
