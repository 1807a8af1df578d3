"""The fleet's values: robots, groups, the membership snapshot, and the id rules (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.tenancy import tokens
from robot_mcp_memory.tenancy.tokens import ROBOT_RE

ID_RULE = "1-64 characters of letters, digits, '_', '.' or '-', starting with a letter or digit"
RESERVED_ROBOT_IDS = tokens.RESERVED_ROBOT_IDS  # {SHARED, "unknown"}: a token for them is refused at startup
MAX_TEXT = 200
MAX_META_BYTES = 16_384


# ---------------------------------------------------------------------------- ids
def check_robot_id(value: str) -> str:
    """The robot id, stripped, or `InvalidInput` saying the rule."""
    rid = value.strip()
    if not ROBOT_RE.match(rid):
        raise InvalidInput(f"invalid robot id {value[:80]!r}: use {ID_RULE} (e.g. 'rap-1')")
    if rid.lower() in RESERVED_ROBOT_IDS:
        raise InvalidInput(f"'{rid}' is reserved ('shared' marks fleet-wide documents, 'unknown' no provenance)")
    return rid


def check_group_id(value: str) -> str:
    gid = value.strip()
    if not ROBOT_RE.match(gid):
        raise InvalidInput(f"invalid group id {value[:80]!r}: use {ID_RULE} (e.g. 'acme-line-2')")
    return gid


# ---------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Robot:
    robot_id: str
    name: str
    group_id: str | None
    meta: dict[str, Any]
    created: str
    updated: str


@dataclass(frozen=True)
class Group:
    group_id: str
    name: str
    customer: str
    factory: str
    #: The group's own setting; None means it follows the global toggle.
    self_improve: bool | None
    created: str
    updated: str
    robots: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """Membership and switches as of one committed fleet write (`generation` orders them)."""

    generation: int
    robot_groups: Mapping[str, str | None] = field(default_factory=dict)
    group_settings: Mapping[str, bool | None] = field(default_factory=dict)
    members: Mapping[str, frozenset[str]] = field(default_factory=dict)
    global_self_improve: bool = False


class SnapshotMembership:
    """The membership questions every fleet adapter answers from its current `snapshot`, with no
    I/O. Each answer reads the snapshot once, so it is one committed write's view even while a
    newer snapshot is being installed."""

    @property
    def snapshot(self) -> Snapshot:
        raise NotImplementedError

    def group_mates(self, robot_id: str) -> frozenset[str]:
        """The robots in `robot_id`'s group, itself included ({robot_id} when ungrouped or unknown)."""
        snap = self.snapshot
        group = snap.robot_groups.get(robot_id)
        if group is None:
            return frozenset({robot_id})
        return snap.members.get(group, frozenset()) | {robot_id}

    def is_registered(self, robot_id: str) -> bool:
        return robot_id in self.snapshot.robot_groups

    def group_of(self, robot_id: str) -> str | None:
        return self.snapshot.robot_groups.get(robot_id)

    def group_exists(self, group_id: str) -> bool:
        return group_id in self.snapshot.group_settings

    def self_improve_for(self, robot_id: str) -> bool:
        """The robot's group's own setting if it has one, else the global toggle."""
        snap = self.snapshot
        group = snap.robot_groups.get(robot_id)
        own = snap.group_settings.get(group) if group is not None else None
        return snap.global_self_improve if own is None else own

    def effective_self_improve(self, group_id: str | None) -> bool:
        snap = self.snapshot
        own = snap.group_settings.get(group_id) if group_id is not None else None
        return snap.global_self_improve if own is None else own
