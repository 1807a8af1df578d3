"""Readiness: whether this server can serve its stores now (``GET /readyz``).

``/healthz`` answers liveness — the process runs and its event loop answers — and stays ok with a
damaged database, so a supervisor does not restart a server into the same file in a loop.
Readiness reads each store for real: through one of the server's own readers (what the tools
use) and on a connection of its own (what the file holds now, past any page cache), with an
integrity check on a small file (`ports.OperatorStore.probe`). A store that cannot serve fails readiness
and the answer names it and the next step. The embedder is reported but never fails it: without
it search is keyword-only, which still serves.

The answer is public (a load balancer's probe carries no token), so it names stores by file
name only — never a path, SQL or an exception's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory.operations.ports import Installation

#: What an operator does when a store cannot serve (docs/operations.md, "When the database is damaged").
NEXT_STEP = (
    "run `robot-mcp-memory doctor` on the server; if it reports damage, stop the server and restore "
    "the file from a backup (`robot-mcp-memory backup` makes one), see docs/operations.md"
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Readiness:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def next_step(self) -> str | None:
        return None if self.ok else NEXT_STEP


async def readiness(memory: Installation) -> Readiness:
    stores = await memory.operations.probe()
    checks = [Check(s.name, s.problem is None, "reads" if s.problem is None else s.problem) for s in stores]
    checks.append(_embedder(memory))
    return Readiness(tuple(checks))


def _embedder(memory: Installation) -> Check:
    emb = memory.embedder
    mode = "off" if emb is None else emb.mode
    if mode == "unavailable":
        return Check("embedder", True, "unavailable: search is keyword-only until it loads (see the server log)")
    return Check("embedder", True, mode)
