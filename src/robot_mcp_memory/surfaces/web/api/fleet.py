"""Fleet over REST: robots, groups, moving robots, the self-improvement switches (§6a: a robot
token sees its own group and may not administer)."""

from __future__ import annotations

from pydantic import Field

from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import (
    ID_PATTERN,
    Args,
    FleetOverview,
    GroupBody,
    GroupList,
    GroupOut,
    GroupRemoved,
    GroupSaved,
    Moved,
    RegisterBody,
    Registered,
    RobotOut,
    RobotPage,
    SelfImproveBody,
    SelfImproveOut,
    SetGroupBody,
)
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoArgs, NoBody


class RobotsArgs(Args):
    group: str = Field(default="", max_length=64, description="only this group's robots")


class RobotArgs(Args):
    robot_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)


class GroupArgs(Args):
    group_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)


def register(api: Api, ctx: WebContext) -> None:
    fleet = ctx.memory.fleet
    tag = "fleet"

    @api.route("GET", "/api/fleet", args=NoArgs, body=NoBody, response=FleetOverview, summary="Fleet overview", tag=tag)
    async def fleet_overview(call: Call[NoArgs, NoBody]) -> FleetOverview:
        """Robot counts, the global switch and every visible group's switch."""
        o = await fleet.overview(call.principal)
        return FleetOverview(
            robots=o.robots,
            grouped=o.grouped,
            ungrouped=o.ungrouped,
            global_self_improve=o.global_self_improve,
            groups=[GroupOut.of(g) for g in o.groups],
        )

    @api.route(
        "GET", "/api/fleet/robots", args=RobotsArgs, body=NoBody, response=RobotPage, summary="List robots", tag=tag,
        errors=(404,),
    )  # fmt: skip
    async def list_robots(call: Call[RobotsArgs, NoBody]) -> RobotPage:
        """Every robot (or one group's); a robot token sees only its own group's robots."""
        robots = [RobotOut.of(r) for r in await fleet.list_robots(call.principal, call.args.group)]
        return RobotPage(robots=robots, total=len(robots))

    @api.route(
        "POST", "/api/fleet/robots", args=NoArgs, body=RegisterBody, response=Registered, summary="Register a robot",
        tag=tag, errors=(403, 404, 409, 503),
    )  # fmt: skip
    async def register_robot(call: Call[NoArgs, RegisterBody]) -> Registered:
        """register_robot: create or refresh a robot (a robot token: only itself, not into a group)."""
        b = call.body
        view, created = await fleet.register_robot(call.principal, b.robot_id, b.name, b.group)
        return Registered(robot=RobotOut.of(view), created=created)

    @api.route(
        "PUT", "/api/fleet/robots/{robot_id}/group", args=RobotArgs, body=SetGroupBody, response=Moved,
        summary="Move a robot to a group", tag=tag, errors=(403, 404, 409, 503),
    )  # fmt: skip
    async def set_group(call: Call[RobotArgs, SetGroupBody]) -> Moved:
        """set_group: move a robot into a group ('' ungroups). Fleet administration (admin only)."""
        view, previous = await fleet.set_group(call.principal, call.args.robot_id, call.body.group)
        return Moved(robot=RobotOut.of(view), previous_group=previous)

    @api.route("GET", "/api/fleet/groups", args=NoArgs, body=NoBody, response=GroupList, summary="List groups", tag=tag)
    async def list_groups(call: Call[NoArgs, NoBody]) -> GroupList:
        """Every group with its robots and switch, and the global switch (a robot token: its own group)."""
        g = await fleet.list_groups(call.principal)
        return GroupList(groups=[GroupOut.of(x) for x in g.groups], global_self_improve=g.global_self_improve)

    @api.route(
        "PUT", "/api/fleet/groups/{group_id}", args=GroupArgs, body=GroupBody, response=GroupSaved,
        summary="Create or update a group", tag=tag, errors=(403, 409, 503),
    )  # fmt: skip
    async def upsert_group(call: Call[GroupArgs, GroupBody]) -> GroupSaved:
        """upsert_group: create a group or update the fields given. Admin only."""
        b = call.body
        view, created = await fleet.upsert_group(
            call.principal, call.args.group_id, b.name, b.customer, b.factory, b.self_improve
        )
        return GroupSaved(group=GroupOut.of(view), created=created)

    @api.route(
        "DELETE", "/api/fleet/groups/{group_id}", args=GroupArgs, body=NoBody, response=GroupRemoved,
        summary="Delete a group", tag=tag, errors=(403, 404, 503),
    )  # fmt: skip
    async def delete_group(call: Call[GroupArgs, NoBody]) -> GroupRemoved:
        """delete_group: its robots become ungrouped; its lessons are kept. Admin only."""
        d = await fleet.delete_group(call.principal, call.args.group_id)
        return GroupRemoved(group_id=d.group.group_id, ungrouped=list(d.ungrouped))

    @api.route(
        "PUT", "/api/fleet/self-improve", args=NoArgs, body=SelfImproveBody, response=SelfImproveOut,
        summary="Switch self-improvement", tag=tag, errors=(403, 404, 503),
    )  # fmt: skip
    async def set_self_improve(call: Call[NoArgs, SelfImproveBody]) -> SelfImproveOut:
        """set_self_improve: one group's switch (null follows the global one), or the global one
        with group ''. Admin only."""
        r = await fleet.set_self_improve(call.principal, call.body.enabled, call.body.group)
        return SelfImproveOut(
            group=GroupOut.of(r.group) if r.group is not None else None, global_self_improve=r.global_self_improve
        )
