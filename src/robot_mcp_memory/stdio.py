"""MCP over stdio, with the pipes read and written on the event loop.

mcp 1.30's ``stdio_server`` wraps stdin and stdout in ``anyio.wrap_file``: every line read and
every write and flush is a trip to a worker thread and back — three per call, each a thread wake-up
on both sides (~0.2 ms of a 0.7 ms ping on a 2-core VM). When stdin and stdout are pipes
(how MCP clients start a server) `pipe_stdio` hands them to asyncio's pipe transports
instead: the same memory streams and the same JSON lines, with no thread in between. Anything else
(a terminal, a regular file, a socket) keeps mcp's transport, which is right for those and never
changes their blocking mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import AsyncIterator
from typing import BinaryIO

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from robot_mcp_memory import logs
from robot_mcp_memory.kit import jsonvalue

_log = logs.get("robot_mcp_memory.stdio")

#: The longest JSON-RPC line read (bytes). mcp's reader has no bound; the largest legitimate
#: request (a 256k-character process document, escaped) is well under this.
MAX_LINE = 4 * 1024 * 1024

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class LineTooLong(ValueError):
    """A line longer than `MAX_LINE`: it is skipped, and the session logs it."""


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
    leniently as Python's json allows — the body did not validate — or None."""
    try:
        raw = json.loads(body.decode("utf-8", errors="replace"), parse_int=_id_int)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or (of_request and "method" not in raw):
        return None
    rid = raw.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _refusal_for(line: bytes, exc: Exception) -> SessionMessage | None:
    """A JSON-RPC error answering a request whose line did not validate (a lone surrogate in an
    argument, NaN, nesting past the parser's limit), when its id can still be read; else None."""
    rid = message_id(line, of_request=True)
    if rid is None:
        return None
    lone = "a string holds a lone surrogate, or the message nests too deeply"
    reason = str(exc) if isinstance(exc, NotJson) else lone
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=rid,
        error=types.ErrorData(code=types.INVALID_REQUEST, message=f"invalid request: {reason}"),
    )
    return SessionMessage(types.JSONRPCMessage(error))


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
    return error.model_dump_json(by_alias=True, exclude_none=True)


def _is_pipe(f: BinaryIO) -> bool:
    """A FIFO only. A socket is not: asyncio's write-pipe transport takes a readable socket for a
    closed one (the same socket on both ends, as inetd or socat hand over, or a peer that shut
    down its writing side) and drops every answer; mcp's transport serves those."""
    try:
        mode = os.fstat(f.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode)


def _too_long(max_line: int) -> LineTooLong:
    return LineTooLong(f"a message longer than {max_line} bytes was skipped")


async def _lines(reader: asyncio.StreamReader, max_line: int) -> AsyncIterator[bytes | LineTooLong]:
    """Each non-blank line of `reader` without its newline (the last one may lack it), or a
    `LineTooLong` in place of a line longer than `max_line` bytes, dropped up to its newline."""
    buf = bytearray()
    skipping = False
    while chunk := await reader.read(1 << 16):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not skipping:
                buf += chunk[start:end]
                if len(buf) > max_line:
                    yield _too_long(max_line)
                elif buf.strip():
                    yield bytes(buf)
            skipping = False
            buf.clear()
            start = end + 1
        if not skipping:
            buf += chunk[start:]
            if len(buf) > max_line:
                yield _too_long(max_line)
                skipping = True
                buf.clear()
    if buf.strip() and not skipping:
        yield bytes(buf)


@contextlib.asynccontextmanager
async def pipe_stdio(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None, max_line: int = MAX_LINE
) -> AsyncIterator[Streams]:
    """`(read_stream, write_stream)` for ``Server.run``, like mcp's ``stdio_server``."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    if not (_is_pipe(stdin) and _is_pipe(stdout)):
        async with stdio_server() as streams:
            yield streams
        return
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

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines() -> None:
        async with read_writer, write_stream.clone() as replies:
            async for line in _lines(reader, max_line):
                if isinstance(line, LineTooLong):
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
                await read_writer.send(SessionMessage(message))

    async def write_lines() -> None:
        async with write_reader:
            async for session_message in write_reader:
                try:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_none=True)
                except Exception as exc:  # one answer that cannot be encoded must not end the session
                    _log.error("stdio.unencodable_message", error=type(exc).__name__)
                    replacement = _unencodable(session_message.message)
                    if replacement is None:
                        continue
                    text = replacement
                writer.write(text.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            yield read_stream, write_stream
    finally:
        rtransport.close()
        wtransport.close()
        for fd, was in blocking:  # the pipes' other holders (a wrapper script, a shell) get them back as they were
            os.set_blocking(fd, was)
