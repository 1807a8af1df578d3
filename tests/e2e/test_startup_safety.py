"""Startup safety, through the real process: a database it cannot use, or a bad setting, ends the
process at once with a documented exit code and one line saying what to do — it never serves,
never crash-loops into the file, never touches it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness import child_env, free_port, server_command

pytestmark = pytest.mark.e2e

EXIT_DATA = 65  # sysexits EX_DATAERR: restarting will not help
EXIT_CONFIG = 78  # sysexits EX_CONFIG
RUN_TIMEOUT_S = 30

#: Deterministic bytes that are not an SQLite database (no header, no pages).
GARBAGE = b"this is not a database\n" + bytes(range(256)) * 16


def run_server(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        server_command(),
        env=child_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("transport", ["stdio", "sse"])
def test_a_garbage_index_db_exits_65_with_one_line_naming_the_path_and_leaves_it_untouched(
    tmp_path: Path, transport: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    index = data / "index.db"
    index.write_bytes(GARBAGE)

    done = run_server({"MCP_TRANSPORT": transport, "MCP_PORT": str(free_port()), "MEMORY_DATA_DIR": str(data)})

    assert done.returncode == EXIT_DATA, done.stderr
    assert done.stdout == ""
    lines = stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert str(index) in lines[0]
    assert "backup" in lines[0]  # the remedy: restore a copy of index.db (or move the file aside)
    assert index.read_bytes() == GARBAGE
    assert sorted(p.name for p in data.iterdir()) == ["index.db"]  # no -wal / -shm / journal left behind


@pytest.mark.parametrize("port", ["not-a-port", "0", "70000"])
def test_a_bad_mcp_port_exits_78_with_one_line_naming_mcp_port(tmp_path: Path, port: str) -> None:
    data = tmp_path / "data"

    done = run_server({"MCP_TRANSPORT": "sse", "MCP_PORT": port, "MEMORY_DATA_DIR": str(data)})

    assert done.returncode == EXIT_CONFIG, done.stderr
    assert done.stdout == ""
    lines = stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert "MCP_PORT" in lines[0]
    assert not data.exists()  # configuration is checked before anything is created
