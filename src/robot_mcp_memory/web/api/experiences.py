"""Experiences (robotmem-style memories) over REST: list with filters, search, get, update,
forget; sessions and their timelines; collections, categories, recent failures, memories per day.
Registered only when the server has the experience memory (`Memory.experiences`)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.browse import MAX_LIMIT, ExperienceBrowser, Page
from robot_mcp_memory.experiences.model import MAX_INSIGHT, MAX_N, MAX_QUERY, MAX_REASON, Experience, Session
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.principal import Principal
from robot_mcp_memory.web.api.processes import last_days
from robot_mcp_memory.web.context import WebContext
from robot_mcp_memory.web.models import Args, Body, DayCount
from robot_mcp_memory.web.routing import Api, Call, NoArgs, NoBody

ISO_DATE = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"
TAG = "experiences"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    access_count: int
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
    memories: list[MemoryOut]


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
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")


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


def _page(p: Page, limit: int, offset: int) -> MemoryPage:
    return MemoryPage(memories=[MemoryOut.of(m) for m in p.memories], total=p.total, limit=limit, offset=offset)


def register(api: Api, ctx: WebContext, service: ExperienceService, browser: ExperienceBrowser) -> None:
    api.features.add("experiences")

    async def counts(principal: Principal) -> dict[str, int]:
        return await browser.counts(principal)

    ctx.experience_counts = counts

    @api.route(
        "GET", "/api/memories", args=ListArgs, body=NoBody, response=MemoryPage, summary="List memories", tag=TAG
    )
    async def list_memories(call: Call[ListArgs, NoBody]) -> MemoryPage:
        """Memories newest first, filtered by collection, robot, category, type, session, time
        range and task success; paged."""
        a = call.args
        page = await browser.page(
            call.principal,
            collection=a.collection,
            robot=a.robot,
            category=a.category,
            memory_type=a.type,
            session_id=a.session_id,
            since=epoch(a.since, "since"),
            until=epoch(a.until, "until"),
            success=None if a.success == "" else a.success == "true",
            status=a.status,
            limit=a.limit,
            offset=a.offset,
        )
        return _page(page, a.limit, a.offset)

    @api.route(
        "GET", "/api/search/memories", args=SearchArgs, body=NoBody, response=MemorySearch, summary="Recall memories",
        tag=TAG, errors=(404, 503),
    )  # fmt: skip
    async def search_memories(call: Call[SearchArgs, NoBody]) -> MemorySearch:
        """recall over REST: hybrid (or keyword) search with the caller's scope; says which mode ran."""
        a = call.args
        found = await service.recall(call.principal, a.q, a.n, a.collection, a.min_confidence, a.session_id or None)
        hits = [
            MemoryHit(
                **MemoryOut.of(h.memory).model_dump(),
                rank=i,
                score=round(h.score, 6),
                decayed_confidence=round(h.confidence, 4),
                distance=h.distance,
            )
            for i, h in enumerate(found.hits, start=1)
        ]
        return MemorySearch(query=a.q, mode=found.mode, memories=hits, total=len(hits))

    @api.route(
        "GET", "/api/memories/{id}", args=MemoryArgs, body=NoBody, response=MemoryDetail, summary="Get a memory",
        tag=TAG, errors=(404,),
    )  # fmt: skip
    async def get_memory(call: Call[MemoryArgs, NoBody]) -> MemoryDetail:
        """One memory with its context sections (params, spatial, robot, task), metadata and data."""
        return MemoryDetail.full(await browser.get(call.principal, call.args.id))

    @api.route(
        "PATCH", "/api/memories/{id}", args=MemoryArgs, body=UpdateBody, response=Updated, summary="Update a memory",
        tag=TAG, errors=(403, 404, 503),
    )  # fmt: skip
    async def update_memory(call: Call[MemoryArgs, UpdateBody]) -> Updated:
        """update over REST: new content (re-classified, re-indexed); a context replaces the old one."""
        u = await service.update(call.principal, call.args.id, call.body.content, call.body.context)
        return Updated(status="updated", memory=MemoryOut.of(u.memory), old_content=u.old_content)

    @api.route(
        "POST", "/api/memories/{id}/forget", args=MemoryArgs, body=ForgetBody, response=Forgotten,
        summary="Forget a memory", tag=TAG, errors=(403, 404, 503),
    )  # fmt: skip
    async def forget_memory(call: Call[MemoryArgs, ForgetBody]) -> Forgotten:
        """forget over REST: a soft delete with a reason; the memory leaves every recall."""
        m = await service.forget(call.principal, call.args.id, call.body.reason)
        return Forgotten(status="forgotten", memory_id=m.id, reason=call.body.reason)

    @api.route(
        "GET", "/api/sessions", args=SessionsArgs, body=NoBody, response=SessionPage, summary="List sessions", tag=TAG
    )
    async def list_sessions(call: Call[SessionsArgs, NoBody]) -> SessionPage:
        """Episodes, newest first, with how many memories (and failures) each holds."""
        a = call.args
        s = await browser.sessions(
            call.principal, collection=a.collection, robot=a.robot, limit=a.limit, offset=a.offset
        )
        return SessionPage(
            sessions=[SessionOut.of(r.session, r.memories, r.failures) for r in s.sessions],
            total=s.total,
            limit=a.limit,
            offset=a.offset,
        )

    @api.route(
        "GET", "/api/sessions/{id}/memories", args=SessionArgs, body=NoBody, response=SessionTimeline,
        summary="A session's timeline", tag=TAG, errors=(404,),
    )  # fmt: skip
    async def session_timeline(call: Call[SessionArgs, NoBody]) -> SessionTimeline:
        """The session and its memories in the order they were made (every status)."""
        t = await browser.timeline(call.principal, call.args.id)
        failures = sum(1 for m in t.memories if m.section("task").get("success") is False)
        return SessionTimeline(
            session=SessionOut.of(t.session, len(t.memories), failures), memories=[MemoryOut.of(m) for m in t.memories]
        )

    @api.route(
        "GET", "/api/collections", args=NoArgs, body=NoBody, response=Collections, summary="Collections", tag=TAG
    )
    async def list_collections(call: Call[NoArgs, NoBody]) -> Collections:
        """Collections with their active memory counts."""
        return Collections(collections=[Named(name=n, count=c) for n, c in await browser.collections(call.principal)])

    @api.route("GET", "/api/categories", args=NoArgs, body=NoBody, response=Categories, summary="Categories", tag=TAG)
    async def list_categories(call: Call[NoArgs, NoBody]) -> Categories:
        """Categories with their active memory counts."""
        return Categories(categories=[Named(name=n, count=c) for n, c in await browser.categories(call.principal)])

    @api.route(
        "GET", "/api/recent-failures", args=FailuresArgs, body=NoBody, response=MemoryPage, summary="Recent failures",
        tag=TAG,
    )  # fmt: skip
    async def recent_failures(call: Call[FailuresArgs, NoBody]) -> MemoryPage:
        """The newest memories whose task.success is false."""
        a = call.args
        page = await browser.page(call.principal, collection=a.collection, success=False, limit=a.limit)
        return _page(page, a.limit, 0)

    @api.route(
        "GET", "/api/charts/memories", args=DaysArgs, body=NoBody, response=MemoryDays, summary="Memories per day",
        tag=TAG,
    )  # fmt: skip
    async def memories_per_day(call: Call[DaysArgs, NoBody]) -> MemoryDays:
        """Memories made per day over the last `days`, split by task.success (true / false / unset)."""
        rows = {d: (s, f, o) for d, s, f, o in await browser.per_day(call.principal, call.args.days)}
        days = [(d, *rows.get(d, (0, 0, 0))) for d in last_days(call.args.days)]
        return MemoryDays(days=[DayCount(day=d, success=s, failure=f, other=o) for d, s, f, o in days])
