"""The rules of saving a process (spec §5, save_process) and of a tenant's view of its counters,
backend-neutral and pure.

A backend runs `plan_save` inside its write transaction, with `lookup` reading that transaction's
rows, and then writes the returned document: the decision and the write are one atomic step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Saved
from robot_mcp_memory.tenancy.principal import SHARED


def plan_save(
    doc: ProcessDoc, now: str, lookup: Callable[[str], ProcessDoc | None], writable: Callable[[str], bool]
) -> Saved:
    """Create, update or fork `doc` by the spec's slug-collision rules; `Saved.doc` is what to write.

    - no document with this id → created (counters as given, timestamps filled in);
    - one with this id and the same (or no new) ``source_mission_id`` → updated: the stored
      counters, ``created`` and ``last_used`` are kept, ``updated`` is bumped;
    - one with this id from a *different* mission → forked to ``<id>-2`` (``-3`` …), so one
      teaching run never silently overwrites another's document. A document the caller may
      not overwrite (`writable(owner)` is false) forks the same way.
    """
    existing = lookup(doc.id)
    if existing is None:
        return Saved(doc.model_copy(update={"created": doc.created or now, "updated": now}), "created", doc.id)
    if not writable(existing.robot) or (doc.source_mission_id and doc.source_mission_id != existing.source_mission_id):
        n = 2
        while True:
            candidate = f"{doc.id[: docmodel.MAX_ID - 6].rstrip('-')}-{n}"  # cut at a hyphen: no "--"
            other = lookup(candidate)
            if other is None:
                return Saved(doc.model_copy(update={"id": candidate, "created": now, "updated": now}), "forked", doc.id)
            if other.source_mission_id == doc.source_mission_id and writable(other.robot):
                return _update(other, doc, now, doc.id)
            n += 1
    return _update(existing, doc, now, doc.id)


def _update(existing: ProcessDoc, doc: ProcessDoc, now: str, asked: str) -> Saved:
    stored = doc.model_copy(
        update={
            "id": existing.id,
            "created": existing.created,
            "updated": now,
            "success_count": existing.success_count,
            "failure_count": existing.failure_count,
            "last_used": existing.last_used,
        }
    )
    return Saved(stored, "updated", asked)


def tenant_view(
    docs: list[ProcessDoc], others: Mapping[str, tuple[int, int]]
) -> list[tuple[ProcessDoc, tuple[int, int] | None]]:
    """Each document as one tenant is shown its counters, with the fleet-wide (successes,
    failures) beside a fleet-wide document's. `others` holds, per fleet-wide document, what other
    tenants' robots counted on it: the tenant's view leaves that out (one group's failures never
    rank it down for another); outcomes of unscoped callers, and those counted before outcomes
    were attributed, count for every tenant."""
    out: list[tuple[ProcessDoc, tuple[int, int] | None]] = []
    for d in docs:
        if d.robot != SHARED:
            out.append((d, None))
            continue
        s, f = others.get(d.id, (0, 0))
        view = d.model_copy(
            update={"success_count": max(d.success_count - s, 0), "failure_count": max(d.failure_count - f, 0)}
        )
        out.append((view, (d.success_count, d.failure_count)))
    return out
