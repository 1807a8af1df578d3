"""The timestamp format every table of every backend stores."""

from __future__ import annotations

import time


def now_iso(ts: float | None = None) -> str:
    """UTC timestamp with second precision, the format every table uses."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))
