"""The fleet port: what `FleetService`, the lessons and the tenancy policy need from the registry.

Contract of a `FleetRepository`:

- membership reads (`group_mates`, `group_of`, `is_registered`, `snapshot`, …) are synchronous and
  answer from the last committed fleet write this process has seen: they sit on every call's path;
- writes are atomic and, once awaited, visible to the reads of this process;
- ids arrive checked (`model.check_robot_id`, `model.check_group_id`); a case twin is a `Conflict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from robot_mcp_memory.fleet.model import Group, Robot, Snapshot


class FleetRepository(Protocol):
    @property
    def snapshot(self) -> Snapshot: ...

    def group_mates(self, robot_id: str) -> frozenset[str]: ...

    def is_registered(self, robot_id: str) -> bool: ...

    def group_of(self, robot_id: str) -> str | None: ...

    def group_exists(self, group_id: str) -> bool: ...

    def self_improve_for(self, robot_id: str) -> bool: ...

    def effective_self_improve(self, group_id: str | None) -> bool: ...

    async def robots(self, group_id: str | None = None) -> list[Robot]: ...

    async def groups(self) -> list[Group]: ...

    async def register_robot(self, robot_id: str, name: str | None, group_id: str | None) -> tuple[Robot, bool]: ...

    async def set_robot_meta(self, robot_id: str, name: str | None, meta: Mapping[str, Any] | None) -> Robot: ...

    async def set_group(self, robot_id: str, group_id: str | None) -> tuple[Robot, str | None]: ...

    async def upsert_group(
        self,
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
        self_improve: bool | None = None,
    ) -> tuple[Group, bool]: ...

    async def delete_group(self, group_id: str) -> tuple[Group, tuple[str, ...]]: ...

    async def set_group_self_improve(self, group_id: str, enabled: bool | None) -> Group: ...

    async def set_global_self_improve(self, enabled: bool) -> bool: ...
