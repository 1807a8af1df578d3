"""The real server as a child process, and MCP client sessions to it over every transport.

`ServerProcess` runs ``python -m robot_mcp_memory`` with ``MCP_TRANSPORT=sse`` on a free loopback
port, waits (bounded) for ``GET /healthz``, keeps each run's stderr in its own file, and stops with
SIGTERM → bounded wait → SIGKILL. `restart` reuses the same data directory and port, so a client
that reconnects sees exactly what a robot brain would see after a service restart.

`Inspector` runs a client nobody here wrote, the MCP Inspector CLI from npm, with a bounded wait.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
import httpx
from mcp import ClientSession
from mcp.client.session import MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import Client, doc

HOST = "127.0.0.1"
#: How long a start may take before it is declared failed: a bound on waiting, not a speed figure.
#: A passing start returns at its first healthy answer; on a 2-core machine shared with other runs
#: the interpreter's start and imports alone can take tens of seconds.
START_DEADLINE_S = 90.0
POLL_INTERVAL_S = 0.05
STOP_GRACE_S = 10.0

#: The seven process tools of the primary spec §5 (other domains add more; these must be there).
PROCESS_TOOLS = frozenset(
    {
        "find_processes",
        "get_process",
        "save_process",
        "record_outcome",
        "delete_process",
        "list_processes",
        "reindex",
    }
)

_OUR_ENV_PREFIXES = ("MCP_", "MEMORY_")
_OUR_ENV_NAMES = frozenset({"ROBOT_ID"})


def robot_tokens(tokens: Mapping[str, str]) -> str:
    """``MEMORY_ROBOT_TOKENS`` for robot id → token."""
    return ",".join(f"{r}:{t}" for r, t in tokens.items())


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment without any setting of ours (so a developer's shell cannot leak
    a token or a data directory into a test), plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OUR_ENV_PREFIXES) and k not in _OUR_ENV_NAMES}
    env.update(overrides)
    return env


def initialize_request(client: str, rid: int = 1) -> dict[str, Any]:
    """A raw JSON-RPC ``initialize`` request, for tests that speak the wire themselves."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}},
    }


def rss(pid: int) -> int:
    """A process's resident memory in bytes (`/proc/<pid>/status`)."""
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert found is not None
    return int(found.group(1)) * 1024


def server_ended(sock: socket.socket, wait: float) -> bool:
    """Whether the server has ended `sock`'s connection: what it had sent is read, then the end
    (False when it is still open after `wait` seconds of silence)."""
    sock.settimeout(wait)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def server_command() -> list[str]:
    return [sys.executable, "-m", "robot_mcp_memory"]


def console_script() -> Path:
    """The installed ``robot-mcp-memory`` script beside this interpreter."""
    return Path(sys.executable).with_name("robot-mcp-memory")


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among `text`'s lines (structlog's output); other lines are skipped."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


class ServerDidNotStart(RuntimeError):
    pass


@dataclass
class ServerProcess:
    """One real server on ``127.0.0.1:port`` serving SSE, Streamable HTTP and /healthz."""

    data_dir: Path
    log_dir: Path
    port: int = field(default_factory=free_port)
    process: anyio.abc.Process | None = None
    runs: int = 0
    stderr_paths: list[Path] = field(default_factory=list)
    #: Extra environment for the server (tokens, allowed hosts …).
    env: dict[str, str] = field(default_factory=dict)
    #: The command that runs the server (a wrapper can set resource limits before exec'ing it).
    command: list[str] = field(default_factory=server_command)

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    @property
    def index_path(self) -> Path:
        return self.data_dir / "index.db"

    @property
    def pid(self) -> int:
        assert self.process is not None, "the server is not running"
        return self.process.pid

    def stderr(self, run: int = -1) -> str:
        """The stderr of one run (default: the latest)."""
        return self.stderr_paths[run].read_text(encoding="utf-8", errors="replace")

    async def start(self) -> None:
        assert self.process is None, "already running"
        self.runs += 1
        stderr_path = self.log_dir / f"server-{self.runs}.stderr"
        self.stderr_paths.append(stderr_path)
        env = child_env(
            MCP_TRANSPORT="sse",
            MCP_HOST=HOST,
            MCP_PORT=str(self.port),
            MEMORY_DATA_DIR=str(self.data_dir),
            **self.env,
        )
        with stderr_path.open("wb") as err:
            self.process = await anyio.open_process(
                self.command, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err
            )
        await self._wait_healthy()

    async def _wait_healthy(self) -> None:
        assert self.process is not None
        deadline = anyio.current_time() + START_DEADLINE_S
        last: str = "no answer yet"
        async with httpx.AsyncClient(timeout=2.0) as http:
            while anyio.current_time() < deadline:
                if self.process.returncode is not None:
                    code = self.process.returncode
                    await self._reap()
                    raise ServerDidNotStart(f"server exited with {code} before it was healthy:\n{self.stderr()}")
                try:
                    response = await http.get(self.url("/healthz"))
                except httpx.TransportError as exc:
                    last = repr(exc)
                else:
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}"
                await anyio.sleep(POLL_INTERVAL_S)
        await self.stop()
        raise ServerDidNotStart(f"no healthy /healthz within {START_DEADLINE_S} s (last: {last}):\n{self.stderr(-1)}")

    async def stop(self) -> int | None:
        """SIGTERM, wait up to STOP_GRACE_S, then SIGKILL. Returns the exit code (None if not running)."""
        if self.process is None:
            return None
        if self.process.returncode is None:
            self.process.terminate()
            with anyio.move_on_after(STOP_GRACE_S):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
        return await self._reap()

    async def kill(self) -> int | None:
        """SIGKILL now: no shutdown code runs in the server."""
        if self.process is None:
            return None
        if self.process.returncode is None:
            self.process.kill()
        return await self._reap()

    async def restart(self) -> int | None:
        """Stop (gracefully) and start again on the same data directory and port."""
        code = await self.stop()
        await self.start()
        return code

    async def _reap(self) -> int:
        # Signal at most once per path: a second signal polls (waitpid) the dead child itself and
        # races asyncio's child watcher, which then reports a bogus exit code 255.
        process, self.process = self.process, None
        assert process is not None
        with anyio.fail_after(STOP_GRACE_S):
            code = await process.wait()
        await process.aclose()
        return code


@asynccontextmanager
async def running(tmp_path: Path, env: dict[str, str] | None = None) -> AsyncIterator[ServerProcess]:
    """A real server on a fresh data directory under `tmp_path` (its logs there too), stopped after."""
    proc = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=env or {})
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


@asynccontextmanager
async def _session(read: Any, write: Any, handler: MessageHandlerFnT | None = None) -> AsyncIterator[Client]:
    async with ClientSession(read, write, message_handler=handler) as session:
        await session.initialize()
        yield Client(session)


def bearer(token: str | None) -> dict[str, str] | None:
    return None if token is None else {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def sse_session(server: ServerProcess, token: str | None = None) -> AsyncIterator[Client]:
    async with (
        sse_client(server.url("/sse"), headers=bearer(token)) as (read, write),
        _session(read, write) as client,
    ):
        yield client


@asynccontextmanager
async def http_session(
    server: ServerProcess, *, terminate_on_close: bool = True, token: str | None = None
) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers=bearer(token)) as http,
        streamable_http_client(server.url("/mcp"), http_client=http, terminate_on_close=terminate_on_close) as (
            read,
            write,
            _,
        ),
        _session(read, write) as client,
    ):
        yield client


@asynccontextmanager
async def stdio_session(
    command: list[str], data_dir: Path, errlog: TextIO, handler: MessageHandlerFnT | None = None
) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=child_env(MEMORY_DATA_DIR=str(data_dir)))
    async with stdio_client(params, errlog=errlog) as (read, write), _session(read, write, handler) as client:
        yield client


INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
#: A cold ``npx -y`` downloads the inspector (~10-60 s); a warm call takes about a second.
INSPECTOR_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class InspectorRun:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.returncode == 0, f"inspector exited {self.returncode}:\n{self.stderr}\n{self.stdout}"
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def tool_result(self) -> dict[str, Any]:
        """The JSON object a tools/call returned as its one text block."""
        return self._text(self.json())

    def refusal(self) -> dict[str, Any]:
        """The JSON object of a refused tools/call (``{"error": …, "detail": …}``): its result is
        marked ``isError``, which the Inspector prints, then exits 5 (``tool_is_error``)."""
        assert self.returncode == 5, f"inspector exited {self.returncode}, not 5:\n{self.stderr}\n{self.stdout}"
        data: dict[str, Any] = json.loads(self.stdout)
        assert data["isError"] is True, data
        return self._text(data)

    @staticmethod
    def _text(data: dict[str, Any]) -> dict[str, Any]:
        content = data["content"]
        assert len(content) == 1, content
        assert content[0]["type"] == "text"
        result: dict[str, Any] = json.loads(content[0]["text"])
        return result


@dataclass(frozen=True)
class Inspector:
    """``npx -y @modelcontextprotocol/inspector --cli`` with HOME in a temporary folder (it writes
    ``~/.mcp-inspector/``); npm's package cache stays where it was, so only the first run downloads."""

    npx: str
    env: dict[str, str]

    async def run(self, *args: str) -> InspectorRun:
        with anyio.fail_after(INSPECTOR_TIMEOUT_S):
            done = await anyio.run_process([self.npx, "-y", INSPECTOR, "--cli", *args], env=self.env, check=False)
        return InspectorRun(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


async def embedder_settled(server: ServerProcess, wait: float = 120.0) -> None:
    """Until the server's embedder has loaded or given up, as its log says: a model loading in the
    background grows the process by ~100 MB, which a test measuring what a client costs must not
    count (on a loaded machine the load outlasts the test's first steps)."""
    with anyio.fail_after(wait):
        while not any(event in server.stderr() for event in ("embedder.ready", "embedder.unavailable")):  # noqa: ASYNC110 - the log is the signal
            await anyio.sleep(0.1)


async def save_big_document(server: ServerProcess) -> None:
    """Save process ``big`` (~190 kB, the largest answer a slow-reader test asks for) and read it
    8 times: what the first reads of it cache is then not counted as held for a slow client."""
    async with http_session(server) as client:
        saved = await client.call("save_process", markdown=doc("big", "a big one", "word " * 38_000))
        assert saved.get("error") is None, saved
        for _ in range(8):
            assert (await client.call("get_process", id="big")).get("error") is None
