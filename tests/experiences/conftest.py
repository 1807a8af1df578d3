from __future__ import annotations

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.principal import ADMIN


async def put_in_group(memory: Memory, group: str, *robots: str) -> None:
    await memory.fleet.upsert_group(ADMIN, group)
    for r in robots:
        await memory.fleet.register_robot(ADMIN, r, group=group)


def shared_writer(memory: Memory) -> ExperienceService:
    """The service as an operator tool writing fleet-wide ('shared') memories would use it."""
    svc = memory.experiences
    return ExperienceService(svc.store, svc.policy, default_robot="shared")


def age(memory: Memory, memory_id: int, days: float) -> None:
    """Make a memory `days` older (as if learned then), straight in the database."""
    memory.index.write_blocking(
        lambda c: c.execute("UPDATE memories SET updated_at = updated_at - ? WHERE id = ?", (days * 86400, memory_id))
    )
