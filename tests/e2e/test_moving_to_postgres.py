"""Issue 27 item 6, end to end: a fleet's SQLite data directory — filled by a real server (a
document, its outcome, the fleet, a memory) and by the Python API (a session of memories) — is
copied by the real ``copy-to-postgres`` command into a database of the test cluster; a real server
started on that URL then answers the same reads, and the API opens it by ``database_url``. A second
copy into the same database is refused; a URL nothing answers at, or one that cannot be read, is one
line without the password."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from robot_mcp_memory.api import RobotMemory
from tests.conftest import doc
from tests.e2e.harness import ServerProcess, child_env, console_script, http_session
from tests.pgcluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ADMIN = "admin-token-0123456789"
ENV = {"MEMORY_TOKEN": ADMIN, "MEMORY_EMBEDDER": "hashing"}
DEADLINE_S = 120.0
SECRET = "s3cret-never-shown"
#: The tables the command verifies, in its report's order (no lessons.db was made: none are counted).
TABLES = (
    "fleet_groups",
    "fleet_robots",
    "fleet_settings",
    "memories",
    "memory_public",
    "memory_tags",
    "process_outcomes",
    "process_tenant_counts",
    "processes",
    "sessions",
)


@pytest.fixture
def database_url(pg_cluster: Cluster) -> Iterator[str]:
    """A fresh database of this test's own, named by a URL carrying a password (the test cluster
    trusts its loopback clients, so the password is accepted and ignored)."""
    with pg_cluster.database("move") as url:
        yield url.replace("postgres@", f"postgres:{SECRET}@")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(console_script()), *args], capture_output=True, text=True, timeout=DEADLINE_S, env=child_env(), check=False
    )


def ids(result: dict[str, Any]) -> list[int]:
    return [m["id"] for m in result["memories"]]


async def test_a_sqlite_fleet_copied_by_the_command_is_served_from_postgresql(
    tmp_path: Path, database_url: str
) -> None:
    data = tmp_path / "sqlite" / "data"
    (tmp_path / "sqlite").mkdir()
    before = ServerProcess(data_dir=data, log_dir=tmp_path / "sqlite", env=ENV)
    with anyio.fail_after(DEADLINE_S):
        await before.start()
        try:
            async with http_session(before, token=ADMIN) as admin:
                await admin.call("upsert_group", group_id="lab", customer="acme")
                await admin.call("register_robot", robot_id="rap-1", group="lab")
                await admin.call("save_process", markdown=doc("open-dock-door", "Open the dock door", "Press green."))
                await admin.call("record_outcome", id="open-dock-door", success=True, note="opened")
                learned = await admin.call("learn", insight="the dock door sticks below 5 C", collection="dock")
                recalled = await admin.call("recall", query="dock door sticks", collection="dock")
                found = await admin.call("find_processes", query="open the dock door")
        finally:
            await before.stop()
    with RobotMemory(data, robot_id="rap-1", collection="kitchen") as api:
        session = api.start_session(context={"task": {"name": "grasp_mug"}})
        api.learn("grip force 12 N held the wet mug", context={"params": {"grip_force": 12}}, session_id=session)
        api.learn("the red cup slips at 8 N", session_id=session)
        api.end_session(session, outcome_score=1.0)
        kitchen = api.recall("grip the mug")
    assert ids(recalled) == [learned["memory_id"]]
    assert kitchen

    copied = cli("copy-to-postgres", "--data-dir", str(data), "--to", database_url)
    assert copied.returncode == 0, copied.stderr
    for table in TABLES:
        assert f"copy-to-postgres: verify {table} " in copied.stderr
    assert "copy-to-postgres: export memories 3/3" in copied.stderr
    assert "copy-to-postgres: restore memories 3/3" in copied.stderr
    counts = {line.split()[0]: line.split()[1:] for line in copied.stdout.splitlines() if line.startswith("  ")}
    assert list(counts) == list(TABLES)
    assert counts["memories"] == ["3", "=", "3"]
    assert counts["processes"] == ["1", "=", "1"]
    assert counts["sessions"] == ["1", "=", "1"]
    assert counts["fleet_robots"] == ["1", "=", "1"]
    assert SECRET not in copied.stdout + copied.stderr

    again = cli("copy-to-postgres", "--data-dir", str(data), "--to", database_url)
    assert again.returncode == 1
    assert "already holds" in again.stderr
    assert "Traceback" not in again.stderr
    assert SECRET not in again.stderr

    (tmp_path / "pg").mkdir()
    after = ServerProcess(
        data_dir=tmp_path / "pg" / "data", log_dir=tmp_path / "pg", env={**ENV, "MEMORY_DATABASE_URL": database_url}
    )
    with anyio.fail_after(DEADLINE_S):
        await after.start()
        try:
            async with http_session(after, token=ADMIN) as admin:
                got = await admin.call("get_process", id="open-dock-door")
                found_there = await admin.call("find_processes", query="open the dock door")
                recalled_there = await admin.call("recall", query="dock door sticks", collection="dock")
                robots = await admin.call("list_robots")
        finally:
            await after.stop()
    assert "success: opened" in got["markdown"]
    assert [p["id"] for p in found_there["processes"]] == [p["id"] for p in found["processes"]]
    assert ids(recalled_there) == ids(recalled)
    assert "rap-1" in str(robots)
    assert not (tmp_path / "pg" / "data" / "index.db").exists()  # served from PostgreSQL only

    with RobotMemory(database_url=database_url, robot_id="rap-1", collection="kitchen") as api:
        assert [m["id"] for m in api.recall("grip the mug")] == [m["id"] for m in kitchen]

    doctor = _with_url(database_url, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def _with_url(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(console_script()), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=child_env(MEMORY_DATABASE_URL=url),
        check=False,
    )


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://fleet:{SECRET}@127.0.0.1:1/memory",  # nothing listens on port 1
        f"postgresql://fleet:{SECRET}@[::1/memory",  # cannot be read
    ],
)
def test_a_url_that_cannot_be_used_is_one_line_without_the_password(tmp_path: Path, url: str) -> None:
    with RobotMemory(tmp_path / "data") as api:
        api.learn("one memory to copy")
    done = cli("copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("robot-mcp-memory: ")
    assert "PostgreSQL" in done.stderr
    assert SECRET not in done.stderr + done.stdout
