"""Processes over REST: list, search (with why each result ranked where it did), get (markdown and
safe HTML), save, record an outcome, delete, outcome history, reindex."""

from __future__ import annotations

import datetime as dt
import math
from typing import Literal

from pydantic import Field

from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import MAX_ID
from robot_mcp_memory.processes.service import MAX_K, MAX_LIMIT, Viewed
from robot_mcp_memory.surfaces.web import markdown
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import (
    SLUG_PATTERN,
    Args,
    DayCount,
    DeletedProcess,
    OutcomeBody,
    OutcomeEntry,
    OutcomeHistory,
    OutcomeTimeline,
    ProcessDetail,
    ProcessPage,
    ProcessSummary,
    Reindexed,
    SaveBody,
    SavedProcess,
    SearchHit,
    SearchResult,
)
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoArgs, NoBody


class ListArgs(Args):
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=10_000_000)
    sort: Literal["updated", "used"] = Field(default="updated", description="most recently updated, or most used first")
    robot: str = Field(default="", max_length=64, description="what this robot would see (unscoped callers)")


class SearchArgs(Args):
    q: str = Field(max_length=4000, description="an instruction, in any language")
    k: int = Field(default=10, ge=1, le=MAX_K)
    robot: str = Field(default="", max_length=64)
    min_score: float | None = Field(
        default=None, ge=0.0, le=1.0, description="only processes whose relevance (0-1) reaches this"
    )


class IdArgs(Args):
    id: str = Field(min_length=1, max_length=MAX_ID, pattern=SLUG_PATTERN)


class TimelineArgs(Args):
    days: int = Field(default=30, ge=1, le=366)


def outcome_log(body: str) -> list[OutcomeEntry]:
    """The lines under ``## Outcome log`` of a rendered body, oldest first."""
    return entries(docmodel.split_outcome_log(body)[1])


def entries(records: list[docmodel.OutcomeEntry]) -> list[OutcomeEntry]:
    """Outcome records as the REST API shows them, oldest first."""
    return [
        OutcomeEntry(when=e.when, success=e.success, note=e.note, robot=e.robot if e.tenant else "", group=e.group)
        for e in records
    ]


def last_days(n: int, today: dt.date | None = None) -> list[str]:
    """The last `n` calendar days (UTC), oldest first, as YYYY-MM-DD: a chart's continuous axis."""
    end = today or dt.datetime.now(dt.UTC).date()
    return [(end - dt.timedelta(days=i)).isoformat() for i in range(n - 1, -1, -1)]


def explain(mode: str, rank: int, relevance: float, reliability: float, score: float) -> str:
    """Why a hit ranked where it did, in the numbers the search actually produced."""
    if mode == "keyword":
        base = (
            f"keyword relevance {relevance:.3f} (-bm25 over the most the query's words can score; "
            "title ×4, task pattern ×2, tags ×2, body)"
        )
    else:
        base = f"hybrid relevance {relevance:.3f} (calibrated keyword and vector relevance averaged)"
    if math.isclose(score, relevance * reliability, rel_tol=1e-6, abs_tol=1e-9):
        how = f"{base} × reliability {reliability:.3f} = score {score:.3f}"
    elif math.isclose(score, relevance, rel_tol=1e-6, abs_tol=1e-9):
        how = f"{base} = score {score:.3f}; reliability {reliability:.3f} ordered each list before fusion"
    else:
        how = f"{base} with reliability {reliability:.3f} → score {score:.3f}"
    return f"#{rank}: {how}"


def _detail(view: Viewed) -> ProcessDetail:
    doc = view.doc
    return ProcessDetail(
        **ProcessSummary._fields(doc),
        markdown=doc.render(),
        html=markdown.render(doc.body),
        outcomes=entries(view.outcomes),
    )


def _history(view: Viewed) -> OutcomeHistory:
    doc = view.doc
    return OutcomeHistory(
        id=doc.id,
        success_count=doc.success_count,
        failure_count=doc.failure_count,
        reliability=round(doc.reliability, 4),
        last_used=doc.last_used,
        outcomes=entries(view.outcomes),
        fleet_reliability=None if view.fleet is None else round(docmodel.reliability(*view.fleet), 4),
    )


def register(api: Api, ctx: WebContext) -> None:
    service = ctx.memory.processes
    tag = "processes"

    @api.route(
        "GET", "/api/processes", args=ListArgs, body=NoBody, response=ProcessPage, summary="List processes", tag=tag
    )
    async def list_processes(call: Call[ListArgs, NoBody]) -> ProcessPage:
        """Frontmatter summaries, most recently updated (or with ``sort=used`` most used) first,
        paged with limit/offset."""
        a = call.args
        docs, total = await service.list(call.principal, a.limit, a.offset, a.robot, a.sort)
        return ProcessPage(processes=[ProcessSummary.of(d) for d in docs], total=total, limit=a.limit, offset=a.offset)

    @api.route(
        "GET", "/api/search/processes", args=SearchArgs, body=NoBody, response=SearchResult, summary="Search processes",
        tag=tag, errors=(503,),
    )  # fmt: skip
    async def search_processes(call: Call[SearchArgs, NoBody]) -> SearchResult:
        """find_processes over REST: which mode ran, and per result its relevance, reliability
        and score (score = relevance × reliability; results are ordered by it)."""
        a = call.args
        found = await service.find(call.principal, a.q, a.k, a.robot, a.min_score)
        hits = []
        for rank, h in enumerate(found.hits, start=1):
            rel = h.doc.reliability
            hits.append(
                SearchHit(
                    rank=rank,
                    id=h.doc.id,
                    title=h.doc.title,
                    robot=h.doc.robot,
                    updated=h.doc.updated,
                    score=round(h.score, 6),
                    relevance=round(h.relevance, 6),
                    reliability=round(rel, 4),
                    success_count=h.doc.success_count,
                    failure_count=h.doc.failure_count,
                    explanation=explain(found.mode, rank, h.relevance, rel, h.score),
                )
            )
        return SearchResult(query=a.q, mode=found.mode, mode_reason=found.reason, processes=hits, note=found.note)

    @api.route(
        "GET", "/api/charts/outcomes", args=TimelineArgs, body=NoBody, response=OutcomeTimeline,
        summary="Logged outcomes per day", tag=tag,
    )  # fmt: skip
    async def outcomes_timeline(call: Call[TimelineArgs, NoBody]) -> OutcomeTimeline:
        """Successes and failures per calendar day (UTC) over the last `days`, from the outcome records
        of the processes this caller can see (every outcome recorded since outcome records exist;
        from before them, those that were logged with a note)."""
        axis = last_days(call.args.days)
        counts, processes = await service.outcome_days(call.principal, axis[0])
        return OutcomeTimeline(
            days=[DayCount(day=d, success=counts[(d, True)], failure=counts[(d, False)]) for d in axis],
            processes_scanned=processes,
            note="dated outcomes come from the outcome records (before they existed: record_outcome with a note)",
        )

    @api.route(
        "GET", "/api/processes/{id}", args=IdArgs, body=NoBody, response=ProcessDetail, summary="Get a process",
        tag=tag, errors=(404,),
    )  # fmt: skip
    async def get_process(call: Call[IdArgs, NoBody]) -> ProcessDetail:
        """The document as markdown, its body as safe HTML, and its outcome log."""
        view = await service.view(call.principal, call.args.id)
        # Rendering is pure-Python work that grows with the document (a stored frontmatter of
        # thousands of values, a 200,000-character body): on the documents lane, off the loop.
        return await service.in_lane(lambda: _detail(view))

    @api.route(
        "GET", "/api/processes/{id}/outcomes", args=IdArgs, body=NoBody, response=OutcomeHistory,
        summary="Outcome history", tag=tag, errors=(404,),
    )  # fmt: skip
    async def outcome_history(call: Call[IdArgs, NoBody]) -> OutcomeHistory:
        """Counters and the outcome records of one process (those this caller may see), oldest first."""
        return _history(await service.view(call.principal, call.args.id))

    @api.route(
        "POST", "/api/processes/{id}/outcomes", args=IdArgs, body=OutcomeBody, response=OutcomeHistory,
        summary="Record an outcome", tag=tag, errors=(403, 404, 503),
    )  # fmt: skip
    async def record_outcome(call: Call[IdArgs, OutcomeBody]) -> OutcomeHistory:
        """record_outcome over REST: count a success or failure (a note also logs a dated line)."""
        return _history(
            await service.record_outcome_view(call.principal, call.args.id, call.body.success, call.body.note)
        )

    @api.route(
        "POST", "/api/processes", args=NoArgs, body=SaveBody, response=SavedProcess, summary="Save a process",
        tag=tag, errors=(403, 409, 503),
    )  # fmt: skip
    async def save_process(call: Call[NoArgs, SaveBody]) -> SavedProcess:
        """save_process over REST: the whole markdown document (edit = re-save). The same id from
        the same mission updates it; from another mission (or someone else's document) forks it."""
        saved = await service.save(call.principal, call.body.markdown, create_only=call.body.create)
        return SavedProcess(**ProcessSummary._fields(saved.doc), action=saved.action, requested_id=saved.requested_id)

    @api.route(
        "DELETE", "/api/processes/{id}", args=IdArgs, body=NoBody, response=DeletedProcess,
        summary="Delete a process", tag=tag, errors=(403, 404, 503),
    )  # fmt: skip
    async def delete_process(call: Call[IdArgs, NoBody]) -> DeletedProcess:
        """Remove the row and its index entries in one transaction."""
        doc = await service.delete(call.principal, call.args.id)
        return DeletedProcess(id=doc.id, deleted=True)

    @api.route(
        "POST", "/api/reindex", args=NoArgs, body=NoBody, response=Reindexed, summary="Rebuild the search index",
        tag=tag, errors=(403, 503),
    )  # fmt: skip
    async def reindex(call: Call[NoArgs, NoBody]) -> Reindexed:
        """Admin only: rebuild the FTS index from the rows."""
        return Reindexed(indexed=await service.reindex(call.principal))
