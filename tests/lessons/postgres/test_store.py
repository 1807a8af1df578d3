"""The PostgreSQL lesson store as replicas use it: reports of one lesson from several at once."""

from __future__ import annotations

import asyncio

import pytest

from robot_mcp_memory.lessons.postgres.store import PostgresLessons
from robot_mcp_memory.storage.postgres import PostgresStore

pytestmark = pytest.mark.postgres

GRIP = {"grip_force": 0.3}


async def test_concurrent_reports_from_two_replicas_lose_no_outcome_and_create_one_lesson(
    pg_store: PostgresStore, pg_url: str
) -> None:
    other = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=4)
    try:
        one, two = PostgresLessons(pg_store), PostgresLessons(other)
        reports = [
            store.record("group:g", "grasp/mug", "", GRIP, n % 3 != 0, "rap-1")
            for n in range(12)
            for store in (one, two)
        ]
        stored = await asyncio.gather(*reports)
    finally:
        other.close()
    assert [s.action for s in stored if s is not None].count("created") == 1
    [lesson] = await one.for_key(["group:g"], "grasp/mug")
    assert (lesson.success_count, lesson.failure_count) == (16, 8)


async def test_a_failure_of_other_params_changes_nothing_and_true_is_not_one(pg_store: PostgresStore) -> None:
    store = PostgresLessons(pg_store)
    await store.record("solo:r", "k", "", {"use_suction": True}, True, "r")
    assert await store.record("solo:r", "k", "", {"use_suction": 1}, False, "r") is None
    replaced = await store.record("solo:r", "k", "", {"use_suction": 1}, True, "r")
    assert replaced is not None
    assert (replaced.action, replaced.lesson.params, replaced.lesson.success_count) == (
        "replaced",
        {"use_suction": 1},
        1,
    )
