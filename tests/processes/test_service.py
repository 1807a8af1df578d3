"""ProcessService's rules, run against every `ProcessRepository`: the SQLite adapter, the
PostgreSQL one and a toy in-memory one (`toy_repository`). The same tests pass on all, so the
service depends on the port alone — a second backend plugs in without touching the service."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import Forbidden, InvalidInput, NotFound
from robot_mcp_memory.processes.docmodel import OUTCOME_HEADING
from robot_mcp_memory.processes.ports import ProcessRepository
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.processes.service import ProcessService
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import ADMIN, SHARED, Principal
from tests.conftest import doc
from tests.processes.toy_repository import ToyProcessRepository

GROUPS = {"r1": frozenset({"r1", "r2"}), "r2": frozenset({"r1", "r2"}), "r3": frozenset({"r3"})}
R1, R3 = Principal.robot("r1"), Principal.robot("r3")


class StaticMembership:
    def group_mates(self, robot_id: str) -> frozenset[str]:
        return GROUPS.get(robot_id, frozenset({robot_id}))

    def group_of(self, robot_id: str) -> str | None:
        return "g12" if robot_id in ("r1", "r2") else None


def _clock() -> Iterator[str]:
    for n in itertools.count():
        yield f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "toy"])
def repository(request: pytest.FixtureRequest) -> ProcessRepository:
    if request.param == "sqlite":
        memory: Memory = request.getfixturevalue("memory")
        return memory.process_store
    if request.param == "postgres":
        return PostgresProcesses(request.getfixturevalue("pg_store"))
    ticks = _clock()
    return ToyProcessRepository(lambda: next(ticks))


@pytest.fixture
def service(repository: ProcessRepository) -> ProcessService:
    return ProcessService(repository, Policy(StaticMembership()))


MOP = doc("mop-hall-floor", "Mop the floor in the hall", "## Steps\n1. fill the bucket\n2. mop the hall floor\n")
COFFEE = doc("deliver-coffee", "Deliver coffee to the office", "## Steps\n1. carry the cup to the office\n")


async def test_a_saved_document_reads_back_and_a_resave_keeps_its_counters(service: ProcessService) -> None:
    saved = await service.save(ADMIN, MOP)
    assert (saved.action, saved.doc.id) == ("created", "mop-hall-floor")
    await service.record_outcome(ADMIN, "mop-hall-floor", True)
    await service.record_outcome(ADMIN, "mop-hall-floor", False)
    again = await service.save(ADMIN, MOP.replace("fill the bucket", "fill the bucket with warm water"))
    assert again.action == "updated"
    stored = await service.get(ADMIN, "mop-hall-floor")
    assert "warm water" in stored.body
    assert (stored.success_count, stored.failure_count) == (1, 1)


async def test_a_save_from_another_mission_forks_instead_of_overwriting(service: ProcessService) -> None:
    await service.save(ADMIN, MOP.replace("---\n", "---\nsource_mission_id: m-1\n", 1))
    forked = await service.save(ADMIN, MOP.replace("---\n", "---\nsource_mission_id: m-2\n", 1))
    assert (forked.action, forked.doc.id) == ("forked", "mop-hall-floor-2")
    assert (await service.list(ADMIN))[1] == 2


async def test_a_robot_cannot_overwrite_another_groups_document_it_forks(service: ProcessService) -> None:
    await service.save(R3, MOP)
    saved = await service.save(R1, MOP.replace("fill the bucket", "grab a mop"))
    assert saved.action == "forked"
    assert saved.doc.robot == "r1"
    assert "grab a mop" not in (await service.get(ADMIN, "mop-hall-floor")).body


async def test_an_outcome_note_lands_in_the_outcome_log(service: ProcessService) -> None:
    await service.save(ADMIN, MOP)
    after = await service.record_outcome(ADMIN, "mop-hall-floor", False, note="bucket was empty")
    assert after.failure_count == 1
    assert OUTCOME_HEADING in after.body
    assert "bucket was empty" in after.body


async def test_a_robot_sees_its_groups_and_shared_documents_only(service: ProcessService) -> None:
    await service.save(R1, MOP)
    await service.save(R3, COFFEE)
    await service.save(ADMIN, doc("charge-at-dock", "Charge at the dock", "go to the dock", robot=SHARED))
    mates = Principal.robot("r2")
    assert {d.id for d in (await service.list(mates))[0]} == {"mop-hall-floor", "charge-at-dock"}
    assert (await service.list(R3))[1] == 2
    with pytest.raises(NotFound):
        await service.get(R3, "mop-hall-floor")
    found = await service.find(R3, "mop the hall floor", k=5)
    assert "mop-hall-floor" not in {h.doc.id for h in found.hits}
    assert (await service.find(mates, "mop the hall floor", k=5)).hits[0].doc.id == "mop-hall-floor"


async def test_find_ranks_the_reliable_of_two_identical_documents_first(service: ProcessService) -> None:
    await service.save(ADMIN, MOP)
    await service.save(ADMIN, MOP.replace("mop-hall-floor", "mop-hall-floor-again"))
    for _ in range(5):
        await service.record_outcome(ADMIN, "mop-hall-floor", False)
        await service.record_outcome(ADMIN, "mop-hall-floor-again", True)
    found = await service.find(ADMIN, "mop the hall floor", k=2)
    assert [h.doc.id for h in found.hits] == ["mop-hall-floor-again", "mop-hall-floor"]
    assert found.hits[0].score > found.hits[1].score


async def test_list_pages_through_every_visible_document_once(service: ProcessService) -> None:
    for n in range(7):
        await service.save(ADMIN, doc(f"task-{n}", f"Task number {n}", "do it"))
    first, total = await service.list(ADMIN, limit=4)
    rest, _ = await service.list(ADMIN, limit=4, offset=4)
    assert total == 7
    assert len({d.id for d in first} | {d.id for d in rest}) == 7
    with pytest.raises(InvalidInput):
        await service.list(ADMIN, order="random")


async def test_deleting_needs_visibility_and_shared_documents_need_an_operator(service: ProcessService) -> None:
    await service.save(ADMIN, doc("charge-at-dock", "Charge at the dock", "go to the dock", robot=SHARED))
    with pytest.raises(Forbidden):
        await service.delete(R1, "charge-at-dock")
    await service.delete(ADMIN, "charge-at-dock")
    with pytest.raises(NotFound):
        await service.get(ADMIN, "charge-at-dock")


async def test_find_refuses_k_out_of_range(service: ProcessService) -> None:
    with pytest.raises(InvalidInput):
        await service.find(ADMIN, "anything", k=0)
