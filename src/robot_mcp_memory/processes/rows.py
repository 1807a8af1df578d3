"""A process document as a row of the ``processes`` table and back, backend-neutral: every
adapter stores the same columns, in this order, with tags and extra as JSON text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from robot_mcp_memory.processes.docmodel import ProcessDoc

#: The columns, in the order `to_row` writes and `from_row` reads them.
COLUMNS = (
    "id, title, task_pattern, tags, robot, created, updated, success_count, failure_count, "
    "last_used, source_mission_id, extra, body"
)


def to_row(doc: ProcessDoc) -> tuple[Any, ...]:
    return (
        doc.id,
        doc.title,
        doc.task_pattern,
        json.dumps(list(doc.tags), ensure_ascii=False),
        doc.robot,
        doc.created,
        doc.updated,
        doc.success_count,
        doc.failure_count,
        doc.last_used,
        doc.source_mission_id,
        json.dumps(doc.extra, ensure_ascii=False, sort_keys=True),
        doc.body,
    )


def from_row(row: Sequence[Any]) -> ProcessDoc:
    (pid, title, task_pattern, tags, robot, created, updated, s, f, last_used, mission, extra, body) = row
    return ProcessDoc.model_construct(
        id=pid,
        title=title,
        task_pattern=task_pattern,
        tags=tuple(json.loads(tags)),
        robot=robot,
        created=created,
        updated=updated,
        success_count=int(s),
        failure_count=int(f),
        last_used=last_used,
        source_mission_id=mission,
        extra=json.loads(extra),
        body=body,
    )


def embed_text(doc: ProcessDoc) -> str:
    """What a process is embedded as: what it is for (title, task pattern, tags), not its steps.
    Queries are instructions, and so are these fields; the step lists full of API calls only
    dilute a sentence embedding (measured in docs/search.md). Outcome notes never change it."""
    parts = [doc.title, doc.task_pattern, " ".join(doc.tags)]
    return ". ".join(p.strip() for p in parts if p.strip())
