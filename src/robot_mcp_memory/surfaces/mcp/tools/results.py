"""Typed tool results. Clients read the text content (one JSON object per result) and, with
mcp ≥ 1.10, `structuredContent` validated against the `outputSchema` these models produce."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, Field

from robot_mcp_memory.lessons.service import Answer
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.surfaces import views
from robot_mcp_memory.surfaces.views import GroupInfo as GroupInfo  # shared with REST (re-exported)
from robot_mcp_memory.surfaces.views import ProcessSummary as ProcessSummary
from robot_mcp_memory.surfaces.views import RobotInfo as RobotInfo


class Refusal(BaseModel):
    """A refusal, as an ordinary result: ``{"error": "not_found" | "forbidden" | "invalid" | …}``."""

    error: Literal["not_found", "forbidden", "invalid", "conflict", "busy", "storage", "internal"]
    detail: str


class ProcessMatch(BaseModel):
    id: str
    title: str
    score: float = Field(description="relevance × reliability; higher is better")
    relevance: float = Field(
        description="how well the process matches the query, 0-1, the same scale in keyword and hybrid mode "
        "(an exact match ~0.8 or more, an unrelated one below ~0.2)"
    )
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")
    success_count: int
    failure_count: int
    updated: str
    robot: str
    markdown: str = Field(description="the full process document, to use as advice")
    fleet_reliability: float | None = Field(
        default=None,
        description="a fleet-wide 'shared' document seen by a robot token: the reliability over every group's "
        "outcomes (`reliability` and the counts are this robot's group's view); null otherwise",
    )


class FoundProcesses(BaseModel):
    processes: list[ProcessMatch]
    mode: str = Field(description="which search ran: keyword or hybrid")
    mode_reason: str = Field(description="why that mode ran, and what it means for the results")
    note: str | None = Field(
        default=None,
        description="set when no process is returned: nothing matched well enough (or reached min_score); "
        "null otherwise",
    )


class ProcessDocument(BaseModel):
    id: str
    markdown: str
    reliability: float
    fleet_reliability: float | None = Field(
        default=None,
        description="a fleet-wide 'shared' document seen by a robot token: the reliability over every group's "
        "outcomes (`reliability` and the counts are this robot's group's view); null otherwise",
    )


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
    fleet_reliability: float | None = Field(
        default=None,
        description="a fleet-wide 'shared' document seen by a robot token: the reliability over every group's "
        "outcomes (`reliability` and the counts are this robot's group's view); null otherwise",
    )


def fleet_reliability(fleet: tuple[int, int] | None) -> float | None:
    """The fleet-wide reliability beside a group's view of a shared document (None: no such view)."""
    return None if fleet is None else round(docmodel.reliability(*fleet), 4)


class Deleted(BaseModel):
    id: str
    deleted: bool = True


class Reindexed(BaseModel):
    indexed: int


# ---------------------------------------------------------------------------- fleet
class RobotList(BaseModel):
    robots: list[RobotInfo]
    total: int


class RegisteredRobot(RobotInfo):
    action: Literal["created", "updated"]


class GroupMove(RobotInfo):
    previous_group: str | None = Field(description="the group the robot was in before, or null")


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
class LessonInfo(views.LessonInfo):
    scope: str = Field(description="group:<G> (shared in the group), solo:<robot> (ungrouped) or robot:<id> (private)")
    place: str = Field(description="where the lesson was learned ('' = no place given)")
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")
    orphaned: bool = Field(description="a group lesson whose group no longer exists (kept, not deleted)")
    transferred: bool = Field(description="true when learned at another place than the one asked about")
    from_place: str | None = Field(description="the place it was learned at, when transferred")

    @classmethod
    def of(cls, answer: Answer, **extra: Any) -> Self:
        where = answer.lesson.place if answer.transferred else None
        return super().of(answer, transferred=answer.transferred, from_place=where, **extra)


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
