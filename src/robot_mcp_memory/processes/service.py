"""Process documents: save, find, outcomes — the rules of spec §5 with the §6a policy applied.

Parsing and rendering a document is CPU work in pure Python (PyYAML) that grows with the
frontmatter: it runs on the service's documents lane, one worker thread, never on the event loop
that serves every tenant — except rendering a document `docmodel.cheap_to_render` finds small,
which costs less than the hop. One thread, not a pool: CPU-bound threads share the GIL with the
loop, and each more of them makes the loop wait longer for it; hostile documents queue behind
each other instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from robot_mcp_memory.errors import Conflict, InvalidInput, NotFound
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import OutcomeEntry, ProcessDoc
from robot_mcp_memory.processes.ports import ORDERS, Author, Hit, ProcessRepository, Progress, RecordsView, Saved
from robot_mcp_memory.search import relevance
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import SHARED, Principal

MAX_K = 50
MAX_LIMIT = 500
T = TypeVar("T")

#: Why `find` ran the mode it ran, in the words both surfaces give (MCP `mode_reason`, REST).
MODE_REASONS = {
    "hybrid": (
        "the embedder is ready: keyword (FTS5 bm25) and vector (cosine) relevance, each calibrated to 0-1, "
        "were averaged and weighted by reliability"
    ),
    "keyword": (
        "keyword-only: FTS5 bm25 calibrated to 0-1 and weighted by reliability (no embedder configured, it is "
        "still loading or unavailable, or no process has a vector of the current model yet); results are "
        "still ranked, but a paraphrase that shares no word with a document does not find it"
    ),
}


@dataclass(frozen=True)
class Found:
    """What `find` answers: the hits best first, the mode that ran, and `note` when nothing is
    returned (`relevance.NOTHING_RELEVANT`: nothing matched, or nothing reached `min_score`)."""

    hits: list[Hit]
    mode: str
    note: str | None = None

    @property
    def reason(self) -> str:
        return MODE_REASONS[self.mode]


@dataclass(frozen=True)
class Viewed:
    """One document as a caller is shown it: `doc` carries the caller's counters (a group's own
    view of a fleet-wide document) and the `## Outcome log` rendered from the outcome records it
    may see; `fleet` the fleet-wide (successes, failures) beside a shared document's group view;
    `outcomes` those records, oldest first."""

    doc: ProcessDoc
    fleet: tuple[int, int] | None
    outcomes: list[OutcomeEntry]


class ProcessService:
    def __init__(self, store: ProcessRepository, policy: Policy, *, default_robot: str = "unknown") -> None:
        self.store = store
        self.policy = policy
        self.default_robot = default_robot
        self._lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="documents")

    def close(self) -> None:
        """Drop the documents lane's queued work; a job already running finishes on its thread."""
        self._lane.shutdown(wait=False, cancel_futures=True)

    async def in_lane(self, work: Callable[[], T]) -> T:
        """`work()` on the documents lane (parsing, rendering): off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._lane, work)

    async def find(
        self, principal: Principal, query: str, k: int = 3, robot: str = "", min_score: float | None = None
    ) -> Found:
        """The `k` best processes by relevance × reliability; with `min_score`, only those whose
        relevance (in [0, 1], `search.relevance`) reaches it — possibly none, said in `note`."""
        if not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be between 1 and {MAX_K}")
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise InvalidInput("min_score must be between 0 and 1 (a relevance; 0.5 keeps what really matches)")
        visible = self.policy.visible_robots(principal, robot)
        parsed = Query.parse(query)  # parsed once: the store and its ranking read only this
        hits, mode = await self.store.find_hybrid(parsed, k, visible, self.policy.tenant(principal))
        if min_score is not None:
            hits = [h for h in hits if h.relevance >= min_score]
        if not hits:
            return Found([], mode, relevance.NOTHING_RELEVANT)
        records = await self.store.outcomes([h.doc.id for h in hits], with_note=True)
        views = self._rendered(principal, [(h.doc, h.fleet, records[h.doc.id]) for h in hits])
        return Found([dataclasses.replace(h, doc=v.doc) for h, v in zip(hits, views, strict=True)], mode)

    async def get(self, principal: Principal, pid: str) -> ProcessDoc:
        """The document as `principal` is shown it (`Viewed.doc`)."""
        return (await self.view(principal, pid, history=False)).doc

    async def view(self, principal: Principal, pid: str, *, history: bool = True) -> Viewed:
        """The document with the outcome records `principal` may see (every one with `history`,
        else those with a note, which are all the rendered log needs)."""
        got = await self.store.view(pid, self.policy.tenant(principal), with_note=not history)
        if got is None or not self.policy.can_see(principal, got[0].robot):
            raise NotFound(f"no process with id '{pid}'; find_processes or list_processes shows what exists")
        return self._rendered(principal, [got])[0]

    async def _stored(self, principal: Principal, pid: str) -> ProcessDoc:
        doc = await self.store.get(pid)
        if doc is None or not self.policy.can_see(principal, doc.robot):
            raise NotFound(f"no process with id '{pid}'; find_processes or list_processes shows what exists")
        return doc

    def _rendered(self, principal: Principal, found: list[RecordsView]) -> list[Viewed]:
        """Each document with the outcome log rendered from the records `principal` may see."""
        out = []
        for doc, fleet, records in found:
            shown = [e for e in records if self.policy.shows_outcome(principal, doc.robot, e)]
            body = docmodel.with_outcome_log(doc.body, shown)
            out.append(Viewed(doc.model_copy(update={"body": body}), fleet, shown))
        return out

    async def save(self, principal: Principal, markdown: str, *, create_only: bool = False) -> Saved:
        """save_process: create, update or fork (`ProcessRepository.save`). `create_only` (the dashboard's
        "New process"): `Conflict` when a process with the document's id exists, instead of
        updating it — a new draft whose title matches an existing process must not replace it."""
        doc = await self.in_lane(lambda: docmodel.parse(markdown, default_robot="unknown"))
        if create_only and await self.store.get(doc.id) is not None:
            raise Conflict(
                f"a process with id '{doc.id}' exists already: open it to change it, or give the new one "
                "another title (or id)"
            )
        author = self.policy.pin_author(principal, doc.robot, self.default_robot)
        doc = doc.model_copy(update={"robot": author})
        return await self.store.save(doc, writable=lambda owner: self.policy.may_overwrite(principal, owner))

    async def markdown(self, docs: Sequence[ProcessDoc]) -> list[str]:
        """Each document rendered as markdown; on the documents lane unless every one is cheap
        to render: a document stored before the frontmatter limits may hold thousands of
        values, and rendering them in pure Python would hold the event loop every tenant shares."""
        if all(map(docmodel.cheap_to_render, docs)):
            return [d.render() for d in docs]
        return await self.in_lane(lambda: [d.render() for d in docs])

    async def record_outcome(self, principal: Principal, pid: str, success: bool, note: str = "") -> ProcessDoc:
        """`record_outcome_view`'s document."""
        return (await self.record_outcome_view(principal, pid, success, note)).doc

    async def record_outcome_view(self, principal: Principal, pid: str, success: bool, note: str = "") -> Viewed:
        """Count and record an outcome, attributed to the caller (a robot token: its robot and
        tenant). Returns the document as the caller is shown it afterwards, with its history."""
        await self._stored(principal, pid)
        tenant = self.policy.tenant(principal)
        by = Author(principal.label, tenant or "")
        doc = await self.store.record_outcome(pid, success, note, by)
        if doc is None:
            raise NotFound(f"no process with id '{pid}'")
        return self._rendered(principal, await self.store.views([doc], tenant))[0]

    def _counts_for(self, tenant: str | None, owner: str, by: str) -> bool:
        """Whether an outcome recorded by tenant `by` on a document of `owner` counts in the view
        of a caller of `tenant` (`store.tenant_view`: on a fleet-wide document a robot token's view
        leaves out other tenants' outcomes)."""
        return tenant is None or owner != SHARED or by in ("", tenant)

    async def outcome_tallies(self, principal: Principal, since: str) -> list[tuple[str, str, bool, int]]:
        """(process id, UTC day, success, how many) over the outcome records since `since`
        (``YYYY-MM-DD``) of the documents `principal` may see, as its view counts them."""
        rows = await self.store.outcome_days(since, self.policy.visible_robots(principal))
        tenant = self.policy.tenant(principal)
        return [(pid, day, ok, n) for day, ok, pid, owner, by, n in rows if self._counts_for(tenant, owner, by)]

    async def outcome_events(self, principal: Principal) -> list[tuple[str, str, bool, str]]:
        """(process id, time, success, recording robot) of the newest outcome records of each
        document `principal` may see (`ranking.EVENTS_PER_PROCESS`), oldest first, as its view
        counts them (the robot: a robot's id, an unscoped caller's kind, '' when not known)."""
        rows = await self.store.outcome_events(self.policy.visible_robots(principal))
        tenant = self.policy.tenant(principal)
        return [(pid, at, ok, robot) for pid, at, ok, owner, by, robot in rows if self._counts_for(tenant, owner, by)]

    async def outcome_days(self, principal: Principal, since: str) -> tuple[Counter[tuple[str, bool]], int]:
        """Outcomes per (UTC day, success) since `since` (`outcome_tallies`), and how many
        processes they fell on."""
        counts: Counter[tuple[str, bool]] = Counter()
        processes = set()
        for pid, day, success, n in await self.outcome_tallies(principal, since):
            counts[(day, success)] += n
            processes.add(pid)
        return counts, len(processes)

    async def delete(self, principal: Principal, pid: str) -> ProcessDoc:
        doc = await self._stored(principal, pid)
        self.policy.check_delete(principal, doc.robot)
        if not await self.store.delete(pid):
            raise NotFound(f"no process with id '{pid}'")
        return doc

    async def list(
        self, principal: Principal, limit: int = 50, offset: int = 0, robot: str = "", order: str = "updated"
    ) -> tuple[list[ProcessDoc], int]:
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
        if offset < 0:
            raise InvalidInput("offset must be 0 or more")
        if order not in ORDERS:
            raise InvalidInput(f"order must be one of {', '.join(ORDERS)}")
        docs, total = await self.store.list(limit, offset, self.policy.visible_robots(principal, robot), order)
        return [d for d, _ in await self.store.viewed(docs, self.policy.tenant(principal))], total

    async def reembed(self, principal: Principal, progress: Progress | None = None, *, force: bool = False) -> int:
        """Embed every process lacking a vector of the current model (all of them after a model
        change; every one with `force`). Admin only. Raises `EmbedderUnavailable` when the model
        is not ready. `progress(done, total)` is called after each batch."""
        self.policy.require_admin(principal, "reembed")
        return await self.store.reembed(progress, force=force)

    async def search_status(self) -> dict[str, object]:
        """Embedder mode, model, stored vectors per model and how many processes lack one."""
        return await self.store.vector_status()

    async def reindex(self, principal: Principal) -> int:
        self.policy.require_admin(principal, "reindex")
        return await self.store.reindex()
