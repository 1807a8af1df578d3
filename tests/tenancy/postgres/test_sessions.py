"""Browser sessions as replicas share them: two `PostgresStore`s on one schema are two replicas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.principal import ADMIN, Principal

pytestmark = pytest.mark.postgres


@pytest.fixture
def other(pg_store: PostgresStore, pg_url: str) -> Iterator[PostgresStore]:
    """A second replica: its own pool on the same schema."""
    store = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=4)
    yield store
    store.close()


async def test_a_session_made_on_one_replica_is_valid_on_the_other_and_a_logout_on_either_ends_it_on_both(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    one, two = PostgresSessions(pg_store), PostgresSessions(other)
    sid, made = await one.create(Principal.robot("rap-1"))
    found = await two.lookup(sid)
    assert found == made
    kept, _ = await two.create(ADMIN)
    assert await two.end(sid) is True
    assert await one.lookup(sid) is None
    assert await two.lookup(sid) is None
    assert await one.end(sid) is False  # already ended, on the other replica
    assert await one.lookup(kept) is not None  # only that session ended


async def test_concurrent_logins_on_two_replicas_keep_the_per_robot_cap(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    one, two = PostgresSessions(pg_store, per_robot=3), PostgresSessions(other, per_robot=3)
    admin, _ = await one.create(ADMIN)
    made = await asyncio.gather(*(store.create(Principal.robot("a")) for _ in range(8) for store in (one, two)))
    live = [sid for sid, _ in made if await one.lookup(sid) is not None]
    assert len(live) == 3
    assert await one.lookup(admin) is not None
    assert await two.count() == 4


async def test_with_the_database_clock_a_session_lasts_its_ttl_from_now(pg_store: PostgresStore) -> None:
    store = PostgresSessions(pg_store, ttl_s=3600)
    before = time.time()
    sid, made = await store.create(ADMIN)
    assert before - 5 < made.expires_at - 3600 < time.time() + 5  # seconds since the epoch, the database's
    assert await store.lookup(sid) == made
    gone, _ = await PostgresSessions(pg_store, ttl_s=0).create(ADMIN)
    assert await store.lookup(gone) is None  # over at once: the ttl is absolute
    assert await store.count() == 1


async def test_a_row_for_a_principal_this_build_does_not_know_is_refused(pg_store: PostgresStore) -> None:
    store = PostgresSessions(pg_store)
    sid, _ = await store.create(Principal.robot("rap-1"))
    pg_store.write_blocking(lambda c: c.execute("UPDATE web_sessions SET via = 'operator'"))
    assert await store.lookup(sid) is None
    pg_store.write_blocking(lambda c: c.execute("UPDATE web_sessions SET via = 'admin'"))  # admin with a robot id
    assert await store.lookup(sid) is None


def test_a_second_replica_finds_the_table_made_and_migrates_nothing(pg_store: PostgresStore) -> None:
    from robot_mcp_memory.tenancy.postgres.sessions import COMPONENT, MIGRATIONS

    PostgresSessions(pg_store)
    again = pg_store.migrate(COMPONENT, MIGRATIONS)
    assert (again.from_version, again.to_version) == (len(MIGRATIONS), len(MIGRATIONS))
