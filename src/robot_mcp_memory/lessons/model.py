"""A lesson: learned parameters in one scope, for one key and place, with their outcome counts (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Action = Literal["created", "counted", "unchanged", "replaced"]


@dataclass(frozen=True)
class Lesson:
    scope: str
    key: str
    place: str
    params: dict[str, Any]
    success_count: int
    failure_count: int
    recorded_by: str
    created: str
    updated: str

    @property
    def reliability(self) -> float:
        """Laplace: (s + 1) / (s + f + 2)."""
        return (self.success_count + 1) / (self.success_count + self.failure_count + 2)


@dataclass(frozen=True)
class Stored:
    lesson: Lesson
    action: Action


def same_params(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` and ``false`` is not ``0.0`` (Python's ``==`` says
    they are, which counted a report of other params as the stored ones)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_params(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_params(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
