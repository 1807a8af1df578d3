"""Read models shared by the surfaces: pydantic views built from the domain objects (a process
document, the fleet views, the lesson answers). Transport-neutral — neither mcp nor starlette
is imported here; the MCP results and the REST models subclass or alias these."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, Field

from robot_mcp_memory.fleet.service import GroupView, RobotView
from robot_mcp_memory.lessons.service import Answer
from robot_mcp_memory.processes.docmodel import ProcessDoc


class ProcessSummary(BaseModel):
    """A process document's frontmatter (no body)."""

    id: str
    title: str
    task_pattern: str
    tags: list[str]
    robot: str
    created: str
    updated: str
    success_count: int
    failure_count: int
    last_used: str
    source_mission_id: str
    reliability: float

    @classmethod
    def of(cls, doc: ProcessDoc, **extra: Any) -> Self:
        return cls(**cls.fields_of(doc), **extra)

    @staticmethod
    def fields_of(doc: ProcessDoc) -> dict[str, Any]:
        return {
            "id": doc.id,
            "title": doc.title,
            "task_pattern": doc.task_pattern,
            "tags": list(doc.tags),
            "robot": doc.robot,
            "created": doc.created,
            "updated": doc.updated,
            "success_count": doc.success_count,
            "failure_count": doc.failure_count,
            "last_used": doc.last_used,
            "source_mission_id": doc.source_mission_id,
            "reliability": round(doc.reliability, 4),
        }


class RobotInfo(BaseModel):
    robot_id: str
    name: str
    group: str | None = Field(description="the robot's group, or null when ungrouped")
    meta: dict[str, Any] = Field(description="free-form facts about the robot (model, site, …)")
    self_improve: bool = Field(description="whether self-improvement is on for this robot now")
    created: str
    updated: str

    @classmethod
    def of(cls, view: RobotView, **extra: Any) -> Self:
        r = view.robot
        return cls(
            robot_id=r.robot_id,
            name=r.name,
            group=r.group_id,
            meta=r.meta,
            self_improve=view.self_improve,
            created=r.created,
            updated=r.updated,
            **extra,
        )


class GroupInfo(BaseModel):
    group_id: str
    name: str
    customer: str
    factory: str
    self_improve: bool | None = Field(description="the group's own switch; null means it follows the global toggle")
    effective_self_improve: bool = Field(description="what applies to its robots now")
    robots: list[str]
    created: str
    updated: str

    @classmethod
    def of(cls, view: GroupView, **extra: Any) -> Self:
        g = view.group
        return cls(
            group_id=g.group_id,
            name=g.name,
            customer=g.customer,
            factory=g.factory,
            self_improve=g.self_improve,
            effective_self_improve=view.effective_self_improve,
            robots=list(g.robots),
            created=g.created,
            updated=g.updated,
            **extra,
        )


class LessonInfo(BaseModel):
    """A stored lesson as one caller sees it (``private``/``orphaned`` depend on who asks)."""

    scope: str
    key: str
    place: str
    params: dict[str, Any]
    success_count: int
    failure_count: int
    reliability: float
    recorded_by: str
    created: str
    updated: str
    private: bool
    orphaned: bool = Field(description="a group lesson whose group no longer exists")

    @classmethod
    def of(cls, answer: Answer, **extra: Any) -> Self:
        x = answer.lesson
        return cls(
            scope=x.scope,
            key=x.key,
            place=x.place,
            params=x.params,
            success_count=x.success_count,
            failure_count=x.failure_count,
            reliability=round(x.reliability, 4),
            recorded_by=x.recorded_by,
            created=x.created,
            updated=x.updated,
            private=answer.private,
            orphaned=answer.orphaned,
            **extra,
        )
