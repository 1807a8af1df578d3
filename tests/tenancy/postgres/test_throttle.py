"""The token throttle as replicas share it: two `PostgresStore`s on one schema are two replicas;
threads are many requests at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle

pytestmark = pytest.mark.postgres


@pytest.fixture
def other(pg_store: PostgresStore, pg_url: str) -> Iterator[PostgresStore]:
    """A second replica: its own pool on the same schema."""
    store = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=4)
    yield store
    store.close()


def stored_failures(db: PostgresStore, client: str) -> list[float]:
    row = db.read_blocking(
        lambda c: c.execute("SELECT times FROM auth_failures WHERE client = %s", (client,)).fetchone()
    )
    return [] if row is None else [float(t) for t in row[0]]


def trusted_until(db: PostgresStore, client: str, who: str) -> float | None:
    row = db.read_blocking(
        lambda c: c.execute("SELECT until FROM auth_trust WHERE client = %s AND who = %s", (client, who)).fetchone()
    )
    return None if row is None else float(row[0])


async def test_failures_counted_on_two_replicas_add_up_to_one_lockout(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    now = [100.0]
    one = PostgresThrottle(pg_store, max_failures=6, window_s=60, clock=lambda: now[0])
    two = PostgresThrottle(other, max_failures=6, window_s=60, clock=lambda: now[0])
    for n in range(6):
        assert await (one, two)[n % 2].attempt("10.0.0.9", None) == 0
        now[0] += 1
    assert await one.retry_after("10.0.0.9") == await two.retry_after("10.0.0.9") == 54
    assert await two.attempt("10.0.0.9", None) == await one.attempt("10.0.0.9", None) == 54
    assert len(stored_failures(pg_store, "10.0.0.9")) == 6  # the refused ones did not count


async def test_a_token_trusted_on_one_replica_still_gets_in_on_the_other_while_the_address_is_held(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    now = [0.0]
    one = PostgresThrottle(pg_store, max_failures=2, window_s=10, clock=lambda: now[0])
    two = PostgresThrottle(other, max_failures=2, window_s=10, clock=lambda: now[0])
    assert await one.attempt("10.0.0.3", "admin") == 0
    assert await two.attempt("10.0.0.3", None) == await one.attempt("10.0.0.3", None) == 0
    assert await two.attempt("10.0.0.3", "admin") == 0
    assert await two.attempt("10.0.0.3", "robot:a1") == await two.attempt("10.0.0.3", None) == 10


def test_concurrent_failures_from_threads_on_two_replicas_lose_no_count(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    threads, each = 8, 5
    total = threads * each
    replicas = [PostgresThrottle(s, max_failures=total, window_s=3600, clock=lambda: 50.0) for s in (pg_store, other)]
    start = threading.Barrier(threads)
    waits: list[int] = []

    def guess(n: int) -> None:
        throttle = replicas[n % 2]

        async def run() -> list[int]:
            return [await throttle.attempt("10.2.0.1", None) for _ in range(each)]

        start.wait(timeout=30)
        waits.extend(asyncio.run(run()))

    workers = [threading.Thread(target=guess, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert waits == [0] * total  # every one counted: none was refused before the last
    assert len(stored_failures(pg_store, "10.2.0.1")) == total
    assert not asyncio.run(replicas[0].allows("10.2.0.1"))  # exactly max_failures: held


async def test_a_token_in_steady_use_refreshes_its_trust_once_a_refresh_interval(pg_store: PostgresStore) -> None:
    now = [0.0]
    t = PostgresThrottle(pg_store, trust_s=1000, refresh_s=60, clock=lambda: now[0])
    assert await t.attempt("10.0.0.4", "admin") == 0
    assert trusted_until(pg_store, "10.0.0.4", "admin") == 1000
    now[0] = 59
    assert await t.attempt("10.0.0.4", "admin") == 0
    assert trusted_until(pg_store, "10.0.0.4", "admin") == 1000  # within refresh_s: no write
    now[0] = 61
    assert await t.attempt("10.0.0.4", "admin") == 0
    assert trusted_until(pg_store, "10.0.0.4", "admin") == 1061


async def test_a_held_address_flooding_changes_nothing_stored(pg_store: PostgresStore) -> None:
    now = [0.0]
    t = PostgresThrottle(pg_store, max_failures=3, window_s=100, clock=lambda: now[0])
    for _ in range(3):
        await t.attempt("10.0.0.5", None)
    kept = stored_failures(pg_store, "10.0.0.5")
    for n in range(50):
        now[0] = 1 + n
        assert await t.attempt("10.0.0.5", None) == 100 - now[0]
        assert await t.attempt("10.0.0.5", "robot:a1") == 100 - now[0]
    assert stored_failures(pg_store, "10.0.0.5") == kept
    assert trusted_until(pg_store, "10.0.0.5", "robot:a1") is None


async def test_pruning_deletes_only_what_no_longer_counts(pg_store: PostgresStore) -> None:
    now = [0.0]
    t = PostgresThrottle(pg_store, max_failures=2, window_s=10, trust_s=20, clock=lambda: now[0])
    await t.attempt("10.0.0.6", None)  # leaves the window at 10
    await t.attempt("10.0.0.6", "admin")  # trusted until 20
    now[0] = 5
    await t.attempt("10.0.0.7", None)  # leaves the window at 15
    await t.attempt("10.0.0.7", "admin")  # trusted until 25
    now[0] = 20
    assert await t.prune() == 3
    assert stored_failures(pg_store, "10.0.0.6") == []
    assert stored_failures(pg_store, "10.0.0.7") == []
    assert trusted_until(pg_store, "10.0.0.7", "admin") == 25
    assert await t.attempt("10.0.0.7", "admin") == 0


async def test_a_replica_prunes_on_its_own_after_a_counted_failure(pg_store: PostgresStore) -> None:
    now = [0.0]
    t = PostgresThrottle(pg_store, max_failures=2, window_s=10, prune_every_s=0, clock=lambda: now[0])
    await t.attempt("10.0.0.6", None)
    now[0] = 30
    await t.attempt("10.0.0.7", None)
    assert stored_failures(pg_store, "10.0.0.6") == []
    assert stored_failures(pg_store, "10.0.0.7") == [30.0]


async def test_with_the_database_clock_a_held_address_waits_at_most_the_window(pg_store: PostgresStore) -> None:
    t = PostgresThrottle(pg_store, max_failures=2, window_s=300)
    assert await t.attempt("10.0.0.8", None) == await t.attempt("10.0.0.8", None) == 0
    assert 290 <= await t.retry_after("10.0.0.8") <= 300
    assert 290 <= await t.attempt("10.0.0.8", "admin") <= 300  # not trusted here before the hold
    assert await t.allows("10.0.0.9")


async def test_a_failure_waiting_on_another_replicas_row_lock_does_not_hold_the_event_loop(
    pg_store: PostgresStore, pg_url: str
) -> None:
    import psycopg

    now = [0.0]
    t = PostgresThrottle(pg_store, max_failures=5, window_s=60, clock=lambda: now[0])
    assert await t.attempt("10.3.0.1", None) == 0
    with psycopg.connect(pg_url, autocommit=False) as other_replica:
        other_replica.execute(f"SET search_path TO {pg_store.schema}")
        other_replica.execute("SELECT 1 FROM auth_failures WHERE client = '10.3.0.1' FOR UPDATE")
        # Were the upsert run on the loop, the loop would stop here until this lets go: then the
        # failure is done before the loop turns again, and the assertion below fails (not a hang).
        release = threading.Timer(10, other_replica.rollback)
        release.start()
        try:
            waiting = asyncio.ensure_future(t.attempt("10.3.0.1", None))
            for _ in range(200):  # the loop keeps turning while the upsert waits
                await asyncio.sleep(0.001)
            assert not waiting.done()
            assert await t.attempt("10.3.0.2", None) == 0  # another address is served meanwhile
        finally:
            release.cancel()
        other_replica.rollback()
    assert await asyncio.wait_for(waiting, timeout=30) == 0
    assert len(stored_failures(pg_store, "10.3.0.1")) == 2
