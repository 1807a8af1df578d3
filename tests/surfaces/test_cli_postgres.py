"""The operator's commands on PostgreSQL (``MEMORY_DATABASE_URL``), run in-process through
`cli.main` against a database of the test cluster: copy-to-postgres, then doctor, stats, dump and
load there; backup and import-robotmem refused with what to do instead; a stopped copy and a copy
whose counts differ reported by doctor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.operations.postgres.store import PostgresOperations
from robot_mcp_memory.surfaces import cli, cli_copy
from tests.pgcluster import Cluster

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database of this test's own; the commands see it as MEMORY_DATABASE_URL."""
    for var in ("MEMORY_DATABASE_URL", "MEMORY_DATA_DIR", "MEMORY_TOKEN", "MEMORY_ROBOT_TOKENS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMORY_EMBEDDER", "none")
    with pg_cluster.database("cli") as url:
        yield url


def _fill(data: Path) -> None:
    with RobotMemory(data, robot_id="rap-1") as api:
        session = api.start_session()
        api.learn("grip force 12 N held the wet mug", session_id=session)
        api.learn("the dock door sticks below 5 C")
        api.end_session(session, outcome_score=1.0)


def test_doctor_stats_dump_and_load_work_on_a_copied_postgresql_installation(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "data")
    assert cli.main(["copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert cli.main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("ok ") for line in lines), lines
    assert cli.main(["stats"]) == 0
    stats: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (stats["memories"], stats["sessions"]) == (2, 1)
    assert cli.main(["dump", str(tmp_path / "dump")]) == 0
    assert "2 memories, 1 session" in capsys.readouterr().out
    assert len((tmp_path / "dump" / "archive" / "memories.jsonl").read_text().splitlines()) == 2
    assert cli.main(["load", str(tmp_path / "dump")]) == 0  # a merge of the same rows: nothing changes
    assert "2 memories, 1 session" in capsys.readouterr().out
    assert cli.main(["stats"]) == 0
    assert json.loads(capsys.readouterr().out) == stats


def test_backup_and_the_robotmem_import_on_postgresql_name_what_to_do_instead(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert cli.main(["backup", str(tmp_path / "backup")]) == cli.EXIT_FAILED
    assert "pg_dump" in capsys.readouterr().err
    assert not (tmp_path / "backup").exists()
    assert cli.main(["import-robotmem", str(tmp_path / "memory.db")]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "fresh SQLite dir" in err
    assert "copy-to-postgres" in err


class _Stop(Exception):
    """What the test's restore raises: a copy stopped midway."""


def test_a_stopped_copy_is_reported_by_doctor_and_a_second_copy_finishes_it(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "data")
    real = PostgresOperations.restore

    async def stopped(self: PostgresOperations, *args: Any, **kwargs: Any) -> Any:
        raise _Stop

    monkeypatch.setattr(PostgresOperations, "restore", stopped)
    monkeypatch.setattr(cli_copy, "_Stopped", _Stop)  # the operator's stop, as the command sees one
    assert cli.main(["copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url]) == 130
    monkeypatch.setattr(PostgresOperations, "restore", real)
    capsys.readouterr()
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert cli.main(["doctor"]) == cli.EXIT_FAILED
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == ["FAIL copy"]
    monkeypatch.delenv("MEMORY_DATABASE_URL")
    assert cli.main(["copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url]) == 0
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert cli.main(["doctor"]) == 0


def test_a_copy_whose_counts_differ_exits_1_and_doctor_reports_it(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "data")
    real = PostgresOperations.restore

    async def lossy(self: PostgresOperations, *args: Any, **kwargs: Any) -> Any:
        done = await real(self, *args, **kwargs)
        await self.db.write(lambda conn: conn.execute("DELETE FROM memories WHERE content LIKE 'the dock%'"))
        return done

    monkeypatch.setattr(PostgresOperations, "restore", lossy)
    assert cli.main(["copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url]) == cli.EXIT_FAILED
    assert "memories: 2 in the source, 1 copied" in capsys.readouterr().err
    monkeypatch.setattr(PostgresOperations, "restore", real)
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert cli.main(["doctor"]) == cli.EXIT_FAILED
    assert "FAIL copy" in capsys.readouterr().out
    monkeypatch.delenv("MEMORY_DATABASE_URL")
    assert cli.main(["copy-to-postgres", "--data-dir", str(tmp_path / "data"), "--to", url]) == cli.EXIT_FAILED
    assert "already holds" in capsys.readouterr().err  # not empty: drop it first, as doctor says


def test_the_python_api_left_without_a_store_opens_the_servers_database(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)
    with RobotMemory(robot_id="rap-1") as api:
        made = api.learn("the conveyor belt stalls at 0.8 m/s")
    with RobotMemory(database_url=url) as api:
        assert [m["id"] for m in api.recall("conveyor belt stalls")] == [made["memory_id"]]
    assert not (tmp_path / "data").exists()  # nothing went to SQLite
