"""Browsing the experience memory for operators: filtered lists, sessions with their timelines,
collections, categories, recent failures and per-day counts — with the §6a read rule applied
(a robot token sees its own group's and fleet-wide ``shared`` memories; out-of-scope ids and
sessions read as ``not_found``). Read-only: changes go through `ExperienceService`. Memories are
shown, and looked up, by their public ids (`model.PUBLIC_FROM`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from robot_mcp_memory.errors import InvalidInput, NotFound
from robot_mcp_memory.experiences.model import Experience, Session
from robot_mcp_memory.experiences.ports import Filters, MemoryCatalogue, SessionRow
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal

MAX_LIMIT = 500
MAX_TIMELINE = 2000
STATUSES = ("active", "forgotten", "superseded", "all")


@dataclass(frozen=True)
class Page:
    memories: list[Experience]
    total: int


@dataclass(frozen=True)
class Sessions:
    sessions: list[SessionRow]
    total: int


@dataclass(frozen=True)
class Timeline:
    session: Session
    memories: list[Experience]  # the first `MAX_TIMELINE`
    total: int  # memories in the session, all of them
    failures: int  # of those, with task.success false (as the session list counts them)


def _paging(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    if offset < 0:
        raise InvalidInput("offset must be 0 or more")


class ExperienceBrowser:
    def __init__(self, catalogue: MemoryCatalogue, policy: Policy) -> None:
        self.catalogue = catalogue
        self.policy = policy

    def _visible(self, principal: Principal) -> frozenset[str] | None:
        return self.policy.visible_robots(principal)

    async def page(
        self,
        principal: Principal,
        *,
        collection: str = "",
        robot: str = "",
        category: str = "",
        memory_type: str = "",
        session_id: str = "",
        since: float | None = None,
        until: float | None = None,
        success: bool | None = None,
        status: str = "active",
        limit: int = 50,
        offset: int = 0,
    ) -> Page:
        _paging(limit, offset)
        if status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}")
        f = Filters(
            self._visible(principal),
            collection,
            robot,
            category,
            memory_type,
            session_id,
            since,
            until,
            success,
            status,
        )
        memories, total = await self.catalogue.page(f, limit, offset)
        return Page([m.shown() for m in memories], total)

    async def get(self, principal: Principal, mid: int) -> Experience:
        exp = await self.catalogue.one(mid)
        if exp is None or not self.policy.can_see(principal, exp.robot):
            raise NotFound(f"no memory {mid}; recall or the memory list shows what exists")
        return exp.shown() if self.policy.sees_activity(principal, exp.robot) else exp.shown().without_activity()

    async def sessions(
        self, principal: Principal, *, collection: str = "", robot: str = "", limit: int = 50, offset: int = 0
    ) -> Sessions:
        _paging(limit, offset)
        visible = self._visible(principal)
        rows, total = await self.catalogue.sessions(visible, collection, robot, limit, offset)
        return Sessions(rows, total)

    async def timeline(self, principal: Principal, session_id: str) -> Timeline:
        s = await self.catalogue.session(session_id)
        if s is None or not self.policy.can_see(principal, s.robot):
            raise NotFound(f"no session '{session_id}'")
        # the rows and their counts from one snapshot: a learn between two reads skewed `truncated`
        memories, total, failures = await self.catalogue.timeline(session_id, MAX_TIMELINE)
        return Timeline(s, [m.shown() for m in memories if self.policy.can_see(principal, m.robot)], total, failures)

    async def collections(self, principal: Principal) -> list[tuple[str, int]]:
        visible = self._visible(principal)
        return await self.catalogue.counts_by("collection", visible)

    async def categories(self, principal: Principal) -> list[tuple[str, int]]:
        visible = self._visible(principal)
        return await self.catalogue.counts_by("category", visible)

    async def counts(self, principal: Principal) -> dict[str, int]:
        visible = self._visible(principal)
        return await self.catalogue.status_counts(visible)

    async def per_day(self, principal: Principal, days: int) -> list[tuple[str, int, int, int]]:
        if not 1 <= days <= 366:
            raise InvalidInput("days must be between 1 and 366")
        visible = self._visible(principal)
        since = time.time() - days * 86_400
        return await self.catalogue.per_day(visible, since)

    def _since(self, days: int) -> float:
        if not 1 <= days <= 366:
            raise InvalidInput("days must be between 1 and 366")
        return time.time() - days * 86_400

    async def robot_days(self, principal: Principal, days: int) -> list[tuple[str, str, int, int, int]]:
        """(robot, day, memories, successes, failures) over the last `days`, the caller's scope."""
        visible, since = self._visible(principal), self._since(days)
        return await self.catalogue.robot_days(visible, since)

    async def robot_totals(
        self, principal: Principal
    ) -> dict[str, tuple[int, int, int, float | None, int, float | None]]:
        """Per robot in the caller's scope: memories, successes, failures, newest memory, sessions,
        newest session event."""
        visible = self._visible(principal)
        return await self.catalogue.robot_totals(visible)

    async def session_days(self, principal: Principal, days: int) -> list[tuple[str, int, int, int]]:
        """(day, scored >= 0.5, scored < 0.5, unscored) of sessions started over the last `days`."""
        visible, since = self._visible(principal), self._since(days)
        return await self.catalogue.session_days(visible, since)
