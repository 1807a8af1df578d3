"""What a restart, or a crash, leaves behind: clients that reconnect find everything as it was, and
no acknowledged save is ever lost — even to ``kill -9`` while saves are in flight."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from tests.conftest import MAILROOM, doc
from tests.e2e.harness import ServerProcess, http_session, json_lines, sse_session

pytestmark = pytest.mark.e2e

QUERY = "bring me the parcel from the mail room"
MAILROOM_ID = "fetch-package-mailroom"

STORM_CLIENTS = 6
STORM_SAVES_PER_CLIENT = 100
#: kill -9 once this many saves were acknowledged in the cycle (varied, so the kill lands at
#: different points of the storm and of the WAL's life)
STORM_KILL_AFTER_ACKS = (6, 16, 32)
STORM_DEADLINE_S = 60.0


@dataclass(frozen=True)
class IndexCounts:
    rows: int
    fts_rows: int
    quick_check: str


def index_counts(path: Path) -> IndexCounts:
    """Counts read straight from ``index.db`` through a read-only connection (tests may use sqlite3)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (rows,) = conn.execute("SELECT count(*) FROM processes").fetchone()
        (fts_rows,) = conn.execute("SELECT count(*) FROM processes_fts").fetchone()
        (check,) = conn.execute("PRAGMA quick_check").fetchone()
    finally:
        conn.close()
    return IndexCounts(int(rows), int(fts_rows), str(check))


def store_ready(stderr: str) -> dict[str, object]:
    lines = [line for line in json_lines(stderr) if line.get("event") == "store_ready"]
    assert len(lines) == 1, stderr
    return lines[0]


async def test_documents_saved_over_sse_are_found_after_a_restart(server: ServerProcess) -> None:
    async with sse_session(server) as client:
        saved = await client.call("save_process", markdown=MAILROOM)
        assert saved["id"] == MAILROOM_ID
        await client.call("record_outcome", id=MAILROOM_ID, success=True, note="parcel delivered")
        before = await client.call("get_process", id=MAILROOM_ID)
        listed_before = await client.call("list_processes")

    assert await server.restart() == 0, f"SIGTERM should stop the server cleanly:\n{server.stderr(0)}"
    assert "serve.stopped" in [line.get("event") for line in json_lines(server.stderr(0))]
    ready = store_ready(server.stderr())
    assert ready["created"] is False
    rows = ready["rows"]
    assert isinstance(rows, dict)
    assert rows["processes"] == 1

    async with sse_session(server) as client:
        found = await client.call("find_processes", query=QUERY)
        after = await client.call("get_process", id=MAILROOM_ID)
        listed_after = await client.call("list_processes")
    assert found["processes"][0]["id"] == MAILROOM_ID
    assert found["processes"][0]["markdown"] == before["markdown"]
    assert after == before
    assert listed_after == listed_before


@dataclass
class Storm:
    cycle: int
    kill_after: int
    acked: list[str] = field(default_factory=list)
    in_flight: int = 0
    killed: bool = False
    enough: anyio.Event = field(default_factory=anyio.Event)

    async def client(self, server: ServerProcess, n: int) -> None:
        """Save distinct documents back to back; remember each one the server acknowledged."""
        try:
            async with http_session(server, terminate_on_close=False) as client:
                for i in range(STORM_SAVES_PER_CLIENT):
                    pid = f"storm-{self.cycle}-{n}-{i}"
                    markdown = doc(
                        pid,
                        f"Storm document {self.cycle} {n} {i}",
                        f"## Steps\n1. carry crate {i} to bay {n}\n",
                        tags=f"[storm, cycle{self.cycle}]",
                    )
                    self.in_flight += 1
                    try:
                        result = await client.call("save_process", markdown=markdown)
                    finally:
                        self.in_flight -= 1
                    if result.get("error") is None and not self.killed:
                        assert result["id"] == pid, result
                        self.acked.append(pid)
                    if len(self.acked) >= self.kill_after:
                        self.enough.set()
        except Exception:
            # after the SIGKILL every way a call can fail is expected; before it, none is
            if not self.killed:
                raise


async def test_no_acknowledged_save_is_lost_to_kill_9_mid_storm(tmp_path: Path) -> None:
    # The hashing embedder makes every save write its row, FTS entry and vector together from the
    # first request on (the default model loads in the background for a few seconds).
    server = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env={"MEMORY_EMBEDDER": "hashing"})
    await server.start()
    try:
        await storm_cycles(server)
    finally:
        await server.stop()


async def storm_cycles(server: ServerProcess) -> None:
    acked: list[str] = []
    for cycle, kill_after in enumerate(STORM_KILL_AFTER_ACKS):
        storm = Storm(cycle, kill_after)
        with anyio.fail_after(STORM_DEADLINE_S):
            async with anyio.create_task_group() as tg:
                for n in range(STORM_CLIENTS):
                    tg.start_soon(storm.client, server, n)
                await storm.enough.wait()
                in_flight_at_kill = storm.in_flight
                storm.killed = True
                assert await server.kill() == -9
                tg.cancel_scope.cancel()
        assert in_flight_at_kill > 0, "the kill should land while saves are in flight"
        assert len(storm.acked) >= kill_after
        acked += storm.acked

        await server.start()
        assert store_ready(server.stderr())["created"] is False
        async with http_session(server) as client:
            missing = [
                pid for pid in storm.acked if (await client.call("get_process", id=pid)).get("error") is not None
            ]
            listed = await client.call("list_processes", limit=500)
        assert missing == [], f"cycle {cycle}: acknowledged saves lost after kill -9: {missing}"
        stored = {p["id"] for p in listed["processes"]}
        assert set(acked) <= stored, f"saves acknowledged in earlier cycles lost: {set(acked) - stored}"

        counts = await anyio.to_thread.run_sync(index_counts, server.index_path)
        assert counts.quick_check == "ok"
        assert counts.rows == counts.fts_rows, counts
        assert counts.rows >= len(acked), counts
