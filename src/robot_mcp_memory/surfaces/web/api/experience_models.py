"""Request and response models of the experience endpoints (`web.api.experiences`)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.browse import MAX_LIMIT
from robot_mcp_memory.experiences.model import MAX_INSIGHT, MAX_N, MAX_QUERY, MAX_REASON, Experience, Session
from robot_mcp_memory.surfaces.web.models import Args, Body, DayCount

ISO_DATE = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    t = dt.datetime.fromtimestamp(ts, dt.UTC)
    return f"{t.year:04d}" + t.strftime("-%m-%dT%H:%M:%SZ")  # %Y writes year 1 as "1": no ISO date


def epoch(value: str, what: str) -> float | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace(" ", "T"))
    except ValueError as exc:
        raise InvalidInput(f"{what} must be a date or date-time such as 2026-11-01 or 2026-11-01T08:00:00Z") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


# ---------------------------------------------------------------------------- models
class MemoryOut(BaseModel):
    id: int
    robot: str
    collection: str
    type: str
    content: str
    category: str
    confidence: float
    session_id: str | None
    status: str
    created: str | None
    updated: str | None
    tags: list[str]
    params: dict[str, Any] = Field(description="context.params")
    spatial: dict[str, Any] = Field(description="context.spatial")
    robot_info: dict[str, Any] = Field(description="context.robot")
    task: dict[str, Any] = Field(description="context.task (task.success = false marks a failure)")
    perception_type: str | None

    @classmethod
    def of(cls, m: Experience) -> MemoryOut:
        return cls(
            id=m.id,
            robot=m.robot,
            collection=m.collection,
            type=m.type,
            content=m.content,
            category=m.category,
            confidence=round(m.confidence, 4),
            session_id=m.session_id,
            status=m.status,
            created=iso(m.created_at),
            updated=iso(m.updated_at),
            tags=list(m.tags),
            params=m.section("params"),
            spatial=m.section("spatial"),
            robot_info=m.section("robot"),
            task=m.section("task"),
            perception_type=m.perception_type,
        )


class MemoryDetail(MemoryOut):
    context: dict[str, Any]
    metadata: dict[str, Any]
    data: Any = Field(default=None, description="a perception's data, when it has any")
    superseded_by: int | None
    forget_reason: str | None
    access_count: int | None = Field(description="null on a fleet-wide memory read with a robot token")
    last_accessed: str | None

    @classmethod
    def full(cls, m: Experience) -> MemoryDetail:
        return cls(
            **MemoryOut.of(m).model_dump(),
            context=m.context,
            metadata=m.metadata,
            data=m.data,
            superseded_by=m.superseded_by,
            forget_reason=m.forget_reason,
            access_count=m.access_count,
            last_accessed=iso(m.last_accessed),
        )


class MemoryPage(BaseModel):
    memories: list[MemoryOut]
    total: int
    limit: int
    offset: int


class MemoryHit(MemoryOut):
    rank: int
    score: float = Field(description="normalised: the best hit is 1.0")
    decayed_confidence: float
    distance: float | None


class MemorySearch(BaseModel):
    query: str
    mode: str
    memories: list[MemoryHit]
    total: int


class SessionOut(BaseModel):
    id: str
    robot: str
    collection: str
    context: dict[str, Any]
    started: str | None
    ended: str | None
    outcome_score: float | None
    summary: dict[str, Any] | None
    memories: int
    failures: int

    @classmethod
    def of(cls, s: Session, memories: int = 0, failures: int = 0) -> SessionOut:
        return cls(
            id=s.id,
            robot=s.robot,
            collection=s.collection,
            context=s.context,
            started=iso(s.started_at),
            ended=iso(s.ended_at),
            outcome_score=s.outcome_score,
            summary=s.summary,
            memories=memories,
            failures=failures,
        )


class SessionPage(BaseModel):
    sessions: list[SessionOut]
    total: int
    limit: int
    offset: int


class SessionTimeline(BaseModel):
    session: SessionOut
    memories: list[MemoryOut] = Field(description="in the order they were made; the first 2,000 of a longer session")
    truncated: bool = Field(description="the session holds more memories than are listed (session.memories counts all)")


class Named(BaseModel):
    name: str
    count: int


class Collections(BaseModel):
    collections: list[Named]


class Categories(BaseModel):
    categories: list[Named]


class MemoryDays(BaseModel):
    days: list[DayCount]


class Forgotten(BaseModel):
    status: Literal["forgotten"]
    memory_id: int
    reason: str


class Updated(BaseModel):
    status: Literal["updated"]
    memory: MemoryOut
    old_content: str


# ---------------------------------------------------------------------------- arguments
class ListArgs(Args):
    collection: str = Field(default="", max_length=64)
    robot: str = Field(default="", max_length=64)
    category: str = Field(default="", max_length=64)
    type: Literal["", "fact", "perception"] = ""
    session_id: str = Field(default="", max_length=64)
    since: str = Field(default="", pattern=ISO_DATE, description="created at or after (date or ISO date-time, UTC)")
    until: str = Field(default="", pattern=ISO_DATE, description="created before")
    success: Literal["", "true", "false"] = Field(default="", description="task.success")
    status: Literal["active", "forgotten", "superseded", "all"] = "active"
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)


class SearchArgs(Args):
    q: str = Field(default="", max_length=MAX_QUERY, description="text; empty = filter-only recall")
    n: int = Field(default=10, ge=1, le=MAX_N)
    collection: str = Field(default="default", min_length=1, max_length=64)
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    session_id: str = Field(default="", max_length=64)


class MemoryArgs(Args):
    id: int = Field(ge=1, le=2**62)


class SessionArgs(Args):
    # any id a session can have but a control character: an import keeps robotmem's ids as they
    # are ("robot 1 ep 3", "runs/2024/ep 3": the route takes a slash, sent as %2F)
    id: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")


class SessionsArgs(Args):
    collection: str = Field(default="", max_length=64)
    robot: str = Field(default="", max_length=64)
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)


class FailuresArgs(Args):
    collection: str = Field(default="", max_length=64)
    limit: int = Field(default=10, ge=1, le=100)


class DaysArgs(Args):
    days: int = Field(default=30, ge=1, le=366)


class UpdateBody(Body):
    content: str = Field(min_length=1, max_length=MAX_INSIGHT)
    context: dict[str, Any] | None = Field(default=None, description="replaces the context when given")


class ForgetBody(Body):
    reason: str = Field(min_length=1, max_length=MAX_REASON)
