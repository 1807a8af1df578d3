"""Who is calling. Every service method takes a `Principal` as an argument — there is no ambient
"current tenant". Adapters build it: stdio is always unscoped; HTTP transports derive it from the
bearer token of the request that carried the call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Via = Literal["stdio", "admin", "open", "robot", "local"]


@dataclass(frozen=True)
class Principal:
    """`robot_id` is None for an unscoped caller (admin token, stdio, open transport, CLI)."""

    via: Via
    robot_id: str | None = None

    @property
    def scoped(self) -> bool:
        return self.robot_id is not None

    @property
    def label(self) -> str:
        return self.robot_id if self.robot_id is not None else self.via

    @classmethod
    def robot(cls, robot_id: str) -> Principal:
        return cls("robot", robot_id)


STDIO = Principal("stdio")
ADMIN = Principal("admin")
OPEN = Principal("open")
LOCAL = Principal("local")
SHARED = "shared"
#: The robot a row carries when nothing said whose it is (``ROBOT_ID`` unset, an open server):
#: no robot token reads it until an operator hands it over (`operations.handover`).
UNKNOWN = "unknown"
