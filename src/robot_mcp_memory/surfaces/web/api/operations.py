"""Stats, doctor (health) and lessons over REST."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.lessons.service import MAX_LIMIT as LESSON_MAX_LIMIT
from robot_mcp_memory.operations import handover
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import Args, Body, Check, Doctor, Embedder, LessonOut, LessonPage, Stats
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoArgs, NoBody


class LessonArgs(Args):
    robot: str = Field(default="", max_length=64, description="one robot's view; '' = every scope (unscoped callers)")
    limit: int = Field(default=50, ge=1, le=LESSON_MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)


class DoctorArgs(Args):
    full: bool = Field(default=False, description="run integrity_check instead of quick_check")


class HandOverBody(Body):
    to: str = Field(min_length=1, max_length=64, description="'shared' (every robot reads them) or a robot id")
    apply: bool = Field(default=False, description="hand them over; false (the default) only counts")


class HandedOver(BaseModel):
    """Rows carrying robot 'unknown' that were handed over (`applied`) or would be."""

    to: str
    applied: bool
    processes: int
    memories: int
    sessions: int


#: What `embedder_status` counts over every group's processes: for unscoped callers only (a
#: robot read the fleet's process total from them, and watched another group's saves).
FLEET_COUNTS = ("stored", "missing")


async def embedder_status(memory: Memory, *, scoped: bool = False) -> Embedder:
    """The embedder's state, as the process search reports it (when this build has embeddings);
    for a `scoped` caller without the fleet-wide counts (`FLEET_COUNTS`)."""
    status_of = getattr(memory.processes, "search_status", None)
    if status_of is None:
        return Embedder(mode="unknown")
    raw: dict[str, Any] = dict(await status_of())
    if scoped:
        for key in FLEET_COUNTS:
            raw.pop(key, None)
    mode = str(raw.pop("mode", "unknown"))
    model = raw.pop("model_id", None) or raw.pop("model", None)
    detail = {k: v for k, v in raw.items() if isinstance(v, str | int | float | bool | dict | list) or v is None}
    return Embedder(mode=mode, model=str(model) if model is not None else None, detail=detail)


def register(api: Api, ctx: WebContext) -> None:
    memory = ctx.memory

    @api.route("GET", "/api/stats", args=NoArgs, body=NoBody, response=Stats, summary="Counts", tag="operations")
    async def stats(call: Call[NoArgs, NoBody]) -> Stats:
        """What this caller can see, counted; per-table row counts for unscoped callers only."""
        p = call.principal
        _, processes = await memory.processes.list(p, 1, 0)
        overview = await memory.fleet.overview(p)
        visible_lessons = not p.scoped or memory.fleet_repo.is_registered(p.robot_id or "")
        lessons = await memory.lessons.list(p, "", 1, 0) if visible_lessons else None
        tables = await operations.stats(memory) if not p.scoped else None
        return Stats(
            processes=processes,
            robots=overview.robots,
            groups=len(overview.groups),
            lessons=lessons.total if lessons is not None else 0,
            global_self_improve=overview.global_self_improve,
            embedder=await embedder_status(memory, scoped=p.scoped),
            tables=tables,
            experiences=await ctx.experience_counts(p) if ctx.experience_counts is not None else None,
        )

    @api.route(
        "GET", "/api/doctor", args=DoctorArgs, body=NoBody, response=Doctor, summary="Health checks",
        tag="operations", errors=(403,),
    )  # fmt: skip
    async def doctor(call: Call[DoctorArgs, NoBody]) -> Doctor:
        """Integrity, schema version, index entries vs rows, database size, disk, embedder mode.
        Operator information: unscoped callers only."""
        memory.policy.require_admin(call.principal, "doctor")
        report = await operations.doctor(memory, full=call.args.full)
        # Through the operations port, on either backend: the process index's rows and entries.
        indexes = await memory.operations.text_indexes(deep=False)
        process = next((ix for ix in indexes if ix.name == "process index"), None)
        rows, indexed = (process.rows, process.entries) if process is not None else (0, 0)
        health = await asyncio.to_thread(memory.operations.health)  # reads files or the database
        return Doctor(
            ok=report.ok,
            checks=[Check(check=c, detail=d, ok=ok) for c, d, ok in report.lines],
            schema_version=health.schema_version,
            schema_supported=health.schema_supported,
            process_rows=rows,
            process_index_entries=indexed,
            db_size_bytes=health.size_bytes,
            wal_size_bytes=health.wal_bytes,
            embedder=await embedder_status(memory),
        )

    @api.route(
        "POST", "/api/hand-over", args=NoArgs, body=HandOverBody, response=HandedOver,
        summary="Hand over rows without provenance", tag="operations", errors=(403,),
    )  # fmt: skip
    async def hand_over(call: Call[NoArgs, HandOverBody]) -> HandedOver:
        """Documents, memories and sessions saved without provenance (robot 'unknown': an open
        server, stdio without ROBOT_ID) are invisible to robot tokens. Count them (`apply`
        false), or give them all to 'shared' or to one robot. Unscoped callers only."""
        b = call.body
        moved = await handover.hand_over(memory, call.principal, b.to, apply=b.apply)
        return HandedOver(
            to=moved.to, applied=moved.applied, processes=moved.processes, memories=moved.memories,
            sessions=moved.sessions,
        )  # fmt: skip

    @api.route(
        "GET", "/api/lessons", args=LessonArgs, body=NoBody, response=LessonPage, summary="Browse lessons",
        tag="lessons", errors=(404,),
    )  # fmt: skip
    async def list_lessons(call: Call[LessonArgs, NoBody]) -> LessonPage:
        """Stored lessons, newest first: one robot's scopes (a robot token: always its own), or
        every scope for an operator naming no robot (orphaned group lessons included)."""
        a = call.args
        page = await memory.lessons.list(call.principal, a.robot, a.limit, a.offset)
        return LessonPage(
            lessons=[LessonOut.of(x) for x in page.answers], total=page.total, limit=a.limit, offset=a.offset
        )
