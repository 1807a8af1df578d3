"""structlog → JSON lines on stderr. stdout is the MCP wire under stdio: nothing else may write there."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import MutableMapping
from typing import Any, cast

import anyio
import structlog
from structlog.tracebacks import ExceptionDictTransformer

_SECRET_KEYS = ("token", "authorization", "password", "secret", "api_key")


@functools.lru_cache(maxsize=4096)
def _secret(key: str) -> bool:
    """Whether a field named `key` may hold a secret. Field names are the code's own, a few dozen:
    each is looked at once, not on every line (a third of a ``tool.call`` line's cost)."""
    return any(s in key.lower() for s in _SECRET_KEYS)


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if _secret(key):
            event[key] = "[redacted]"
    return event


#: Tracebacks as JSON, without the frames' local variables: a request body, a token or a
#: memory's text in a local would otherwise be copied into the log.
_tracebacks = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))


def _stderr_logger(*_: Any) -> structlog.WriteLogger:
    """Resolve ``sys.stderr`` when a logger is made, not once at configure time: whoever swaps
    stderr later (a test runner's capture, a daemoniser) is honoured, and a closed stream from an
    earlier phase is never written to. Each line is one write, its newline included: stderr
    writes through, so `print`'s two writes (the text, then the newline) let the workers of
    ``MEMORY_WORKERS``, sharing one stderr, run two records into one line."""
    return structlog.WriteLogger(file=sys.stderr)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stdlib handler writing to whatever ``sys.stderr`` is when a record is written (as
    `_stderr_logger`)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass  # StreamHandler's __init__ and setStream assign it: stderr is always looked up


_HANGUPS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def _not_a_hangup(record: logging.LogRecord) -> bool:
    """False for mcp's error-with-traceback when a client closed its stream mid-answer (a brain
    restarting, a dropped connection): not a fault of the server, and nothing an operator can act
    on — an alert on ``level=error`` must not fire for it."""
    exc = record.exc_info[1] if record.exc_info else None
    return not (record.name.startswith("mcp.") and isinstance(exc, _HANGUPS))


_STOPPING = False


def as_worker(number: int, pid: int) -> None:
    """Every event this process logs from here names its worker (``MEMORY_WORKERS``) and pid."""
    structlog.contextvars.bind_contextvars(worker=number, pid=pid)


def stopping() -> None:
    """The server is shutting down: uvicorn's errors about the streams it cuts (an open SSE
    stream, a Streamable HTTP GET) are the shutdown itself, logged as one warning each."""
    global _STOPPING
    _STOPPING = True


def _expected_at_shutdown(record: logging.LogRecord) -> bool:
    """Demote uvicorn's errors once the shutdown began (see `stopping`); always True (keep)."""
    if _STOPPING and record.name.startswith("uvicorn") and record.levelno >= logging.ERROR:
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args = f"a connection was cut by the shutdown: {record.getMessage()}", ()
        record.exc_info, record.exc_text = None, None
    return True


def _foreign_pre_chain() -> list[structlog.typing.Processor]:
    """What a record from stdlib logging (not structlog) gets before rendering: level, logger
    name and time, as our own events carry."""
    return [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _stdlib_handler() -> logging.Handler:
    """What the libraries underneath log (mcp's refusals, uvicorn's errors) as the same JSON
    lines as ours, with the logger's name, so a log collector reads one format."""
    handler = _StderrHandler()
    handler.addFilter(_not_a_hangup)
    handler.addFilter(_expected_at_shutdown)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_foreign_pre_chain(),
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _redact,
                _tracebacks,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    return handler


def configure(level: str = "info") -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    # Like basicConfig, a no-op when the host process already configured logging (a library
    # user of `api.RobotMemory`, a test runner): only an unconfigured root gets our handler.
    logging.basicConfig(level=max(lvl, logging.WARNING), handlers=[_stdlib_handler()])
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            _tracebacks,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


#: The stdlib logger above every logger of the package: what a library host configures.
PACKAGE = "robot_mcp_memory"


def _to_stdlib(_: Any, __: str, event: MutableMapping[str, Any]) -> tuple[tuple[str], dict[str, Any]]:
    """Library mode's last processor: a stdlib record whose message reads on its own in the host's
    format (``api.embedder_not_ready embedder='use' waited_s=60``), carrying the event for
    `_LibraryFormatter`'s JSON line."""
    ed = dict(event)
    exc_info = ed.get("exc_info")
    if exc_info is True:
        exc_info = sys.exc_info()
        ed["exc_info"] = exc_info
    shown = _redact(None, "", dict(ed))
    text = " ".join(
        [str(ed.get("event", "")), *(f"{k}={v!r}" for k, v in shown.items() if k not in ("event", "exc_info"))]
    )
    return (text,), {"extra": {"structlog_event": ed}, "exc_info": exc_info or None}


class _LibraryFormatter(structlog.stdlib.ProcessorFormatter):
    """Our events in library mode as the server's JSON lines (level, logger, timestamp, the event's
    own keys, redacted); anything else as `_stdlib_handler` renders it."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "structlog_event", None)
        if event is None:
            return super().format(record)
        copy = logging.makeLogRecord(record.__dict__)
        ed = dict(event)
        ed.setdefault("level", record.levelname.lower())
        ed.setdefault("logger", record.name)
        copy.msg, copy.args, copy._logger, copy._name = ed, (), None, record.levelname.lower()
        return super().format(copy)


class _LibraryHandler(_StderrHandler):
    """The JSON line on stderr for the package's warnings while the host has configured no logging
    of its own (no handler would take them); once it has, its handlers do, in its format."""

    def filter(self, record: logging.LogRecord) -> bool:
        c: logging.Logger | None = logging.getLogger(record.name)
        while c is not None:
            if any(not isinstance(h, _LibraryHandler) for h in c.handlers):
                return False
            if not c.propagate:
                break
            c = c.parent
        return bool(super().filter(record))


def for_library() -> None:
    """Logging for the package used as a library (`api.RobotMemory`): the root logger and the
    host's logging are left alone. When the host has not configured structlog, the package's
    events go to the stdlib loggers under `PACKAGE` (warnings and above unless the host set that
    logger's level), written as JSON lines on stderr only while the host has no handler of its
    own. Idempotent."""
    if structlog.is_configured():
        return  # the host (or our server) configured structlog: events follow that
    package = logging.getLogger(PACKAGE)
    if package.level == logging.NOTSET:
        package.setLevel(logging.WARNING)  # a library stays quiet unless asked
    if not any(isinstance(h, _LibraryHandler) for h in package.handlers):
        handler = _LibraryHandler()
        handler.setFormatter(
            _LibraryFormatter(
                foreign_pre_chain=_foreign_pre_chain(),
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    _redact,
                    _tracebacks,
                    structlog.processors.JSONRenderer(),
                ],
            )
        )
        package.addHandler(handler)


_LIBRARY_PROCESSORS: list[structlog.typing.Processor] = [
    structlog.stdlib.filter_by_level,
    structlog.contextvars.merge_contextvars,
    _to_stdlib,
]


class _Logger:
    """`get`'s logger: structlog's as configured (the server, `configure`; or a host that
    configured structlog), else library mode's stdlib logger of the same name (`for_library`) —
    never structlog's unconfigured default, which prints every level to stdout."""

    __slots__ = ("_configured", "_library", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._library: Any = None
        self._configured: Any = None  # structlog's lazy proxy, made once (it caches its own binding)

    def __getattr__(self, attr: str) -> Any:
        if structlog.is_configured():
            if self._configured is None:
                self._configured = structlog.get_logger(self._name)
            return getattr(self._configured, attr)
        if self._library is None:
            self._library = structlog.wrap_logger(
                logging.getLogger(self._name),
                processors=_LIBRARY_PROCESSORS,
                wrapper_class=structlog.stdlib.BoundLogger,
                cache_logger_on_first_use=False,
            )
        return getattr(self._library, attr)


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    return cast(structlog.typing.FilteringBoundLogger, _Logger(name))
