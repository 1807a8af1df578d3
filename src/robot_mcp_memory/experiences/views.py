"""The experience results as robotmem shapes them, as pydantic models.

One set of models serves every surface: the MCP tools return them (clients get the JSON object
*and* an ``outputSchema``), the Python API returns their ``model_dump()`` dicts, so a script and
an LLM read the same keys. Keys clients can rely on are those of DESIGN §4 (robotmem's); more are
added, never renamed.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from robot_mcp_memory.experiences.model import Experience, Session
from robot_mcp_memory.experiences.service import EndedSession, Hit, Learned, Recalled, Updated


def iso(ts: float | None) -> str | None:
    """Epoch seconds as UTC ISO-8601 with milliseconds."""
    if ts is None:
        return None
    whole = math.floor(ts)  # not int(): before 1970, -1.5 is 23:59:58.500, not 23:59:59 and "-500" ms
    t = time.gmtime(whole)  # the year padded to four digits: strftime's %Y writes year 1 as "1"
    return f"{t.tm_year:04d}" + time.strftime("-%m-%dT%H:%M:%S", t) + f".{min(999, int((ts - whole) * 1000)):03d}Z"


class AutoInferred(BaseModel):
    category: str
    confidence: float
    tags: list[str] = Field(default_factory=list)
    scope_entities: list[str] = Field(default_factory=list)
    scope_files: list[str] = Field(default_factory=list)


class LearnResult(BaseModel):
    status: Literal["created", "duplicate"] = Field(
        description="created a new memory, or found this experience already stored (numbers and outcome equal)"
    )
    memory_id: int = Field(description="the memory holding this insight (the existing one for a duplicate)")
    existing_id: int | None = Field(default=None, description="for a duplicate: the memory it duplicates")
    method: Literal["exact", "jaccard", "cosine"] | None = Field(
        default=None, description="for a duplicate: how it was recognised"
    )
    similarity: float | None = None
    auto_inferred: AutoInferred | None = Field(default=None, description="category, confidence and tags inferred")
    robot: str = Field(description="the robot the memory is attributed to")
    collection: str

    @classmethod
    def of(cls, learned: Learned) -> LearnResult:
        if learned.status == "duplicate":
            return cls(
                status="duplicate",
                memory_id=learned.memory_id,
                existing_id=learned.memory_id,
                method=learned.method,
                similarity=learned.similarity,
                robot=learned.robot,
                collection=learned.collection,
            )
        scope = learned.scope
        return cls(
            status="created",
            memory_id=learned.memory_id,
            auto_inferred=AutoInferred(
                category=learned.category,
                confidence=learned.confidence,
                tags=list(learned.tags),
                scope_entities=scope.get("entities", []),
                scope_files=scope.get("files", []),
            ),
            robot=learned.robot,
            collection=learned.collection,
        )


class MemoryView(BaseModel):
    """One memory as recall returns it; ``params``/``spatial``/``robot``/``task`` are the context's
    sections, extracted for convenience (empty when absent)."""

    id: int
    content: str
    type: Literal["fact", "perception"]
    category: str
    confidence: float = Field(description="confidence now, after time decay (computed at read time)")
    base_confidence: float = Field(description="confidence as stored when learned")
    score: float | None = Field(default=None, description="relevance, normalised so the best hit is 1.0")
    distance: float | None = Field(default=None, description="Euclidean distance to spatial_sort.target")
    context: dict[str, Any]
    params: dict[str, Any]
    spatial: dict[str, Any]
    robot: dict[str, Any] = Field(description="the context's robot section (see recorded_by for the owner)")
    task: dict[str, Any]
    tags: list[str]
    perception_type: str | None = None
    has_data: bool = False
    data: Any = Field(default=None, description="perception data, only when asked for (include_data)")
    session_id: str | None = None
    collection: str
    recorded_by: str = Field(description="the robot whose memory this is ('shared' = fleet-wide)")
    status: Literal["active", "forgotten", "superseded"] = "active"
    created_at: str | None
    updated_at: str | None
    access_count: int | None = Field(
        description="how often recall returned it; null on a fleet-wide memory read with a robot token "
        "(its count is every group's)"
    )

    @classmethod
    def of(cls, m: Experience, *, hit: Hit | None = None, include_data: bool = True) -> MemoryView:
        return cls(
            id=m.id,
            content=m.content,
            type=m.type,
            category=m.category,
            confidence=round(hit.confidence if hit else m.confidence, 4),
            base_confidence=m.confidence,
            score=hit.score if hit else None,
            distance=None if hit is None or hit.distance is None else round(hit.distance, 6),
            context=m.context,
            params=m.section("params"),
            spatial=m.section("spatial"),
            robot=m.section("robot"),
            task=m.section("task"),
            tags=list(m.tags),
            perception_type=m.perception_type,
            has_data=m.has_data,
            data=m.data if include_data else None,
            session_id=m.session_id,
            collection=m.collection,
            recorded_by=m.robot,
            status=m.status,
            created_at=iso(m.created_at),
            updated_at=iso(m.updated_at),
            access_count=m.access_count,
        )


class RecallResult(BaseModel):
    memories: list[MemoryView]
    total: int = Field(description="how many memories are returned")
    mode: Literal["keyword", "hybrid", "filter"] = Field(
        description="keyword (full-text), hybrid (full-text fused with embeddings) or filter (no query: "
        "filters only, most confident and recent first)"
    )

    @classmethod
    def of(cls, r: Recalled, include_data: bool = False) -> RecallResult:
        views = [MemoryView.of(h.memory, hit=h, include_data=include_data) for h in r.hits]
        return cls(memories=views, total=len(views), mode=r.mode)


class PerceptionResult(BaseModel):
    status: Literal["created", "duplicate"]
    memory_id: int
    perception_type: str
    collection: str
    robot: str
    has_data: bool
    has_embedding: bool = Field(description="whether a vector was stored with it (robotmem's key)")

    @classmethod
    def of(cls, learned: Learned, perception_type: str, has_data: bool) -> PerceptionResult:
        return cls(
            status=learned.status,
            memory_id=learned.memory_id,
            perception_type=perception_type,
            collection=learned.collection,
            robot=learned.robot,
            has_data=has_data,
            has_embedding=learned.embedded,
        )


class ForgetResult(BaseModel):
    status: Literal["forgotten"] = "forgotten"
    memory_id: int
    content: str = Field(description="the first 100 characters of what was forgotten")
    reason: str


class UpdateResult(BaseModel):
    status: Literal["updated"] = "updated"
    memory_id: int
    old_content: str
    new_content: str
    auto_inferred: AutoInferred

    @classmethod
    def of(cls, u: Updated) -> UpdateResult:
        m = u.memory
        return cls(
            memory_id=m.id,
            old_content=u.old_content,
            new_content=m.content,
            auto_inferred=AutoInferred(category=m.category, confidence=m.confidence, tags=list(m.tags)),
        )


class SessionResult(BaseModel):
    session_id: str
    collection: str
    robot: str
    context: dict[str, Any]
    started_at: str | None

    @classmethod
    def of(cls, s: Session) -> SessionResult:
        return cls(
            session_id=s.id, collection=s.collection, robot=s.robot, context=s.context, started_at=iso(s.started_at)
        )


class Superseded(BaseModel):
    id: int
    by: int


class Consolidation(BaseModel):
    merged_groups: int = Field(description="clusters of redundant memories folded into one")
    superseded_count: int
    superseded: list[Superseded]


class EndSessionResult(BaseModel):
    status: Literal["ended"] = "ended"
    session_id: str
    outcome_score: float | None
    summary: dict[str, Any]
    consolidated: Consolidation
    related_memories: list[MemoryView] = Field(description="memories worth knowing for the next episode")
    decayed_count: int = Field(
        default=0,
        description="robotmem's key, always 0: decay is computed when memories are read, never written at session end",
    )

    @classmethod
    def of(cls, e: EndedSession) -> EndSessionResult:
        groups = {rep for _, rep in e.consolidated}
        return cls(
            session_id=e.session.id,
            outcome_score=e.session.outcome_score,
            summary=e.summary,
            consolidated=Consolidation(
                merged_groups=len(groups),
                superseded_count=len(e.consolidated),
                superseded=[Superseded(id=old, by=rep) for old, rep in e.consolidated],
            ),
            related_memories=[MemoryView.of(h.memory, hit=h, include_data=False) for h in e.related],
        )


__all__ = [
    "AutoInferred",
    "Consolidation",
    "EndSessionResult",
    "ForgetResult",
    "LearnResult",
    "MemoryView",
    "PerceptionResult",
    "RecallResult",
    "SessionResult",
    "UpdateResult",
    "iso",
]
