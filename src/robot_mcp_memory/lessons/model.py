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
