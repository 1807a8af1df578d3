"""The tenancy policy (primary spec §6a), in one place.

Services ask this module what a principal may see and do; tools never decide. The group
structure comes from a `Membership` (the fleet registry): which robots share a robot's group.
"""

from __future__ import annotations

from typing import Protocol

from robot_mcp_memory.errors import Forbidden
from robot_mcp_memory.processes.docmodel import OutcomeEntry
from robot_mcp_memory.tenancy.principal import SHARED, Principal


class Membership(Protocol):
    def group_mates(self, robot_id: str) -> frozenset[str]:
        """The robots in `robot_id`'s group, itself included ({robot_id} when ungrouped)."""
        ...

    def group_of(self, robot_id: str) -> str | None:
        """The group `robot_id` is in, or None when it is ungrouped."""
        ...


class SoloMembership:
    """Every robot alone: the view before the fleet registry is consulted."""

    def group_mates(self, robot_id: str) -> frozenset[str]:
        return frozenset({robot_id})

    def group_of(self, robot_id: str) -> str | None:
        return None


class Policy:
    def __init__(self, membership: Membership | None = None) -> None:
        self.membership: Membership = membership or SoloMembership()

    # ------------------------------------------------------------------ reads
    def visible_robots(self, principal: Principal, robot: str = "") -> frozenset[str] | None:
        """Whose documents a read may return; None means everyone's.

        A scoped caller sees its own group plus fleet-wide ``shared`` documents, whatever `robot`
        says (the argument cannot widen the scope). An unscoped caller sees everything, or — when
        it names a robot — what that robot would see."""
        if principal.robot_id is not None:
            own = self.membership.group_mates(principal.robot_id)
            return own | {SHARED}
        if robot:
            return self.membership.group_mates(robot) | {SHARED}
        return None

    def can_see(self, principal: Principal, owner: str) -> bool:
        vis = self.visible_robots(principal)
        return vis is None or owner in vis

    def sees_activity(self, principal: Principal, owner: str) -> bool:
        """Whether a caller is shown how often and when a memory was recalled: not a robot
        token for a fleet-wide one, whose counters sum every group's recalls."""
        return principal.robot_id is None or owner != SHARED

    # ------------------------------------------------------------------ outcomes
    def tenant(self, principal: Principal) -> str | None:
        """The tenant a robot token's outcomes are attributed to and whose view of fleet-wide
        documents it is shown: ``group:<G>``, or ``solo:<robot>`` when ungrouped. None for an
        unscoped caller, who is shown everything."""
        if principal.robot_id is None:
            return None
        group = self.membership.group_of(principal.robot_id)
        return f"group:{group}" if group is not None else f"solo:{principal.robot_id}"

    def shows_outcome(self, principal: Principal, owner: str, entry: OutcomeEntry) -> bool:
        """Whether an outcome record (its note in the rendered log) is shown to `principal` on a
        document owned by `owner`. On a fleet-wide document a robot token sees its own tenant's
        outcomes and those an operator (an unscoped caller) recorded — never another group's,
        nor lines whose author is not known (written before outcomes were attributed). On its
        group's own documents, and to an unscoped caller, every outcome is shown."""
        tenant = self.tenant(principal)
        if tenant is None or owner != SHARED:
            return True
        return entry.tenant == tenant or (entry.tenant == "" and entry.robot != "")

    # ------------------------------------------------------------------ writes
    def pin_author(self, principal: Principal, robot: str, default_robot: str) -> str:
        """The robot a saved document is attributed to, or `Forbidden`."""
        if principal.robot_id is None:
            return default_robot if robot == "unknown" else robot
        if robot in ("unknown", principal.robot_id):
            return principal.robot_id
        if robot == SHARED:
            raise Forbidden("a robot token cannot write fleet-wide 'shared' documents; ask an operator")
        raise Forbidden(f"a robot token can only save documents for its own robot ({principal.robot_id})")

    def may_overwrite(self, principal: Principal, owner: str) -> bool:
        """Whether saving over an existing document owned by `owner` updates it in place.
        When not, the save forks to a new id instead (so nothing foreign is overwritten and
        nothing about it is revealed)."""
        if principal.robot_id is None:
            return True
        return owner != SHARED and owner in self.membership.group_mates(principal.robot_id)

    def check_delete(self, principal: Principal, owner: str) -> None:
        if principal.robot_id is not None and owner == SHARED:
            raise Forbidden("fleet-wide 'shared' documents serve every robot; only an operator can delete them")

    def require_admin(self, principal: Principal, what: str) -> None:
        if principal.robot_id is not None:
            raise Forbidden(f"{what} is fleet administration; it needs the admin token")

    # ------------------------------------------------------------------ fleet and lessons (§6a)
    def require_self(self, principal: Principal, robot_id: str, what: str) -> None:
        """register_robot / set_robot_meta: a scoped caller may only act on its own robot."""
        if principal.robot_id is not None and robot_id != principal.robot_id:
            raise Forbidden(f"a robot token can only {what} for its own robot ({principal.robot_id})")

    def visible_fleet(self, principal: Principal) -> frozenset[str] | None:
        """The robots list_robots / list_groups may show: a scoped caller its own group (or just
        itself when ungrouped), an unscoped caller everyone (None)."""
        if principal.robot_id is None:
            return None
        return self.membership.group_mates(principal.robot_id)

    def acting_robot(self, principal: Principal, robot: str) -> str:
        """The robot a lesson call acts as: a scoped caller is always itself, whatever `robot`
        says; an unscoped caller acts as the robot it names ('' if it named none)."""
        return principal.robot_id if principal.robot_id is not None else robot
