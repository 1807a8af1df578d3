"""A toy `ProcessRepository` held in dicts: proof that the processes port is a real seam.

It keeps the port's contract — visibility, atomic counters with an outcome record each, a tenant's
view of a fleet-wide document that leaves out other tenants' outcomes, the save rules through
`rules.plan_save` — with the simplest search that ranks: the share of the query's words a
document contains, times its Laplace reliability. Keyword mode only; no vectors.
"""

from __future__ import annotations

import asyncio
import builtins
import re
from collections.abc import Callable, Collection

from robot_mcp_memory.processes import docmodel, rules
from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc
from robot_mcp_memory.processes.ports import NOBODY, Author, Hit, Progress, RecordsView, Saved, SearchMode
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.tenancy.principal import SHARED

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class ToyProcessRepository:
    def __init__(self, clock: Callable[[], str]) -> None:
        self.docs: dict[str, ProcessDoc] = {}
        self.records: dict[str, list[OutcomeEntry]] = {}
        self.clock = clock
        self.lock = asyncio.Lock()

    async def get(self, pid: str) -> ProcessDoc | None:
        return self.docs.get(pid)

    async def save(self, doc: ProcessDoc, writable: Callable[[str], bool] = lambda _o: True) -> Saved:
        async with self.lock:
            body, carried = docmodel.split_outcome_log(doc.body)
            saved = rules.plan_save(doc.model_copy(update={"body": body}), self.clock(), self.docs.get, writable)
            if saved.action != "updated":  # a new document brings the history its log carries
                self.records[saved.doc.id] = list(carried)
            self.docs[saved.doc.id] = saved.doc
            return saved

    async def record_outcome(self, pid: str, success: bool, note: str = "", by: Author = NOBODY) -> ProcessDoc | None:
        async with self.lock:
            doc = self.docs.get(pid)
            if doc is None:
                return None
            now = self.clock()
            self.records.setdefault(pid, []).append(OutcomeEntry(now, success, note.strip(), by.robot, by.tenant))
            self.docs[pid] = doc.model_copy(
                update={
                    "success_count": doc.success_count + (1 if success else 0),
                    "failure_count": doc.failure_count + (0 if success else 1),
                    "last_used": now,
                }
            )
            return self.docs[pid]

    async def delete(self, pid: str) -> bool:
        self.records.pop(pid, None)
        return self.docs.pop(pid, None) is not None

    def _visible(self, visible: Collection[str] | None) -> builtins.list[ProcessDoc]:
        return [d for d in self.docs.values() if visible is None or d.robot in visible]

    async def list(
        self, limit: int = 50, offset: int = 0, visible: Collection[str] | None = None, order: str = "updated"
    ) -> tuple[builtins.list[ProcessDoc], int]:
        docs = sorted(self._visible(visible), key=lambda d: d.id)
        docs.sort(key=lambda d: d.updated or "", reverse=True)
        if order == "used":
            docs.sort(key=lambda d: d.success_count + d.failure_count, reverse=True)
        return docs[offset : offset + limit], len(docs)

    def _view(self, doc: ProcessDoc, tenant: str | None) -> tuple[ProcessDoc, tuple[int, int] | None]:
        if tenant is None or doc.robot != SHARED:
            return doc, None
        others = [e for e in self.records.get(doc.id, []) if e.tenant not in ("", tenant)]
        s = sum(e.success for e in others)
        f = len(others) - s
        view = doc.model_copy(
            update={"success_count": max(doc.success_count - s, 0), "failure_count": max(doc.failure_count - f, 0)}
        )
        return view, (doc.success_count, doc.failure_count)

    async def find_hybrid(
        self, query: Query, k: int, visible: Collection[str] | None = None, tenant: str | None = None
    ) -> tuple[builtins.list[Hit], SearchMode]:
        asked = _words(query.text)
        hits = []
        for stored in self._visible(visible):
            doc, fleet = self._view(stored, tenant)
            have = _words(f"{doc.title} {doc.task_pattern} {' '.join(doc.tags)} {doc.body}")
            relevance = len(asked & have) / len(asked) if asked else 0.0
            if relevance > 0:
                hits.append(Hit(doc, relevance * doc.reliability, relevance, fleet))
        hits.sort(key=lambda h: (-h.score, h.doc.id))
        return hits[:k], "keyword"

    async def viewed(
        self, docs: builtins.list[ProcessDoc], tenant: str | None
    ) -> builtins.list[tuple[ProcessDoc, tuple[int, int] | None]]:
        return [self._view(d, tenant) for d in docs]

    async def view(self, pid: str, tenant: str | None, *, with_note: bool = False) -> RecordsView | None:
        doc = self.docs.get(pid)
        return None if doc is None else (await self.views([doc], tenant, with_note=with_note))[0]

    async def views(
        self, docs: builtins.list[ProcessDoc], tenant: str | None, *, with_note: bool = False
    ) -> builtins.list[RecordsView]:
        records = await self.outcomes([d.id for d in docs], with_note=with_note)
        return [(*self._view(d, tenant), records[d.id]) for d in docs]

    async def outcomes(
        self, ids: Collection[str], *, with_note: bool = False
    ) -> dict[str, builtins.list[OutcomeEntry]]:
        return {pid: [e for e in self.records.get(pid, []) if e.note or not with_note] for pid in ids}

    async def outcome_days(
        self, since: str, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, bool, str, str, str, int]]:
        counts: dict[tuple[str, bool, str, str, str], int] = {}
        for doc in self._visible(visible):
            for e in self.records.get(doc.id, []):
                if e.when[:10] >= since:
                    key = (e.when[:10], e.success, doc.id, doc.robot, e.tenant)
                    counts[key] = counts.get(key, 0) + 1
        return [(*key, n) for key, n in sorted(counts.items())]

    async def outcome_events(
        self, visible: Collection[str] | None
    ) -> builtins.list[tuple[str, str, bool, str, str, str]]:
        return [
            (doc.id, e.when, e.success, doc.robot, e.tenant, e.robot)
            for doc in sorted(self._visible(visible), key=lambda d: d.id)
            for e in self.records.get(doc.id, [])
        ]

    async def reembed(self, progress: Progress | None = None, *, force: bool = False) -> int:
        return 0

    async def vector_status(self) -> dict[str, object]:
        return {"mode": "off", "stored": {}, "missing": None}

    async def reindex(self) -> int:
        return len(self.docs)
