"""Experiences (robotmem-style memories) over REST: list with filters, search, get, update,
forget; sessions and their timelines; collections, categories, recent failures, memories per day.
Reads go through the read-only `ExperienceBrowser`, changes through `ExperienceService` — both
apply the §6a rules."""

from __future__ import annotations

from robot_mcp_memory.experiences.browse import ExperienceBrowser, Page
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.surfaces.web.api.experience_models import (
    Categories,
    Collections,
    DaysArgs,
    FailuresArgs,
    ForgetBody,
    Forgotten,
    ListArgs,
    MemoryArgs,
    MemoryDays,
    MemoryDetail,
    MemoryHit,
    MemoryOut,
    MemoryPage,
    MemorySearch,
    Named,
    SearchArgs,
    SessionArgs,
    SessionOut,
    SessionPage,
    SessionsArgs,
    SessionTimeline,
    UpdateBody,
    Updated,
    epoch,
)
from robot_mcp_memory.surfaces.web.api.processes import last_days
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import DayCount
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoArgs, NoBody
from robot_mcp_memory.tenancy.principal import Principal

TAG = "experiences"


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
        return Forgotten(status="forgotten", memory_id=m.id, reason=call.body.reason.strip())  # as stored

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
        "GET", "/api/sessions/{id:path}/memories", args=SessionArgs, body=NoBody, response=SessionTimeline,
        summary="A session's timeline", tag=TAG, errors=(404,),
    )  # fmt: skip
    async def session_timeline(call: Call[SessionArgs, NoBody]) -> SessionTimeline:
        """The session and its memories in the order they were made (every status)."""
        t = await browser.timeline(call.principal, call.args.id)
        return SessionTimeline(
            session=SessionOut.of(t.session, t.total, t.failures),
            memories=[MemoryOut.of(m) for m in t.memories],
            truncated=len(t.memories) < t.total,
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

    @api.route(
        "GET", "/api/charts/sessions", args=DaysArgs, body=NoBody, response=MemoryDays, summary="Sessions per day",
        tag=TAG,
    )  # fmt: skip
    async def sessions_per_day(call: Call[DaysArgs, NoBody]) -> MemoryDays:
        """Sessions started per day over the last `days`, by outcome score: success = scored 0.5 or
        more, failure = scored below 0.5, other = not scored (still open, or ended without one)."""
        rows = {d: (s, f, o) for d, s, f, o in await browser.session_days(call.principal, call.args.days)}
        days = [(d, *rows.get(d, (0, 0, 0))) for d in last_days(call.args.days)]
        return MemoryDays(days=[DayCount(day=d, success=s, failure=f, other=o) for d, s, f, o in days])
