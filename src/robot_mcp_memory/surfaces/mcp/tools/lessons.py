"""The three lesson tools (primary spec v0.2): group-scoped, place-aware learned parameters."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.tools.adapter import PrincipalOf, refusals
from robot_mcp_memory.surfaces.mcp.tools.results import LessonInfo, LessonList, RecalledLessons, RecordedLesson, Refusal

RobotArg = Annotated[
    str,
    Field(
        max_length=64,
        description="the registered robot whose lessons these are (with a robot token: always your own robot)",
    ),
]
Key = Annotated[
    str, Field(min_length=1, max_length=200, description="what the lesson is about, e.g. 'grasp/mug' or 'place/shelf'")
]
Place = Annotated[
    str,
    Field(max_length=200, description="where the robot is (a table, cell, room…); '' if it does not matter"),
]


def register(mcp: FastMCP, memory: Memory, principal_of: PrincipalOf) -> None:
    svc = memory.lessons
    read = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False))
    @refusals
    async def record_params(
        ctx: Context,  # type: ignore[type-arg]
        robot: RobotArg,
        key: Key,
        params: Annotated[
            dict[str, Any] | str,
            Field(description='the learned parameters, a JSON object such as {"grip_force": 0.3, "approach": "top"}'),
        ],
        place: Place = "",
        success: Annotated[
            bool | None, Field(description="true/false: the outcome of using these params; null: just store them")
        ] = None,
        private: Annotated[
            bool, Field(description="true: robot-specific, never shared with the group (e.g. what this robot saw)")
        ] = False,
    ) -> RecordedLesson | Refusal:
        """Record learned parameters (a lesson) for a robot, optionally with the outcome of using them.

        The lesson is shared with the robot's group (or kept to the robot when it is ungrouped or
        private=true). Same params again: the outcome is counted. New params that worked (or plain
        storing) replace the old ones; a failure of different params changes nothing. When
        self-improvement is off for the robot nothing is written and `recorded` is false with the
        reason — that is not an error."""
        rec = await svc.record(principal_of(ctx), robot, key, params, place, success, private)
        return RecordedLesson(
            recorded=rec.recorded,
            reason=rec.reason,
            detail=rec.detail,
            robot=rec.robot,
            scope=rec.scope,
            self_improve=rec.self_improve,
            lessons=[] if rec.answer is None else [LessonInfo.of(rec.answer)],
        )

    @mcp.tool(annotations=read)
    @refusals
    async def recall_params(
        ctx: Context,  # type: ignore[type-arg]
        robot: RobotArg,
        key: Key,
        place: Place = "",
    ) -> RecalledLessons | Refusal:
        """Get the lessons (learned parameters) that apply to a robot for `key` at `place`.

        Lessons learned here come first; lessons from other places are offered only once they
        have proven themselves (enough successes, high reliability) and are marked
        transferred=true with from_place. They are advice from past executions: use them as
        starting values and deviate when reality disagrees. No lessons (or self_improve=false)
        means: use your defaults."""
        rec = await svc.recall(principal_of(ctx), robot, key, place)
        return RecalledLessons(
            robot=rec.robot,
            self_improve=rec.self_improve,
            scopes=list(rec.scopes),
            lessons=[LessonInfo.of(a) for a in rec.answers],
        )

    @mcp.tool(annotations=read)
    @refusals
    async def list_lessons(
        ctx: Context,  # type: ignore[type-arg]
        robot: Annotated[
            str, Field(max_length=64, description="only what this robot can see; '' = every lesson (admin)")
        ] = "",
        limit: Annotated[int, Field(ge=1, le=500, description="page size")] = 50,
        offset: Annotated[int, Field(ge=0, description="how many to skip")] = 0,
    ) -> LessonList | Refusal:
        """List stored lessons, most recently updated first, with the total for paging. Shows
        lessons even while self-improvement is off (it is an inspection view), including
        lessons of deleted groups (orphaned=true) for an operator."""
        page = await svc.list(principal_of(ctx), robot, limit, offset)
        return LessonList(lessons=[LessonInfo.of(a) for a in page.answers], total=page.total)
