"""The event loop's lag: a task asks to wake every `INTERVAL_S` and records how late it woke.
Lateness is time some callback held the loop, so every tenant waited that long.

Exposed on ``/metrics`` as the histogram ``memory_event_loop_lag_seconds``, the gauge
``memory_event_loop_lag_max_seconds`` (the worst since start) and the counter
``memory_event_loop_stalls_total`` (wakes later than the threshold); each stall is also logged as
``loop.stalled`` with the lag and the threshold (``MEMORY_LOOP_LAG_WARN_MS``).
"""

from __future__ import annotations

import asyncio

from robot_mcp_memory import logs
from robot_mcp_memory.metrics import Metrics

#: How often the monitor asks to wake. Its own cost is one timer callback per interval.
INTERVAL_S = 0.05

_log = logs.get("robot_mcp_memory.looplag")


class LoopLag:
    """Observations of the loop's lag, into `metrics`; `run` is the monitor task."""

    def __init__(self, metrics: Metrics, warn_s: float, interval_s: float = INTERVAL_S) -> None:
        self.metrics = metrics
        self.warn_s = warn_s
        self.interval_s = interval_s
        self.worst = 0.0
        metrics.gauge(
            "memory_event_loop_lag_max_seconds",
            "the longest the event loop was held since start",
            lambda: [((), self.worst)],
        )

    def observe(self, lag: float) -> None:
        """One wake `lag` seconds later than asked."""
        self.metrics.observe("memory_event_loop_lag_seconds", "how late the event loop's monitor woke", lag)
        self.worst = max(self.worst, lag)
        if lag >= self.warn_s:
            self.metrics.inc("memory_event_loop_stalls_total", "times the event loop was held past the threshold")
            _log.warning("loop.stalled", lag_ms=round(lag * 1000, 1), threshold_ms=round(self.warn_s * 1000, 1))

    async def run(self) -> None:
        """Measure until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.observe(max(0.0, loop.time() - asked))
