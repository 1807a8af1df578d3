"""structlog → JSON lines on stderr. stdout is the MCP wire under stdio: nothing else may write there."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = ("token", "authorization", "password", "secret", "api_key")


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if any(s in key.lower() for s in _SECRET_KEYS):
            event[key] = "[redacted]"
    return event


def _stderr_logger(*_: Any) -> structlog.PrintLogger:
    """Resolve ``sys.stderr`` when a logger is made, not once at configure time: whoever swaps
    stderr later (a test runner's capture, a daemoniser) is honoured, and a closed stream from an
    earlier phase is never written to."""
    return structlog.PrintLogger(file=sys.stderr)


def configure(level: str = "info") -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=max(lvl, logging.WARNING), format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
