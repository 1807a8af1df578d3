"""The stdio transport of the real server process (`robot_mcp_memory.surfaces.mcp.stdio`).

Over pipes the server reads and writes on its event loop; a line that is not JSON-RPC, or one
longer than `stdio.MAX_LINE`, is skipped and the session goes on. A terminal or a regular file
keeps mcp's own transport."""

from __future__ import annotations

import json
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.surfaces.mcp import stdio
from robot_mcp_memory.surfaces.mcp.stdio import MAX_LINE
from tests.e2e.harness import child_env, initialize_request, server_command

pytestmark = pytest.mark.e2e  # starts the server over stdio

INIT = initialize_request("raw")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(rid: int, tool: str, **args: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def _line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def _env(tmp_path: Path) -> dict[str, str]:
    return child_env(MEMORY_DATA_DIR=str(tmp_path / "data"), ROBOT_ID="pipe-1", MEMORY_EMBEDDER="none")


def _responses(out: bytes) -> dict[int, dict[str, Any]]:
    return {m["id"]: m for m in map(json.loads, out.decode().splitlines()) if "id" in m}


def _script(*messages: dict[str, Any] | bytes) -> bytes:
    return b"".join(m if isinstance(m, bytes) else _line(m) for m in messages)


SCRIPT = (
    INIT,
    INITIALIZED,
    b"this is not json\n",
    b"{" + b"x" * (MAX_LINE + 10) + b"}\n",  # too long: skipped up to its newline
    _call(2, "learn", insight="the gripper slipped at 12 N on the wet mug", context={"task": {"success": False}}),
    _call(3, "recall", query="wet mug gripper"),
)


def _check(responses: dict[int, dict[str, Any]]) -> None:
    assert sorted(responses) == [1, 2, 3]
    assert responses[2]["result"]["structuredContent"]["result"]["status"] == "created"
    recalled = responses[3]["result"]["structuredContent"]["result"]["memories"]
    assert [m["content"] for m in recalled] == ["the gripper slipped at 12 N on the wet mug"]
    # The text block is the same value as the structured content, as compact JSON.
    text = responses[3]["result"]["content"][0]["text"]
    assert json.loads(text) == responses[3]["result"]["structuredContent"]["result"]
    assert "\n" not in text


def _converse(
    phases: list[tuple[dict[str, Any] | bytes, ...]], env: dict[str, str]
) -> tuple[dict[int, dict[str, Any]], bytes]:
    """Send each phase's messages once every request sent before has been answered (the server
    runs requests concurrently; a raw line counts as a request when it holds an ``"id"``), then
    close stdin: the server exits at end of input, dropping what it has not answered yet (mcp's
    behaviour too)."""
    proc = subprocess.Popen(
        server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    assert stdin is not None
    assert stdout is not None
    assert stderr is not None
    out = b""
    asked = 0
    deadline = time.monotonic() + 120
    for phase in phases:
        # Written from a thread: a line longer than the pipe holds blocks until the server reads it.
        writer = threading.Thread(target=lambda p=phase: (stdin.write(_script(*p)), stdin.flush()))
        writer.start()
        asked += sum(1 for m in phase if (isinstance(m, dict) and "id" in m) or (isinstance(m, bytes) and b'"id"' in m))
        while len(_responses(out.rpartition(b"\n")[0])) < asked and time.monotonic() < deadline:
            ready, _, _ = select.select([stdout], [], [], 1.0)
            if ready:
                chunk = os.read(stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                out += chunk
        writer.join()
    stdin.close()
    err = stderr.read()
    assert proc.wait(timeout=60) == 0, err.decode()[-2000:]
    return _responses(out.rpartition(b"\n")[0]), err


def test_over_pipes_bad_and_overlong_lines_are_skipped_and_the_session_goes_on(tmp_path: Path) -> None:
    responses, err = _converse([SCRIPT[:-1], SCRIPT[-1:]], _env(tmp_path))
    _check(responses)
    assert b"longer than" in err  # the skipped line is logged, not silently lost


def test_an_overlong_request_is_answered_with_an_error_when_its_id_can_be_read(tmp_path: Path) -> None:
    """Such a request went unanswered: its caller waited for its own timeout. The id is read from
    the line's first or last bytes, where clients write it; the line itself is never kept."""
    big = "x" * (MAX_LINE + 10)
    id_first = _line(_call(7, "learn", insight=big))  # {"jsonrpc": "2.0", "id": 7, ...}
    head_less = {"method": "tools/call", "params": {"name": "learn", "arguments": {"insight": big, "id": 5}}}
    id_last = _line({"jsonrpc": "2.0", **head_less, "id": "late-8"})
    phases: list[tuple[dict[str, Any] | bytes, ...]] = [
        (INIT, INITIALIZED),
        (id_first,),
        (id_last,),
        (_call(9, "recall"),),
    ]
    responses, err = _converse(phases, _env(tmp_path))
    for rid in (7, "late-8"):
        assert responses[rid]["error"]["code"] == -32600  # type: ignore[index]
        assert "longer than" in responses[rid]["error"]["message"]  # type: ignore[index]
    assert responses[9]["result"]["structuredContent"]["result"]["mode"] == "filter"  # the session goes on
    assert err.count(b"longer than") >= 2


def test_a_request_whose_id_no_answer_can_carry_does_not_end_the_session(tmp_path: Path) -> None:
    """A lone surrogate as the id: the refusal could not be encoded, nor its replacement, and the
    server exited (found by review). The key is written ``"\\u0069d"`` (JSON for "id")."""
    lone = b'{"jsonrpc":"2.0","\\u0069d":"\\ud800","method":"tools/call","params":{"name":"recall","arguments":{}}}\n'
    responses, _ = _converse([(INIT, INITIALIZED), (lone, _call(9, "recall"))], _env(tmp_path))
    assert responses[9]["result"]["structuredContent"]["result"]["mode"] == "filter"


def test_only_a_requests_own_id_is_read_from_an_overlong_line() -> None:
    """Answered under the wrong id, an error lands on another of the client's requests (found by
    review: a response, a float id, a 20-digit id and an escaped key were all answered)."""
    read = stdio._overlong_id
    assert read(b'{"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"x', b"") == 12
    assert read(b'{"id":"a\\"b","method":"x","params":{', b"") == 'a"b'
    assert read(b'{"id":12,"jsonrpc":"2.0","method":"tools/call","params":{', b"}}") == 12
    # mcp-go: id, then the long params, then the method last
    assert (
        read(
            b'{"jsonrpc":"2.0","id":11,"params":{"name":"learn","arguments":{"insight":"x',
            b'x"}},"method":"tools/call"}',
        )
        == 11
    )
    # the Python SDK: method and params first, id last
    assert (
        read(b'{"method":"tools/call","params":{"name":"learn","arguments":{', b'..."x"}},"jsonrpc":"2.0","id":-3}\n')
        == -3
    )
    assert read(b'{"jsonrpc":"2.0","id":12345678901234567890,"method":"x","params":{', b"") == 12345678901234567890
    nothing = [
        (b'{"jsonrpc":"2.0","id":7,"result":{', b"}}"),  # a response: its id is the client's own
        (b'{"jsonrpc":"2.0","method":"x","params":{', b',"id":7}}'),  # an id nested in the arguments
        (b'{"jsonrpc":"2.0","method":"x","params":{"id":4', b'"id": 5}}'),
        (b'{"jsonrpc":"2.0","id":7.5,"method":"x"', b""),  # not an id mcp would answer
        (b'{"jsonrpc":"2.0","id":1e3,"method":"x"', b""),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"', b""),
        (b'{"jsonrpc":"2.0","method":"x","params":{}', b',"\\"id":5}'),  # a key that only ends in id
        (b'{"jsonrpc":"2.0","result":{', b',"id":5}'),  # a response with its id last
        (b'{"method":"notifications/x","params":{', b'"y"}}'),
        (b'{"jsonrpc":"2.0","method":"x","id":123', b""),  # cut off by the edge: 123 of 123456
        (b'{"jsonrpc":"2.0","method":"x","id":-1', b""),
        (b'{"jsonrpc":"2.0","id":12ab,"method":"x"', b""),  # not JSON after all
        (b'{"jsonrpc":"2.0","id":007,"method":"x"', b""),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"x","params":{', b""),  # no answer can carry it
        (b'{"jsonrpc":"2.0","method":"x","params":{', b',"id":"\\udc00"}'),
    ]
    for head, tail in nothing:
        assert read(head, tail) is None, (head, tail)


def test_only_pipes_take_the_thread_free_transport(tmp_path: Path) -> None:
    """A terminal, a regular file or a socket keeps mcp's transport (never switched to
    non-blocking; asyncio's write-pipe transport takes a readable socket for a closed one)."""
    regular = tmp_path / "script.jsonl"
    regular.write_bytes(b"")
    with regular.open("rb") as f:
        assert not stdio._is_pipe(f)
    r, w = os.pipe()
    with os.fdopen(r, "rb") as rf, os.fdopen(w, "wb") as wf:
        assert stdio._is_pipe(rf)
        assert stdio._is_pipe(wf)
    a, b = socket.socketpair()
    with a, b, a.makefile("rb") as af:
        assert not stdio._is_pipe(af)


def test_one_socket_for_stdin_and_stdout_is_served(tmp_path: Path) -> None:
    """How inetd or socat hand a connection over: the same socket on fd 0 and fd 1."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        proc = subprocess.Popen(
            server_command(), stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=subprocess.PIPE, env=_env(tmp_path)
        )
        theirs.close()
        ours.sendall(_script(INIT, INITIALIZED, _call(2, "recall", query="anything")))
        out = b""
        deadline = time.monotonic() + 60
        while len(_responses(out.rpartition(b"\n")[0])) < 2 and time.monotonic() < deadline:
            ours.settimeout(max(0.1, deadline - time.monotonic()))
            chunk = ours.recv(1 << 16)
            if not chunk:
                break
            out += chunk
        ours.shutdown(socket.SHUT_WR)
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err.decode()[-2000:]
    responses = _responses(out.rpartition(b"\n")[0])
    assert sorted(responses) == [1, 2]
    assert responses[2]["result"]["structuredContent"]["result"]["memories"] == []


def test_the_pipes_are_blocking_again_for_whoever_shares_them_next(tmp_path: Path) -> None:
    """The transport makes fd 0 and 1 non-blocking while it runs (the open file descriptions are
    shared); a wrapper script running something after the server gets them back blocking."""
    probe = "import os, sys; sys.stderr.write(f'BLOCKING {os.get_blocking(0)} {os.get_blocking(1)}')"
    script = f"{shlex.join(server_command())}; {shlex.quote(sys.executable)} -c {shlex.quote(probe)}"
    proc = subprocess.Popen(
        ["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path)
    )
    out, err = proc.communicate(_script(INIT, INITIALIZED), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert _responses(out)[1]["result"]["serverInfo"]["name"] == "memory"
    assert b"BLOCKING True True" in err


def test_a_request_that_does_not_validate_gets_an_error_answer_not_silence(tmp_path: Path) -> None:
    """A line that is JSON to Python but not valid JSON-RPC to the SDK — NaN or 1e400 (which mcp
    would turn into null), an integer of 5,000 digits, a lone surrogate, nesting past the
    parser's limit — answers its request with -32600 instead of leaving the client waiting or
    storing null; nothing is stored from it."""
    learn = _call(5, "learn", insight="grip force reading", context={"params": {"f": 1}})
    nan = json.dumps(learn).replace('"f": 1', '"f": NaN').encode() + b"\n"
    surrogate = json.dumps(_call(6, "recall", query="x")).replace('"x"', '"\\udc00"').encode() + b"\n"
    big = json.dumps(_call(10, "learn", insight="big", context={"params": {"n": 1}})).replace('"n": 1', '"n": 1e400')
    digits = json.dumps(_call(11, "learn", insight="long", context={"p": {"n": 1}})).replace(
        '"n": 1', '"n": ' + "9" * 5000
    )
    deep = _call(7, "learn", insight="deep", context="CTX")
    deep_line = json.dumps(deep).replace('"CTX"', '{"a":' * 300 + "1" + "}" * 300).encode() + b"\n"
    phases: list[tuple[dict[str, Any] | bytes, ...]] = [
        (INIT, INITIALIZED, nan, surrogate, deep_line, big.encode() + b"\n", digits.encode() + b"\n"),
        (_call(8, "recall", query="grip force reading"),),
        (_call(9, "recall", query="grip force reading"),),
    ]
    responses, err = _converse(phases, _env(tmp_path))
    assert b"stdio.request_refused" in err  # a warning of ours, not the session's "Internal Server Error"
    assert b'"level": "error"' not in err
    for rid in (5, 6, 7, 10, 11):
        assert responses[rid]["error"]["code"] == -32600, responses[rid]
    assert "NaN" in responses[5]["error"]["message"]
    assert "out of range" in responses[10]["error"]["message"]  # 1e400: mcp made it null
    assert "out of range" in responses[11]["error"]["message"]  # 5,000 digits: mcp answered nothing
    for rid in (8, 9):  # the session went on, and nothing was stored from the refused lines
        assert responses[rid]["result"]["structuredContent"]["result"]["memories"] == []
