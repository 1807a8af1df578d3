"""Startup safety, through the real process: a database it cannot use, or a bad setting, ends the
process at once with a documented exit code and one line saying what to do — it never serves,
never crash-loops into the file, never touches it."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness import HOST, child_env, free_port, server_command

pytestmark = pytest.mark.e2e

EXIT_DATA = 65  # sysexits EX_DATAERR: restarting will not help
EXIT_CONFIG = 78  # sysexits EX_CONFIG
EXIT_UNAVAILABLE = 69  # sysexits EX_UNAVAILABLE: cannot listen on the host:port
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


@pytest.mark.parametrize("command", ["serve", "web"])
def test_a_port_in_use_exits_69_with_one_line_naming_host_port_before_serving(tmp_path: Path, command: str) -> None:
    """It said ``serve.http`` with its URLs, then uvicorn's bare OSError, then exited 3 (not a
    documented code)."""
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*server_command(), command, "--host", HOST, "--port", str(port)],
            env=child_env(MCP_TRANSPORT="sse", MEMORY_DATA_DIR=str(data)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    assert done.returncode == EXIT_UNAVAILABLE, done.stderr
    lines = stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert f"{HOST}:{port}" in lines[0]
    assert "already in use" in lines[0]
    assert not data.exists()  # checked before the store is opened


def test_a_host_that_does_not_resolve_exits_69_naming_it(tmp_path: Path) -> None:
    """uvicorn logged ``[Errno -2] Name or service not known``, naming no host."""
    data = tmp_path / "data"
    port = free_port()
    env = {"MCP_TRANSPORT": "sse", "MCP_HOST": "no-such-host.invalid", "MCP_PORT": str(port)}
    done = run_server({**env, "MEMORY_DATA_DIR": str(data)})
    assert done.returncode == EXIT_UNAVAILABLE, done.stderr
    lines = stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert f"no-such-host.invalid:{port}" in lines[0]
    assert "does not resolve" in lines[0]
    assert not data.exists()
