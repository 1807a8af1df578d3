"""The seven experience tools (robotmem-compatible names, arguments and result shapes).

``context``, ``context_filter``, ``spatial_sort``, ``data`` and ``metadata`` accept a JSON object
*or* a JSON string: robotmem typed them ``str``, FastMCP pre-parsed the object string into a dict
and then rejected it, so its structured features never worked over MCP.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import BeforeValidator, Field

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.views import (
    EndSessionResult,
    ForgetResult,
    LearnResult,
    PerceptionResult,
    RecallResult,
    SessionResult,
    UpdateResult,
)
from robot_mcp_memory.surfaces.mcp.tools.adapter import PrincipalOf, refusals
from robot_mcp_memory.surfaces.mcp.tools.results import Refusal

JsonObject = dict[str, Any] | str | None


def _blank_is_none(value: Any) -> Any:
    """robotmem reads a blank collection as the default one, as it reads null."""
    return None if isinstance(value, str) and not value.strip() else value


Collection = Annotated[
    Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")] | None,
    BeforeValidator(_blank_is_none),
    Field(
        description="a namespace for memories (a project, a task family, a lab): letters, digits, _ . : - "
        "(64 at most); 'default' if you have none (null is 'default', as in robotmem)",
    ),
]
SessionId = Annotated[
    str | None, Field(max_length=64, description="the session_id start_session returned; null for none")
]
MemoryId = Annotated[int, Field(ge=1, le=2**63 - 1, description="the memory's id, as learn or recall returned it")]
ContextArg = Annotated[
    dict[str, Any] | str,
    Field(
        description="what was true when this happened, as a JSON object (or its JSON string), in sections: "
        '"params" (parameters used, e.g. {"grip_force": 12.5}), "spatial" (e.g. {"position": [x, y, z]}), '
        '"robot" (e.g. {"id": "ur5-01"}), "task" (e.g. {"name": "grasp_mug", "success": true, "source": "real"}); '
        "plain text is kept as a note. At most 64 KB."
    ),
]
#: update's context: an object replaces the stored one; text only informs re-classification.
UpdateContextArg = Annotated[
    dict[str, Any] | str,
    Field(
        description="a new context, as a JSON object (or its JSON string) in the sections learn takes: it "
        "replaces the stored one. Plain text (robotmem's usage) or '' only informs re-classification; "
        "the stored context is kept. At most 64 KB."
    ),
]


def register(mcp: FastMCP, memory: Memory, principal_of: PrincipalOf) -> None:
    svc = memory.experiences

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def learn(
        ctx: Context,  # type: ignore[type-arg]
        insight: Annotated[
            str,
            Field(
                min_length=1,
                max_length=10_000,
                description="what was learned, in one or two sentences, with the numbers that mattered "
                "(e.g. 'grip force 12.5 N held the wet mug; 8 N let it slip')",
            ),
        ],
        context: ContextArg = "",
        collection: Collection = "default",
        session_id: SessionId = None,
    ) -> LearnResult | Refusal:
        """Remember an experience: a lesson from an episode, with the parameters and outcome behind it.

        Category, tags and confidence are inferred. If this robot already holds the same experience
        the result says "duplicate" and names it — but different numbers, a different outcome
        (task.success) or a negated instruction are always a new memory. Memories are advice from
        past executions: recall them later and deviate when reality disagrees."""
        learned = await svc.learn(principal_of(ctx), insight, context, collection or "default", session_id)
        return LearnResult.of(learned)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False))
    @refusals
    async def recall(
        ctx: Context,  # type: ignore[type-arg]
        query: Annotated[
            str, Field(max_length=4000, description="what you are about to do or want to know; '' to use filters only")
        ] = "",
        n: Annotated[int, Field(ge=1, le=100, description="how many memories to return")] = 5,
        collection: Collection = "default",
        min_confidence: Annotated[
            float, Field(ge=0.0, le=1.0, description="skip memories whose confidence (after time decay) is lower")
        ] = 0.3,
        session_id: SessionId = None,
        context_filter: Annotated[
            JsonObject,
            Field(
                description="only memories whose context matches, as a JSON object (or its string) of dot paths: "
                '{"task.success": true, "params.grip_force": {"$gte": 10, "$lt": 15}, '
                '"robot.type": {"$in": ["ur5e"]}}. Operators: $eq $ne $lt $lte $gt $gte $in $nin $exists. '
                "Values match by value, as Python's == (1 equals 1.0 and true, 0 equals false; the text "
                '"1" is not 1). Lists and objects match whole: the '
                "same elements in order, the same keys in any order; a list is never searched for one element "
                '(name it: "tags.0"). null matches a stored null only, not a missing path (use {"$exists": false}); '
                "$ne and $nin also match memories without the path. A number in a path indexes a list "
                '("spatial.position.0"); for a key with a space or a key that is a number, nest objects: '
                '{"joints": {"0": 0.5}}'
            ),
        ] = None,
        spatial_sort: Annotated[
            JsonObject,
            Field(
                description='order by distance too: {"field": "spatial.position", "target": [x, y, z], '
                '"max_distance": 0.5} (max_distance optional; proximity is blended with relevance)'
            ),
        ] = None,
        include_data: Annotated[bool, Field(description="also return perceptions' raw data (can be large)")] = False,
    ) -> RecallResult | Refusal:
        """Recall the experiences most relevant to what you are about to do, best first (score 1.0).

        Full-text search over what was learned and its context (any language), restricted by
        context_filter before ranking, so a filtered recall finds every match there is. With no
        query, the filters alone choose. Real-world experience ranks above simulation; old memories
        count a little less. Use them as advice, not orders."""
        found = await svc.recall(
            principal_of(ctx),
            query,
            n,
            collection or "default",
            min_confidence,
            session_id,
            context_filter,
            spatial_sort,
            include_data,
        )
        return RecallResult.of(found, include_data)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def save_perception(
        ctx: Context,  # type: ignore[type-arg]
        description: Annotated[
            str, Field(min_length=1, max_length=10_000, description="what was perceived, in words (this is searched)")
        ],
        perception_type: Annotated[
            str,
            Field(
                max_length=32,
                pattern=r"^[a-z][a-z0-9_]*$",
                description="visual, tactile, auditory, proprioceptive, procedural (trajectories) …",
            ),
        ] = "visual",
        data: Annotated[
            # any JSON value, as the service and the Python API take it (a reading may be one number)
            dict[str, Any] | list[Any] | str | int | float | bool | None,
            Field(
                description="raw data, any JSON value: readings, a trajectory, a detection, a number. A string "
                "holding JSON is read as that JSON (once); other text is stored as text. At most 256 KB"
            ),
        ] = None,
        metadata: Annotated[
            JsonObject,
            Field(
                description="the perception's context, like learn's (sensor, pose, task …); recall filters and "
                "spatial_sort read it. A JSON object or its string, at most 16 KB"
            ),
        ] = None,
        collection: Collection = "default",
        session_id: SessionId = None,
    ) -> PerceptionResult | Refusal:
        """Store a perception: what a camera, force sensor or microphone observed, or a trajectory.

        Recall finds it by its description (data is returned only when asked for). Saving the same
        description again with new data stores a new perception."""
        saved = await svc.save_perception(
            principal_of(ctx), description, perception_type, data, metadata, collection or "default", session_id
        )
        return PerceptionResult.of(saved, perception_type, saved.has_data)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False))
    @refusals
    async def forget(
        ctx: Context,  # type: ignore[type-arg]
        memory_id: MemoryId,
        reason: Annotated[str, Field(min_length=1, max_length=1000, description="why it is wrong or obsolete")],
    ) -> ForgetResult | Refusal:
        """Forget a memory that is wrong or obsolete. It disappears from recall; it is kept on disk
        with the reason, so an operator can see what was forgotten and why."""
        gone = await svc.forget(principal_of(ctx), memory_id, reason)
        return ForgetResult(memory_id=gone.id, content=gone.content[:100], reason=reason.strip())

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False))
    @refusals
    async def update(
        ctx: Context,  # type: ignore[type-arg]
        memory_id: MemoryId,
        new_content: Annotated[str, Field(min_length=1, max_length=10_000, description="the corrected insight")],
        context: UpdateContextArg = "",
    ) -> UpdateResult | Refusal:
        """Correct a memory's content (it is re-classified and re-indexed). A context that is a
        JSON object replaces the memory's context; plain text (not JSON) only informs the
        re-classification, and an empty one changes nothing: the memory keeps its context."""
        updated = await svc.update(principal_of(ctx), memory_id, new_content, context)
        return UpdateResult.of(updated)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def start_session(
        ctx: Context,  # type: ignore[type-arg]
        collection: Collection = "default",
        context: Annotated[
            JsonObject,
            Field(description='the episode\'s context, e.g. {"task": {"name": "grasp_mug"}, "robot": {"id": "ur5"}}'),
        ] = None,
    ) -> SessionResult | Refusal:
        """Start an episode. Pass the returned session_id to learn and save_perception, and call
        end_session when the episode is over."""
        return SessionResult.of(await svc.start_session(principal_of(ctx), collection or "default", context))

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False))
    @refusals
    async def end_session(
        ctx: Context,  # type: ignore[type-arg]
        session_id: Annotated[str, Field(min_length=1, max_length=64, description="the session to end")],
        outcome_score: Annotated[
            float | None, Field(ge=0.0, le=1.0, description="how well the episode went: 0 failure … 1 success")
        ] = None,
    ) -> EndSessionResult | Refusal:
        """End an episode: record its outcome, fold its redundant memories together (a failure is
        never merged into a success; nothing is deleted) and get the memories most related to it,
        to use in the next episode."""
        return EndSessionResult.of(await svc.end_session(principal_of(ctx), session_id, outcome_score))
