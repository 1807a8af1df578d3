"""Log lines: one JSON format for our events and for what the libraries underneath log."""

from __future__ import annotations

import io
import json
import logging
import sys

import anyio
import pytest

from robot_mcp_memory import logs


def _record(name: str, level: int, msg: str, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord(name, level, __file__, 1, msg, (), info)


def _raised(exc: BaseException) -> BaseException:
    secret = "tok-very-secret-1234"  # a local of the failing frame  # noqa: F841
    try:
        raise exc
    except BaseException as caught:
        return caught


class _Writes(io.StringIO):
    """A stream keeping each write it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_each_record_is_one_write_with_its_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers share one stderr, which writes through: a record and its newline written apart
    let two workers' records run into one line (seen in the workers' e2e test's log)."""
    out = _Writes()
    monkeypatch.setattr(sys, "stderr", out)  # the logger looks stderr up when it is made
    logs._stderr_logger().msg('{"event": "serve.worker"}')
    assert out.writes == ['{"event": "serve.worker"}\n']


def test_a_library_warning_is_a_json_line_naming_its_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)  # the handler looks stderr up when it writes
    handler = logs._stdlib_handler()
    handler.handle(_record("mcp.server.transport_security", logging.WARNING, "Invalid Host header: evil.example"))
    line = json.loads(out.getvalue())
    assert line["event"] == "Invalid Host header: evil.example"
    assert (line["level"], line["logger"]) == ("warning", "mcp.server.transport_security")


def test_a_traceback_is_json_without_the_frames_locals(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    logs._stdlib_handler().handle(_record("uvicorn.error", logging.ERROR, "boom", _raised(RuntimeError("x"))))
    line = json.loads(out.getvalue())
    assert line["exception"][0]["exc_type"] == "RuntimeError"
    assert "tok-very-secret-1234" not in out.getvalue()


def test_a_client_hanging_up_is_not_logged_as_a_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    handler = logs._stdlib_handler()
    hangup = _raised(anyio.ClosedResourceError())
    handler.handle(_record("mcp.server.streamable_http", logging.ERROR, "Error in standalone SSE writer", hangup))
    assert out.getvalue() == ""
    # the same exception from anything but mcp, or another error from mcp, is still logged
    handler.handle(_record("robot_mcp_memory.x", logging.ERROR, "ours", hangup))
    handler.handle(_record("mcp.server.streamable_http", logging.ERROR, "theirs", _raised(ValueError("v"))))
    assert [json.loads(x)["event"] for x in out.getvalue().splitlines()] == ["ours", "theirs"]


def test_streams_cut_by_a_shutdown_are_not_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graceful SIGTERM logged an error with a traceback for every connected SSE or Streamable
    HTTP client (found by review); once stopping, uvicorn's such lines are warnings."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    handler = logs._stdlib_handler()
    failure = _raised(RuntimeError("Expected ASGI message 'http.response.body'"))
    handler.handle(_record("uvicorn.error", logging.ERROR, "Exception in ASGI application", failure))
    monkeypatch.setattr(logs, "_STOPPING", True)
    handler.handle(_record("uvicorn.error", logging.ERROR, "Exception in ASGI application", failure))
    handler.handle(_record("robot_mcp_memory.x", logging.ERROR, "ours", None))
    before, after, ours = (json.loads(x) for x in out.getvalue().splitlines())
    assert before["level"] == "error"
    assert after["level"] == "warning"
    assert "exception" not in after
    assert "cut by the shutdown" in after["event"]
    assert ours["level"] == "error"  # our own errors stay errors


def test_fields_whose_names_may_hold_a_secret_are_redacted_every_time() -> None:
    """By name, in any case, wherever the word stands in it; the same name twice (the answer is
    remembered per name) is redacted twice."""
    for _ in range(2):
        event = logs._redact(None, "info", {"Authorization": "Bearer x", "robot_token": "t", "tool": "recall", "ms": 1})
        assert event == {"Authorization": "[redacted]", "robot_token": "[redacted]", "tool": "recall", "ms": 1}
