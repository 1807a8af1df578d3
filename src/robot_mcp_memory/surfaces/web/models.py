"""Request and response models of the REST API (the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from robot_mcp_memory.processes.docmodel import MAX_DOCUMENT
from robot_mcp_memory.surfaces import views

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"


class Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every error: a stable code, a message saying what to do next, and for a 500 a reference."""

    error: str = Field(description="invalid, unauthorized, forbidden, not_found, conflict, busy, internal, …")
    detail: str
    reference: str | None = Field(default=None, description="for internal errors: quote it to the operator")


# ---------------------------------------------------------------------------- session
class LoginBody(Body):
    token: str = Field(min_length=1, max_length=4096, description="the admin or a robot token")


class SessionInfo(BaseModel):
    auth_enabled: bool = Field(description="false: no tokens are configured and everything is open")
    via: str = Field(description="admin, robot or open")
    robot_id: str | None = Field(description="the robot a scoped caller acts as; null when unscoped")
    scoped: bool
    group: str | None = Field(description="a scoped caller's group, if it has one")
    label: str
    cookie: bool = Field(description="whether this request was authenticated by the session cookie")
    csrf_token: str | None = Field(description="echo it in X-CSRF-Token on cookie-authenticated writes")
    can_administer: bool = Field(description="whether fleet administration is allowed (unscoped callers)")
    features: list[str] = Field(description="optional parts this server has, e.g. 'experiences'")
    version: str


class LoggedOut(BaseModel):
    logged_out: bool


# ---------------------------------------------------------------------------- processes
# The shared read models (robot_mcp_memory.surfaces.views) under their REST names; a field redeclared
# here only keeps the OpenAPI document's descriptions as they were.
class ProcessSummary(views.ProcessSummary):
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")

    _fields = staticmethod(views.ProcessSummary.fields_of)


class ProcessPage(BaseModel):
    processes: list[ProcessSummary]
    total: int
    limit: int
    offset: int


class OutcomeEntry(BaseModel):
    when: str
    success: bool
    note: str
    robot: str = Field(default="", description="the robot whose token recorded it ('' for an operator or not known)")
    group: str = Field(default="", description="that robot's group when it recorded it ('' when ungrouped)")


class ProcessDetail(ProcessSummary):
    markdown: str = Field(description="the document as stored (frontmatter + body)")
    html: str = Field(description="the body rendered to safe HTML (all source text escaped)")
    outcomes: list[OutcomeEntry] = Field(
        description="the outcome records this caller may see, oldest first (those with a note are the '## Outcome log')"
    )


class OutcomeHistory(BaseModel):
    id: str
    success_count: int
    failure_count: int
    reliability: float
    last_used: str
    outcomes: list[OutcomeEntry]
    fleet_reliability: float | None = Field(
        default=None, description="a shared document seen by a robot token: the reliability over every group"
    )


class SearchHit(BaseModel):
    rank: int
    id: str
    title: str
    robot: str
    updated: str
    score: float = Field(description="what results are ordered by: relevance weighted by reliability")
    relevance: float = Field(description="how well it matches, 0-1, the same scale in keyword and hybrid mode")
    reliability: float
    success_count: int
    failure_count: int
    explanation: str


class SearchResult(BaseModel):
    query: str
    mode: str = Field(description="which search ran: keyword or hybrid")
    mode_reason: str
    processes: list[SearchHit]
    note: str | None = Field(default=None, description="set when no process is returned: nothing matched well enough")


class SaveBody(Body):
    markdown: str = Field(min_length=1, max_length=MAX_DOCUMENT, description="a whole process document")
    create: bool = Field(default=False, description="only create: 409 when a process with this id exists")


class SavedProcess(ProcessSummary):
    action: Literal["created", "updated", "forked"]
    requested_id: str


class OutcomeBody(Body):
    success: bool
    note: str = Field(default="", max_length=2000)


class DeletedProcess(BaseModel):
    id: str
    deleted: bool


class Reindexed(BaseModel):
    indexed: int


# ---------------------------------------------------------------------------- fleet
class RobotOut(views.RobotInfo):
    group: str | None
    meta: dict[str, Any]


class RobotPage(BaseModel):
    robots: list[RobotOut]
    total: int


class GroupOut(views.GroupInfo):
    self_improve: bool | None = Field(description="the group's own switch; null follows the global one")
    effective_self_improve: bool


class GroupList(BaseModel):
    groups: list[GroupOut]
    global_self_improve: bool


class FleetOverview(BaseModel):
    robots: int
    grouped: int
    ungrouped: int
    global_self_improve: bool
    groups: list[GroupOut]


class RegisterBody(Body):
    robot_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)
    name: str = Field(default="", max_length=200)
    group: str = Field(default="", max_length=64, description="'' leaves the robot's group as it is")


class Registered(BaseModel):
    robot: RobotOut
    created: bool


class SetGroupBody(Body):
    group: str = Field(max_length=64, description="the group to move the robot into; '' ungroups it")


class Moved(BaseModel):
    robot: RobotOut
    previous_group: str | None


class GroupBody(Body):
    name: str = Field(default="", max_length=200)
    customer: str = Field(default="", max_length=200)
    factory: str = Field(default="", max_length=200)
    self_improve: bool | None = Field(default=None, description="null leaves the switch as it is")


class GroupSaved(BaseModel):
    group: GroupOut
    created: bool


class GroupRemoved(BaseModel):
    group_id: str
    ungrouped: list[str]


class SelfImproveBody(Body):
    enabled: bool | None = Field(description="on/off; null makes a group follow the global switch again")
    group: str = Field(default="", max_length=64, description="'' sets the global switch")


class SelfImproveOut(BaseModel):
    group: GroupOut | None
    global_self_improve: bool


# ---------------------------------------------------------------------------- lessons
class LessonOut(views.LessonInfo):
    pass  # the shared model under the name the OpenAPI document has always used


class LessonPage(BaseModel):
    lessons: list[LessonOut]
    total: int
    limit: int
    offset: int


# ---------------------------------------------------------------------------- operations
class Embedder(BaseModel):
    mode: str = Field(description="off, loading, ready, unavailable — or unknown when not reported")
    model: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class Stats(BaseModel):
    processes: int = Field(description="processes this caller can see")
    robots: int = Field(description="robots this caller can see")
    groups: int
    lessons: int = Field(description="lessons this caller can see")
    global_self_improve: bool
    embedder: Embedder
    tables: dict[str, int] | None = Field(description="row counts per table (unscoped callers only)")
    experiences: dict[str, int] | None = Field(default=None, description="memory counts, when experiences exist")


class Check(BaseModel):
    check: str
    detail: str
    ok: bool


class Doctor(BaseModel):
    ok: bool
    checks: list[Check]
    schema_version: int | None
    schema_supported: int
    process_rows: int
    process_index_entries: int
    db_size_bytes: int
    wal_size_bytes: int
    embedder: Embedder


class DayCount(BaseModel):
    day: str
    success: int
    failure: int
    other: int = 0


class OutcomeTimeline(BaseModel):
    days: list[DayCount]
    processes_scanned: int
    note: str
