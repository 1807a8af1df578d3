"""PostgresStore against a real cluster: transactions, migrations under a lock, errors, pool hygiene."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from robot_mcp_memory.errors import NotFound, SchemaTooNew, StorageError, StoreFailed
from robot_mcp_memory.storage.postgres import Connection, PostgresStore

pytestmark = pytest.mark.postgres


def _counter(conn: Connection) -> None:
    conn.execute("CREATE TABLE steps_run (n INTEGER NOT NULL)")
    conn.execute("INSERT INTO steps_run VALUES (1)")


def _second(conn: Connection) -> None:
    conn.execute("UPDATE steps_run SET n = n + 1")


def test_replicas_migrating_at_once_apply_each_step_once(pg_store: PostgresStore, pg_url: str) -> None:
    stores = [PostgresStore.open(pg_url, schema=pg_store.schema, max_size=1) for _ in range(4)]
    start = threading.Barrier(len(stores))

    def migrate(store: PostgresStore) -> tuple[int, int]:
        start.wait(10)
        done = store.migrate("demo", [_counter, _second])
        return done.from_version, done.to_version

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            results = sorted(pool.map(migrate, stores))
    finally:
        for s in stores:
            s.close()
    assert results == [(0, 2), (2, 2), (2, 2), (2, 2)]
    assert pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run").fetchall()) == [(2,)]
    assert pg_store.migrate("demo", [_counter, _second]).from_version == 2


def test_a_schema_newer_than_this_build_is_refused_and_left_untouched(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter, _second])
    with pytest.raises(SchemaTooNew):
        pg_store.migrate("demo", [_counter])
    assert pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run").fetchall()) == [(2,)]


def test_components_keep_their_own_versions(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter])
    assert pg_store.migrate("other", []).to_version == 0
    assert pg_store.migrate("demo", [_counter, _second]).from_version == 1


def test_a_driver_error_is_a_store_failure_that_names_no_sql_and_rolls_back(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter])

    def broken(c: Connection) -> None:
        c.execute("UPDATE steps_run SET n = 99")
        c.execute("SELECT no_such_column FROM steps_run")

    with pytest.raises(StoreFailed) as caught:
        pg_store.write_blocking(broken)
    assert "no_such_column" not in str(caught.value)
    assert "steps_run" not in str(caught.value)
    assert pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run").fetchall()) == [(1,)]


def test_our_own_errors_pass_through_and_roll_back(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter])

    def refused(c: Connection) -> None:
        c.execute("UPDATE steps_run SET n = 99")
        raise NotFound("no such thing")

    with pytest.raises(NotFound):
        pg_store.write_blocking(refused)
    assert pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run").fetchall()) == [(1,)]


def test_a_read_cannot_write(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter])
    with pytest.raises(StoreFailed):
        pg_store.read_blocking(lambda c: c.execute("UPDATE steps_run SET n = 5"))


def test_no_prepared_statement_and_no_session_setting_outlives_a_transaction(pg_store: PostgresStore) -> None:
    """What PgBouncer's transaction mode needs: the next transaction may be another client's."""
    pg_store.migrate("demo", [_counter])
    for _ in range(10):  # psycopg would prepare a query seen 5 times unless prepare_threshold is None
        pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run WHERE n = %s", (1,)).fetchall())
    with pg_store.pool.connection() as conn:  # outside any of the store's transactions
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        path = conn.execute("SHOW search_path").fetchone()
        read_only = conn.execute("SHOW transaction_read_only").fetchone()
    assert prepared == (0,)
    assert path is not None
    assert pg_store.schema not in path[0]
    assert read_only == ("off",)


async def test_a_write_whose_caller_is_cancelled_still_commits(pg_store: PostgresStore) -> None:
    pg_store.migrate("demo", [_counter])
    gate = threading.Event()
    entered = threading.Event()

    def slow(c: Connection) -> None:
        entered.set()
        gate.wait(10)
        c.execute("UPDATE steps_run SET n = 7")

    task = asyncio.create_task(pg_store.write(slow))
    assert await asyncio.to_thread(entered.wait, 10)
    task.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task

    def committed() -> bool:
        return pg_store.read_blocking(lambda c: c.execute("SELECT n FROM steps_run").fetchall()) == [(7,)]

    for _ in range(500):  # bounded: the shielded write commits on its thread
        if committed():
            break
        await asyncio.sleep(0.01)
    assert committed()


def test_an_unreachable_server_is_a_clear_error_without_the_url(pg_cluster: object) -> None:
    with pytest.raises(StoreFailed) as caught:
        PostgresStore.open("postgresql://robot:s3cret@127.0.0.1:1/nowhere", timeout_s=1)
    assert "s3cret" not in str(caught.value)


def test_a_schema_name_is_checked_before_it_reaches_sql(pg_url: str) -> None:
    with pytest.raises(StorageError):
        PostgresStore.open(pg_url, schema='x"; DROP SCHEMA public; --')
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'public'").fetchone() == (1,)
