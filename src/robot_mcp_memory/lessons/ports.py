"""The lessons port: what `ScopedParams` needs from the lesson store.

Contract of a `LessonRepository`: `record` counts an outcome (or stores new parameters) atomically per
(scope, key, place) and says what it did; reads never return a scope they were not given; a store
that was never written reads as empty.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

from robot_mcp_memory.lessons.model import Lesson, Stored


class LessonRepository(Protocol):
    async def record(
        self,
        scope: str,
        key: str,
        place: str,
        params: Mapping[str, Any],
        success: bool | None,
        recorded_by: str,
    ) -> Stored | None: ...

    async def for_key(self, scopes: Collection[str], key: str) -> list[Lesson]: ...

    async def page(self, scopes: Collection[str] | None, limit: int, offset: int) -> tuple[list[Lesson], int]: ...
