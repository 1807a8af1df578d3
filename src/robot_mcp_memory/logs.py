"""structlog → JSON lines on stderr. stdout is the MCP wire under stdio: nothing else may write there."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import anyio
import structlog
from structlog.tracebacks import ExceptionDictTransformer

_SECRET_KEYS = ("token", "authorization", "password", "secret", "api_key")


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if any(s in key.lower() for s in _SECRET_KEYS):
            event[key] = "[redacted]"
    return event


#: Tracebacks as JSON, without the frames' local variables: a request body, a token or a
#: memory's text in a local would otherwise be copied into the log.
_tracebacks = structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))


def _stderr_logger(*_: Any) -> structlog.PrintLogger:
    """Resolve ``sys.stderr`` when a logger is made, not once at configure time: whoever swaps
    stderr later (a test runner's capture, a daemoniser) is honoured, and a closed stream from an
    earlier phase is never written to."""
    return structlog.PrintLogger(file=sys.stderr)


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


def _stdlib_handler() -> logging.Handler:
    """What the libraries underneath log (mcp's refusals, uvicorn's errors) as the same JSON
    lines as ours, with the logger's name, so a log collector reads one format."""
    handler = _StderrHandler()
    handler.addFilter(_not_a_hangup)
    handler.addFilter(_expected_at_shutdown)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
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


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
