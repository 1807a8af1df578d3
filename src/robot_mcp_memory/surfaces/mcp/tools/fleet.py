"""The eight fleet tools (primary spec v0.2 + §6a): robots, groups, self-improvement switches."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.tools.adapter import PrincipalOf, refusals
from robot_mcp_memory.surfaces.mcp.tools.results import (
    DeletedGroup,
    GroupInfo,
    GroupList,
    GroupMove,
    Refusal,
    RegisteredRobot,
    RobotInfo,
    RobotList,
    SavedGroup,
    SelfImproveState,
)

_ID = "1-64 letters, digits, '_', '.', '-', starting with a letter or digit"
RobotId = Annotated[str, Field(min_length=1, max_length=64, description=f"the robot's id ({_ID}), e.g. 'rap-1'")]
GroupId = Annotated[str, Field(min_length=1, max_length=64, description=f"the group's id ({_ID}), e.g. 'acme-line-2'")]
Text = Annotated[str, Field(max_length=200)]


def register(mcp: FastMCP, memory: Memory, principal_of: PrincipalOf) -> None:
    svc = memory.fleet
    admin = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
    read = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)

    @mcp.tool(annotations=admin)
    @refusals
    async def register_robot(
        ctx: Context,  # type: ignore[type-arg]
        robot_id: RobotId,
        name: Annotated[str, Field(max_length=200, description="display name; '' keeps the current one")] = "",
        group: Annotated[
            str, Field(max_length=64, description="group to put it in (must exist); '' keeps the current group")
        ] = "",
    ) -> RegisteredRobot | Refusal:
        """Add a robot to the fleet registry, or refresh its name/group if it is already there.

        Safe to call at every start: an empty name or group leaves the stored one alone (use
        set_group(robot_id, "") to ungroup). A group that does not exist is refused with
        not_found — create it with upsert_group first. With a robot token you can only register
        your own robot, and not move it into a group."""
        view, created = await svc.register_robot(principal_of(ctx), robot_id, name, group)
        return RegisteredRobot.of(view, action="created" if created else "updated")

    @mcp.tool(annotations=admin)
    @refusals
    async def set_robot_meta(
        ctx: Context,  # type: ignore[type-arg]
        robot_id: RobotId,
        name: Annotated[str | None, Field(max_length=200, description="new display name; null keeps it")] = None,
        meta: Annotated[
            dict[str, Any] | str | None,
            Field(description="a JSON object merged into the robot's meta; a key set to null is removed"),
        ] = None,
    ) -> RobotInfo | Refusal:
        """Rename a registered robot and/or update its free-form meta (model, site, firmware …).
        `meta` is merged key by key into what is stored. With a robot token: only your own robot."""
        return RobotInfo.of(await svc.set_robot_meta(principal_of(ctx), robot_id, name, meta))

    @mcp.tool(annotations=read)
    @refusals
    async def list_robots(
        ctx: Context,  # type: ignore[type-arg]
        group: Annotated[str, Field(max_length=64, description="only this group's robots; '' for all")] = "",
    ) -> RobotList | Refusal:
        """List registered robots with their group and whether self-improvement is on for them.
        With a robot token you see only your own group's robots."""
        robots = [RobotInfo.of(v) for v in await svc.list_robots(principal_of(ctx), group)]
        return RobotList(robots=robots, total=len(robots))

    @mcp.tool(annotations=read)
    @refusals
    async def list_groups(ctx: Context) -> GroupList | Refusal:  # type: ignore[type-arg]
        """List robot groups: tags (customer, factory), members, and each group's self-improvement
        switch (null = follows the global toggle, also returned). With a robot token: your own group."""
        listed = await svc.list_groups(principal_of(ctx))
        return GroupList(
            groups=[GroupInfo.of(g) for g in listed.groups], global_self_improve=listed.global_self_improve
        )

    @mcp.tool(annotations=admin)
    @refusals
    async def set_group(
        ctx: Context,  # type: ignore[type-arg]
        robot_id: RobotId,
        group: Annotated[str, Field(max_length=64, description="the group to move it into; '' ungroups it")],
    ) -> GroupMove | Refusal:
        """Move a robot into a group (it then shares that group's lessons and processes) or, with
        group "", make it ungrouped (isolated). The group must exist (upsert_group creates one).
        Admin only."""
        view, previous = await svc.set_group(principal_of(ctx), robot_id, group)
        return GroupMove.of(view, previous_group=previous)

    @mcp.tool(annotations=admin)
    @refusals
    async def upsert_group(
        ctx: Context,  # type: ignore[type-arg]
        group_id: GroupId,
        name: Annotated[str, Field(max_length=200, description="display name; '' keeps the current one")] = "",
        customer: Annotated[str, Field(max_length=200, description="customer tag; '' keeps the current one")] = "",
        factory: Annotated[str, Field(max_length=200, description="factory/site tag; '' keeps the current one")] = "",
        self_improve: Annotated[
            bool | None, Field(description="the group's own switch; null keeps it (a new group follows the global one)")
        ] = None,
    ) -> SavedGroup | Refusal:
        """Create a robot group, or update the fields you pass on an existing one. Admin only."""
        view, created = await svc.upsert_group(principal_of(ctx), group_id, name, customer, factory, self_improve)
        return SavedGroup.of(view, action="created" if created else "updated")

    @mcp.tool(annotations=admin)
    @refusals
    async def delete_group(ctx: Context, group_id: GroupId) -> DeletedGroup | Refusal:  # type: ignore[type-arg]
        """Delete a group. Its robots become ungrouped; its lessons are KEPT (not deleted) and
        come back if a group with the same id is created again. Admin only."""
        deleted = await svc.delete_group(principal_of(ctx), group_id)
        return DeletedGroup(group_id=deleted.group.group_id, ungrouped_robots=list(deleted.ungrouped))

    @mcp.tool(annotations=admin)
    @refusals
    async def set_self_improve(
        ctx: Context,  # type: ignore[type-arg]
        enabled: Annotated[
            bool | None, Field(description="on or off; for a group, null makes it follow the global toggle again")
        ],
        group: Annotated[str, Field(max_length=64, description="the group to switch; '' = the global toggle")] = "",
    ) -> SelfImproveState | Refusal:
        """Switch self-improvement (recording and recalling lessons) on or off, for one group or
        globally. A group's own setting overrides the global one. Off is a clean kill switch:
        nothing is recorded and robots get no lessons. Admin only."""
        state = await svc.set_self_improve(principal_of(ctx), enabled, group)
        group_view = None if state.group is None else GroupInfo.of(state.group)
        return SelfImproveState(group=group_view, global_self_improve=state.global_self_improve)
