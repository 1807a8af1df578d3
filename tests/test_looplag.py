"""The event loop's lag monitor: a call that holds the loop is measured, counted and logged."""

from __future__ import annotations

import time

import anyio
from structlog.testing import capture_logs

from robot_mcp_memory.config import Settings
from robot_mcp_memory.looplag import LoopLag
from robot_mcp_memory.metrics import Metrics


def _hold_the_loop(seconds: float) -> None:
    """What CPU work on the event loop does: nothing else runs meanwhile."""
    time.sleep(seconds)


async def test_a_call_that_holds_the_loop_is_measured_counted_and_logged() -> None:
    metrics = Metrics()
    lag = LoopLag(metrics, warn_s=0.1, interval_s=0.01)
    with capture_logs() as seen:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lag.run)
            await anyio.sleep(0.02)  # the monitor is waiting for its next wake
            _hold_the_loop(0.4)
            await anyio.sleep(0.05)  # the monitor's overdue wake is due before this one
            tasks.cancel_scope.cancel()
    assert metrics.value("memory_event_loop_stalls_total") >= 1
    assert lag.worst >= 0.1
    text = metrics.render()
    assert "# TYPE memory_event_loop_lag_seconds histogram" in text
    assert "# TYPE memory_event_loop_lag_max_seconds gauge" in text
    stalls = [e for e in seen if e["event"] == "loop.stalled"]
    assert stalls
    assert stalls[0]["log_level"] == "warning"
    assert stalls[0]["threshold_ms"] == 100.0
    assert stalls[0]["lag_ms"] >= 100.0


def test_a_lag_under_the_threshold_is_observed_but_not_a_stall() -> None:
    metrics = Metrics()
    lag = LoopLag(metrics, warn_s=0.25)
    with capture_logs() as seen:
        lag.observe(0.01)
        lag.observe(0.3)
    assert metrics.value("memory_event_loop_stalls_total") == 1
    assert [e["lag_ms"] for e in seen if e["event"] == "loop.stalled"] == [300.0]
    assert "memory_event_loop_lag_seconds_count 2" in metrics.render()


def test_the_stall_threshold_is_a_setting() -> None:
    assert Settings.from_env({}).loop_lag_warn_ms == 250
    assert Settings.from_env({"MEMORY_LOOP_LAG_WARN_MS": "40"}).loop_lag_warn_ms == 40
