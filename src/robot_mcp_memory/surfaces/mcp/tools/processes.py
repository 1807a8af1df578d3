"""The seven process tools (spec §5)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.tools.adapter import PrincipalOf, refusals
from robot_mcp_memory.surfaces.mcp.tools.results import (
    Deleted,
    FoundProcesses,
    Outcome,
    ProcessDocument,
    ProcessList,
    ProcessMatch,
    ProcessSummary,
    Refusal,
    Reindexed,
    SavedProcess,
    fleet_reliability,
)

ProcessId = Annotated[str, Field(min_length=1, max_length=120, description="the process id (a kebab-case slug)")]
RobotArg = Annotated[
    str,
    Field(
        max_length=64,
        description="optional robot id: search what that robot may use (its group's and fleet-wide documents)",
    ),
]


def register(mcp: FastMCP, memory: Memory, principal_of: PrincipalOf) -> None:
    svc = memory.processes

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False))
    @refusals
    async def find_processes(
        ctx: Context,  # type: ignore[type-arg]
        query: Annotated[str, Field(max_length=4000, description="the instruction or sub-task in natural language")],
        k: Annotated[int, Field(ge=1, le=50, description="how many processes to return")] = 3,
        robot: RobotArg = "",
        min_score: Annotated[
            float | None,
            Field(
                ge=0.0,
                le=1.0,
                description="optional: return only processes whose relevance (0-1) reaches this; 0.5 keeps "
                "what really matches. An empty list then comes with a note",
            ),
        ] = None,
    ) -> FoundProcesses | Refusal:
        """Find process documents that describe how similar tasks were done before.

        Normally the system calls this automatically at mission start with the instruction; call it
        yourself mid-mission for a sub-task. Results are ranked by relevance (0-1, the same scale
        whichever search mode ran) times reliability (how often the process worked) and each
        carries the full markdown; an empty list comes with a note saying nothing matched well
        enough. Processes are advice distilled from past executions, not orders: follow them
        where they fit and deviate when reality disagrees."""
        found = await svc.find(principal_of(ctx), query, k, robot, min_score)
        texts = await svc.markdown([h.doc for h in found.hits])
        return FoundProcesses(
            processes=[
                ProcessMatch(
                    id=h.doc.id,
                    title=h.doc.title,
                    score=round(h.score, 6),
                    relevance=round(h.relevance, 6),
                    reliability=round(h.doc.reliability, 4),
                    success_count=h.doc.success_count,
                    failure_count=h.doc.failure_count,
                    updated=h.doc.updated,
                    robot=h.doc.robot,
                    markdown=text,
                    fleet_reliability=fleet_reliability(h.fleet),
                )
                for h, text in zip(found.hits, texts, strict=True)
            ],
            mode=found.mode,
            mode_reason=found.reason,
            note=found.note,
        )

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False))
    @refusals
    async def get_process(ctx: Context, id: ProcessId) -> ProcessDocument | Refusal:  # type: ignore[type-arg]
        """Get one process document as markdown by its id. Returns {"error": "not_found"} if no such
        process exists (or it belongs to another group)."""
        view = await svc.view(principal_of(ctx), id, history=False)
        doc = view.doc
        (text,) = await svc.markdown([doc])
        return ProcessDocument(
            id=doc.id,
            markdown=text,
            reliability=round(doc.reliability, 4),
            fleet_reliability=fleet_reliability(view.fleet),
        )

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def save_process(
        ctx: Context,  # type: ignore[type-arg]
        markdown: Annotated[
            str,
            Field(
                min_length=1,
                max_length=256_000,
                description="the process document: YAML frontmatter between '---' lines (title required; "
                "id, task_pattern, tags, source_mission_id optional) followed by a markdown body "
                "(## Steps, ## Pitfalls & fixes, ## Operator notes)",
            ),
        ],
    ) -> SavedProcess | Refusal:
        """Save a process document distilled from a mission so later missions can reuse it.

        An existing id is updated in place (its success/failure counts are kept); if that id came
        from a different teaching mission (source_mission_id), the new document gets a suffixed id
        (-2, -3 …) instead. Returns the stored frontmatter and what happened."""
        saved = await svc.save(principal_of(ctx), markdown)
        return SavedProcess(
            **ProcessSummary.of(saved.doc).model_dump(), action=saved.action, requested_id=saved.requested_id
        )

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def record_outcome(
        ctx: Context,  # type: ignore[type-arg]
        id: ProcessId,
        success: Annotated[bool, Field(description="true if the mission that used this process succeeded")],
        note: Annotated[
            str, Field(max_length=2000, description="optional: what happened; appended to the ## Outcome log")
        ] = "",
    ) -> Outcome | Refusal:
        """Record whether a mission that followed this process succeeded, so reliable processes rank
        higher and flaky ones lose weight. A note is appended, dated, under '## Outcome log'; on a
        fleet-wide 'shared' document it is attributed to your robot and shown only to your group."""
        view = await svc.record_outcome_view(principal_of(ctx), id, success, note)
        doc = view.doc
        return Outcome(
            id=doc.id,
            success_count=doc.success_count,
            failure_count=doc.failure_count,
            reliability=round(doc.reliability, 4),
            last_used=doc.last_used,
            fleet_reliability=fleet_reliability(view.fleet),
        )

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False))
    @refusals
    async def delete_process(ctx: Context, id: ProcessId) -> Deleted | Refusal:  # type: ignore[type-arg]
        """Delete a process document permanently (its row and its search entry together)."""
        doc = await svc.delete(principal_of(ctx), id)
        return Deleted(id=doc.id)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False))
    @refusals
    async def list_processes(
        ctx: Context,  # type: ignore[type-arg]
        limit: Annotated[int, Field(ge=1, le=500, description="page size")] = 50,
        offset: Annotated[int, Field(ge=0, description="how many to skip")] = 0,
        robot: RobotArg = "",
    ) -> ProcessList | Refusal:
        """List process documents (frontmatter only, newest first) with the total count, for paging."""
        docs, total = await svc.list(principal_of(ctx), limit, offset, robot)
        return ProcessList(processes=[ProcessSummary.of(d) for d in docs], total=total)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=True, openWorldHint=False))
    @refusals
    async def reindex(ctx: Context) -> Reindexed | Refusal:  # type: ignore[type-arg]
        """Rebuild the search index from the stored documents (admin only). Only needed after a
        tokenizer or weighting change; documents are always indexed when saved."""
        return Reindexed(indexed=await svc.reindex(principal_of(ctx)))
