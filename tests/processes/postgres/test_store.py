"""The PostgreSQL process store as replicas use it: outcomes and saves from several at once."""

from __future__ import annotations

import asyncio

import pytest

from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Author
from robot_mcp_memory.processes.postgres.store import PostgresProcesses
from robot_mcp_memory.storage.postgres import PostgresStore

pytestmark = pytest.mark.postgres

MOP = ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared")


async def test_outcomes_from_two_replicas_at_once_are_all_counted_and_recorded(
    pg_store: PostgresStore, pg_url: str
) -> None:
    other = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=4)
    try:
        one, two = PostgresProcesses(pg_store), PostgresProcesses(other)
        await one.save(MOP)
        by = Author("rap-1", "group:a")
        await asyncio.gather(
            *(repo.record_outcome("mop-hall", n % 4 != 0, by=by) for n in range(10) for repo in (one, two))
        )
    finally:
        other.close()
    doc = await one.get("mop-hall")
    assert doc is not None
    assert (doc.success_count, doc.failure_count) == (14, 6)
    records = (await one.outcomes(["mop-hall"]))["mop-hall"]
    assert len(records) == 20
    [(view, fleet, _)] = await one.views([doc], "group:b")
    assert (view.success_count, view.failure_count, fleet) == (0, 0, (14, 6)), "group a's outcomes are not b's"


async def test_the_same_document_saved_by_two_replicas_at_once_is_one_document_and_one_fork(
    pg_store: PostgresStore, pg_url: str
) -> None:
    other = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=2)
    try:
        one, two = PostgresProcesses(pg_store), PostgresProcesses(other)
        first = MOP.model_copy(update={"source_mission_id": "m-1", "robot": "rap-1"})
        second = MOP.model_copy(update={"source_mission_id": "m-2", "robot": "rap-1"})
        saved = await asyncio.gather(one.save(first), two.save(second))
    finally:
        other.close()
    assert sorted(s.action for s in saved) == ["created", "forked"]
    assert sorted(s.doc.id for s in saved) == ["mop-hall", "mop-hall-2"]
    assert (await one.list())[1] == 2
