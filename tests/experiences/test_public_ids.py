"""Public memory ids (`model.PUBLIC_FROM`): what every caller is shown and hands back. The stored
ids stay one dense sequence for the fleet; a robot reading its own ids learns nothing of how many
memories other groups wrote in between, and cannot reach a memory by guessing a stored id.
Memories stored before public ids keep the ids robots were given; dumps and loads keep both."""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import NotFound
from robot_mcp_memory.experiences.model import PUBLIC_FROM
from robot_mcp_memory.experiences.postgres import records
from robot_mcp_memory.experiences.postgres.repository import PostgresMemories
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.surfaces import cli
from robot_mcp_memory.tenancy.policy import Policy, SoloMembership
from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from tests.experiences.conftest import put_in_group, stored_id

A, B = Principal.robot("rap-1"), Principal.robot("rap-2")


def _public(m: int) -> bool:
    return PUBLIC_FROM <= m < 2 * PUBLIC_FROM


async def test_a_robots_ids_say_nothing_of_what_other_groups_wrote(memory: Memory) -> None:
    await put_in_group(memory, "g1", "rap-1")
    await put_in_group(memory, "g2", "rap-2")
    svc = memory.experiences
    rng = random.Random(4)
    mine: list[int] = []
    for k in range(12):
        mine.append((await svc.learn(A, f"dock {k}: the charger of bay {k} needs {k + 2} minutes")).memory_id)
        for j in range(rng.randint(0, 5)):
            await svc.learn(B, f"lift {k}-{j}: the door of floor {j} is slow")
    stored = [stored_id(memory, m) for m in mine]
    assert stored == sorted(stored)  # stored: one dense sequence, every group's writes in it
    assert stored[-1] - stored[0] > len(mine)  # … which counts rap-2's writes in between
    assert all(_public(m) for m in mine)  # shown: drawn at random, never the stored id
    assert len(set(mine)) == len(mine)
    # every way back in takes the public id and nothing else
    hit = (await svc.recall(A, "charger of bay 3", n=1)).hits[0]
    assert hit.memory.id in mine
    assert (await svc.get(A, mine[3])).id == mine[3]
    for guessed in (stored[3], stored[3] + 1):
        with pytest.raises(NotFound, match=f"no memory with id {guessed};"):
            await svc.get(A, guessed)
        with pytest.raises(NotFound):
            await svc.forget(ADMIN, guessed, "a guess")
    updated = await svc.update(A, mine[0], "dock 0: the charger of bay 0 needs 3 minutes now")
    assert updated.memory.id == mine[0]
    assert (await svc.forget(A, mine[1], "moved")).id == mine[1]
    again = await svc.learn(A, "dock 2: the charger of bay 2 needs 4 minutes")
    assert (again.status, again.memory_id) == ("duplicate", mine[2])


async def test_an_operators_lists_show_the_same_ids(memory: Memory) -> None:
    svc = memory.experiences
    s = await svc.start_session(ADMIN, context={"task": {"name": "pick"}})
    learned = [
        (await svc.learn(ADMIN, f"pick {k}: the tote on shelf {k} is heavy", session_id=s.id)).memory_id
        for k in range(3)
    ]
    from robot_mcp_memory.experiences.browse import ExperienceBrowser

    browser = ExperienceBrowser(memory.memories, svc.policy)
    assert sorted(m.id for m in (await browser.page(ADMIN)).memories) == sorted(learned)
    assert sorted(m.id for m in (await browser.timeline(ADMIN, s.id)).memories) == sorted(learned)
    assert (await browser.get(ADMIN, learned[0])).id == learned[0]
    with pytest.raises(NotFound):
        await browser.get(ADMIN, stored_id(memory, learned[0]))


def _back_to_before_public_ids(data: Path) -> None:
    """What index.db was before migration 26: no public ids, so its memories were shown by their
    stored ids."""
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        conn.execute("DROP TABLE memory_public")
        conn.execute("UPDATE store_meta SET value = '25' WHERE key = 'schema_version'")
        conn.commit()


def test_memories_stored_before_public_ids_keep_the_ids_robots_were_given(tmp_path: Path) -> None:
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        for k in range(3):
            mem.learn(f"old {k}: the gripper of cell {k} slips at {k + 10} N")
    _back_to_before_public_ids(tmp_path)
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        old = sorted(h["id"] for h in mem.recall("gripper slips", n=10))
        assert old == [1, 2, 3]  # as they were shown before the upgrade
        assert mem.get(2)["content"].startswith("old 1:")
        new = mem.learn("new: the gripper of cell 9 slips at 30 N")["memory_id"]
        assert _public(new)
        assert mem.forget(1, "obsolete")["memory_id"] == 1
        with pytest.raises(NotFound):
            mem.get(4)  # the new memory's stored id: not how it is shown
        assert mem.get(new)["content"].startswith("new:")


def _dump(data: Path, dest: Path) -> Path:
    assert cli.main(["dump", "--data-dir", str(data), str(dest)]) == 0
    return dest


def test_a_dump_loaded_elsewhere_keeps_its_memories_ids(tmp_path: Path) -> None:
    with RobotMemory(tmp_path / "a", robot_id="rap-1") as mem:
        ids = [mem.learn(f"shelf {k}: the tote there weighs {k + 3} kg")["memory_id"] for k in range(4)]
    dump = _dump(tmp_path / "a", tmp_path / "dump")
    assert (dump / "archive" / "memory_public.jsonl").is_file()
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(dump)]) == 0
    with RobotMemory(tmp_path / "b", robot_id="rap-1") as mem:
        assert [mem.get(m)["content"] for m in ids] == [
            f"shelf {k}: the tote there weighs {k + 3} kg" for k in range(4)
        ]
        later = mem.learn("shelf 9: the tote there is empty")["memory_id"]
        assert _public(later)
        assert later not in ids


def test_a_dump_from_before_public_ids_loads_its_memories_under_their_own_ids(tmp_path: Path) -> None:
    with RobotMemory(tmp_path / "a", robot_id="rap-1") as mem:
        shown = [mem.learn(f"bay {k}: the charger takes {k + 20} minutes")["memory_id"] for k in range(3)]
    dump = _dump(tmp_path / "a", tmp_path / "dump")
    (dump / "archive" / "memory_public.jsonl").unlink()  # what an older release's dump holds
    # loaded over the store it came from, whose memories were shown by drawn ids: as the dump says
    assert cli.main(["load", "--data-dir", str(tmp_path / "a"), str(dump)]) == 0
    with RobotMemory(tmp_path / "a", robot_id="rap-1") as mem:
        assert [mem.get(m)["content"] for m in (1, 2, 3)] == [
            f"bay {k}: the charger takes {k + 20} minutes" for k in range(3)
        ]
        with pytest.raises(NotFound):
            mem.get(shown[0])


@pytest.fixture
def taken_then_fresh(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The next draws of either backend: an id already taken (the first memory's), then fresh ones."""
    draws: list[int] = []

    def draw() -> int:
        return draws.pop(0)

    monkeypatch.setattr(storage, "draw_public_id", draw)
    monkeypatch.setattr(records, "draw_public_id", draw)
    return draws


async def test_a_drawn_id_already_taken_is_drawn_again(memory: Memory, taken_then_fresh: list[int]) -> None:
    svc = memory.experiences
    taken_then_fresh.extend([PUBLIC_FROM + 7, PUBLIC_FROM + 7, PUBLIC_FROM + 8])
    first = await svc.learn(A, "the lift door is slow")
    second = await svc.learn(A, "the ramp is wet in the morning")
    assert (first.memory_id, second.memory_id) == (PUBLIC_FROM + 7, PUBLIC_FROM + 8)
    assert taken_then_fresh == []


@pytest.mark.postgres
async def test_on_postgresql_too(pg_store: PostgresStore, taken_then_fresh: list[int]) -> None:
    repo = PostgresMemories(pg_store)
    try:
        svc = ExperienceService(repo, Policy(SoloMembership()), default_robot="tester")
        taken_then_fresh.extend([PUBLIC_FROM + 7, PUBLIC_FROM + 7, PUBLIC_FROM + 8])
        first = await svc.learn(A, "the lift door is slow")
        second = await svc.learn(A, "the ramp is wet in the morning")
        assert (first.memory_id, second.memory_id) == (PUBLIC_FROM + 7, PUBLIC_FROM + 8)
        assert (await svc.get(A, second.memory_id)).content == "the ramp is wet in the morning"
        with pytest.raises(NotFound):
            await svc.get(A, 2)  # its stored id
    finally:
        repo.close()


def test_public_ids_of_more_memories_than_sqlite_takes_parameters(tmp_path: Path) -> None:
    """An import's every id, or a long session's consolidation, in one lookup: past SQLite's
    limit on parameters it raised "too many SQL variables" (review)."""
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        shown = [mem.learn(f"crate {k} weighs {k + 1} kg")["memory_id"] for k in range(3)]
    with contextlib.closing(sqlite3.connect(tmp_path / "index.db")) as conn:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        public = storage.public_ids(conn, range(1, 5001))
    assert [public[i] for i in (1, 2, 3)] == shown
    assert public[4] == 4  # no such memory: its own id, as for a memory without a drawn one
    assert len(public) == 5000


def _archive_line(dump: Path, table: str, **changed: object) -> None:
    path = dump / "archive" / f"{table}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows[0].update(changed)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.mark.parametrize(
    ("table", "changed", "why"),
    [
        ("memory_public", {"public_id": 7}, "not a public id"),  # shown as 7, yet 7 would find nothing
        ("memory_public", {"public_id": 2 * PUBLIC_FROM}, "not a public id"),
        ("memories", {"id": PUBLIC_FROM + 5}, "not a stored id"),  # a stored id in the public range
    ],
)
def test_a_load_refuses_ids_in_the_other_range(
    tmp_path: Path, table: str, changed: dict[str, object], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with RobotMemory(tmp_path / "a", robot_id="rap-1") as mem:
        mem.learn("the forklift charger is in bay 4")
    dump = _dump(tmp_path / "a", tmp_path / "dump")
    _archive_line(dump, table, **changed)
    capsys.readouterr()
    assert cli.main(["load", "--data-dir", str(tmp_path / "b"), str(dump)]) == 1
    assert why in capsys.readouterr().err
    with RobotMemory(tmp_path / "b", robot_id="rap-1") as mem:
        assert mem.recall("forklift charger") == []  # nothing was loaded


def test_an_older_dump_with_ids_written_as_whole_floats_shows_them_by_their_own_ids(tmp_path: Path) -> None:
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        drawn = mem.learn("the ramp by dock 2 is wet")["memory_id"]
    dump = _dump(tmp_path, tmp_path / "dump")
    (dump / "archive" / "memory_public.jsonl").unlink()
    _archive_line(dump, "memories", id=1.0)  # a hand-made or another tool's archive
    assert cli.main(["load", "--data-dir", str(tmp_path), str(dump)]) == 0
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        assert mem.get(1)["content"] == "the ramp by dock 2 is wet"
        with pytest.raises(NotFound):
            mem.get(drawn)


@pytest.mark.postgres
def test_postgresql_refuses_a_public_id_two_memories_would_share(
    tmp_path: Path, pg_cluster: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("MEMORY_DATABASE_URL", "MEMORY_DATA_DIR", "MEMORY_TOKEN", "MEMORY_ROBOT_TOKENS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMORY_EMBEDDER", "none")
    with RobotMemory(tmp_path / "a", robot_id="rap-1") as mem:
        first = mem.learn("the lift is slow")["memory_id"]
        mem.learn("the ramp is wet")
    dump = _dump(tmp_path / "a", tmp_path / "dump")
    path = dump / "archive" / "memory_public.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[1]["public_id"] = first  # two lines, one public id
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pg_cluster.database("public_ids") as url:
        monkeypatch.setenv("MEMORY_DATABASE_URL", url)
        capsys.readouterr()
        assert cli.main(["load", str(dump)]) == 1
        err = capsys.readouterr().err
        assert "memory_public.jsonl line 2 has public_id" in err
        assert "Traceback" not in err
        assert cli.main(["stats"]) == 0
        assert json.loads(capsys.readouterr().out)["memories"] == 0  # nothing was loaded
