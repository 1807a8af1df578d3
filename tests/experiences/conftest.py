from __future__ import annotations

from bench.experience_corpus import corpus

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.tenancy.principal import ADMIN, STDIO, Principal


async def put_in_group(memory: Memory, group: str, *robots: str) -> None:
    await memory.fleet.upsert_group(ADMIN, group)
    for r in robots:
        await memory.fleet.register_robot(ADMIN, r, group=group)


def shared_writer(memory: Memory) -> ExperienceService:
    """The service as an operator tool writing fleet-wide ('shared') memories would use it."""
    svc = memory.experiences
    return ExperienceService(svc.store, svc.policy, default_robot="shared")


def stored_id(memory: Memory, public_id: int) -> int:
    """The stored id of the memory shown as `public_id` (`model.PUBLIC_FROM`), for a hand edit."""
    mid = memory.index.read_blocking(lambda c: storage.stored_id(c, public_id))
    assert mid is not None, f"no memory is shown as {public_id}"
    return mid


def shown_id(memory: Memory, mid: int) -> int:
    """The public id of the memory stored as `mid` (what the service takes)."""
    return memory.index.read_blocking(lambda c: storage.public_ids(c, [mid]))[mid]


def age(memory: Memory, memory_id: int, days: float) -> None:
    """Make a memory (by its public id) `days` older (as if learned then), straight in the database."""
    _age_stored(memory, stored_id(memory, memory_id), days)


def _age_stored(memory: Memory, mid: int, days: float) -> None:
    memory.index.write_blocking(
        lambda c: c.execute("UPDATE memories SET updated_at = updated_at - ? WHERE id = ?", (days * 86400, mid))
    )


async def ranking_corpus(memory: Memory) -> None:
    """1,800 memories for the ranking exactness tests: the bench corpus over two collections, a
    second robot's copies of 300, 29 ties (one sentence with other numbers: the same relevance,
    told apart by weight, age and id), and one memory in seven made up to 400 days older."""
    svc = memory.experiences
    items = list(corpus(1500, seed=7))
    for coll in ("default", "kitchen-lab"):
        mine = [(it.insight, it.context) for it in items if it.collection == coll]
        await svc.learn_many(STDIO, mine, collection=coll)
    await svc.learn_many(Principal.robot("rap-9"), [(it.insight, it.context) for it in items[:300]])
    twins = [(items[0].insight, {**items[0].context, "params": {"grip_force": float(f)}}) for f in range(1, 30)]
    await svc.learn_many(STDIO, twins)
    for mid in range(1, 1800, 7):  # stored ids: the corpus is the whole store
        _age_stored(memory, mid, days=(mid % 400))
