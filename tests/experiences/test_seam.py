"""ExperienceService's rules, run against every `MemoryRepository`: the SQLite adapter, the
PostgreSQL one and a toy in-memory one (`toy_memories`, with its own evaluator of the filter tree).
The same tests pass on all, so the service and its recall plan depend on the ports alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import Forbidden, InvalidInput, NotFound
from robot_mcp_memory.experiences.ports import MemoryRepository
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import STDIO, Principal
from tests.experiences.toy_memories import ToyMemories

R1, R3 = Principal.robot("r1"), Principal.robot("r3")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "toy"])
def repository(request: pytest.FixtureRequest) -> Iterator[MemoryRepository]:
    if request.param == "sqlite":
        memory: Memory = request.getfixturevalue("memory")
        yield memory.memories
    elif request.param == "postgres":
        pg = PostgresMemories(request.getfixturevalue("pg_store"))
        yield pg
        pg.close()
    else:
        yield ToyMemories()


@pytest.fixture
def service(repository: MemoryRepository) -> ExperienceService:
    return ExperienceService(repository, Policy(SoloMembership()), default_robot="tester")


async def test_an_exact_repeat_is_a_duplicate_and_other_numbers_are_not(service: ExperienceService) -> None:
    first = await service.learn(R1, "grip the mug with 12 N", {"task": {"success": True}})
    again = await service.learn(R1, "grip the mug with 12 N", {"task": {"success": True}})
    other = await service.learn(R1, "grip the mug with 15 N", {"task": {"success": True}})
    assert (first.status, again.status, other.status) == ("created", "duplicate", "created")
    assert again.memory_id == first.memory_id


async def test_recall_filters_by_the_context_filter_before_ranking(service: ExperienceService) -> None:
    ok = await service.learn(R1, "the mug slips when wet", {"task": {"success": True}, "params": {"force": 12}})
    one = await service.learn(R1, "the mug slips off the tray", {"task": {"success": 1.0}, "params": {"force": 20}})
    bad = await service.learn(R1, "the mug slips on the shelf", {"task": {"success": False}})
    found = await service.recall(R1, "mug slips", n=10, context_filter={"task.success": True})
    assert {h.memory.id for h in found.hits} == {ok.memory_id, one.memory_id}  # true == 1
    assert found.mode == "keyword"
    ranged = await service.recall(R1, "", n=10, context_filter={"params.force": {"$gte": 10, "$lt": 15}})
    assert [h.memory.id for h in ranged.hits] == [ok.memory_id]
    assert ranged.mode == "filter"
    missing = await service.recall(R1, "", n=10, context_filter={"params": {"$exists": False}})
    assert [h.memory.id for h in missing.hits] == [bad.memory_id]
    with pytest.raises(InvalidInput):
        await service.recall(R1, "!!!", context_filter={"x": {"$gt": True}})  # refused even with nothing to search


async def test_a_robot_sees_and_changes_only_its_own_memories(service: ExperienceService) -> None:
    mine = await service.learn(R1, "the lift door closes after 8 s")
    with pytest.raises(NotFound):
        await service.get(R3, mine.memory_id)
    assert (await service.recall(R3, "lift door")).hits == []
    shared = await ExperienceService(service.store, service.policy, default_robot="shared").learn(
        STDIO, "the fleet charger is in bay 2"
    )
    with pytest.raises(Forbidden):
        await service.forget(R1, shared.memory_id, "not mine")
    await service.forget(R1, mine.memory_id, "the door was fixed")
    assert (await service.recall(R1, "lift door")).hits == []
    with pytest.raises(NotFound):
        await service.forget(R1, mine.memory_id, "again")


async def test_an_update_replaces_the_content_recall_finds(service: ExperienceService) -> None:
    m = await service.learn(R1, "the shelf is 40 cm deep")
    updated = await service.update(R1, m.memory_id, "the shelf is 45 cm deep")
    assert (updated.old_content, updated.memory.content) == ("the shelf is 40 cm deep", "the shelf is 45 cm deep")
    assert [h.memory.content for h in (await service.recall(R1, "shelf deep")).hits] == ["the shelf is 45 cm deep"]


async def test_a_refused_batch_stores_nothing_and_sessions_are_their_robots(service: ExperienceService) -> None:
    with pytest.raises(NotFound):
        await service.learn_batch(R1, [("the bin is full", None, "default", None), ("x y", None, "default", "nope")])
    assert (await service.recall(R1, "bin full")).hits == []
    s = await service.start_session(R1, "kitchen")
    assert (await service.get_session(R1, s.id)).robot == "r1"
    with pytest.raises(NotFound):
        await service.get_session(R3, s.id)
    learned = await service.learn(R1, "the kettle is on the left", collection="kitchen", session_id=s.id)
    assert learned.status == "created"
    found = await service.recall(R1, "kettle", collection="kitchen", session_id=s.id)
    assert [h.memory.id for h in found.hits] == [learned.memory_id]
    with pytest.raises(NotFound):  # another robot's session
        await service.learn(R3, "the kettle is hot", collection="kitchen", session_id=s.id)
