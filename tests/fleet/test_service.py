"""The fleet registry and FleetService: ids, groups, switches, snapshot freshness, the §6a rules.

The service's rules run against every `FleetRepository` (the `fleet` fixture: SQLite's registry
and PostgreSQL's); the tests that reach into one backend's machinery take `memory` (SQLite) or
live in tests/fleet/postgres/."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from robot_mcp_memory.fleet.model import check_group_id, check_robot_id
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.fleet.service import FleetService
from robot_mcp_memory.fleet.sqlite.store import load_snapshot
from robot_mcp_memory.storage.sqlite import Kind
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from tests.conftest import eventually

RAP1 = Principal.robot("rap-1")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest) -> Iterator[FleetService]:
    """The fleet service on SQLite's registry (as `Memory` wires it) and on PostgreSQL's."""
    if request.param == "sqlite":
        memory: Memory = request.getfixturevalue("memory")
        yield memory.fleet
        return
    registry = PostgresFleet(request.getfixturevalue("pg_store"))
    try:
        yield FleetService(registry, Policy(membership=registry))
    finally:
        registry.close()


async def _line(fleet: FleetService) -> None:
    """Group 'line-a' with rap-1 and rap-2; rap-3 ungrouped; group 'line-b' with rap-4."""
    await fleet.upsert_group(ADMIN, "line-a", name="Line A", customer="acme", factory="lyon")
    await fleet.upsert_group(ADMIN, "line-b")
    await fleet.register_robot(ADMIN, "rap-1", group="line-a")
    await fleet.register_robot(ADMIN, "rap-2", group="line-a")
    await fleet.register_robot(ADMIN, "rap-3")
    await fleet.register_robot(ADMIN, "rap-4", group="line-b")


# ---------------------------------------------------------------------------- storage and kinds
def test_the_fleet_tables_are_declared_definitions_and_created_by_a_new_migration(tmp_path: Path) -> None:
    schema = db.schema()
    for name in ("fleet_robots", "fleet_groups", "fleet_settings"):
        assert schema.kind_of(name) is Kind.DEFINITION
    store = db.open_index(tmp_path / "index.db")
    try:
        names = store.read_blocking(lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")})
        assert store.report is not None
        assert store.report.undeclared == []
        assert store.report.to_version == len(db.MIGRATIONS)
    finally:
        store.close()
    assert {"fleet_robots", "fleet_groups", "fleet_settings"} <= names


def test_a_version_1_index_db_migrates_forward_keeping_its_documents(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.MIGRATIONS[0](conn)
    conn.execute("INSERT INTO store_meta VALUES ('schema_version', '1')")
    conn.execute(
        "INSERT INTO processes(id, title, created, updated) VALUES ('p', 'P', '2026-01-01T00:00:00Z', "
        "'2026-01-01T00:00:00Z')"
    )
    conn.close()
    store = db.open_index(path)
    try:
        assert store.report is not None
        assert (store.report.from_version, store.report.to_version) == (1, len(db.MIGRATIONS))
        assert store.report.counts["processes"] == 1
        assert store.report.counts["fleet_robots"] == 0
    finally:
        store.close()


# ---------------------------------------------------------------------------- ids
@pytest.mark.parametrize("bad", ["", " ", "-rap", "rap 1", "rap/1", "rap:1", "x" * 65, "ráp", "shared", "Unknown"])
def test_bad_robot_ids_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_robot_id(bad)


@pytest.mark.parametrize("good", ["rap-1", "G1.lab_01", "a", "x" * 64])
def test_good_ids_pass_unchanged(good: str) -> None:
    assert check_robot_id(good) == good
    assert check_group_id(good) == good


async def test_an_id_differing_only_by_case_is_a_conflict_not_a_second_robot(fleet: FleetService) -> None:
    await fleet.register_robot(ADMIN, "rap-1")
    with pytest.raises(Conflict):
        await fleet.register_robot(ADMIN, "RAP-1")
    await fleet.upsert_group(ADMIN, "line-a")
    with pytest.raises(Conflict):
        await fleet.upsert_group(ADMIN, "Line-A")
    assert [r.robot.robot_id for r in await fleet.list_robots(ADMIN)] == ["rap-1"]


# ---------------------------------------------------------------------------- robots and groups
async def test_register_robot_is_idempotent_and_an_empty_group_keeps_the_operators_grouping(
    fleet: FleetService,
) -> None:
    await fleet.upsert_group(ADMIN, "line-a")
    view, created = await fleet.register_robot(ADMIN, "rap-1", name="Rap one", group="line-a")
    assert created
    assert (view.robot.name, view.robot.group_id) == ("Rap one", "line-a")
    again, created = await fleet.register_robot(ADMIN, "rap-1")
    assert not created
    assert (again.robot.name, again.robot.group_id) == ("Rap one", "line-a")
    assert again.robot.updated == view.robot.updated, "nothing changed, nothing was rewritten"
    renamed, _ = await fleet.register_robot(ADMIN, "rap-1", name="Rap 1")
    assert renamed.robot.name == "Rap 1"


async def test_joining_a_group_that_does_not_exist_is_not_found_and_creates_nothing(fleet: FleetService) -> None:
    await fleet.register_robot(ADMIN, "rap-1")
    with pytest.raises(NotFound, match="upsert_group"):
        await fleet.set_group(ADMIN, "rap-1", "nowhere")
    with pytest.raises(NotFound):
        await fleet.register_robot(ADMIN, "rap-2", group="nowhere")
    assert (await fleet.list_groups(ADMIN)).groups == []
    assert [r.robot.robot_id for r in await fleet.list_robots(ADMIN)] == ["rap-1"]


async def test_unknown_robots_are_not_found(fleet: FleetService) -> None:
    await fleet.upsert_group(ADMIN, "line-a")
    with pytest.raises(NotFound):
        await fleet.set_group(ADMIN, "ghost", "line-a")
    with pytest.raises(NotFound):
        await fleet.set_robot_meta(ADMIN, "ghost", name="x")
    with pytest.raises(NotFound):
        await fleet.list_robots(ADMIN, group="no-such-group")
    with pytest.raises(NotFound):
        await fleet.delete_group(ADMIN, "no-such-group")
    with pytest.raises(NotFound):
        await fleet.set_self_improve(ADMIN, True, group="no-such-group")


async def test_set_group_moves_and_an_empty_group_ungroups(fleet: FleetService) -> None:
    await _line(fleet)
    view, previous = await fleet.set_group(ADMIN, "rap-3", "line-a")
    assert (view.robot.group_id, previous) == ("line-a", None)
    view, previous = await fleet.set_group(ADMIN, "rap-3", "")
    assert (view.robot.group_id, previous) == (None, "line-a")


async def test_meta_is_merged_key_by_key_and_null_removes_a_key(fleet: FleetService) -> None:
    await fleet.register_robot(ADMIN, "rap-1")
    await fleet.set_robot_meta(ADMIN, "rap-1", meta={"model": "r1", "site": "lyon"})
    view = await fleet.set_robot_meta(ADMIN, "rap-1", meta='{"site": null, "firmware": "2.1"}')
    assert view.robot.meta == {"model": "r1", "firmware": "2.1"}
    named = await fleet.set_robot_meta(ADMIN, "rap-1", name="Rap one")
    assert named.robot.name == "Rap one"
    assert named.robot.meta == {"model": "r1", "firmware": "2.1"}


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", "3", '"text"', "null-ish", '{"a": NaN}'])
async def test_malformed_meta_is_invalid(fleet: FleetService, bad: str) -> None:
    await fleet.register_robot(ADMIN, "rap-1")
    with pytest.raises(InvalidInput):
        await fleet.set_robot_meta(ADMIN, "rap-1", meta=bad)


async def test_upsert_group_updates_only_the_fields_given(fleet: FleetService) -> None:
    view, created = await fleet.upsert_group(ADMIN, "line-a", name="Line A", customer="acme", factory="lyon")
    assert created
    assert view.group.self_improve is None
    view, created = await fleet.upsert_group(ADMIN, "line-a", factory="porto", self_improve=True)
    assert not created
    g = view.group
    assert (g.name, g.customer, g.factory, g.self_improve) == ("Line A", "acme", "porto", True)


async def test_list_groups_shows_members_and_both_switches(fleet: FleetService) -> None:
    await _line(fleet)
    listed = await fleet.list_groups(ADMIN)
    assert [(v.group.group_id, v.group.robots) for v in listed.groups] == [
        ("line-a", ("rap-1", "rap-2")),
        ("line-b", ("rap-4",)),
    ]
    assert listed.global_self_improve is False, "off until somebody switches it on"
    assert all(v.effective_self_improve is False for v in listed.groups)


# ---------------------------------------------------------------------------- switches
async def test_self_improve_for_a_robot_is_its_groups_setting_else_the_global_one(fleet: FleetService) -> None:
    registry = fleet.registry
    await _line(fleet)
    assert not any(registry.self_improve_for(r) for r in ("rap-1", "rap-3", "rap-4"))
    await fleet.set_self_improve(ADMIN, True)
    assert all(registry.self_improve_for(r) for r in ("rap-1", "rap-3", "rap-4"))
    await fleet.set_self_improve(ADMIN, False, group="line-a")
    assert not registry.self_improve_for("rap-1")
    assert registry.self_improve_for("rap-3"), "ungrouped robots follow the global toggle"
    assert registry.self_improve_for("rap-4")
    state = await fleet.set_self_improve(ADMIN, None, group="line-a")
    assert state.group is not None
    assert state.group.group.self_improve is None
    assert state.group.effective_self_improve is True
    assert registry.self_improve_for("rap-1")


async def test_the_global_toggle_cannot_be_set_to_follow_itself(fleet: FleetService) -> None:
    with pytest.raises(InvalidInput):
        await fleet.set_self_improve(ADMIN, None)


# ---------------------------------------------------------------------------- freshness and deletion
async def test_every_fleet_write_is_visible_to_the_very_next_membership_question(fleet: FleetService) -> None:
    registry = fleet.registry
    await _line(fleet)
    assert registry.group_mates("rap-1") == {"rap-1", "rap-2"}
    assert fleet.policy.visible_robots(RAP1) == frozenset({"rap-1", "rap-2", "shared"})
    await fleet.set_group(ADMIN, "rap-3", "line-a")
    assert registry.group_mates("rap-1") == {"rap-1", "rap-2", "rap-3"}
    await fleet.set_group(ADMIN, "rap-1", "line-b")
    assert registry.group_mates("rap-1") == {"rap-1", "rap-4"}
    assert registry.group_mates("rap-3") == {"rap-2", "rap-3"}
    assert registry.group_mates("never-registered") == {"never-registered"}


async def test_a_fleet_write_whose_caller_is_cancelled_still_commits_and_updates_membership(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, registry = memory.fleet, memory.fleet_registry
    await _line(fleet)
    submitted = asyncio.Event()
    original = memory.index.write

    async def spy(fn: Any) -> Any:
        submitted.set()
        return await original(fn)

    monkeypatch.setattr(memory.index, "write", spy)
    gate = threading.Event()
    blocker = asyncio.create_task(asyncio.to_thread(memory.index.on_writer, lambda _c: gate.wait(10)))
    task = asyncio.create_task(fleet.set_group(ADMIN, "rap-3", "line-a"))
    await asyncio.wait_for(submitted.wait(), 10)  # the write is on the writer's queue, behind the gate
    task.cancel()
    gate.set()
    await blocker
    await asyncio.to_thread(memory.index.flush)
    for _ in range(100):  # bounded: a few loop turns hand the result back
        if "rap-3" in registry.group_mates("rap-1"):
            break
        await asyncio.sleep(0)
    assert task.cancelled()
    assert registry.group_mates("rap-1") == {"rap-1", "rap-2", "rap-3"}
    assert [v.robot.group_id for v in await fleet.list_robots(ADMIN) if v.robot.robot_id == "rap-3"] == ["line-a"]


async def test_a_reopened_registry_sees_what_was_written(memory: Memory) -> None:
    await _line(memory.fleet)
    await memory.fleet.set_self_improve(ADMIN, True)
    memory.close()
    reopened = Memory.open(memory.settings)
    try:
        assert reopened.fleet_registry.group_mates("rap-2") == {"rap-1", "rap-2"}
        assert reopened.fleet_registry.self_improve_for("rap-3")
    finally:
        reopened.close()


async def test_deleting_a_group_ungroups_its_robots_and_leaves_the_others(fleet: FleetService) -> None:
    await _line(fleet)
    deleted = await fleet.delete_group(ADMIN, "line-a")
    assert deleted.ungrouped == ("rap-1", "rap-2")
    robots = {v.robot.robot_id: v.robot.group_id for v in await fleet.list_robots(ADMIN)}
    assert robots == {"rap-1": None, "rap-2": None, "rap-3": None, "rap-4": "line-b"}
    assert fleet.registry.group_mates("rap-1") == {"rap-1"}
    assert [v.group.group_id for v in (await fleet.list_groups(ADMIN)).groups] == ["line-b"]


async def test_overview_counts_robots_and_lists_every_groups_switch(fleet: FleetService) -> None:
    await _line(fleet)
    await fleet.set_self_improve(ADMIN, True, group="line-b")
    ov = await fleet.overview(ADMIN)
    assert (ov.robots, ov.grouped, ov.ungrouped, ov.global_self_improve) == (4, 3, 1, False)
    assert {v.group.group_id: v.effective_self_improve for v in ov.groups} == {"line-a": False, "line-b": True}


# ---------------------------------------------------------------------------- §6a: a robot token
async def test_a_robot_token_registers_and_describes_only_itself(fleet: FleetService) -> None:
    view, created = await fleet.register_robot(RAP1, "rap-1", name="me")
    assert created
    assert view.robot.name == "me"
    await fleet.set_robot_meta(RAP1, "rap-1", meta={"site": "lyon"})
    with pytest.raises(Forbidden):
        await fleet.register_robot(RAP1, "rap-2")
    await fleet.register_robot(ADMIN, "rap-2")
    with pytest.raises(Forbidden):
        await fleet.set_robot_meta(RAP1, "rap-2", name="hijacked")


async def test_a_robot_token_cannot_put_itself_into_a_group(fleet: FleetService) -> None:
    await _line(fleet)
    with pytest.raises(Forbidden):
        await fleet.register_robot(RAP1, "rap-1", group="line-b")
    view, _ = await fleet.register_robot(RAP1, "rap-1", group="line-a")
    assert view.robot.group_id == "line-a", "re-stating its current group is fine"


async def test_a_robot_token_sees_only_its_own_group(fleet: FleetService) -> None:
    await _line(fleet)
    assert [v.robot.robot_id for v in await fleet.list_robots(RAP1)] == ["rap-1", "rap-2"]
    assert await fleet.list_robots(RAP1, group="line-b") == []
    assert await fleet.list_robots(RAP1, group="no-such-group") == [], "filtered, not revealed"
    assert [v.group.group_id for v in (await fleet.list_groups(RAP1)).groups] == ["line-a"]
    loner = Principal.robot("rap-3")
    assert [v.robot.robot_id for v in await fleet.list_robots(loner)] == ["rap-3"]
    assert (await fleet.list_groups(loner)).groups == []
    ov = await fleet.overview(RAP1)
    assert (ov.robots, [g.group.group_id for g in ov.groups]) == (2, ["line-a"])


async def test_fleet_administration_is_forbidden_to_a_robot_token(fleet: FleetService) -> None:
    await _line(fleet)
    with pytest.raises(Forbidden):
        await fleet.set_group(RAP1, "rap-1", "line-b")
    with pytest.raises(Forbidden):
        await fleet.upsert_group(RAP1, "line-c")
    with pytest.raises(Forbidden):
        await fleet.delete_group(RAP1, "line-a")
    with pytest.raises(Forbidden):
        await fleet.set_self_improve(RAP1, True)
    with pytest.raises(Forbidden):
        await fleet.set_self_improve(RAP1, True, group="line-a")
    assert fleet.registry.group_mates("rap-1") == {"rap-1", "rap-2"}


# ---------------------------------------------------------------------------- another process, same data dir
async def test_a_fleet_change_made_by_another_process_reaches_this_ones_tenancy(memory: Memory) -> None:
    """`web` beside `serve` on one data directory: a robot moved out of a group through one kept
    seeing that group's documents through the other until it restarted."""
    await _line(memory.fleet)
    other = Memory.open(memory.settings)  # another process's connections and registry
    try:
        assert other.fleet_registry.group_mates("rap-1") == {"rap-1", "rap-2"}
        await other.fleet.set_group(ADMIN, "rap-2", "")
        await other.fleet.set_self_improve(ADMIN, True)
        registry = memory.fleet_registry
        assert registry.group_mates("rap-1") == {"rap-1", "rap-2"}  # not looked yet
        registry.refresh()
        assert registry.group_mates("rap-1") == {"rap-1"}
        assert registry.self_improve_for("rap-3") is True
        await other.fleet.register_robot(ADMIN, "rap-9", group="line-a")  # and the background look
        assert eventually(lambda: registry.group_mates("rap-1") == {"rap-1", "rap-9"}, 30)
    finally:
        other.close()


async def test_a_look_never_replaces_a_snapshot_this_process_installed_after_it_read(memory: Memory) -> None:
    await _line(memory.fleet)
    registry = memory.fleet_registry
    stale = registry.snapshot
    read = registry.db.read_blocking

    def slow_read(fn: Any) -> Any:  # this process writes between the look's read and its install
        got = read(fn)
        registry._install(replace(stale, generation=stale.generation + 100, global_self_improve=True))
        return got

    registry.db.read_blocking = slow_read  # type: ignore[method-assign]
    try:
        with sqlite3.connect(memory.settings.index_path) as conn:  # another process's write
            conn.execute("UPDATE fleet_robots SET group_id = NULL WHERE robot_id = 'rap-2'")
        registry.refresh()
    finally:
        registry.db.read_blocking = read  # type: ignore[method-assign]
    assert registry.snapshot.generation == stale.generation + 100


async def test_a_look_set_aside_for_a_newer_own_write_looks_again(memory: Memory) -> None:
    """A look discarded because a write of this process installed its snapshot meanwhile still
    counted as seen: another process's write it had read was never installed on a quiet server."""
    await _line(memory.fleet)
    registry = memory.fleet_registry
    store = registry.db
    seen = registry.refresh(None)

    def own(c: sqlite3.Connection) -> Any:  # a write of ours, its snapshot not installed yet
        c.execute("INSERT INTO fleet_robots(robot_id, created, updated) VALUES ('rap-0', 'x', 'x')")
        return load_snapshot(c, next(registry._generations))

    own_snap = store.write_blocking(own)
    with sqlite3.connect(memory.settings.index_path) as conn:  # then another process's
        conn.execute("UPDATE fleet_robots SET group_id = 'line-b' WHERE robot_id = 'rap-3'")
    read = store.read_blocking

    def read_then_install(fn: Any) -> Any:
        got = read(fn)
        registry._install(own_snap)
        return got

    store.read_blocking = read_then_install  # type: ignore[method-assign]
    try:
        seen = registry.refresh(seen)
    finally:
        store.read_blocking = read  # type: ignore[method-assign]
    registry.refresh(seen)  # the next look, nothing else committed
    assert registry.group_of("rap-3") == "line-b"
