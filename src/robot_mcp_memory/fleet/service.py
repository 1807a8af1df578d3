"""The fleet: robots, groups and the self-improvement switches — operator actions and the
dashboard's view, with the §6a policy applied.

Decisions (also in docs/fleet.md):

- **Registering is idempotent.** `register_robot` of an existing robot refreshes its name and
  group when given; an empty name or group leaves them as they are, so a brain that registers
  itself at every boot never undoes an operator's grouping. `set_group(robot, "")` ungroups.
- **Groups must exist before robots join them.** `set_group` / `register_robot` with an unknown
  group is ``not_found`` with a hint to call `upsert_group` — a typo never creates a group.
- **Deleting a group ungroups its robots and keeps its lessons.** The ``group:<G>`` lessons stay
  in lessons.db (nothing learned silently vanishes); `list_lessons` shows them to an operator as
  orphaned, and re-creating the group restores its robots' access once they rejoin it.
- **Scoped callers** (a robot token) register and describe only themselves, may not join or
  leave a group, see only their own group, and cannot administer groups or switches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robot_mcp_memory.errors import InvalidInput, NotFound
from robot_mcp_memory.fleet.model import MAX_META_BYTES, MAX_TEXT, Group, Robot, check_group_id, check_robot_id
from robot_mcp_memory.fleet.ports import FleetRepository
from robot_mcp_memory.json_object import parse_json_object
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal


@dataclass(frozen=True)
class RobotView:
    robot: Robot
    #: Whether self-improvement is on for this robot now (its group's setting, else the global one).
    self_improve: bool


@dataclass(frozen=True)
class GroupView:
    group: Group
    #: The group's own setting if it has one, else the global toggle.
    effective_self_improve: bool


@dataclass(frozen=True)
class Groups:
    groups: list[GroupView]
    global_self_improve: bool


@dataclass(frozen=True)
class GroupDeleted:
    group: Group
    ungrouped: tuple[str, ...]


@dataclass(frozen=True)
class SelfImprove:
    group: GroupView | None  # None: the global toggle was set
    global_self_improve: bool


@dataclass(frozen=True)
class Overview:
    """What a fleet dashboard shows: counts and every group's switch."""

    robots: int
    grouped: int
    ungrouped: int
    global_self_improve: bool
    groups: list[GroupView]


def _text(value: str, what: str) -> str | None:
    """'' → None (leave as it is); otherwise the stripped text, bounded."""
    value = value.strip()
    if len(value) > MAX_TEXT:
        raise InvalidInput(f"{what} is longer than {MAX_TEXT} characters")
    return value or None


class FleetService:
    def __init__(self, registry: FleetRepository, policy: Policy) -> None:
        self.registry = registry
        self.policy = policy

    def _robot(self, robot: Robot) -> RobotView:
        return RobotView(robot, self.registry.effective_self_improve(robot.group_id))

    def _group(self, group: Group) -> GroupView:
        return GroupView(group, self.registry.effective_self_improve(group.group_id))

    # ------------------------------------------------------------------ robots
    async def register_robot(
        self, principal: Principal, robot_id: str, name: str = "", group: str = ""
    ) -> tuple[RobotView, bool]:
        """Create or refresh a robot; returns it and whether it was created."""
        rid = check_robot_id(robot_id)
        self.policy.require_self(principal, rid, "register_robot")
        gid = check_group_id(group) if group.strip() else None
        if gid is not None and gid != self.registry.group_of(rid):
            self.policy.require_admin(principal, "putting a robot into a group")
        robot, created = await self.registry.register_robot(rid, _text(name, "name"), gid)
        return self._robot(robot), created

    async def set_robot_meta(
        self,
        principal: Principal,
        robot_id: str,
        name: str | None = None,
        meta: Mapping[str, Any] | str | None = None,
    ) -> RobotView:
        """Rename and/or merge `meta` (a JSON object; a key set to null is removed)."""
        rid = check_robot_id(robot_id)
        self.policy.require_self(principal, rid, "set_robot_meta")
        patch = None if meta is None else parse_json_object(meta, "meta", MAX_META_BYTES)
        new_name = None if name is None else (_text(name, "name") or "")
        return self._robot(await self.registry.set_robot_meta(rid, new_name, patch))

    async def list_robots(self, principal: Principal, group: str = "") -> list[RobotView]:
        """Every robot, or one group's. A scoped caller sees only its own group's robots."""
        gid = check_group_id(group) if group.strip() else None
        visible = self.policy.visible_fleet(principal)
        if visible is None and gid is not None and not self.registry.group_exists(gid):
            raise NotFound(f"no group '{gid}'; list_groups shows what exists")
        robots = await self.registry.robots(gid)
        return [self._robot(r) for r in robots if visible is None or r.robot_id in visible]

    async def set_group(self, principal: Principal, robot_id: str, group: str) -> tuple[RobotView, str | None]:
        """Move a robot into `group` ('' ungroups). Returns the robot and its previous group."""
        self.policy.require_admin(principal, "set_group")
        rid = check_robot_id(robot_id)
        gid = check_group_id(group) if group.strip() else None
        robot, previous = await self.registry.set_group(rid, gid)
        return self._robot(robot), previous

    # ------------------------------------------------------------------ groups
    async def list_groups(self, principal: Principal) -> Groups:
        """Every group with its robots, and the global toggle; a scoped caller sees only its own group."""
        groups = await self.registry.groups()
        if principal.robot_id is not None:
            own = self.registry.group_of(principal.robot_id)
            groups = [g for g in groups if g.group_id == own]
        return Groups([self._group(g) for g in groups], self.registry.snapshot.global_self_improve)

    async def upsert_group(
        self,
        principal: Principal,
        group_id: str,
        name: str = "",
        customer: str = "",
        factory: str = "",
        self_improve: bool | None = None,
    ) -> tuple[GroupView, bool]:
        """Create a group or update the fields given ('' / None leave a field as it is)."""
        self.policy.require_admin(principal, "upsert_group")
        gid = check_group_id(group_id)
        group, created = await self.registry.upsert_group(
            gid, _text(name, "name"), _text(customer, "customer"), _text(factory, "factory"), self_improve
        )
        return self._group(group), created

    async def delete_group(self, principal: Principal, group_id: str) -> GroupDeleted:
        """Delete a group: its robots become ungrouped; its lessons are kept (see module doc)."""
        self.policy.require_admin(principal, "delete_group")
        group, ungrouped = await self.registry.delete_group(check_group_id(group_id))
        return GroupDeleted(group, ungrouped)

    async def set_self_improve(self, principal: Principal, enabled: bool | None, group: str = "") -> SelfImprove:
        """Switch self-improvement for one group, or globally with `group` ''. For a group,
        `enabled` None makes it follow the global toggle again."""
        self.policy.require_admin(principal, "set_self_improve")
        if not group.strip():
            if enabled is None:
                raise InvalidInput("the global toggle is either on or off: pass enabled true or false")
            return SelfImprove(None, await self.registry.set_global_self_improve(enabled))
        updated = await self.registry.set_group_self_improve(check_group_id(group), enabled)
        return SelfImprove(self._group(updated), self.registry.snapshot.global_self_improve)

    # ------------------------------------------------------------------ dashboard
    async def overview(self, principal: Principal) -> Overview:
        """Counts and per-group switches, limited to what `principal` may see."""
        robots = await self.list_robots(principal)
        grouped = sum(1 for r in robots if r.robot.group_id is not None)
        return Overview(
            robots=len(robots),
            grouped=grouped,
            ungrouped=len(robots) - grouped,
            global_self_improve=self.registry.snapshot.global_self_improve,
            groups=(await self.list_groups(principal)).groups,
        )
