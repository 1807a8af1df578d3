"""What the PostgreSQL experience adapter adds to the ports' contract: replicas sharing a schema
(migrations once, concurrent learns of one experience leave one memory), access counters written
without waiting, the blocking twin, and the one value PostgreSQL cannot store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.postgres.tables import COMPONENT, MIGRATIONS
from robot_mcp_memory.experiences.service import ExperienceService, run_sync
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import Principal

pytestmark = pytest.mark.postgres

R1 = Principal.robot("r1")


@pytest.fixture
def repo(pg_store: PostgresStore) -> Iterator[PostgresMemories]:
    r = PostgresMemories(pg_store)
    yield r
    r.close()


def _service(repo: PostgresMemories) -> ExperienceService:
    return ExperienceService(repo, Policy(SoloMembership()), default_robot="tester")


def _count(store: PostgresStore) -> int:
    row = store.read_blocking(lambda c: c.execute("SELECT count(*) FROM memories").fetchone())
    return int(row[0]) if row else 0


def test_a_second_replica_on_the_schema_migrates_nothing(repo: PostgresMemories) -> None:
    again = repo.db.migrate(COMPONENT, MIGRATIONS)
    assert again.from_version == again.to_version == len(MIGRATIONS)


async def test_concurrent_learns_of_one_experience_leave_one_memory(repo: PostgresMemories) -> None:
    """Two replicas (two adapters, one schema) learn the same fact at once, many times over."""
    other = PostgresMemories(repo.db, migrate=False)
    first, second = _service(repo), _service(other)
    for k in range(12):
        text = f"the lift in wing {k} stops at every floor"
        a, b = await asyncio.gather(first.learn(R1, text), second.learn(R1, text))
        assert sorted((a.status, b.status)) == ["created", "duplicate"]
        assert a.memory_id == b.memory_id
    assert _count(repo.db) == 12


async def test_recall_counts_accesses_without_waiting_and_close_writes_them(repo: PostgresMemories) -> None:
    svc = _service(repo)
    m = await svc.learn(R1, "the dock is behind the blue door")
    for _ in range(3):
        assert [h.memory.id for h in (await svc.recall(R1, "blue door")).hits] == [m.memory_id]
    repo.close()
    got = await svc.get(R1, m.memory_id)
    assert got.access_count == 3
    assert got.last_accessed is not None


def test_the_blocking_twin_completes_every_call_without_an_event_loop(repo: PostgresMemories) -> None:
    svc = _service(repo).blocking()
    assert svc.store.blocking
    learned = run_sync(svc.learn(R1, "the charger in bay 3 is slow"))
    found = run_sync(svc.recall(R1, "charger bay"))
    assert [h.memory.id for h in found.hits] == [learned.memory_id]


async def test_a_text_holding_u0000_is_refused_and_nothing_is_stored(repo: PostgresMemories) -> None:
    svc = _service(repo)
    with pytest.raises(InvalidInput):
        await svc.learn(R1, "the bin\x00 is full")
    with pytest.raises(InvalidInput):
        await svc.learn(R1, "the bin is full", {"task": {"name": "b\x00in"}})
    assert _count(repo.db) == 0
    m = await svc.learn(R1, "the bin is full", {"note": "ok"})
    with pytest.raises(InvalidInput):
        await svc.forget(R1, m.memory_id, "emptied\x00")
    assert (await svc.get(R1, m.memory_id)).status == "active"
