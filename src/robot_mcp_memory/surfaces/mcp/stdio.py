"""MCP over stdio, with the pipes read and written on the event loop.

mcp 1.30's ``stdio_server`` wraps stdin and stdout in ``anyio.wrap_file``: every line read and
every write and flush is a trip to a worker thread and back — three per call, each a thread wake-up
on both sides, a large share of a ping (docs/benchmarks.md). When stdin and stdout are pipes
(how MCP clients start a server) `pipe_stdio` hands them to asyncio's pipe transports
instead: the same memory streams and the same JSON lines, with no thread in between. Anything else
(a terminal, a regular file, a socket) is read and written by blocking calls on daemon threads
(`kit.daemon.DaemonThreads`), never changing its blocking mode: unlike mcp's worker threads, a read still
blocked on a terminal when the server stops does not keep the process alive.

Given a `stop` event (SIGTERM/SIGINT, see ``serve.run_stdio``), the transport stops reading once
it is set, gives the requests already read a bounded time to be answered, then ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, BinaryIO, Protocol, TypeVar

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from robot_mcp_memory import jsonvalue, logs
from robot_mcp_memory.storage.daemon import DaemonThreads

_log = logs.get("robot_mcp_memory.surfaces.mcp.stdio")

#: Seconds the requests read before a `stop` get to be answered before the session ends.
STOP_GRACE_S = 5.0

#: The longest JSON-RPC line read (bytes). mcp's reader has no bound; the largest legitimate
#: request (a 256k-character process document, escaped) is well under this.
MAX_LINE = 4 * 1024 * 1024

_T = TypeVar("_T")

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class LineTooLong(ValueError):
    """A line longer than `MAX_LINE`: it is skipped, and the session logs it. `request_id` is
    its request's id when one can be read from the line's first or last bytes (`_overlong_id`)."""

    def __init__(self, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


#: How much of an overlong line's start and end is kept to find its request's id.
_EDGE = 4096
#: An overlong line's id and method, where they can be read without the line: the top-level pairs
#: its first bytes complete (clients write ``jsonrpc``, ``id`` and ``method`` in any order before
#: the long ``params``, or after it), or a top-level ``,"id":…}`` / ``,"method":"…"}`` that closes
#: the message (the comma before it makes it a top-level key, the brace after it the message's own).
_STR = rb'"(?:[^"\\]|\\.){0,256}"'
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d{1,40}(?![\d.eE])|' + _STR + rb")\s*\}\s*\Z")
_TAIL_METHOD = re.compile(rb',\s*"method"\s*:\s*' + _STR + rb"\s*\}\s*\Z")
_JSON = json.JSONDecoder()


def _ws(text: str, i: int) -> int:
    """The index of the first character at or after `i` that is not JSON whitespace."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _head_pairs(head: bytes) -> dict[str, Any]:
    """The top-level pairs `head` (the start of a message) holds whole, in order, up to the first
    value it cuts off."""
    text = head.decode("utf-8", errors="replace")
    pairs: dict[str, Any] = {}
    i = _ws(text, 0)
    if not text.startswith("{", i):
        return pairs
    i += 1
    try:
        while True:
            key, i = _JSON.raw_decode(text, _ws(text, i))
            i = _ws(text, i)
            if not isinstance(key, str) or not text.startswith(":", i):
                return pairs
            value, i = _JSON.raw_decode(text, _ws(text, i + 1))
            i = _ws(text, i)
            # A pair counts once what follows it says it ended: a number cut off by the head's
            # edge (123 of 123456) or followed by junk (12 of 12ab) is not the id.
            if not text.startswith((",", "}"), i):
                return pairs
            pairs[key] = value
            if text.startswith("}", i):
                return pairs
            i += 1
    except (ValueError, RecursionError):  # a value running past the head: the long one
        return pairs


def _overlong_id(head: bytes, tail: bytes) -> str | int | None:
    """The id of the request an overlong line carries, read from its first and last bytes, or
    None: a response or a notification, or an id that cannot be read (the line is never parsed
    whole, or even kept). Only a whole integer or a string is an id (``7.5`` is not 7)."""
    pairs = _head_pairs(head)
    if not (isinstance(pairs.get("method"), str) or _TAIL_METHOD.search(tail)):
        return None
    if "id" in pairs:
        rid = pairs["id"]
    else:
        found = _TAIL_ID.search(tail)
        if found is None:
            return None
        try:
            rid = json.loads(found.group(1))
        except ValueError:
            return None
    return _answerable(rid)


#: What a line must hold for a number in it to be something mcp would quietly change: JavaScript's
#: number words, an exponent that may overflow a double (``1e400``), an integer of thousands of
#: digits. Only such lines are parsed strictly (a byte search each, on every line).
#: (The long-integer branch starts only where a run of digits does: tried at every digit, runs of
#: 3,999 would cost 4,000 steps each — quadratic on a hostile line.)
_SUSPECT = re.compile(rb"NaN|Infinity|[eE][+-]?\d{2}|(?<!\d)\d{300}")


def _parse(line: bytes) -> types.JSONRPCMessage:
    """One JSON-RPC message, or `NotJson` for a line whose numbers mcp would change (see
    `number_problem`)."""
    problem = number_problem(line)
    if problem is not None:
        raise NotJson(problem)
    return types.JSONRPCMessage.model_validate_json(line.decode("utf-8", errors="replace"))


def number_problem(body: bytes) -> str | None:
    """Why mcp would read `body` with a number changed, or None. mcp's parser takes ``NaN``,
    ``Infinity`` and numbers a double cannot hold (``1e400`` is infinity), and its session then
    turns them into null before any tool sees them: a number silently became null (and
    ``set_robot_meta`` deleted the key). Checked strictly only when a byte search finds a sign of
    one (`_SUSPECT`); anything else wrong with `body` is left to mcp's own parser."""
    if not _SUSPECT.search(body):
        return None
    text = body.decode("utf-8", errors="replace")  # as mcp reads it: one bad byte is not our business
    try:
        value = pydantic_core.from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        if "out of range" in str(exc):
            return "a number is out of range (thousands of digits)"
        try:
            pydantic_core.from_json(text, allow_inf_nan=True)
        except ValueError:
            return None  # not JSON for another reason: mcp's parser says so
        return "NaN and Infinity are not JSON numbers"
    return None if jsonvalue.finite(value) else "a number is out of range (beyond what a double holds)"


class NotJson(ValueError):
    """A line mcp would read with a number changed: said to its caller instead."""


def _id_int(digits: str) -> int:
    return int(digits) if len(digits) < 4000 else 0  # only the message's id is wanted here


def message_id(body: bytes, *, of_request: bool = False) -> str | int | None:
    """The id of the JSON-RPC message in `body` (with `of_request`, only a request's), read as
    leniently as Python's json allows — the body did not validate — or None. pydantic's parser
    reads first: whatever it accepts, Python's json reads as the same value, at a fraction of the
    cost (an SSE POST's id is read here on every call); what it refuses (bytes that are not
    UTF-8, a lone surrogate, an integer of thousands of digits, deep nesting) Python's reads."""
    try:
        raw = pydantic_core.from_json(body)
    except ValueError:
        try:
            raw = json.loads(body.decode("utf-8", errors="replace"), parse_int=_id_int)
        except (ValueError, RecursionError):
            return None
    if not isinstance(raw, dict) or (of_request and "method" not in raw):
        return None
    return _answerable(raw.get("id"))


def _answerable(rid: object) -> str | int | None:
    """`rid` when an answer can carry it: an integer or a string that UTF-8 can encode (a lone
    surrogate cannot: answering under it would end the session), else None."""
    if isinstance(rid, bool) or not isinstance(rid, str | int):
        return None
    if isinstance(rid, str):
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return rid


def _refusal_for(line: bytes, exc: Exception) -> SessionMessage | None:
    """A JSON-RPC error answering a request whose line did not validate (a lone surrogate in an
    argument, NaN, nesting past the parser's limit), when its id can still be read; else None."""
    rid = message_id(line, of_request=True)
    if rid is None:
        return None
    lone = "a string holds a lone surrogate, or the message nests too deeply"
    return _invalid_request(rid, str(exc) if isinstance(exc, NotJson) else lone)


def _overlong_refusal(rid: str | int, max_line: int) -> SessionMessage:
    return _invalid_request(rid, f"the message is longer than {max_line} bytes and was not read; send less per call")


def _invalid_request(rid: str | int, reason: str) -> SessionMessage:
    """The JSON-RPC error answering request `rid`, which could not be read."""
    error = types.ErrorData(code=types.INVALID_REQUEST, message=f"invalid request: {reason}")
    return SessionMessage(types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error)))


def encoded(message: types.JSONRPCMessage) -> str:
    """`message` as one JSON line: ``model_dump_json(by_alias=True, exclude_none=True)``, as
    mcp's stdio transport writes it. A response's result is plain JSON already (the session
    dumped it), so it is encoded as it is, with no model walked: the same text for less work than
    the model's own encoder. A test compares the two on generated messages."""
    root = message.root
    if type(root) is types.JSONRPCResponse and not root.model_extra:
        plain = {"jsonrpc": root.jsonrpc, "id": root.id, "result": root.result}
        # by_alias and exclude_none as the model's encoder passes them down: the SDK's results are
        # plain JSON already, but a model inside one would be written as the SDK writes it.
        return pydantic_core.to_json(plain, inf_nan_mode="null", by_alias=True, exclude_none=True).decode()
    return message.model_dump_json(by_alias=True, exclude_none=True)


def _unencodable(message: types.JSONRPCMessage) -> str | None:
    """The error line sent in place of a response that could not be encoded (None for anything
    but a response: a notification is dropped)."""
    root = message.root
    if not isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
        return None
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=root.id,
        error=types.ErrorData(code=types.INTERNAL_ERROR, message="internal error: the answer could not be encoded"),
    )
    try:
        return error.model_dump_json(by_alias=True, exclude_none=True)
    except Exception:  # the id itself cannot be encoded: nothing can answer it
        return None


def _is_pipe(f: BinaryIO) -> bool:
    """A FIFO only. A socket is not: asyncio's write-pipe transport takes a readable socket for a
    closed one (the same socket on both ends, as inetd or socat hand over, or a peer that shut
    down its writing side) and drops every answer; `_thread_ends` serves those."""
    try:
        mode = os.fstat(f.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode)


def _too_long(max_line: int, head: bytes = b"", tail: bytes = b"") -> LineTooLong:
    return LineTooLong(f"a message longer than {max_line} bytes was skipped", _overlong_id(head, tail))


async def _lines(reader: _Reader, max_line: int) -> AsyncIterator[bytes | LineTooLong]:
    """Each non-blank line of `reader` without its newline (the last one may lack it), or a
    `LineTooLong` in place of a line longer than `max_line` bytes, dropped up to its newline
    (only its first and last `_EDGE` bytes are kept, to find its request's id)."""
    buf = bytearray()
    skipping = False
    head = tail = b""
    while chunk := await reader.read(1 << 16):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if skipping:
                yield _too_long(max_line, head, (tail + chunk[start:end])[-_EDGE:])
            else:
                buf += chunk[start:end]
                if len(buf) > max_line:
                    yield _too_long(max_line, bytes(buf[:_EDGE]), bytes(buf[-_EDGE:]))
                elif buf.strip():
                    yield bytes(buf)
            skipping = False
            buf.clear()
            start = end + 1
        if skipping:
            tail = (tail + chunk[start:])[-_EDGE:]
        else:
            buf += chunk[start:]
            if len(buf) > max_line:
                skipping = True
                head, tail = bytes(buf[:_EDGE]), bytes(buf[-_EDGE:])
                buf.clear()
    if skipping:
        yield _too_long(max_line)  # cut off by the end of input: not a whole request to answer
    elif buf.strip():
        yield bytes(buf)


class _Reader(Protocol):
    async def read(self, n: int) -> bytes: ...


class _Stopped(Exception):
    """Raised by `_StoppableReader.read` once `stop` was called: no more input is read."""


class _StoppableReader:
    """`reader`, until `stop`: then a read waiting for input gives up (`_Stopped`), and so does
    every later one. (Only the wait for input is cancelled: a line already read is never cut.)"""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader
        self._waiting: anyio.CancelScope | None = None
        self.stopped = False

    async def read(self, n: int) -> bytes:
        if not self.stopped:
            with anyio.CancelScope() as self._waiting:
                return await self._reader.read(n)
        raise _Stopped

    def stop(self) -> None:
        self.stopped = True
        if self._waiting is not None:
            self._waiting.cancel()


class _InFlight:
    """The ids of the requests read and not answered yet."""

    def __init__(self) -> None:
        self._ids: set[str | int] = set()
        self._changed: anyio.Event | None = None

    def read(self, message: types.JSONRPCMessage) -> None:
        root = message.root
        if isinstance(root, types.JSONRPCRequest):
            self._ids.add(root.id)
        elif isinstance(root, types.JSONRPCNotification) and root.method == "notifications/cancelled":
            # A request its client cancelled is never answered: nothing to wait for.
            self._done((root.params or {}).get("requestId"))

    def written(self, message: types.JSONRPCMessage) -> None:
        root = message.root
        if isinstance(root, types.JSONRPCResponse | types.JSONRPCError) and root.id is not None:
            self._done(root.id)

    def forget_all(self) -> None:
        """The client is gone: nothing read can be answered any more."""
        self._ids.clear()
        if self._changed is not None:
            self._changed.set()

    def _done(self, rid: object) -> None:
        if isinstance(rid, str | int):
            self._ids.discard(rid)
        if self._changed is not None:
            self._changed.set()

    async def answered(self) -> None:
        """Returns once every request read has been answered."""
        while self._ids:
            self._changed = anyio.Event()
            await self._changed.wait()


async def _on(thread: DaemonThreads, fn: Callable[[], _T]) -> _T:
    """`fn` on `thread` (one daemon thread: calls run in turn), awaited. A call still blocked when
    the server stops (a read of a terminal nobody types into, of a socket whose peer is silent)
    does not hold up the process's exit — anyio's worker threads, which mcp's transport reads
    with, are joined by the interpreter, so Ctrl-C left the server running."""
    return await asyncio.wrap_future(thread.submit(fn))


def _read_blocking(fd: int, n: int) -> bytes:
    while True:
        try:
            return os.read(fd, n)
        except BlockingIOError:  # someone else made the shared descriptor non-blocking: wait for input
            select.select([fd], [], [])


def _write_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


class _ThreadReader:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._thread = DaemonThreads(max_workers=1, name="stdio-reader")

    async def read(self, n: int) -> bytes:
        return await _on(self._thread, lambda: _read_blocking(self._fd, n))


Write = Callable[[bytes], Awaitable[None]]


@contextlib.asynccontextmanager
async def _pipe_ends(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[tuple[_Reader, Write]]:
    """Two pipes, read and written by asyncio's pipe transports on the event loop."""
    loop = asyncio.get_running_loop()
    blocking = [(fd, os.get_blocking(fd)) for fd in (stdin.fileno(), stdout.fileno())]
    reader = asyncio.StreamReader(loop=loop)
    # Duplicates of the descriptors, so closing the transports never closes fd 0 and 1. (They
    # share the open file descriptions, so 0 and 1 turn non-blocking too while the server runs:
    # nothing else may use stdout under stdio, and logs go to stderr. Restored at the end.)
    rfile = os.fdopen(os.dup(stdin.fileno()), "rb", buffering=0)
    wfile = os.fdopen(os.dup(stdout.fileno()), "wb", buffering=0)
    rtransport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), rfile)
    wtransport, wprotocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, wfile)
    wtransport.set_write_buffer_limits(high=0)  # `drain` returns once a line is all in the pipe
    writer = asyncio.StreamWriter(wtransport, wprotocol, None, loop)

    async def write(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    try:
        yield reader, write
    finally:
        rtransport.close()
        wtransport.close()
        for fd, was in blocking:  # the pipes' other holders (a wrapper script, a shell) get them back as they were
            os.set_blocking(fd, was)


@contextlib.asynccontextmanager
async def _thread_ends(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[tuple[_Reader, Write]]:
    """A terminal, a regular file or a socket: blocking reads and writes on daemon threads."""
    stdin_fd, stdout_fd = stdin.fileno(), stdout.fileno()
    writer = DaemonThreads(max_workers=1, name="stdio-writer")

    async def write(data: bytes) -> None:
        await _on(writer, lambda: _write_blocking(stdout_fd, data))

    yield _ThreadReader(stdin_fd), write  # the idle daemon threads end with the process


@contextlib.asynccontextmanager
async def pipe_stdio(
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_line: int = MAX_LINE,
    *,
    stop: anyio.Event | None = None,
    grace: float = STOP_GRACE_S,
) -> AsyncIterator[Streams]:
    """`(read_stream, write_stream)` for ``Server.run``, like mcp's ``stdio_server``.

    Once `stop` is set no more input is read; the requests already read get `grace` seconds to
    be answered, then the read stream ends (and with it the session, which cancels what is left).
    At end of input the read stream ends at once, as mcp's does."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    ends = _pipe_ends if _is_pipe(stdin) and _is_pipe(stdout) else _thread_ends
    async with ends(stdin, stdout) as (raw_reader, write):
        reader = _StoppableReader(raw_reader)
        in_flight = _InFlight()
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_lines() -> None:
            async with read_writer, write_stream.clone() as replies:
                try:
                    async for line in _lines(reader, max_line):
                        if isinstance(line, LineTooLong):
                            if line.request_id is not None:  # its caller gets an answer, not a hang
                                await replies.send(_overlong_refusal(line.request_id, max_line))
                            await read_writer.send(line)
                            continue
                        try:
                            message = _parse(line)
                        except Exception as exc:
                            refusal = _refusal_for(line, exc)
                            if refusal is not None:  # a request we can name: its caller gets an answer, not a hang
                                await replies.send(refusal)
                                _log.warning("stdio.request_refused", reason=type(exc).__name__)
                                continue
                            await read_writer.send(exc)  # the session logs it, as mcp's stdio reader does
                            continue
                        in_flight.read(message)
                        await read_writer.send(SessionMessage(message))
                except _Stopped:
                    stopped = True
                else:
                    stopped = False
                # At a stop as at the end of input (a client that sent its requests and closed its
                # end): what was read is answered before the session ends — it cancels the rest.
                # One grace in all, writing the last answers included.
                ending[0] = anyio.current_time() + grace
                with anyio.move_on_after(grace) as waited:
                    await in_flight.answered()
                if waited.cancelled_caught:
                    _log.warning("stdio.stop_unanswered" if stopped else "stdio.eof_unanswered", grace_s=grace)

        async def write_lines() -> None:
            client_gone = False
            async with write_reader:
                async for session_message in write_reader:
                    if client_gone:
                        continue  # nobody reads any more: drained, so the session never blocks
                    try:
                        text = encoded(session_message.message)
                    except Exception as exc:  # one answer that cannot be encoded must not end the session
                        _log.error("stdio.unencodable_message", error=type(exc).__name__)
                        replacement = _unencodable(session_message.message)
                        if replacement is None:
                            continue
                        text = replacement
                    try:
                        await write(text.encode() + b"\n")
                    except OSError as exc:  # the client closed its end (it died, or was stopped)
                        _log.warning("stdio.client_gone", error=type(exc).__name__)
                        client_gone = True
                        in_flight.forget_all()
                        reader.stop()  # nothing could be answered: the session ends
                        continue
                    in_flight.written(session_message.message)
            writer_done.set()

        watching = anyio.CancelScope()
        writer_done = anyio.Event()
        ending: list[float | None] = [None]  # when the grace given at a stop or the end of input runs out

        async def stop_reading(stop: anyio.Event) -> None:
            with watching:
                await stop.wait()
                reader.stop()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            if stop is not None:
                tg.start_soon(stop_reading, stop)
            try:
                yield read_stream, write_stream
            finally:
                watching.cancel()
                # The answers still being written get the grace too; a client that does not read
                # them (its pipe full) must not keep the server from stopping.
                left = grace if ending[0] is None else max(0.0, ending[0] - anyio.current_time())
                with anyio.move_on_after(left):
                    await writer_done.wait()
                tg.cancel_scope.cancel()
