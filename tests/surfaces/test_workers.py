"""`workers.supervise` with real forked children: a worker that keeps dying at its start stops
the whole server with exit code 1 (instead of restarting it for ever), after the backoff."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from robot_mcp_memory import logs
from robot_mcp_memory.surfaces import workers

pytestmark = pytest.mark.e2e  # forks real worker processes


@pytest.fixture
def signals_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`supervise` takes SIGTERM/SIGINT in the process that calls it: given back afterwards. Its
    stop marks the process as stopping (`logs.stopping`): unmarked afterwards, or every later
    test in this process would see uvicorn's errors logged as a shutdown's warnings."""
    monkeypatch.setattr(logs, "_STOPPING", False)
    kept = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in kept.items():
        signal.signal(s, handler)


def test_a_worker_that_keeps_crashing_at_start_stops_the_server(
    monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    monkeypatch.setattr(workers, "BACKOFF_S", 0.01)
    monkeypatch.setattr(workers, "BACKOFF_MAX_S", 0.01)

    def crash(number: int) -> None:
        raise RuntimeError(f"worker {number} cannot start")

    assert workers.supervise(2, [], crash) == 1


def test_workers_that_end_cleanly_are_started_again_until_they_keep_ending(
    monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    """An exit 0 the parent did not ask for is a died worker too (only SIGTERM stops them)."""
    monkeypatch.setattr(workers, "BACKOFF_S", 0.01)
    monkeypatch.setattr(workers, "BACKOFF_MAX_S", 0.01)
    monkeypatch.setattr(workers, "CRASHES_AT_START", 2)
    assert workers.supervise(1, [], lambda number: None) == 1
