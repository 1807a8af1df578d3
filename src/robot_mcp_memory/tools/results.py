"""Typed tool results. Clients read the text content (one JSON object per result) and, with
mcp ≥ 1.10, `structuredContent` validated against the `outputSchema` these models produce."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from robot_mcp_memory.docmodel import ProcessDoc


class Refusal(BaseModel):
    """A refusal, as an ordinary result: ``{"error": "not_found" | "forbidden" | "invalid" | …}``."""

    error: Literal["not_found", "forbidden", "invalid", "conflict", "busy", "storage", "internal"]
    detail: str


class ProcessSummary(BaseModel):
    """A process document's frontmatter (no body)."""

    id: str
    title: str
    task_pattern: str
    tags: list[str]
    robot: str
    created: str
    updated: str
    success_count: int
    failure_count: int
    last_used: str
    source_mission_id: str
    reliability: float

    @classmethod
    def of(cls, doc: ProcessDoc) -> ProcessSummary:
        return cls(
            id=doc.id,
            title=doc.title,
            task_pattern=doc.task_pattern,
            tags=list(doc.tags),
            robot=doc.robot,
            created=doc.created,
            updated=doc.updated,
            success_count=doc.success_count,
            failure_count=doc.failure_count,
            last_used=doc.last_used,
            source_mission_id=doc.source_mission_id,
            reliability=round(doc.reliability, 4),
        )


class ProcessMatch(BaseModel):
    id: str
    title: str
    score: float = Field(description="relevance × reliability; higher is better")
    reliability: float = Field(description="(successes + 1) / (successes + failures + 2)")
    success_count: int
    failure_count: int
    updated: str
    robot: str
    markdown: str = Field(description="the full process document, to use as advice")


class FoundProcesses(BaseModel):
    processes: list[ProcessMatch]
    mode: str = Field(description="which search ran: keyword, hybrid or vector")


class ProcessDocument(BaseModel):
    id: str
    markdown: str
    reliability: float


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


class Deleted(BaseModel):
    id: str
    deleted: bool = True


class Reindexed(BaseModel):
    indexed: int
