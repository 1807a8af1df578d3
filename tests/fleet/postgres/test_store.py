"""The PostgreSQL fleet registry as replicas use it: several registries on one schema."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from robot_mcp_memory.errors import Conflict
from robot_mcp_memory.fleet.postgres.store import PostgresFleet
from robot_mcp_memory.fleet.service import FleetService
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import ADMIN
from tests.conftest import eventually

pytestmark = pytest.mark.postgres


@pytest.fixture
def replicas(pg_store: PostgresStore, pg_url: str) -> Iterator[tuple[FleetService, FleetService]]:
    """Two replicas: each its own pool and registry on the same schema (fast background looks)."""
    other_store = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=2)
    a, b = PostgresFleet(pg_store, refresh_s=0.05), PostgresFleet(other_store, refresh_s=0.05)
    try:
        yield FleetService(a, Policy(membership=a)), FleetService(b, Policy(membership=b))
    finally:
        a.close()
        b.close()
        other_store.close()


async def test_a_fleet_write_on_one_replica_reaches_the_others_membership(
    replicas: tuple[FleetService, FleetService],
) -> None:
    one, two = replicas
    await one.upsert_group(ADMIN, "line-a")
    await one.register_robot(ADMIN, "rap-1", group="line-a")
    await one.register_robot(ADMIN, "rap-2", group="line-a")
    assert one.registry.group_mates("rap-1") == {"rap-1", "rap-2"}, "its own write: at once"
    assert eventually(lambda: two.registry.group_mates("rap-1") == {"rap-1", "rap-2"})
    await two.set_group(ADMIN, "rap-2", "")
    await two.set_self_improve(ADMIN, True)
    assert eventually(lambda: one.registry.group_mates("rap-1") == {"rap-1"} and one.registry.self_improve_for("rap-1"))


async def test_an_older_snapshot_never_replaces_a_newer_one(replicas: tuple[FleetService, FleetService]) -> None:
    one, two = replicas
    await one.upsert_group(ADMIN, "line-a")
    registry = two.registry
    assert isinstance(registry, PostgresFleet)
    assert eventually(lambda: registry.group_exists("line-a"))
    newer = registry.snapshot
    older = type(newer)(generation=newer.generation - 1)
    assert not registry._install(older)
    assert registry.snapshot is newer


async def test_two_replicas_registering_case_twins_at_once_leave_one_robot(
    replicas: tuple[FleetService, FleetService],
) -> None:
    one, two = replicas
    results = await asyncio.gather(
        one.register_robot(ADMIN, "RAP-1"), two.register_robot(ADMIN, "rap-1"), return_exceptions=True
    )
    assert sorted(type(r).__name__ for r in results) == ["Conflict", "tuple"]
    assert len(await one.list_robots(ADMIN)) == 1
    with pytest.raises(Conflict):
        await two.register_robot(ADMIN, "Rap-1")


async def test_a_fleet_write_whose_caller_is_cancelled_still_commits_and_updates_membership(
    pg_store: PostgresStore, pg_url: str
) -> None:
    registry = PostgresFleet(pg_store)
    fleet = FleetService(registry, Policy(membership=registry))
    try:
        await fleet.upsert_group(ADMIN, "line-a")
        await fleet.register_robot(ADMIN, "rap-1", group="line-a")
        await fleet.register_robot(ADMIN, "rap-3")
        with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as watcher:
            # another replica's fleet write, in progress: it holds the fleet's lock
            holder.execute(f"UPDATE {pg_store.schema}.fleet_state SET version = version WHERE id = 1")  # noqa: S608
            task = asyncio.create_task(fleet.set_group(ADMIN, "rap-3", "line-a"))

            def waiting() -> bool:
                rows = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                ).fetchone()
                return rows is not None and rows[0] > 0

            for _ in range(1000):  # bounded: the write reaches the lock within a few loop turns
                await asyncio.sleep(0.01)
                if waiting():
                    break
            assert waiting(), "the write should wait for the other replica's lock"
            task.cancel()
            holder.commit()
        for _ in range(1000):  # bounded: the shielded write commits and installs its snapshot
            if "rap-3" in registry.group_mates("rap-1"):
                break
            await asyncio.sleep(0.01)
        assert task.cancelled()
        assert registry.group_mates("rap-1") == {"rap-1", "rap-3"}
        assert [v.robot.group_id for v in await fleet.list_robots(ADMIN) if v.robot.robot_id == "rap-3"] == ["line-a"]
    finally:
        registry.close()


async def test_a_reopened_registry_sees_what_was_written(pg_store: PostgresStore) -> None:
    first = PostgresFleet(pg_store)
    fleet = FleetService(first, Policy(membership=first))
    await fleet.upsert_group(ADMIN, "line-a")
    await fleet.register_robot(ADMIN, "rap-1", group="line-a")
    await fleet.register_robot(ADMIN, "rap-2", group="line-a")
    await fleet.set_self_improve(ADMIN, True)
    first.close()
    again = PostgresFleet(pg_store)
    try:
        assert again.group_mates("rap-2") == {"rap-1", "rap-2"}
        assert again.self_improve_for("rap-3")
    finally:
        again.close()
