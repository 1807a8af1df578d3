"""Our stack's own cost per SSE ping: instructions through our whole ASGI app, in-process, ÷ a bare
FastMCP ``sse_app()``'s, pinged the same way (issue 29; docs/benchmarks.md, "S2").

    python -m bench.sse_instructions [--pings 300] [--warmup 200] [--process-time [--repeats 5]]

It builds our `http_app` (tokens on: an admin token and robot tokens, as `bench.load_sse` starts
the server; the client holds robot-1's) and the bare FastMCP app with one echo tool
(`bench.bare_echo`), and drives each with one raw ASGI SSE client, no sockets and no uvicorn:
``GET /sse``, ``initialize``, ``--warmup`` pings, then ``--pings`` pings POSTed to ``/messages/``,
each awaited on the stream before the next is sent. Our app's lifespan is not run: SSE needs
neither the Streamable HTTP session manager nor the loop-lag monitor, whose timer would otherwise
be counted with the pings.

With valgrind on the PATH each side runs in a child process of its own under ``valgrind
--tool=callgrind --instr-atstart=no``; the child turns instrumentation on just before its pings and
off just after them (``callgrind_control -i on|off``, dumping each window), and an empty window
(on, then off at once) is counted the same way and subtracted, so what is left is the pings'
own instructions — the server's and the in-process client's, the same client for both sides.
Every child runs with one hash seed. It prints (the figures are in docs/benchmarks.md, "S2")::

    SSE ping through the ASGI app in-process, 300 pings after 200 warm-up; instructions per ping (callgrind):
      ours         N,NNN,NNN
      bare         N,NNN,NNN
      ours ÷ bare  N.NN×

The count does not depend on the machine's load or clock (only our app's background threads,
which run for as long as the window lasts, make it move a little), so it compares commits on a
shared machine.
Without valgrind, or with ``--process-time``, both sides run in this process and it prints
``time.process_time`` per ping instead (the best of ``--repeats`` windows): the noisy figure, which
moves with the machine's load and the CPU's clock; say so beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import anyio
from anyio.abc import ObjectReceiveStream
from starlette.types import ASGIApp, Message, Scope

from bench import bare_echo
from bench.load_sse import ADMIN_TOKEN, token_of
from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.mcp.server import build_server, http_app

Side = Literal["ours", "bare"]
SIDES: tuple[Side, ...] = ("ours", "bare")
ROBOTS = tuple(f"robot-{n}" for n in range(1, 6))
#: The robot whose token the client holds.
CLIENT_ROBOT = ROBOTS[0]
HOST_HEADER = b"127.0.0.1:8000"
#: The bounded wait for a whole session: a start, and a share per ping (under callgrind a ping runs
#: many times slower). One deadline for the session, not one per answer, so that arming a timer
#: is not counted with every ping.
SESSION_DEADLINE_S = 120.0
PING_DEADLINE_S = 1.0
#: Body chunks the SSE stream may hold unread; one ping's answer is read before the next is sent.
STREAM_BUFFER = 64
ROOT = Path(__file__).resolve().parents[1]


class PingFailed(RuntimeError):
    """The app refused the session or a message, or answered something other than the ping's result."""


class Window(Protocol):
    """What is measured around a run of pings: `open` just before the first, `close` just after the last."""

    def open(self) -> None: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------- the apps
@contextlib.contextmanager
def built(side: Side, data_dir: Path, token: str | None = None) -> Iterator[tuple[ASGIApp, str]]:
    """(the ASGI app, the bearer token its client sends: robot-1's unless `token` is given). Ours
    opens a fresh store in `data_dir` with tokens on."""
    token = token_of(CLIENT_ROBOT) if token is None else token
    if side == "bare":
        yield bare_echo.build(port=8000).sse_app(), token
        return
    settings = Settings.from_env(
        {
            "MEMORY_DATA_DIR": str(data_dir),
            "MEMORY_EMBEDDER": "none",
            "MCP_TRANSPORT": "sse",
            "MEMORY_TOKEN": ADMIN_TOKEN,
            "MEMORY_ROBOT_TOKENS": ",".join(f"{r}:{token_of(r)}" for r in ROBOTS),
        }
    )
    memory = Memory.open(settings)
    try:
        yield http_app(memory, build_server(memory)), token
    finally:
        memory.close()


# ---------------------------------------------------------------------------- the raw ASGI SSE client
def _scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


@dataclass
class _Session:
    app: ASGIApp
    auth: tuple[bytes, bytes]
    query: bytes
    events: ObjectReceiveStream[bytes]

    async def post(self, body: bytes) -> None:
        """POST one JSON-RPC message to /messages/ and require the transport's 202."""
        headers = [
            (b"host", HOST_HEADER),
            self.auth,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if delivered:
                await anyio.sleep_forever()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        statuses: list[int] = []

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await self.app(_scope("POST", "/messages/", self.query, headers), receive, send)
        if statuses != [202]:
            raise PingFailed(f"POST /messages/ answered {statuses}, not [202]")

    async def answer(self, request_id: int) -> None:
        """Read the stream up to the result of request `request_id`; anything else is a failure."""
        wanted = b'"id":%d,"result"' % request_id
        while True:
            try:
                chunk = await self.events.receive()
            except anyio.EndOfStream:
                raise PingFailed(f"the SSE stream ended before the answer to {request_id}") from None
            if b"event: message" not in chunk:
                continue  # the stream's keep-alive comments
            if wanted not in chunk:
                raise PingFailed(f"expected the result of {request_id}, got {chunk[:200]!r}")
            return


@contextlib.asynccontextmanager
async def _stream(app: ASGIApp, token: str) -> AsyncIterator[_Session]:
    """``GET /sse`` held open in a task; the session once the stream has named its endpoint.
    Leaving it disconnects the stream."""
    auth = (b"authorization", b"Bearer " + token.encode())
    sending, events = anyio.create_memory_object_stream[bytes](STREAM_BUFFER)
    disconnected = anyio.Event()
    refused: list[int] = []

    async def receive() -> Message:
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            refused.append(message["status"])
            sending.close()
        elif message["type"] == "http.response.body" and message.get("body") and not refused:
            await sending.send(message["body"])

    headers = [(b"host", HOST_HEADER), auth, (b"accept", b"text/event-stream")]

    async def get() -> None:
        await app(_scope("GET", "/sse", b"", headers), receive, send)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(get)
        try:
            endpoint = await _endpoint(events)
            if endpoint is None:
                raise PingFailed(f"GET /sse answered {refused}, not 200")
            yield _Session(app, auth, endpoint, events)
        finally:
            disconnected.set()
            tasks.cancel_scope.cancel()


async def _endpoint(events: ObjectReceiveStream[bytes]) -> bytes | None:
    """The query string of the endpoint event (``session_id=…``); None if the stream ended first."""
    while True:
        try:
            chunk = await events.receive()
        except anyio.EndOfStream:
            return None
        found = re.search(rb"session_id=[0-9a-f]+", chunk)
        if found:
            return found.group(0)


async def _converse(app: ASGIApp, token: str, warmup: int, windows: Sequence[tuple[int, Window]]) -> int:
    async with _stream(app, token) as session:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        await session.post(json.dumps(initialize).encode())
        await session.answer(0)
        await session.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        next_id = 1
        answered = 0
        for n, window in [(warmup, _Unmeasured()), *windows]:
            ids = range(next_id, next_id + n)
            next_id += n
            bodies = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % i for i in ids]  # built outside the window
            window.open()
            for request_id, body in zip(ids, bodies, strict=True):
                await session.post(body)
                await session.answer(request_id)
            window.close()
            answered += n
        return answered


async def ping_session(app: ASGIApp, token: str, warmup: int, windows: Sequence[tuple[int, Window]]) -> int:
    """One SSE session on `app`: initialize, `warmup` pings, then for each ``(n, window)`` open
    the window, send `n` pings (each awaited on the stream) and close it. Returns how many pings
    were answered; raises `PingFailed` on a refusal or an unexpected answer, `TimeoutError` past
    the session's deadline."""
    pings = warmup + sum(n for n, _ in windows)
    try:
        with anyio.fail_after(SESSION_DEADLINE_S + PING_DEADLINE_S * pings):
            return await _converse(app, token, warmup, windows)
    except BaseExceptionGroup as group:  # the stream's task group wraps what its body raised
        failed = group.subgroup(PingFailed)
        if failed is None:
            raise
        raise failed.exceptions[0] from None


class _Unmeasured:
    def open(self) -> None:
        pass

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------- process time (the fallback)
@dataclass
class ProcessTime:
    """The process's CPU time over each window (all its threads: the store's among them)."""

    seconds: list[float]
    _start: float = 0.0

    def open(self) -> None:
        self._start = time.process_time()

    def close(self) -> None:
        self.seconds.append(time.process_time() - self._start)


async def process_time_per_ping(side: Side, data_dir: Path, pings: int, warmup: int, repeats: int) -> float:
    """The best of `repeats` windows of `pings` pings, in seconds of process time per ping."""
    meter = ProcessTime([])
    with built(side, data_dir) as (app, token):
        await ping_session(app, token, warmup, [(pings, meter)] * repeats)
    return min(meter.seconds) / pings


# ---------------------------------------------------------------------------- callgrind
@dataclass(frozen=True)
class Callgrind:
    """A window counted by the callgrind this process runs under, dumped as ``dump <name>``."""

    name: str

    def _control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(os.getpid())],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def open(self) -> None:
        self._control("--instr=on")

    def close(self) -> None:
        self._control("--instr=off")
        self._control(f"--dump={self.name}")


EMPTY, PINGS = Callgrind("empty"), Callgrind("pings")


def dumped_totals(out_file: Path) -> dict[str, int]:
    """Instructions per dump, by the name the dump was given, from callgrind's output files
    (``<out_file>.1``, ``.2``, …: one per ``callgrind_control --dump=<name>``)."""
    totals: dict[str, int] = {}
    for part in sorted(out_file.parent.glob(out_file.name + ".*")):
        text = part.read_text(encoding="utf-8", errors="replace")
        trigger = re.search(r"^desc: Trigger: dump (\S+)$", text, re.MULTILINE)
        total = re.search(r"^totals: (\d+)", text, re.MULTILINE)
        if trigger and total:
            totals[trigger.group(1)] = int(total.group(1))
    return totals


def callgrind_available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def instructions_per_ping(side: Side, pings: int, warmup: int) -> float:
    """Run `side` in a child under callgrind; its pings' instructions, less an empty window's, per ping."""
    with tempfile.TemporaryDirectory(prefix="sse-instructions-") as tmp:
        out = Path(tmp) / "callgrind.out"
        log = Path(tmp) / "valgrind.log"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            f"--log-file={log}",
            sys.executable,
            "-m",
            "bench.sse_instructions",
            "--child",
            side,
            "--pings",
            str(pings),
            "--warmup",
            str(warmup),
        ]
        # One hash seed for every child: str hashes, and so dict and set layouts, are then the same
        # from run to run, and so is the count.
        env = os.environ | {"PYTHONHASHSEED": "0"}
        done = subprocess.run(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        totals = dumped_totals(out)
        if done.returncode != 0 or {EMPTY.name, PINGS.name} - totals.keys():
            valgrind = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"the {side} child under callgrind exited with {done.returncode} and dumped {sorted(totals)}:\n"
                f"{done.stderr[-2000:]}\n{valgrind}"
            )
        return (totals[PINGS.name] - totals[EMPTY.name]) / pings


def _child(side: Side, pings: int, warmup: int) -> int:
    with tempfile.TemporaryDirectory(prefix="sse-instructions-") as tmp, built(side, Path(tmp)) as (app, token):
        answered = anyio.run(ping_session, app, token, warmup, [(0, EMPTY), (pings, PINGS)])
    return 0 if answered == warmup + pings else 1


# ---------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class Figures:
    #: "instructions" (callgrind) or "process time" (seconds, the noisy fallback)
    kind: Literal["instructions", "process time"]
    ours: float
    bare: float
    pings: int
    warmup: int
    #: why the process time was measured instead of instructions ("" for instructions)
    reason: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.bare


def render(f: Figures) -> str:
    head = f"SSE ping through the ASGI app in-process, {f.pings} pings after {f.warmup} warm-up;"
    if f.kind == "instructions":
        lines = [f"{head} instructions per ping (callgrind):"]
        lines += [f"  {name:<12} {value:,.0f}" for name, value in (("ours", f.ours), ("bare", f.bare))]
    else:
        lines = [
            f"{head} process time per ping (time.process_time, the best window; {f.reason}).",
            "This is the noisy figure: it moves with the machine's load and the CPU's clock.",
        ]
        lines += [f"  {name:<12} {value * 1e6:,.1f} µs" for name, value in (("ours", f.ours), ("bare", f.bare))]
    lines.append(f"  {'ours ÷ bare':<12} {f.ratio:.2f}×")
    return "\n".join(lines)


def measure(pings: int, warmup: int, *, process_time: bool, repeats: int) -> Figures:
    if not process_time and callgrind_available():
        ours, bare = (instructions_per_ping(side, pings, warmup) for side in SIDES)
        return Figures("instructions", ours, bare, pings, warmup)
    reason = "--process-time given" if process_time else "valgrind not found"
    per_ping: dict[Side, float] = {}
    for side in SIDES:
        with tempfile.TemporaryDirectory(prefix="sse-instructions-") as tmp:
            per_ping[side] = anyio.run(process_time_per_ping, side, Path(tmp), pings, warmup, repeats)
    return Figures("process time", per_ping["ours"], per_ping["bare"], pings, warmup, reason)


def _at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        n = int(text)
        if n < least:
            raise argparse.ArgumentTypeError(f"needs a whole number of at least {least}, got {text}")
        return n

    return parse


def main(argv: Sequence[str] | None = None, out: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pings", type=_at_least(1), default=300, help="pings measured per side")
    parser.add_argument("--warmup", type=_at_least(0), default=200, help="pings sent first, not measured")
    parser.add_argument("--process-time", action="store_true", help="measure time.process_time, not instructions")
    parser.add_argument("--repeats", type=_at_least(1), default=5, help="windows per side with --process-time")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)  # one side, under callgrind
    args = parser.parse_args(argv)
    logs.configure("warning")
    if args.child:
        return _child(args.child, args.pings, args.warmup)
    out(render(measure(args.pings, args.warmup, process_time=args.process_time, repeats=args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
