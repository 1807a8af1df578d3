"""The Robots view over REST: per robot and per group — last seen, activity and failures per day,
failure rate, what it contributed (processes, memories, lessons) and reads — and which processes
are getting worse.

Everything is derived from what is stored today, in the caller's scope (§6a: a robot token sees
its own group's robots and the data its reads may return):

- *activity* is what a robot wrote: memories per day (``learn``), split by ``task.success``,
  plus the sessions it opened; a call that stores nothing leaves no trace and is not counted;
- *last seen* is the newest trace of a robot: a memory, a session start or end, a process or
  lesson it saved, its registration or meta update;
- *process trends* come from the outcome records (`outcome_events`), dated by their day and
  counted as the caller's view counts them (a robot token: not other groups' outcomes on a
  fleet-wide document).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from robot_mcp_memory.errors import NotFound
from robot_mcp_memory.experiences.browse import ExperienceBrowser
from robot_mcp_memory.lessons.service import MAX_LIMIT as LESSON_LIMIT
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.service import MAX_LIMIT as PROCESS_LIMIT
from robot_mcp_memory.processes.service import ProcessService
from robot_mcp_memory.surfaces.web.api.experience_models import iso
from robot_mcp_memory.surfaces.web.api.processes import last_days
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import Args, DayCount
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoBody
from robot_mcp_memory.tenancy.principal import Principal

#: How many processes (most recently updated first) and lessons the report reads at most.
SCAN = 2000
#: A trend needs this many dated outcomes: the older half is compared with the newer half.
MIN_TREND = 4
#: How many of the processes a robot used the report lists.
MAX_USED = 20
#: The owner of fleet-wide documents: not a robot.
SHARED = "shared"


class ReportArgs(Args):
    days: int = Field(default=30, ge=1, le=366, description="the activity window, in days up to today (UTC)")


class Activity(BaseModel):
    last_seen: str | None = Field(description="the newest stored trace (memory, session, process, lesson, registry)")
    memories: int = Field(description="memories written, every status, all time")
    sessions: int
    successes: int = Field(description="memories whose task.success is true")
    failures: int = Field(description="memories whose task.success is false")
    failure_rate: float | None = Field(description="failures / (successes + failures); null with no task outcomes")
    processes: int = Field(description="processes it saved (their author)")
    lessons_recorded: int
    days: list[DayCount] = Field(
        description="the days of the window with activity, oldest first (a day not listed had none): "
        "success, failure, other (no task outcome) memories written"
    )


class ProcessUse(BaseModel):
    id: str
    title: str
    outcomes: int = Field(description="outcomes this robot recorded on it (of the newest records read)")
    successes: int


class RobotActivity(Activity):
    robot_id: str
    name: str
    group: str | None
    registered: bool = Field(description="false for an owner of stored data that never registered")
    lessons_readable: int | None = Field(description="lessons in the scopes it reads; null when not shown to you")
    used: list[ProcessUse] = Field(
        default_factory=list,
        description=f"the processes it used: those it recorded outcomes on, most used first (at most {MAX_USED})",
    )


class GroupActivity(Activity):
    group: str | None = Field(description="null: the robots in no group")
    name: str
    robots: list[str]


class ProcessTrend(BaseModel):
    id: str
    title: str
    robot: str
    dated_outcomes: int
    earlier_rate: float = Field(description="success rate of the older half of the dated outcomes")
    recent_rate: float = Field(description="success rate of the newer half")
    change: float = Field(description="recent_rate - earlier_rate: below 0 it is getting worse")
    success_count: int
    failure_count: int


class RobotsReport(BaseModel):
    days: int
    first_day: str = Field(description="the window's first day (YYYY-MM-DD, UTC); its last is today")
    robots: list[RobotActivity]
    groups: list[GroupActivity]
    trends: list[ProcessTrend] = Field(description="processes with enough dated outcomes, the steepest drop first")
    processes_scanned: int = Field(description=f"processes read (most recently updated first, at most {SCAN})")
    note: str


@dataclass(frozen=True)
class OutcomeEvent:
    process_id: str
    when: str
    success: bool
    robot: str = ""


async def outcome_events(service: ProcessService, principal: Principal) -> list[OutcomeEvent]:
    """The outcomes the caller's view counts, from the outcome records (each process's newest)."""
    return [OutcomeEvent(pid, at, ok, robot) for pid, at, ok, robot in await service.outcome_events(principal)]


def uses(docs: list[ProcessDoc], events: list[OutcomeEvent]) -> dict[str, list[ProcessUse]]:
    """Per robot, the processes it recorded outcomes on, most used first."""
    titles = {d.id: d.title for d in docs}
    counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
    wins: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.robot and e.process_id in titles:
            counts[e.robot][e.process_id] += 1
            wins[e.robot][e.process_id] += e.success
    return {
        robot: [
            ProcessUse(id=pid, title=titles[pid], outcomes=n, successes=wins[robot][pid])
            for pid, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_USED]
        ]
        for robot, c in counts.items()
    }


def trends(docs: list[ProcessDoc], events: list[OutcomeEvent]) -> list[ProcessTrend]:
    """Per process with `MIN_TREND` dated outcomes: the newer half's success rate against the
    older half's, the steepest drop first."""
    by_id: defaultdict[str, list[OutcomeEvent]] = defaultdict(list)
    for e in events:
        by_id[e.process_id].append(e)
    out = []
    for d in docs:
        seq = sorted(by_id.get(d.id, []), key=lambda e: e.when)
        if len(seq) < MIN_TREND:
            continue
        older, newer = seq[: len(seq) // 2], seq[len(seq) // 2 :]
        before = sum(e.success for e in older) / len(older)
        after = sum(e.success for e in newer) / len(newer)
        out.append(
            ProcessTrend(
                id=d.id,
                title=d.title,
                robot=d.robot,
                dated_outcomes=len(seq),
                earlier_rate=round(before, 4),
                recent_rate=round(after, 4),
                change=round(after - before, 4),
                success_count=d.success_count,
                failure_count=d.failure_count,
            )
        )
    return sorted(out, key=lambda t: (t.change, t.id))


def _stamp(value: str | float | None) -> str | None:
    """A time as ``YYYY-MM-DDTHH:MM:SSZ`` (comparable as text), from an epoch or an ISO string."""
    if value is None or value == "":
        return None
    if isinstance(value, float | int):
        return iso(float(value))
    return value.replace(" ", "T")[:19] + "Z"


def _newest(*values: str | float | None) -> str | None:
    stamps = [s for s in map(_stamp, values) if s is not None]
    return max(stamps) if stamps else None


@dataclass
class _Tally:
    """One robot's (or group's) counts while the report is built."""

    last_seen: str | None = None
    memories: int = 0
    sessions: int = 0
    successes: int = 0
    failures: int = 0
    processes: int = 0
    lessons_recorded: int = 0

    def add(self, other: _Tally) -> None:
        self.last_seen = _newest(self.last_seen, other.last_seen)
        self.memories += other.memories
        self.sessions += other.sessions
        self.successes += other.successes
        self.failures += other.failures
        self.processes += other.processes
        self.lessons_recorded += other.lessons_recorded

    def fields(self, days: list[DayCount]) -> dict[str, Any]:
        """The `Activity` fields, validated (a subclass is built from them)."""
        judged = self.successes + self.failures
        return Activity(
            last_seen=self.last_seen,
            memories=self.memories,
            sessions=self.sessions,
            successes=self.successes,
            failures=self.failures,
            failure_rate=round(self.failures / judged, 4) if judged else None,
            processes=self.processes,
            lessons_recorded=self.lessons_recorded,
            days=days,
        ).model_dump()


def _sum_days(series: Iterable[list[DayCount]]) -> list[DayCount]:
    """Day-by-day sums of sparse series: only days some series lists, oldest first."""
    total: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for days in series:
        for x in days:
            t = total[x.day]
            t[0] += x.success
            t[1] += x.failure
            t[2] += x.other
    return [DayCount(day=d, success=s, failure=f, other=o) for d, (s, f, o) in sorted(total.items())]


class RobotReporter:
    """Builds `RobotsReport` from the services' scoped reads (no SQL here, no policy of its own)."""

    def __init__(self, ctx: WebContext, browser: ExperienceBrowser | None) -> None:
        self.memory = ctx.memory
        self.browser = browser

    async def _processes(self, principal: Principal) -> list[ProcessDoc]:
        docs: list[ProcessDoc] = []
        while len(docs) < SCAN:
            page, _ = await self.memory.processes.list(principal, PROCESS_LIMIT, len(docs))
            if not page:
                break
            docs += page
        return docs

    async def _lessons_by_author(self, principal: Principal) -> tuple[Counter[str], dict[str, str]]:
        count: Counter[str] = Counter()
        newest: dict[str, str] = {}
        seen = 0
        if principal.robot_id is not None and not self.memory.fleet_repo.is_registered(principal.robot_id):
            return count, newest  # an unregistered robot reads no lessons (the service says not_found)
        while seen < SCAN:
            page = await self.memory.lessons.list(principal, "", LESSON_LIMIT, seen)
            if not page.answers:
                break
            seen += len(page.answers)
            for a in page.answers:
                count[a.lesson.recorded_by] += 1
                newest[a.lesson.recorded_by] = _newest(newest.get(a.lesson.recorded_by), a.lesson.updated) or ""
        return count, newest

    async def _readable(self, principal: Principal, robot_id: str) -> int | None:
        """Lessons in the scopes `robot_id` reads — shown to an operator, or to a robot about itself."""
        if principal.robot_id is not None and principal.robot_id != robot_id:
            return None
        try:
            return (await self.memory.lessons.list(principal, robot_id, 1, 0)).total
        except NotFound:  # an owner of stored data that never registered reads no lessons
            return None

    async def report(self, principal: Principal, days: int) -> RobotsReport:
        fleet = self.memory.fleet
        registered = {r.robot.robot_id: r.robot for r in await fleet.list_robots(principal)}
        groups = {g.group.group_id: g.group for g in (await fleet.list_groups(principal)).groups}
        docs = await self._processes(principal)
        events = await outcome_events(self.memory.processes, principal)
        used = uses(docs, events)
        lessons, lesson_times = await self._lessons_by_author(principal)
        totals = await self.browser.robot_totals(principal) if self.browser else {}
        per_day = await self.browser.robot_days(principal, days) if self.browser else []

        owners = set(registered)
        if principal.robot_id is None:  # an operator also sees owners of data that never registered
            owners |= {d.robot for d in docs} | set(totals) | set(lessons)
        owners.discard(SHARED)

        axis = last_days(days)
        window = set(axis)
        daily: defaultdict[str, list[DayCount]] = defaultdict(list)
        for robot, day, n, ok, bad in per_day:  # ordered by robot, then day
            if day in window:
                daily[robot].append(DayCount(day=day, success=ok, failure=bad, other=n - ok - bad))
        authored = Counter(d.robot for d in docs)
        process_times: dict[str, str | None] = {}
        for d in docs:
            process_times[d.robot] = _newest(process_times.get(d.robot), d.updated)

        robots: list[RobotActivity] = []
        tallies: dict[str, _Tally] = {}
        for rid in sorted(owners):
            reg = registered.get(rid)
            m = totals.get(rid, (0, 0, 0, None, 0, None))
            tally = _Tally(
                last_seen=_newest(
                    reg.updated if reg else None, m[3], m[5], process_times.get(rid), lesson_times.get(rid)
                ),
                memories=m[0],
                successes=m[1],
                failures=m[2],
                sessions=m[4],
                processes=authored.get(rid, 0),
                lessons_recorded=lessons.get(rid, 0),
            )
            tallies[rid] = tally
            robots.append(
                RobotActivity(
                    robot_id=rid,
                    name=reg.name if reg else "",
                    group=reg.group_id if reg else None,
                    registered=reg is not None,
                    lessons_readable=await self._readable(principal, rid) if reg else None,
                    used=used.get(rid, []),
                    **tally.fields(daily.get(rid, [])),
                )
            )

        rolled: list[GroupActivity] = []
        members: defaultdict[str | None, list[RobotActivity]] = defaultdict(list)
        for r in robots:
            members[r.group].append(r)
        for gid in sorted(set(groups) | {g for g in members if g is not None}):
            rolled.append(self._group(gid, groups[gid].name if gid in groups else "", members[gid], tallies))
        if members.get(None):
            rolled.append(self._group(None, "ungrouped", members[None], tallies))

        return RobotsReport(
            days=days,
            first_day=axis[0],
            robots=robots,
            groups=rolled,
            trends=trends(docs, events),
            processes_scanned=len(docs),
            note=(
                "activity = memories written per day (by task.success) and sessions opened; last seen = the "
                "newest stored trace; used = the processes it recorded outcomes on; trends = the older vs "
                "newer half of each process's recorded outcomes"
            ),
        )

    @staticmethod
    def _group(gid: str | None, name: str, robots: list[RobotActivity], tallies: dict[str, _Tally]) -> GroupActivity:
        total = _Tally()
        for r in robots:
            total.add(tallies[r.robot_id])
        fields = total.fields(_sum_days(r.days for r in robots))
        return GroupActivity(group=gid, name=name, robots=[r.robot_id for r in robots], **fields)


def register(api: Api, ctx: WebContext, browser: ExperienceBrowser | None) -> None:
    reporter = RobotReporter(ctx, browser)

    @api.route(
        "GET", "/api/robots", args=ReportArgs, body=NoBody, response=RobotsReport, summary="Robots and groups report",
        tag="fleet",
    )  # fmt: skip
    async def robots_report(call: Call[ReportArgs, NoBody]) -> RobotsReport:
        """Per robot and per group: last seen, memories and failures per day, failure rate, what it
        contributed and reads; processes whose dated outcomes are getting worse. A robot token sees
        its own group."""
        return await reporter.report(call.principal, call.args.days)
