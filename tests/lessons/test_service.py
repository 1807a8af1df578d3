"""Lessons: scopes, the self-improvement gate, place earning, laziness, group deletion, §6a.

The service's rules run against every backend (`fleet_on`: the lesson and fleet repositories of
SQLite, as `Memory` wires them, and of PostgreSQL); SQLite's lazy lessons.db keeps its own tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import InvalidInput, NotFound
from robot_mcp_memory.fleet.ports import FleetRepository
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.fleet.service import FleetService
from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.lessons.service import ScopedParams, Thresholds
from robot_mcp_memory.lessons.sqlite import store as params
from robot_mcp_memory.storage.sqlite import Kind, SqliteStore
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import ADMIN, Principal

GRIP = {"grip_force": 0.3, "approach": "top"}
FIRM = {"grip_force": 0.6, "approach": "side"}


@pytest.fixture
def lessons(memory: Memory) -> ScopedParams:
    return memory.lessons


@dataclass
class Wired:
    """The services lessons need, on one backend (the names `Memory` gives them)."""

    fleet: FleetService
    lessons: ScopedParams
    fleet_registry: FleetRepository


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def wired(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[Wired]:
    if request.param == "sqlite":
        memory: Memory = request.getfixturevalue("memory")
        yield Wired(memory.fleet, memory.lessons, memory.fleet_registry)
        return
    store = request.getfixturevalue("pg_store")
    registry = PostgresFleet(store)
    policy = Policy(membership=registry)
    thresholds = Thresholds(settings.lesson_min_successes, settings.lesson_min_reliability)
    try:
        yield Wired(
            FleetService(registry, policy), ScopedParams(PostgresLessons(store), registry, policy, thresholds), registry
        )
    finally:
        registry.close()


@pytest.fixture
async def fleet_on(wired: Wired) -> Wired:
    """line-a = {rap-1, rap-2}, rap-3 ungrouped, line-b = {rap-4}; self-improvement on globally."""
    fleet = wired.fleet
    await fleet.upsert_group(ADMIN, "line-a")
    await fleet.upsert_group(ADMIN, "line-b")
    for rid, group in (("rap-1", "line-a"), ("rap-2", "line-a"), ("rap-3", ""), ("rap-4", "line-b")):
        await fleet.register_robot(ADMIN, rid, group=group)
    await fleet.set_self_improve(ADMIN, True)
    return wired


async def _keys(lessons: ScopedParams, robot: str, key: str = "grasp/mug", place: str = "") -> list[dict[str, object]]:
    recalled = await lessons.recall(ADMIN, robot, key, place)
    return [a.lesson.params for a in recalled.answers]


# ---------------------------------------------------------------------------- the file and its kinds
def test_every_table_of_lessons_db_declares_a_kind_and_lessons_are_definitions(tmp_path: Path) -> None:
    schema = params.schema()
    assert schema.kind_of("lessons") is Kind.DEFINITION
    store = SqliteStore.open(tmp_path / "lessons.db", schema, params.MIGRATIONS)
    try:
        names = store.read_blocking(
            lambda c: [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        )
        assert store.report is not None
        assert store.report.undeclared == []
    finally:
        store.close()
    assert sorted(names) == ["lessons", "store_meta"]
    assert all(schema.kind_of(n) is not None for n in names)


async def test_no_lessons_db_exists_until_the_first_lesson_is_written(memory: Memory, settings: Settings) -> None:
    path = settings.lessons_path
    await memory.fleet.register_robot(ADMIN, "rap-1")
    assert (await memory.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP)).recorded is False  # gate off
    await memory.fleet.set_self_improve(ADMIN, True)
    assert (await memory.lessons.recall(ADMIN, "rap-1", "grasp/mug")).answers == []
    assert (await memory.lessons.list(ADMIN)).total == 0
    assert not path.exists(), "switching on and reading must not create the file"
    assert not memory.lesson_store.opened
    rec = await memory.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP)
    assert rec.recorded
    assert path.exists()


async def test_an_existing_lessons_db_is_opened_at_startup_and_keeps_its_lessons(memory: Memory) -> None:
    fleet_on = memory
    await fleet_on.fleet.upsert_group(ADMIN, "line-a")
    for rid in ("rap-1", "rap-2"):
        await fleet_on.fleet.register_robot(ADMIN, rid, group="line-a")
    await fleet_on.fleet.set_self_improve(ADMIN, True)
    await fleet_on.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    fleet_on.close()
    reopened = Memory.open(fleet_on.settings)
    try:
        assert reopened.lesson_store.opened
        assert await _keys(reopened.lessons, "rap-2") == [GRIP]
    finally:
        reopened.close()


# ---------------------------------------------------------------------------- scopes
async def test_two_robots_in_one_group_share_a_lesson(fleet_on: Wired) -> None:
    rec = await fleet_on.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    assert (rec.scope, rec.reason) == ("group:line-a", "created")
    recalled = await fleet_on.lessons.recall(ADMIN, "rap-2", "grasp/mug")
    assert [a.lesson.params for a in recalled.answers] == [GRIP]
    assert recalled.answers[0].lesson.recorded_by == "rap-1"
    assert recalled.answers[0].transferred is False


async def test_an_ungrouped_robot_is_isolated(fleet_on: Wired) -> None:
    rec = await fleet_on.lessons.record(ADMIN, "rap-3", "grasp/mug", FIRM, success=True)
    assert rec.scope == "solo:rap-3"
    await fleet_on.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    assert await _keys(fleet_on.lessons, "rap-3") == [FIRM]
    for other in ("rap-1", "rap-2", "rap-4"):
        assert FIRM not in await _keys(fleet_on.lessons, other)


async def test_a_private_lesson_never_reaches_a_group_mate(fleet_on: Wired) -> None:
    rec = await fleet_on.lessons.record(ADMIN, "rap-1", "seen/shelf", {"mugs": 3}, private=True)
    assert rec.scope == "robot:rap-1"
    assert await _keys(fleet_on.lessons, "rap-2", "seen/shelf") == []
    assert [a.lesson.key for a in (await fleet_on.lessons.list(ADMIN, "rap-2")).answers] == []
    mine = await fleet_on.lessons.recall(ADMIN, "rap-1", "seen/shelf")
    assert [(a.lesson.params, a.private) for a in mine.answers] == [({"mugs": 3}, True)]


async def test_regrouping_moves_a_robots_view(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    await lessons.record(ADMIN, "rap-4", "grasp/mug", FIRM, success=True)
    assert await _keys(lessons, "rap-3") == []
    await fleet_on.fleet.set_group(ADMIN, "rap-3", "line-a")
    assert await _keys(lessons, "rap-3") == [GRIP]
    await fleet_on.fleet.set_group(ADMIN, "rap-3", "line-b")
    assert await _keys(lessons, "rap-3") == [FIRM]
    rec = await lessons.record(ADMIN, "rap-3", "grasp/cup", GRIP)
    assert rec.scope == "group:line-b", "new lessons land in the current group"


# ---------------------------------------------------------------------------- the gate
async def test_a_groups_switch_off_stops_writes_and_recall_while_the_global_toggle_stays_on(
    fleet_on: Wired,
) -> None:
    lessons = fleet_on.lessons
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    await fleet_on.fleet.set_self_improve(ADMIN, False, group="line-a")
    assert fleet_on.fleet_registry.snapshot.global_self_improve is True
    rec = await lessons.record(ADMIN, "rap-2", "grasp/mug", FIRM, success=True)
    assert (rec.recorded, rec.reason, rec.self_improve, rec.answer) == (False, "self_improve_off", False, None)
    recalled = await lessons.recall(ADMIN, "rap-2", "grasp/mug")
    assert (recalled.self_improve, recalled.answers) == (False, [])
    # others are unaffected, and nothing was lost: switching back on restores the lesson unchanged
    assert (await lessons.record(ADMIN, "rap-4", "grasp/mug", FIRM)).recorded
    await fleet_on.fleet.set_self_improve(ADMIN, True, group="line-a")
    back = await lessons.recall(ADMIN, "rap-2", "grasp/mug")
    assert [(a.lesson.params, a.lesson.success_count) for a in back.answers] == [(GRIP, 1)]


async def test_with_nobody_switching_it_on_nothing_is_recorded(wired: Wired) -> None:
    await wired.fleet.register_robot(ADMIN, "rap-1")
    rec = await wired.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    assert (rec.recorded, rec.reason) == (False, "self_improve_off")


# ---------------------------------------------------------------------------- places
async def test_a_lesson_from_place_a_is_not_offered_at_place_b_until_earned_then_is_labelled(
    fleet_on: Wired,
) -> None:
    lessons = fleet_on.lessons  # thresholds: 3 successes and reliability >= 0.75
    for _ in range(2):
        await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, place="table-a", success=True)
    at_a = await lessons.recall(ADMIN, "rap-2", "grasp/mug", place="table-a")
    assert [a.transferred for a in at_a.answers] == [False]
    assert (await lessons.recall(ADMIN, "rap-2", "grasp/mug", place="table-b")).answers == []
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, place="table-a", success=True)
    at_b = await lessons.recall(ADMIN, "rap-2", "grasp/mug", place="table-b")
    assert len(at_b.answers) == 1
    offered = at_b.answers[0]
    assert (offered.transferred, offered.lesson.place, offered.lesson.success_count) == (True, "table-a", 3)


async def test_an_unreliable_lesson_stays_home_however_many_successes(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    for ok in (True, True, True, False, False):  # reliability 4/7 ≈ 0.57
        await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, place="table-a", success=ok)
    assert (await lessons.recall(ADMIN, "rap-1", "grasp/mug", place="table-b")).answers == []


async def test_same_place_lessons_come_first(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    for _ in range(5):
        await lessons.record(ADMIN, "rap-1", "grasp/mug", FIRM, place="table-a", success=True)
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, place="table-b", success=False)
    recalled = await lessons.recall(ADMIN, "rap-2", "grasp/mug", place="table-b")
    assert [(a.lesson.place, a.transferred) for a in recalled.answers] == [("table-b", False), ("table-a", True)]


async def test_earning_thresholds_come_from_settings(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_LESSON_MIN_SUCCESSES": "1", "MEMORY_LESSON_MIN_RELIABILITY": "0.6"}
    )
    memory = Memory.open(settings)
    try:
        await memory.fleet.register_robot(ADMIN, "rap-1")
        await memory.fleet.set_self_improve(ADMIN, True)
        await memory.lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, place="a", success=True)  # 2/3
        assert len((await memory.lessons.recall(ADMIN, "rap-1", "grasp/mug", place="b")).answers) == 1
    finally:
        memory.close()


# ---------------------------------------------------------------------------- counters
async def test_counters_describe_the_params_they_sit_beside(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    assert (await lessons.record(ADMIN, "rap-1", "k", GRIP, success=True)).reason == "created"
    assert (await lessons.record(ADMIN, "rap-1", "k", GRIP, success=False)).reason == "counted"
    assert (await lessons.record(ADMIN, "rap-1", "k", GRIP)).reason == "unchanged"
    failed_other = await lessons.record(ADMIN, "rap-1", "k", FIRM, success=False)
    assert (failed_other.recorded, failed_other.reason) == (False, "other_params_failed")
    [kept] = (await lessons.recall(ADMIN, "rap-1", "k")).answers
    assert (kept.lesson.params, kept.lesson.success_count, kept.lesson.failure_count) == (GRIP, 1, 1)
    replaced = await lessons.record(ADMIN, "rap-1", "k", FIRM, success=True)
    assert replaced.reason == "replaced"
    assert replaced.answer is not None
    assert (replaced.answer.lesson.params, replaced.answer.lesson.success_count) == (FIRM, 1)
    assert replaced.answer.lesson.failure_count == 0


async def test_params_may_arrive_as_a_json_string(fleet_on: Wired) -> None:
    rec = await fleet_on.lessons.record(ADMIN, "rap-1", "k", '{"grip_force": 0.3, "approach": "top"}')
    assert rec.answer is not None
    assert rec.answer.lesson.params == GRIP


# ---------------------------------------------------------------------------- group deletion
async def test_deleting_a_group_loses_no_lesson(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    await fleet_on.fleet.delete_group(ADMIN, "line-a")
    assert await _keys(lessons, "rap-1") == [], "ungrouped now: it sees its solo scope"
    page = await lessons.list(ADMIN)
    assert [(a.lesson.scope, a.orphaned) for a in page.answers] == [("group:line-a", True)]
    await fleet_on.fleet.upsert_group(ADMIN, "line-a")
    await fleet_on.fleet.set_group(ADMIN, "rap-1", "line-a")
    assert await _keys(lessons, "rap-1") == [GRIP]
    assert [a.orphaned for a in (await lessons.list(ADMIN)).answers] == [False]


# ---------------------------------------------------------------------------- listing
async def test_list_lessons_pages_newest_first_and_one_robot_sees_its_own_scopes(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    await lessons.record(ADMIN, "rap-1", "a", GRIP)
    await lessons.record(ADMIN, "rap-3", "b", GRIP)
    await lessons.record(ADMIN, "rap-2", "c", GRIP, private=True)
    everyone = await lessons.list(ADMIN, limit=2)
    assert (len(everyone.answers), everyone.total) == (2, 3)
    assert {a.lesson.key for a in (await lessons.list(ADMIN, offset=2)).answers} <= {"a", "b", "c"}
    assert {a.lesson.key for a in (await lessons.list(ADMIN, "rap-2")).answers} == {"a", "c"}
    assert {a.lesson.key for a in (await lessons.list(ADMIN, "rap-1")).answers} == {"a"}
    with pytest.raises(InvalidInput):
        await lessons.list(ADMIN, limit=0)


# ---------------------------------------------------------------------------- errors
async def test_unknown_robots_and_bad_arguments_are_clear_errors(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    with pytest.raises(NotFound, match="register_robot"):
        await lessons.record(ADMIN, "ghost", "k", GRIP)
    with pytest.raises(NotFound):
        await lessons.recall(ADMIN, "ghost", "k")
    with pytest.raises(NotFound):
        await lessons.list(ADMIN, "ghost")
    with pytest.raises(InvalidInput):
        await lessons.record(ADMIN, "", "k", GRIP)
    with pytest.raises(InvalidInput):
        await lessons.record(ADMIN, "bad id!", "k", GRIP)
    with pytest.raises(InvalidInput):
        await lessons.record(ADMIN, "rap-1", "  ", GRIP)
    with pytest.raises(InvalidInput):
        await lessons.record(ADMIN, "rap-1", "k", GRIP, place="tab\x00le")
    for bad in ("{not json", "[1, 2]", "42", '{"x": Infinity}', '"a string"'):
        with pytest.raises(InvalidInput):
            await lessons.record(ADMIN, "rap-1", "k", bad)
    with pytest.raises(InvalidInput):
        await lessons.record(ADMIN, "rap-1", "k", {"blob": "x" * 70_000})


# ---------------------------------------------------------------------------- §6a: a robot token
async def test_a_robot_token_always_acts_as_its_own_robot(fleet_on: Wired) -> None:
    lessons = fleet_on.lessons
    rap4 = Principal.robot("rap-4")
    await lessons.record(ADMIN, "rap-1", "grasp/mug", GRIP, success=True)
    rec = await lessons.record(rap4, "rap-1", "grasp/mug", FIRM, success=True)
    assert (rec.robot, rec.scope) == ("rap-4", "group:line-b"), "the robot argument cannot escape the token"
    recalled = await lessons.recall(rap4, "rap-1", "grasp/mug")
    assert (recalled.robot, [a.lesson.params for a in recalled.answers]) == ("rap-4", [FIRM])
    listed = await lessons.list(rap4)
    assert {a.lesson.scope for a in listed.answers} == {"group:line-b"}
    assert await _keys(lessons, "rap-2") == [GRIP], "line-a's lesson is untouched"


async def test_a_robot_token_whose_robot_is_not_registered_is_told_to_register(fleet_on: Wired) -> None:
    with pytest.raises(NotFound, match="register_robot"):
        await fleet_on.lessons.recall(Principal.robot("rap-9"), "", "grasp/mug")


async def test_true_is_not_one_and_false_is_not_zero_in_params(tmp_path: Path) -> None:
    """Python's == counted a report of {"use_suction": true} as the stored {"use_suction": 1}."""
    from robot_mcp_memory.lessons.model import same_params

    assert not same_params({"use_suction": 1}, {"use_suction": True})
    assert not same_params({"suction": 0.0}, {"suction": False})
    assert same_params({"force": 1}, {"force": 1.0})
    assert same_params({"a": [True, {"b": 2}]}, {"a": [True, {"b": 2.0}]})
    assert not same_params({"a": [1]}, {"a": [True]})
