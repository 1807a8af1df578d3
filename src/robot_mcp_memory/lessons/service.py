"""ScopedParams: group-scoped, place-aware lessons (learned parameters) for robots.

A lesson call acts as one registered robot (a scoped caller: always itself) and lands in a scope
resolved from the fleet registry at that moment:

- ``robot:<id>`` when ``private`` — robot-specific observations; never shared;
- ``group:<G>`` for a robot in group G — shared by every robot currently in G;
- ``solo:<id>`` for an ungrouped robot — isolated.

A robot recalls from its own ``robot:`` scope and its current transferable scope, so regrouping
changes what it sees from the next call on; lessons stay where they were recorded.

**Gate.** With self-improvement off for the robot (its group's own switch, else the global one —
off until an operator switches it on), `record` writes nothing and says so, and `recall` returns
no lessons: the robot runs on its defaults. `list` is the inspection view and is not gated.

**Place.** A lesson answers at the place it was learned. At another place it answers only once
earned — ``success_count >= min_successes`` and Laplace reliability ``(s+1)/(s+f+2) >=
min_reliability`` — and then says where it came from (``transferred``, ``from_place``).
Same-place lessons come first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from robot_mcp_memory.errors import InvalidInput, NotFound
from robot_mcp_memory.fleet.model import check_robot_id
from robot_mcp_memory.fleet.ports import FleetRepository
from robot_mcp_memory.json_object import parse_json_object
from robot_mcp_memory.lessons.model import Action, Lesson
from robot_mcp_memory.lessons.ports import LessonRepository
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal

MAX_KEY = 200
MAX_PLACE = 200
MAX_PARAMS_BYTES = 65_536
MAX_LIMIT = 500

Reason = Literal[Action, "self_improve_off", "other_params_failed"]

_DETAILS: dict[Reason, str] = {
    "created": "a new lesson was stored",
    "counted": "the outcome was counted on the stored lesson",
    "unchanged": "the stored lesson already has these params; nothing changed",
    "replaced": "the stored lesson had other params; they were replaced and its counts restarted",
    "self_improve_off": "self-improvement is off for this robot, so nothing was stored; an operator can "
    "switch it on with set_self_improve",
    "other_params_failed": "the stored lesson for this key at this place has other params; a failure of "
    "different params neither counts against it nor replaces it",
}


@dataclass(frozen=True)
class Thresholds:
    """When a lesson learned at one place may answer at another."""

    min_successes: int = 3
    min_reliability: float = 0.75

    def earned(self, lesson: Lesson) -> bool:
        return lesson.success_count >= self.min_successes and lesson.reliability >= self.min_reliability


@dataclass(frozen=True)
class Answer:
    """A lesson as one robot sees it."""

    lesson: Lesson
    private: bool = False
    transferred: bool = False  # learned at another place than the one asked about
    orphaned: bool = False  # a group:<G> lesson whose group no longer exists (operator view)


@dataclass(frozen=True)
class Recorded:
    robot: str
    scope: str
    recorded: bool
    reason: Reason
    detail: str
    self_improve: bool
    answer: Answer | None


@dataclass(frozen=True)
class Recalled:
    robot: str
    scopes: tuple[str, ...]
    self_improve: bool
    answers: list[Answer]


@dataclass(frozen=True)
class LessonPage:
    answers: list[Answer]
    total: int


def _label(value: str, what: str, limit: int, required: bool) -> str:
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{what} must not be empty (e.g. 'grasp/mug')")
    if len(value) > limit or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInput(f"{what} must be at most {limit} printable characters")
    return value


class ScopedParams:
    def __init__(self, store: LessonRepository, fleet: FleetRepository, policy: Policy, thresholds: Thresholds) -> None:
        self.store = store
        self.fleet = fleet
        self.policy = policy
        self.thresholds = thresholds

    # ------------------------------------------------------------------ scopes
    def acting(self, principal: Principal, robot: str) -> str:
        """The registered robot this call acts as, or an error saying what to do."""
        named = self.policy.acting_robot(principal, robot)
        if not named.strip():
            raise InvalidInput("name the robot whose lessons these are (robot='rap-1')")
        rid = check_robot_id(named)
        if not self.fleet.is_registered(rid):
            raise NotFound(f"robot '{rid}' is not registered: call register_robot('{rid}') first")
        return rid

    def scope_for(self, robot_id: str, private: bool = False) -> str:
        if private:
            return f"robot:{robot_id}"
        group = self.fleet.group_of(robot_id)
        return f"solo:{robot_id}" if group is None else f"group:{group}"

    def scopes_of(self, robot_id: str) -> tuple[str, ...]:
        """What a robot reads: its own private scope and its current transferable one."""
        return (f"robot:{robot_id}", self.scope_for(robot_id))

    def _answer(self, lesson: Lesson, place: str | None = None) -> Answer:
        orphaned = lesson.scope.startswith("group:") and not self.fleet.group_exists(lesson.scope[6:])
        transferred = place is not None and lesson.place != place
        return Answer(lesson, lesson.scope.startswith("robot:"), transferred, orphaned)

    # ------------------------------------------------------------------ calls
    async def record(
        self,
        principal: Principal,
        robot: str,
        key: str,
        params: Mapping[str, Any] | str,
        place: str = "",
        success: bool | None = None,
        private: bool = False,
    ) -> Recorded:
        rid = self.acting(principal, robot)
        key = _label(key, "key", MAX_KEY, required=True)
        place = _label(place, "place", MAX_PLACE, required=False)
        values = parse_json_object(params, "params", MAX_PARAMS_BYTES)
        scope = self.scope_for(rid, private)
        if not self.fleet.self_improve_for(rid):
            return Recorded(rid, scope, False, "self_improve_off", _DETAILS["self_improve_off"], False, None)
        stored = await self.store.record(scope, key, place, values, success, rid)
        if stored is None:
            reason: Reason = "other_params_failed"
            return Recorded(rid, scope, False, reason, _DETAILS[reason], True, None)
        recorded = stored.action != "unchanged"
        answer = self._answer(stored.lesson)
        return Recorded(rid, scope, recorded, stored.action, _DETAILS[stored.action], True, answer)

    async def recall(self, principal: Principal, robot: str, key: str, place: str = "") -> Recalled:
        """Lessons for `key`: this place's first, then other places' that are earned."""
        rid = self.acting(principal, robot)
        key = _label(key, "key", MAX_KEY, required=True)
        place = _label(place, "place", MAX_PLACE, required=False)
        scopes = self.scopes_of(rid)
        if not self.fleet.self_improve_for(rid):
            return Recalled(rid, scopes, False, [])
        lessons = await self.store.for_key(scopes, key)
        here = [x for x in lessons if x.place == place]
        there = [x for x in lessons if x.place != place and self.thresholds.earned(x)]
        ranked = _ranked(here) + _ranked(there)
        return Recalled(rid, scopes, True, [self._answer(x, place) for x in ranked])

    async def list(self, principal: Principal, robot: str = "", limit: int = 50, offset: int = 0) -> LessonPage:
        """Stored lessons, newest first: one robot's view (a scoped caller: always its own), or —
        for an operator naming no robot — every scope, orphaned group lessons included."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
        if offset < 0:
            raise InvalidInput("offset must be 0 or more")
        everyone = principal.robot_id is None and not robot.strip()
        scopes = None if everyone else self.scopes_of(self.acting(principal, robot))
        lessons, total = await self.store.page(scopes, limit, offset)
        return LessonPage([self._answer(x) for x in lessons], total)


def _ranked(lessons: list[Lesson]) -> list[Lesson]:
    """Most reliable first, then most successes, then most recently updated (stable sorts)."""
    newest_first = sorted(lessons, key=lambda x: x.updated, reverse=True)
    return sorted(newest_first, key=lambda x: (-x.reliability, -x.success_count))
