"""In-process metrics rendered in the Prometheus text format (no dependency, no I/O).

Counters and histograms are keyed by label tuples; `render()` produces the exposition text that
``GET /metrics`` serves. Gauges (queue depth, row counts, embedder mode) are read at scrape time
through callbacks, so they are never stale.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

#: Latency buckets in seconds: dense over the range a tool call normally takes, sparse above it
#: for the slow tail and stalls.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


def _fmt_labels(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    items = [*labels, *extra]
    if not items:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in items)
    return "{" + inner + "}"


#: A UTF-16 surrogate code point: a Python `str` may hold one alone, UTF-8 cannot encode it.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _escape(value: str) -> str:
    """A label value as the Prometheus text format writes it: backslash, double quote and line
    feed escaped; a lone surrogate becomes U+FFFD, so the exposition always encodes as UTF-8."""
    value = _SURROGATE.sub("\ufffd", value)
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class _Hist:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    n: int = 0


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._hists: dict[str, dict[Labels, _Hist]] = {}
        self._help: dict[str, str] = {}
        self._gauges: list[tuple[str, str, Callable[[], Iterable[tuple[Labels, float]]]]] = []

    def inc(self, name: str, help_: str, value: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._help.setdefault(name, help_)
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + value

    def observe(self, name: str, help_: str, seconds: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._help.setdefault(name, help_)
            h = self._hists.setdefault(name, {}).setdefault(key, _Hist())
            h.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            h.total += seconds
            h.n += 1

    def gauge(self, name: str, help_: str, read: Callable[[], Iterable[tuple[Labels, float]]]) -> None:
        """Register a gauge read at scrape time."""
        self._gauges.append((name, help_, read))

    def value(self, name: str, **labels: str) -> float:
        return self._counters.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        out: list[str] = []
        with self._lock:
            for name, series in sorted(self._counters.items()):
                out += [f"# HELP {name} {self._help[name]}", f"# TYPE {name} counter"]
                out += [f"{name}{_fmt_labels(k)} {v:g}" for k, v in sorted(series.items())]
            for name, hs in sorted(self._hists.items()):
                out += [f"# HELP {name} {self._help[name]}", f"# TYPE {name} histogram"]
                for k, h in sorted(hs.items()):
                    running = 0
                    for bound, c in zip((*BUCKETS, float("inf")), h.counts, strict=True):
                        running += c
                        le = "+Inf" if bound == float("inf") else f"{bound:g}"
                        out.append(f"{name}_bucket{_fmt_labels(k, [('le', le)])} {running}")
                    out.append(f"{name}_sum{_fmt_labels(k)} {h.total:.6f}")
                    out.append(f"{name}_count{_fmt_labels(k)} {h.n}")
        for name, help_, read in self._gauges:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
            try:
                out += [f"{name}{_fmt_labels(k)} {v:g}" for k, v in read()]
            except Exception:  # a failing gauge must not break the scrape
                out.append(f"# {name} unavailable")
        return "\n".join(out) + "\n"
