"""Stopping the stdio server the way MCP clients and operators do: SIGTERM (how a client stops
the server it started), SIGINT, Ctrl-C in a terminal. Each ends with exit 0, the writer queue
drained and the WAL checkpointed (docs/operations.md, "Exit codes and restarts"); a request
being answered when the signal arrives is still answered."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import child_env, initialize_request, json_lines, server_command
from tests.search.stub_http import StubEmbedServer, stub_server

pytestmark = pytest.mark.e2e

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
INSIGHT = "the lab 3 door sticks: push hard"


def _call(rid: int, tool: str, **args: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}


class _Stdio:
    """The server over stdin/stdout pipes, as an MCP client starts it."""

    def __init__(self, data: Path, **env: str) -> None:
        self.data = data
        self.proc = subprocess.Popen(
            server_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(MEMORY_DATA_DIR=str(data), **env),
        )
        self._out = b""
        self.stderr_seen = b""

    def send(self, message: dict[str, Any]) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def answer(self, rid: int, timeout: float = 60) -> dict[str, Any]:
        stdout = self.proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            for line in self._out.split(b"\n")[:-1]:
                message: dict[str, Any] = json.loads(line)
                if message.get("id") == rid:
                    return message
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no answer to request {rid}"
            ready, _, _ = select.select([stdout], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(stdout.fileno(), 1 << 16)
                assert chunk, f"stdout closed before the answer to request {rid}"
                self._out += chunk

    def start(self) -> None:
        self.send(initialize_request("signals"))
        assert self.answer(1)["result"]["serverInfo"]["name"] == "memory"
        self.send(INITIALIZED)

    def stop_with(self, sig: signal.Signals) -> tuple[int, str]:
        self.proc.send_signal(sig)
        return self.exited()

    def exited(self) -> tuple[int, str]:
        try:
            code = self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        stderr = self.proc.stderr
        assert stderr is not None
        err = (self.stderr_seen + stderr.read()).decode()
        for pipe in (self.proc.stdin, self.proc.stdout, stderr):
            assert pipe is not None
            pipe.close()
        return code, err


def _access_counts(data: Path) -> list[int]:
    db = sqlite3.connect(f"file:{data / 'index.db'}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT access_count FROM memories")]
    finally:
        db.close()


def _assert_closed_cleanly(data: Path, code: int, err: str) -> None:
    assert code == 0, err[-2000:]
    events = [e.get("event") for e in json_lines(err)]
    assert "serve.stopping" in events
    assert "serve.stopped" in events
    # Closed: the WAL was checkpointed and removed (a killed process leaves it behind).
    assert not (data / "index.db-wal").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_stdio_server_with_exit_0_and_the_recall_counts_kept(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A recall's access count is a hot write, queued for the writer thread: killed by SIGTERM the
    server lost it (and left its WAL); SIGINT exited 130."""
    data = tmp_path / "data"
    server = _Stdio(data, MEMORY_EMBEDDER="none")
    server.start()
    server.send(_call(2, "learn", insight=INSIGHT))
    assert server.answer(2)["result"]["structuredContent"]["result"]["status"] == "created"
    server.send(_call(3, "recall", query="door lab"))
    assert len(server.answer(3)["result"]["structuredContent"]["result"]["memories"]) == 1
    code, err = server.stop_with(sig)
    _assert_closed_cleanly(data, code, err)
    assert _access_counts(data) == [1]


def _hold_a_recall(server: _Stdio, stub: StubEmbedServer) -> int:
    """Sends a recall that waits on its query's embedding, held by `stub` until released; returns
    its id once the stub has the request (the recall is in flight)."""
    server.start()
    server.send(_call(2, "learn", insight=INSIGHT))
    assert server.answer(2)["result"]["structuredContent"]["result"]["status"] == "created"

    def embeds_of(query: str) -> int:
        return sum(1 for _, _, body in list(stub.requests) if query in json.dumps(body))

    # Until the model is loaded a recall is keyword-only: ask until one embeds its query.
    rid = 3
    deadline = time.monotonic() + 60
    while True:
        query = f"door lab {rid}"
        server.send(_call(rid, "recall", query=query))
        server.answer(rid)
        if embeds_of(query):
            break
        assert time.monotonic() < deadline, "the embedding model never loaded"
        rid += 1
        time.sleep(0.2)

    stub.mode = "hold"
    rid += 1
    query = f"door lab {rid}"
    server.send(_call(rid, "recall", query=query))
    deadline = time.monotonic() + 60
    while not embeds_of(query):
        assert time.monotonic() < deadline, "the recall never asked for its embedding"
        time.sleep(0.05)
    return rid


def _wait_for_event(server: _Stdio, event: str) -> None:
    """Until the server's stderr holds `event` (read without blocking past a deadline)."""
    stderr = server.proc.stderr
    assert stderr is not None
    seen = b""
    deadline = time.monotonic() + 60
    while f'"event": "{event}"'.encode() not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, seen.decode(errors="replace")[-2000:]
        ready, _, _ = select.select([stderr], [], [], min(remaining, 1.0))
        if ready:
            chunk = os.read(stderr.fileno(), 1 << 16)
            assert chunk, seen.decode(errors="replace")[-2000:]
            seen += chunk
    server.stderr_seen += seen


def test_a_request_being_answered_at_sigterm_is_answered_before_the_server_exits(tmp_path: Path) -> None:
    """The recall waits on its query's embedding (a stub embedding server holds it) when SIGTERM
    arrives: the server stops reading, answers it once the embedding comes, then exits 0."""
    data = tmp_path / "data"
    with stub_server("ollama") as stub:
        server = _Stdio(data, MEMORY_EMBEDDER="ollama", MEMORY_EMBED_URL=stub.url)
        rid = _hold_a_recall(server, stub)
        server.proc.send_signal(signal.SIGTERM)
        _wait_for_event(server, "serve.stopping")  # the signal is taken while the recall is held
        stub.release.set()
        answered = server.answer(rid)
        code, err = server.exited()
    assert answered["result"]["structuredContent"]["result"]["memories"][0]["content"] == INSIGHT
    _assert_closed_cleanly(data, code, err)


def test_a_second_sigterm_cancels_the_requests_in_flight_and_still_closes_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with stub_server("ollama") as stub:
        server = _Stdio(data, MEMORY_EMBEDDER="ollama", MEMORY_EMBED_URL=stub.url)
        _hold_a_recall(server, stub)
        server.proc.send_signal(signal.SIGTERM)
        _wait_for_event(server, "serve.stopping")
        server.proc.send_signal(signal.SIGTERM)
        _wait_for_event(server, "serve.stopping_now")
        stub.release.set()  # the embedding call itself runs on in a thread until answered
        code, err = server.exited()
    _assert_closed_cleanly(data, code, err)


def test_ctrl_c_in_a_terminal_stops_the_server_with_exit_0(tmp_path: Path) -> None:
    """Started from a terminal, the server answers what is typed; Ctrl-C stops it (it kept
    running: mcp's stdin reader thread sat in a read of the terminal until Ctrl-D)."""
    data = tmp_path / "data"
    env = child_env(MEMORY_DATA_DIR=str(data), MEMORY_EMBEDDER="none")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the server, on the terminal
        os.execve(server_command()[0], server_command(), env)
    out = bytearray()
    code: int | None = None
    try:
        os.write(fd, json.dumps(initialize_request("tty")).encode() + b"\n")
        deadline = time.monotonic() + 60
        while b'"serverInfo"' not in out:  # answered over the terminal
            assert time.monotonic() < deadline, out.decode(errors="replace")[-2000:]
            out += _read_some(fd)
        os.write(fd, b"\x03")  # Ctrl-C
        code = _wait(pid, fd, out, timeout=60)
        out += _drain(fd)
    finally:
        if code is None:  # still running (the bug) or never got that far
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    text = bytes(out).decode(errors="replace")
    assert code == 0, text[-2000:]
    assert "serve.stopped" in text
    assert not (data / "index.db-wal").exists()


def _read_some(fd: int) -> bytes:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if not ready:
        return b""
    try:
        return os.read(fd, 1 << 16)
    except OSError:  # EIO: the other end of the terminal is closed
        return b""


def _drain(fd: int) -> bytes:
    out = b""
    while chunk := _read_some(fd):
        out += chunk
    return out


def _wait(pid: int, fd: int, out: bytearray, timeout: float) -> int | None:
    """The exit code, or None if the process is still running after `timeout` seconds; what
    the terminal shows meanwhile is added to `out`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        out += _read_some(fd)
    return None


def test_a_third_signal_is_ignored_and_a_call_stuck_in_a_thread_does_not_hold_the_exit(tmp_path: Path) -> None:
    """After the second SIGTERM the default handlers were back, so a third killed the server
    before its store closed; and the exit waited for the thread still blocked on the embedding
    server (up to MEMORY_EMBED_TIMEOUT) although the second signal said "at once"."""
    data = tmp_path / "data"
    with stub_server("ollama") as stub:
        stub.hold_s = 600  # the embedding call stays blocked far longer than this test waits
        server = _Stdio(data, MEMORY_EMBEDDER="ollama", MEMORY_EMBED_URL=stub.url, MEMORY_EMBED_TIMEOUT="600")
        _hold_a_recall(server, stub)
        server.proc.send_signal(signal.SIGTERM)
        _wait_for_event(server, "serve.stopping")
        server.proc.send_signal(signal.SIGTERM)
        _wait_for_event(server, "serve.stopping_now")
        server.proc.send_signal(signal.SIGTERM)
        try:
            code, err = server.exited()  # within exited()'s bound, the held call notwithstanding
        finally:
            stub.release.set()
    _assert_closed_cleanly(data, code, err)


def test_a_client_that_stops_reading_does_not_keep_a_stopped_server_alive(tmp_path: Path) -> None:
    """Answers fill the pipe a client no longer reads: the writer waited on it for ever after
    SIGTERM, the grace notwithstanding."""
    data = tmp_path / "data"
    server = _Stdio(data, MEMORY_EMBEDDER="none")
    server.start()
    long_text = "the lab door handle sticks when it is cold " * 200
    for rid in range(2, 12):
        server.send(_call(rid, "learn", insight=f"door {rid}: {long_text}"))
        server.answer(rid)
    for rid in range(100, 160):  # ~5 MB of answers, never read
        server.send(_call(rid, "recall", query="door lab handle", n=10))
    _wait_for_event(server, "tool.call")
    code, err = server.stop_with(signal.SIGTERM)
    _assert_closed_cleanly(data, code, err)


def test_a_client_that_sends_its_requests_and_closes_stdin_gets_every_answer(tmp_path: Path) -> None:
    """At the end of input the session cancelled the requests still being answered: a client
    that pipes a batch of requests in and closes got a few of them answered."""
    data = tmp_path / "data"
    server = _Stdio(data, MEMORY_EMBEDDER="none")
    server.start()
    for rid in range(2, 102):
        server.send(_call(rid, "learn", insight=f"crate {rid} was stacked on the pallet"))
    stdin = server.proc.stdin
    assert stdin is not None
    stdin.close()
    answered = {server.answer(rid)["id"] for rid in range(2, 102)}
    assert answered == set(range(2, 102))
    assert server.proc.wait(timeout=60) == 0


def test_a_client_that_dies_ends_the_session_without_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = _Stdio(data, MEMORY_EMBEDDER="none")
    server.start()
    stdout = server.proc.stdout
    assert stdout is not None
    stdout.close()  # the client's end of the server's stdout, gone
    for rid in range(2, 40):
        server.send(_call(rid, "recall", query=f"door {rid}"))
    assert server.proc.wait(timeout=60) == 0
    stderr = server.proc.stderr
    assert stderr is not None
    err = stderr.read().decode()
    assert "Traceback" not in err
    assert "stdio.client_gone" in err
