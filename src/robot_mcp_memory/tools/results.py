"""Typed tool results. Clients read the text content (one JSON object per result) and, with
mcp ≥ 1.10, `structuredContent` validated against the `outputSchema` these models produce."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from robot_mcp_memory.docmodel import ProcessDoc


class Refusal(BaseModel):
    """A refusal, as an ordinary result: ``{"error": "not_found" | "forbidden" | "invalid" | …}``."""

    error: Literal["not_found", "forbidden", "invalid", "conflict", "busy", "storage", "internal"]
    detail: str


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
    def of(cls, doc: ProcessDoc) -> ProcessSummary:
        return cls(
            id=doc.id,
            title=doc.title,
            task_pattern=doc.task_pattern,
            tags=list(doc.tags),
            robot=doc.robot,
            created=doc.created,
            updated=doc.updated,
            success_count=doc.success_count,
            failure_count=doc.failure_count,
            last_used=doc.last_used,
            source_mission_id=doc.source_mission_id,
            reliability=round(doc.reliability, 4),
        )


class ProcessMatch(BaseModel):
    id: str
    title: str
    score: float = Field(description="relevance × reliability; higher is better")
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")
    success_count: int
    failure_count: int
    updated: str
    robot: str
    markdown: str = Field(description="the full process document, to use as advice")


class FoundProcesses(BaseModel):
    processes: list[ProcessMatch]
    mode: str = Field(description="which search ran: keyword, hybrid or vector")


class ProcessDocument(BaseModel):
    id: str
    markdown: str
    reliability: float


class SavedProcess(ProcessSummary):
    action: Literal["created", "updated", "forked"] = Field(
        description="created a new document, updated the one with this id, or forked to a new id "
        "because the id belonged to a different teaching mission"
    )
    requested_id: str


class ProcessList(BaseModel):
    processes: list[ProcessSummary]
    total: int


class Outcome(BaseModel):
    id: str
    success_count: int
    failure_count: int
    reliability: float
    last_used: str


class Deleted(BaseModel):
    id: str
    deleted: bool = True


class Reindexed(BaseModel):
    indexed: int


# ---------------------------------------------------------------------------- fleet
class RobotInfo(BaseModel):
    robot_id: str
    name: str
    group: str | None = Field(description="the robot's group, or null when ungrouped")
    meta: dict[str, Any] = Field(description="free-form facts about the robot (model, site, …)")
    self_improve: bool = Field(description="whether self-improvement is on for this robot now")
    created: str
    updated: str


class RobotList(BaseModel):
    robots: list[RobotInfo]
    total: int


class RegisteredRobot(RobotInfo):
    action: Literal["created", "updated"]


class GroupMove(RobotInfo):
    previous_group: str | None = Field(description="the group the robot was in before, or null")


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


class GroupList(BaseModel):
    groups: list[GroupInfo]
    global_self_improve: bool


class SavedGroup(GroupInfo):
    action: Literal["created", "updated"]


class DeletedGroup(BaseModel):
    group_id: str
    deleted: bool = True
    ungrouped_robots: list[str] = Field(description="robots that were in the group and are now ungrouped")
    lessons_kept: bool = Field(
        default=True, description="the group's lessons are kept; re-creating the group restores access"
    )


class SelfImproveState(BaseModel):
    group: GroupInfo | None = Field(description="the group switched, or null when the global toggle was set")
    global_self_improve: bool


# ---------------------------------------------------------------------------- lessons
class LessonInfo(BaseModel):
    scope: str = Field(description="group:<G> (shared in the group), solo:<robot> (ungrouped) or robot:<id> (private)")
    key: str
    params: dict[str, Any]
    success_count: int
    failure_count: int
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")
    place: str = Field(description="where the lesson was learned ('' = no place given)")
    transferred: bool = Field(description="true when learned at another place than the one asked about")
    from_place: str | None = Field(description="the place it was learned at, when transferred")
    private: bool
    orphaned: bool = Field(description="a group lesson whose group no longer exists (kept, not deleted)")
    recorded_by: str
    created: str
    updated: str


class RecordedLesson(BaseModel):
    recorded: bool = Field(description="whether anything was written")
    reason: Literal["created", "counted", "unchanged", "replaced", "self_improve_off", "other_params_failed"]
    detail: str
    robot: str
    scope: str
    self_improve: bool
    lessons: list[LessonInfo] = Field(description="the stored lesson after this call (empty when none)")


class RecalledLessons(BaseModel):
    robot: str
    self_improve: bool = Field(description="false: self-improvement is off, no lessons apply — use your defaults")
    scopes: list[str]
    lessons: list[LessonInfo] = Field(description="this place's lessons first, then earned ones from elsewhere")


class LessonList(BaseModel):
    lessons: list[LessonInfo]
    total: int
