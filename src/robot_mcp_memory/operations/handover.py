"""Handing what was saved without provenance to a robot, or to the whole fleet.

A document, memory or session saved on an open server (no tokens), or over stdio without
``ROBOT_ID``, carries robot ``unknown`` (spec §4, §6a). An unscoped caller sees it; once
``MEMORY_ROBOT_TOKENS`` is set, no robot token does — a robot sees its own group and the
fleet-wide ``shared`` rows only. `hand_over` gives every ``unknown`` row to ``shared`` (every robot
reads it, only an operator changes it) or to one robot (its group reads it), in one transaction.
Without `apply` it only counts, so an operator sees what would move first. Lessons never carry
``unknown`` (a lesson call needs a registered robot). Admin only: it changes who may read what.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory import logs
from robot_mcp_memory.errors import InvalidInput, StorageError
from robot_mcp_memory.fleet.model import check_robot_id
from robot_mcp_memory.operations.ports import Installation
from robot_mcp_memory.tenancy.principal import SHARED, UNKNOWN, Principal

_log = logs.get("robot_mcp_memory.handover")

#: The command that applies a hand-over, for messages that tell an operator what to run.
COMMAND = "robot-mcp-memory hand-over --to shared --apply"


@dataclass(frozen=True)
class Handover:
    """What a hand-over moved (`applied`) or would move: rows per kind."""

    to: str
    applied: bool
    processes: int
    memories: int
    sessions: int

    @property
    def total(self) -> int:
        return self.processes + self.memories + self.sessions


def check_target(to: str) -> str:
    """``shared`` or a valid robot id (stripped), else `InvalidInput` saying what to pass."""
    value = to.strip()
    if value == SHARED:
        return value
    if value.lower() == UNKNOWN:
        raise InvalidInput("hand 'unknown' rows to 'shared' (every robot reads them) or to a robot id such as 'rap-1'")
    try:
        return check_robot_id(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{exc.detail}; or 'shared' for the whole fleet") from exc


def log_hint(memory: Installation) -> None:
    """At startup with robot tokens on: a warning naming how many rows no robot token can see,
    and the command that hands them over. Silent when there are none, or without robot tokens
    (an unscoped caller sees ``unknown`` rows)."""
    if not memory.settings.robot_tokens:
        return
    try:
        counts = memory.operations.count_unknown_blocking()
    except StorageError:  # a hint only: a store that cannot be read says so on every call and /readyz
        return
    if any(counts.values()):
        _log.warning(
            "provenance.unknown",
            **counts,
            message="these were saved without a robot (robot 'unknown': before tokens, or over stdio without "
            f"ROBOT_ID) and no robot token can see them; count with `robot-mcp-memory hand-over --to shared`, "
            f"then hand them over with `{COMMAND}` (or --to <robot>), or from the dashboard's Health page",
        )


async def count_unknown(memory: Installation) -> dict[str, int]:
    """Rows per table carrying robot ``unknown`` (no principal: for the startup hint)."""
    return await memory.operations.count_unknown()


async def hand_over(memory: Installation, principal: Principal, to: str, *, apply: bool) -> Handover:
    """Count (``apply=False``) or hand over every ``unknown`` row to `to`."""
    memory.policy.require_admin(principal, "handing over documents without provenance")
    target = check_target(to)
    if apply:
        counts = await memory.operations.hand_over_unknown(target)
    else:
        counts = await count_unknown(memory)
    return Handover(target, apply, counts["processes"], counts["memories"], counts["sessions"])
