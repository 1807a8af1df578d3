"""Issue 27 item 5 / issue 29: ``MEMORY_WORKERS=2`` on a real PostgreSQL database. The real server
starts two worker processes on one port; MCP clients (the official SDK, stateless Streamable
HTTP) are answered by both, a write through one is read through the other, a worker killed with
SIGKILL is started again and serves, and SIGTERM to the parent stops every worker (none left)."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.conftest import doc
from tests.e2e.harness import ServerProcess, http_session, json_lines
from tests.pgcluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.serial]

ADMIN = "admin-token-0123456789"
ENV = {"MEMORY_TOKEN": ADMIN, "MEMORY_EMBEDDER": "hashing", "MEMORY_WORKERS": "2"}
DEADLINE_S = 150.0
#: Connections opened, at most, to meet both workers (each goes to whichever worker accepts it).
TRIES = 60


@pytest.fixture
def database_url(pg_cluster: Cluster) -> Iterator[str]:
    with pg_cluster.database("workers") as url:
        yield url


def served_by(server: ServerProcess) -> list[tuple[str, int]]:
    """(tool, worker pid) of each MCP tool call answered so far, in the order answered: each
    worker logs ``tool.call`` before its answer is sent, all to the one stderr file."""
    return [(e["tool"], e["pid"]) for e in json_lines(server.stderr()) if e.get("event") == "tool.call"]


async def workers_seen(server: ServerProcess, want: int, exclude: frozenset[int] = frozenset()) -> set[int]:
    """Pids answering ``/healthz`` on fresh connections until `want` not in `exclude` are seen."""
    seen: set[int] = set()
    for _ in range(TRIES):
        async with httpx.AsyncClient(timeout=10.0) as http:
            try:
                seen.add((await http.get(server.url("/healthz"))).json()["worker"])
            except httpx.TransportError:
                await anyio.sleep(0.05)  # a worker being started again: ask again
        if len(seen - exclude) >= want:
            break
    return seen - exclude


def exited(pid: int) -> None:
    """Return once `pid` has exited (its pidfd turns readable), however it ends."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def test_two_workers_share_the_port_survive_a_kill_and_stop_together(tmp_path: Path, database_url: str) -> None:
    server = ServerProcess(
        data_dir=tmp_path / "data", log_dir=tmp_path, env={**ENV, "MEMORY_DATABASE_URL": database_url}
    )
    with anyio.fail_after(DEADLINE_S):
        await server.start()
        try:
            parent = server.pid
            workers = await workers_seen(server, 2)
            assert len(workers) == 2, workers
            assert parent not in workers

            # Several MCP clients, one call after another: each saves a process and reads the one
            # the client before saved; both workers answer, and some read is another worker's write.
            # (Which worker accepts a connection is the kernel's choice: clients come until both
            # conditions held, at most TRIES.)
            calls: list[tuple[str, int]] = []
            for i in range(TRIES):
                async with http_session(server, token=ADMIN) as client:
                    saved = await client.call("save_process", markdown=doc(f"p-{i}", f"Process {i}", "Step."))
                    assert saved["action"] == "created", saved
                    if i:
                        got = await client.call("get_process", id=f"p-{i - 1}")
                        assert got["id"] == f"p-{i - 1}", got
                calls = served_by(server)
                saves = [pid for tool, pid in calls if tool == "save_process"]
                reads = [pid for tool, pid in calls if tool == "get_process"]
                elsewhere = [j for j in range(len(reads)) if reads[j] != saves[j]]  # read j is of save j
                if {pid for _, pid in calls} == workers and elsewhere:
                    break
            assert [tool for tool, _ in calls] == ["save_process"] + ["save_process", "get_process"] * i
            assert {pid for _, pid in calls} == workers, "one worker answered every call"
            assert elsewhere, "no read was answered by a worker other than the one that wrote"

            async with httpx.AsyncClient(timeout=10.0) as http:
                sse = await http.get(server.url("/sse"), headers={"Authorization": f"Bearer {ADMIN}"})
            assert sse.status_code == 404
            assert "/mcp" in sse.json()["detail"]

            killed = min(workers)
            os.kill(killed, signal.SIGKILL)
            restarted = await workers_seen(server, 1, exclude=frozenset(workers))
            assert restarted, "the killed worker was not started again"
            assert not alive(killed)
            # The started-again worker serves what the others wrote.
            before = len(served_by(server))
            for _ in range(TRIES):
                async with http_session(server, token=ADMIN) as client:
                    assert (await client.call("get_process", id="p-0"))["id"] == "p-0"
                if restarted & {pid for _, pid in served_by(server)[before:]}:
                    break
            else:
                pytest.fail("the started-again worker answered no call")
            all_workers = (workers - {killed}) | restarted
        finally:
            code = await server.stop()
    assert code == 0, server.stderr()
    assert not [pid for pid in all_workers if alive(pid)], "a worker outlived the parent"
    events = json_lines(server.stderr())
    assert len([e for e in events if e.get("event") == "serve.worker"]) == 3  # two, and the restarted one
    died = [e for e in events if e.get("event") == "serve.worker_died"]
    assert [e["pid"] for e in died] == [killed]
    assert database_url not in server.stderr()


async def test_workers_do_not_outlive_a_killed_parent(tmp_path: Path, database_url: str) -> None:
    """SIGKILL to the parent runs none of its code: each worker gets SIGTERM from the kernel
    (the parent-death signal) and stops, so none keeps the port."""
    server = ServerProcess(
        data_dir=tmp_path / "data", log_dir=tmp_path, env={**ENV, "MEMORY_DATABASE_URL": database_url}
    )
    with anyio.fail_after(DEADLINE_S):
        await server.start()
        try:
            workers = await workers_seen(server, 2)
            assert len(workers) == 2, workers
        finally:
            await server.kill()
        for pid in workers:
            await anyio.to_thread.run_sync(exited, pid, abandon_on_cancel=True)
    stopped = [e for e in json_lines(server.stderr()) if e.get("event") == "serve.worker_stopped"]
    assert sorted(e["pid"] for e in stopped) == sorted(workers)
