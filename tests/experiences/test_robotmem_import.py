"""Importing a robotmem ``memory.db`` (issue 5, item 7): everything comes across, once.

The fixture ``tests/fixtures/robotmem-0.1.3.db`` was written by robotmem 0.1.3 itself
(``tests/fixtures/make_robotmem_db.py``, run with robotmem's own interpreter). When that
interpreter is around (``ROBOTMEM_PYTHON``, else ``/tmp/robotmem-venv/bin/python``), one test also
makes a fresh file with it and imports that.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import Forbidden, InvalidInput
from robot_mcp_memory.experiences.sqlite import robotmem_import
from robot_mcp_memory.experiences.sqlite.robotmem_import import (
    ImportReport,
    RobotmemBusy,
    RobotmemFile,
    RobotmemUnreadable,
    epoch,
    usable_collection,
)
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.surfaces import cli
from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from tests.conftest import ROBOTMEM_MISSING
from tests.experiences.conftest import stored_id

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURE = FIXTURES / "robotmem-0.1.3.db"
MAKER = FIXTURES / "make_robotmem_db.py"
ROBOTMEM_PYTHON = Path(os.environ.get("ROBOTMEM_PYTHON", "/tmp/robotmem-venv/bin/python"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source(path: Path) -> dict[str, Any]:
    """What the robotmem file holds, read straight from it."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        q = conn.execute
        out: dict[str, Any] = {
            "memories": q("SELECT count(*) FROM memories").fetchone()[0],
            "facts": q("SELECT count(*) FROM memories WHERE type = 'fact'").fetchone()[0],
            "perceptions": q("SELECT count(*) FROM memories WHERE type = 'perception'").fetchone()[0],
            "forgotten": q("SELECT count(*) FROM memories WHERE status = 'invalidated'").fetchone()[0],
            "superseded": q("SELECT count(*) FROM memories WHERE status = 'superseded'").fetchone()[0],
            "sessions": [r[0] for r in q("SELECT external_id FROM sessions ORDER BY id")],
            "tags": q("SELECT count(*) FROM memory_tags").fetchone()[0],
            "created": dict(q("SELECT id, created_at FROM memories").fetchall()),
            "supersede": dict(q("SELECT id, superseded_by FROM memories WHERE status = 'superseded'").fetchall()),
        }
        return out
    finally:
        conn.close()


def content_id(path: Path, text_start: str) -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT id FROM memories WHERE content LIKE ?", (text_start + "%",)).fetchone()
        return int(row[0])
    finally:
        conn.close()


@pytest.fixture
def robotmem_db(tmp_path: Path) -> Path:
    copy = tmp_path / "robotmem" / "memory.db"
    copy.parent.mkdir()
    shutil.copyfile(FIXTURE, copy)
    return copy


async def run_import(memory: Memory, path: Path, **kw: Any) -> ImportReport:
    return await operations.import_robotmem(memory, ADMIN, path, **kw)


# ---------------------------------------------------------------------------- the fixture itself
def test_the_fixture_is_small_and_was_written_by_robotmem() -> None:
    assert FIXTURE.stat().st_size < 200 * 1024
    conn = sqlite3.connect(f"{FIXTURE.as_uri()}?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        # robotmem's own objects: its tag taxonomy table (filled at first open) and FTS delete trigger
        assert {"memories", "sessions", "session_outcomes", "memory_tags", "tag_meta", "memories_ad"} <= names
        assert conn.execute("SELECT count(*) FROM tag_meta").fetchone()[0] > 50
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # stands alone: no -wal/-shm
    finally:
        conn.close()
    facts = source(FIXTURE)
    assert facts["perceptions"] >= 3
    assert facts["forgotten"] >= 1
    assert facts["superseded"] >= 1


# ---------------------------------------------------------------------------- what comes across
async def test_every_memory_session_and_tag_comes_across_and_the_file_is_untouched(
    memory: Memory, robotmem_db: Path
) -> None:
    before = sha256(robotmem_db)
    seen: list[tuple[int, int]] = []
    report = await operations.import_robotmem(memory, ADMIN, robotmem_db, progress=lambda d, t: seen.append((d, t)))
    src = source(robotmem_db)

    assert (report.memories, report.total_memories) == (src["memories"], src["memories"])
    assert (report.facts, report.perceptions) == (src["facts"], src["perceptions"])
    assert (report.forgotten, report.superseded) == (src["forgotten"], src["superseded"])
    assert (report.sessions, report.total_sessions) == (len(src["sessions"]), len(src["sessions"]))
    assert report.tags == src["tags"]
    assert not report.skipped_memories
    assert not +report.skipped_sessions
    assert seen[-1] == (src["memories"], src["memories"])
    assert sha256(robotmem_db) == before
    assert not (robotmem_db.parent / "memory.db-wal").exists()

    counts = memory.index.read_blocking(
        lambda c: c.execute(
            "SELECT count(*), sum(status = 'forgotten'), sum(status = 'superseded'), count(DISTINCT robot) "
            "FROM memories"
        ).fetchone()
    )
    assert tuple(counts) == (src["memories"], src["forgotten"], src["superseded"], 1)
    lines = "\n".join(report.lines())
    assert f"memories: {src['memories']} imported of {src['memories']}" in lines


async def test_imported_memories_are_recalled_in_every_script_and_with_filters(
    memory: Memory, robotmem_db: Path
) -> None:
    await run_import(memory, robotmem_db)
    svc = memory.experiences

    zh = await svc.recall(ADMIN, "倒水", collection="kitchen-lab")
    assert zh.hits
    assert zh.hits[0].memory.content.startswith("倒水时杯子倾斜角度")
    glass = await svc.recall(ADMIN, "玻璃杯", collection="kitchen-lab", n=10)
    assert {h.memory.type for h in glass.hits} == {"fact", "perception"}
    ru = await svc.recall(ADMIN, "кружки")
    assert [h.memory.content for h in ru.hits] == ["захват кружки: сила 10 Н достаточно"]

    held = await svc.recall(
        ADMIN,
        "grasp the blue bottle",
        n=20,
        collection="sweeps",
        context_filter={"task.success": True, "params.grip_force": {"$lt": 14}},
    )
    assert sorted(h.memory.context["params"]["grip_force"] for h in held.hits) == [12, 13]
    near = await svc.recall(ADMIN, "mug", spatial_sort={"target": [0.4, 0.12, 0.9], "max_distance": 0.01})
    assert [h.memory.content for h in near.hits] == ["red mug on the drying rack next to the sink"]
    by_user_tag = await svc.recall(ADMIN, "safety")  # robotmem's user tag "kitchen_safety" is searchable
    assert by_user_tag.hits[0].memory.content.startswith("grip_force=12.5N held the wet mug")


async def test_times_status_links_contexts_and_data_are_kept(memory: Memory, robotmem_db: Path) -> None:
    report = await run_import(memory, robotmem_db)
    src = source(robotmem_db)
    svc = memory.experiences
    ours = report.memory_ids

    for rid, created in src["created"].items():
        got = await svc.get(ADMIN, ours[rid])
        stamp = epoch(created)
        assert stamp is not None
        assert got.created_at == pytest.approx(stamp, abs=1e-3)
        assert got.metadata["imported_from"] == {"source": "robotmem", "id": rid, "created_at": created}
    for rid, by in src["supersede"].items():
        got = await svc.get(ADMIN, ours[rid])
        assert (got.status, got.superseded_by) == ("superseded", ours[by])

    wrong = await svc.get(ADMIN, ours[content_id(robotmem_db, "the fire door in lab 7")])
    assert (wrong.status, wrong.forget_reason) == ("forgotten", "wrong: the lab 7 fire door opens outwards")
    assert wrong.id not in [h.memory.id for h in (await svc.recall(ADMIN, "fire door lab 7 opens", n=50)).hits]

    mug = await svc.get(ADMIN, ours[content_id(robotmem_db, "grip_force=12.5N")])
    assert mug.context == {
        "params": {"grip_force": 12.5, "approach_angle": 30},
        "spatial": {"position": [0.42, 0.1, 0.91]},
        "task": {"name": "grasp_mug", "success": True},
        "env": {"sim_or_real": "real"},
    }  # robotmem's own "source": "learn_tool" marker is gone
    assert mug.category == "root_cause"
    assert mug.confidence == pytest.approx(0.9)
    assert {"kitchen_safety", "mug", "root_cause"} <= set(mug.tags)
    assert mug.access_count == 1
    assert mug.last_accessed is not None
    note = await svc.get(ADMIN, ours[content_id(robotmem_db, "avoid the loading dock")])
    assert note.context == {"note": "noted by the night operator"}

    seen = await svc.get(ADMIN, ours[content_id(robotmem_db, "red mug on the drying rack")])
    assert (seen.type, seen.perception_type) == ("perception", "visual")
    assert seen.data == {"bbox": [120, 80, 210, 190], "score": 0.93}
    assert seen.context == {"spatial": {"position": [0.4, 0.12, 0.9]}, "camera": "wrist"}


async def test_sessions_keep_their_ids_context_end_and_outcome(memory: Memory, robotmem_db: Path) -> None:
    await run_import(memory, robotmem_db)
    first, second, still_open = source(robotmem_db)["sessions"]
    svc = memory.experiences

    s1 = await svc.get_session(ADMIN, first)
    assert (s1.outcome_score, s1.collection, s1.context["robot_id"]) == (0.8, "default", "ur5-01")
    assert s1.ended_at is not None
    assert s1.ended_at >= s1.started_at
    s2 = await svc.get_session(ADMIN, second)
    assert (s2.outcome_score, s2.collection, s2.context["task"]) == (0.3, "kitchen-lab", "倒水")
    s3 = await svc.get_session(ADMIN, still_open)
    assert (s3.ended_at, s3.outcome_score) == (None, None)
    replay = await svc.recall(ADMIN, "", session_id=first, n=20, min_confidence=0.0)
    assert len(replay.hits) == 6  # 8 memories in that episode, 2 of them superseded by robotmem
    ended = await svc.end_session(ADMIN, still_open, outcome_score=1.0)  # an imported open episode can end here
    assert ended.session.outcome_score == 1.0


async def test_learning_after_an_import_dedups_against_imported_memories(memory: Memory, robotmem_db: Path) -> None:
    await run_import(memory, robotmem_db)  # attributed to ROBOT_ID ('tester'), like a learn over stdio
    context = {
        "params": {"grip_force": 13},
        "spatial": {"position": [0.8, 0.5, 0.8]},
        "task": {"name": "grasp_bottle", "success": True},
    }
    again = await memory.experiences.learn(
        ADMIN, "grasp the blue bottle with grip force 13 N: held", context, collection="sweeps"
    )
    assert again.status == "duplicate"


# ---------------------------------------------------------------------------- idempotent, and its options
async def test_importing_again_brings_nothing_new(memory: Memory, robotmem_db: Path) -> None:
    first = await run_import(memory, robotmem_db)
    rows = memory.index.read_blocking(
        lambda c: c.execute("SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM sessions)").fetchone()
    )
    again = await run_import(memory, robotmem_db, collection_prefix="rm-")  # another prefix changes nothing
    assert (again.memories, again.sessions, again.tags) == (0, 0, 0)
    assert again.skipped_memories == {"already imported": first.memories}
    assert again.skipped_sessions == {"already imported": first.sessions}
    assert again.memory_ids == first.memory_ids
    after = memory.index.read_blocking(
        lambda c: c.execute("SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM sessions)").fetchone()
    )
    assert tuple(after) == tuple(rows)


async def test_a_session_id_another_robot_holds_here_becomes_the_importing_robots_own(
    memory: Memory, robotmem_db: Path
) -> None:
    """Imported memories joined another robot's session of the same id, and its summary counted a
    memory its owner could not see (found by review). They get a session of their own, and
    importing again still finds it."""
    first = source(robotmem_db)["sessions"][0]
    memory.index.write_blocking(
        lambda c: c.execute(
            "INSERT INTO sessions(id, robot, collection, context, started_at) VALUES (?, 'rap-b', 'default', '{}', 0)",
            (first,),
        )
    )
    report = await run_import(memory, robotmem_db, robot="rap-a")
    assert report.sessions == len(source(robotmem_db)["sessions"])  # every one imported, none taken over
    assert not report.skipped_sessions
    own = robotmem_import.own_session_id(first, "rap-a")

    def sessions_of(c: sqlite3.Connection) -> dict[str, tuple[str, int]]:
        rows = c.execute(
            "SELECT s.id, s.robot, (SELECT count(*) FROM memories m WHERE m.session_id = s.id) FROM sessions s"
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    held = memory.index.read_blocking(sessions_of)
    assert held[first] == ("rap-b", 0)  # the other robot's session gained nothing
    assert held[own][0] == "rap-a"
    assert held[own][1] == 8  # the episode's memories, in the importing robot's own session
    again = await run_import(memory, robotmem_db, robot="rap-a")
    assert (again.memories, again.sessions) == (0, 0)
    assert again.skipped_sessions == {"already imported": report.sessions}
    assert memory.index.read_blocking(sessions_of) == held


async def test_the_same_file_imported_for_a_second_robot_brings_nothing_new(memory: Memory, robotmem_db: Path) -> None:
    """A memory is imported once, whoever for, and so is its session: importing again for another
    robot made empty sessions of its own beside 'already imported' memories (found by review). A
    memory new to the file since goes to a session of the importing robot, never the first one's."""
    first = await run_import(memory, robotmem_db, robot="rap-a")
    again = await run_import(memory, robotmem_db, robot="rap-b")
    assert (again.memories, again.sessions) == (0, 0)
    assert again.skipped_sessions == {"already imported": first.sessions}
    robots = memory.index.read_blocking(lambda c: [r[0] for r in c.execute("SELECT DISTINCT robot FROM sessions")])
    assert robots == ["rap-a"]
    episode = source(robotmem_db)["sessions"][0]
    conn = sqlite3.connect(robotmem_db)
    with conn:
        conn.execute(
            "INSERT INTO memories(session_id, collection, type, content, context, category, confidence, status) "
            "VALUES (?, 'default', 'fact', 'the dock charger needs 40 minutes', '{}', 'observation', 0.9, 'active')",
            (episode,),
        )
    conn.close()
    grown = await run_import(memory, robotmem_db, robot="rap-b")
    assert grown.memories == 1
    new_id = stored_id(memory, grown.memory_ids[max(grown.memory_ids)])
    placed = memory.index.read_blocking(
        lambda c: c.execute(
            "SELECT m.robot, s.robot, s.id FROM memories m JOIN sessions s ON s.id = m.session_id WHERE m.id = ?",
            (new_id,),
        ).fetchone()
    )
    assert tuple(placed) == ("rap-b", "rap-b", robotmem_import.own_session_id(episode, "rap-b"))


def _add_memory(robotmem_db: Path, session: str, text: str) -> None:
    conn = sqlite3.connect(robotmem_db)
    with conn:
        conn.execute(
            "INSERT INTO memories(session_id, collection, type, content, context, category, confidence, status) "
            "VALUES (?, 'default', 'fact', ?, '{}', 'observation', 0.9, 'active')",
            (session, text),
        )
    conn.close()


def _cross_robot(memory: Memory) -> int:
    """Memories sitting in a session of another robot (there must be none)."""
    return int(
        memory.index.read_blocking(
            lambda c: c.execute(
                "SELECT count(*) FROM memories m JOIN sessions s ON s.id = m.session_id WHERE m.robot != s.robot"
            ).fetchone()[0]
        )
    )


async def test_an_imported_session_its_robot_ended_is_still_known_as_imported(
    memory: Memory, robotmem_db: Path
) -> None:
    """Ending a session rewrote its summary and lost where it came from: a second robot's import
    then made itself an empty copy of it (found by review)."""
    first = await run_import(memory, robotmem_db, robot="rap-a")
    still_open = source(robotmem_db)["sessions"][2]
    await memory.experiences.end_session(Principal.robot("rap-a"), still_open, 1.0)
    again = await run_import(memory, robotmem_db, robot="rap-b")
    assert (again.memories, again.sessions) == (0, 0)
    assert again.skipped_sessions == {"already imported": first.sessions}


async def test_a_new_memory_goes_to_a_full_copy_of_its_session_for_the_importing_robot(
    memory: Memory, robotmem_db: Path
) -> None:
    """Not a blank session counted as one robotmem had no row for (found by review)."""
    await run_import(memory, robotmem_db, robot="rap-a")
    episode = source(robotmem_db)["sessions"][0]
    _add_memory(robotmem_db, episode, "the dock charger needs 40 minutes")
    grown = await run_import(memory, robotmem_db, robot="rap-b")
    assert (grown.memories, grown.sessions) == (1, 1)
    assert grown.sessions + sum(grown.skipped_sessions.values()) == grown.total_sessions  # each counted once
    assert not grown.notes.get(robotmem_import.ORPHAN_SESSION)
    own = robotmem_import.own_session_id(episode, "rap-b")
    cols = "collection, context, started_at, ended_at, outcome_score"
    theirs, mine = memory.index.read_blocking(
        lambda c: [c.execute(f"SELECT {cols} FROM sessions WHERE id = ?", (i,)).fetchone() for i in (episode, own)]  # noqa: S608
    )
    assert tuple(mine) == tuple(theirs)
    assert _cross_robot(memory) == 0


async def test_a_session_id_crafted_to_collide_never_puts_a_memory_in_another_robots_session(
    memory: Memory, robotmem_db: Path
) -> None:
    """Found by review: when the id a remapped session would take was itself another robot's,
    the memories went there."""
    episode = source(robotmem_db)["sessions"][0]
    twin = robotmem_import.own_session_id(episode, "rap-b")
    conn = sqlite3.connect(robotmem_db)
    with conn:
        conn.execute(
            "INSERT INTO sessions(external_id, collection, context, status) VALUES (?, 'default', '{}', 'ended')",
            (twin,),
        )
    conn.close()
    await run_import(memory, robotmem_db, robot="rap-a")  # rap-a now holds `twin` too
    _add_memory(robotmem_db, episode, "the dock charger needs 40 minutes")
    grown = await run_import(memory, robotmem_db, robot="rap-b")
    assert grown.memories == 1
    assert _cross_robot(memory) == 0
    again = await run_import(memory, robotmem_db, robot="rap-b")
    assert (again.memories, again.sessions) == (0, 0)


async def test_a_remapped_session_never_lands_on_another_robots_own_session(memory: Memory, robotmem_db: Path) -> None:
    episode = source(robotmem_db)["sessions"][0]
    twin = robotmem_import.own_session_id(episode, "rap-b")
    memory.index.write_blocking(
        lambda c: c.executemany(
            "INSERT INTO sessions(id, robot, collection, context, started_at) VALUES (?, 'rap-a', 'default', '{}', 0)",
            [(episode,), (twin,)],
        )
    )
    report = await run_import(memory, robotmem_db, robot="rap-b")
    assert report.memories == report.total_memories
    assert _cross_robot(memory) == 0


async def test_memories_with_zero_or_negative_ids_come_across(memory: Memory, robotmem_db: Path) -> None:
    """robotmem's ids start at 1, but an edited file may hold others: they were never read, and
    the summary did not count them (found by review)."""
    conn = sqlite3.connect(robotmem_db)
    conn.execute("UPDATE memories SET id = 0 WHERE id = 1")
    conn.execute("UPDATE memories SET id = ? WHERE id = 2", (-(2**63),))
    conn.execute("UPDATE memory_tags SET memory_id = 0 WHERE memory_id = 1")
    conn.execute("UPDATE memory_tags SET memory_id = ? WHERE memory_id = 2", (-(2**63),))
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert {0, -(2**63)} <= set(report.memory_ids)


async def test_a_grown_robotmem_file_brings_only_its_new_memories(memory: Memory, robotmem_db: Path) -> None:
    await run_import(memory, robotmem_db)
    conn = sqlite3.connect(robotmem_db)
    with conn:
        conn.execute(
            "INSERT INTO memories(collection, type, content, context, category, confidence, status) "
            "VALUES ('default', 'fact', 'the dock charger needs 40 minutes for a full charge', '{}', 'observation', "
            "0.9, 'active')"
        )
    conn.close()
    again = await run_import(memory, robotmem_db)
    assert again.memories == 1
    assert again.skipped_memories == {"already imported": again.total_memories - 1}
    assert (await memory.experiences.recall(ADMIN, "charger full charge")).hits


async def test_collection_prefix_and_robot_apply_to_memories_and_sessions(memory: Memory, robotmem_db: Path) -> None:
    report = await run_import(memory, robotmem_db, collection_prefix="rm-", robot="franka-01")
    svc = memory.experiences
    hits = (await svc.recall(ADMIN, "倒水", collection="rm-kitchen-lab")).hits
    assert [h.memory.robot for h in hits] == ["franka-01"]
    assert not (await svc.recall(ADMIN, "倒水", collection="kitchen-lab")).hits
    sid = source(robotmem_db)["sessions"][1]
    s = await svc.get_session(ADMIN, sid)
    assert (s.robot, s.collection) == ("franka-01", "rm-kitchen-lab")
    assert report.robot == "franka-01"
    scoped = await svc.recall(Principal.robot("franka-01"), "倒水", collection="rm-kitchen-lab")
    assert scoped.hits  # the robot reads what was imported as its own


async def test_bad_options_and_robot_tokens_are_refused(memory: Memory, robotmem_db: Path) -> None:
    with pytest.raises(InvalidInput, match="collection prefix"):
        await run_import(memory, robotmem_db, collection_prefix="bad prefix ")
    with pytest.raises(InvalidInput, match="robot id"):
        await run_import(memory, robotmem_db, robot="no spaces allowed")
    with pytest.raises(Forbidden):
        await operations.import_robotmem(memory, Principal.robot("ur5-01"), robotmem_db)
    with pytest.raises(InvalidInput, match="no robotmem database"):
        await run_import(memory, robotmem_db.parent / "missing.db")


# ---------------------------------------------------------------------------- files that are not robotmem's
def test_garbage_empty_and_foreign_files_are_one_clear_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all\x00" * 300)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    for path, reason in ((garbage, "not an SQLite database"), (empty, "no memories table"), (foreign, "no memories")):
        before = sha256(path)
        with pytest.raises(RobotmemUnreadable, match=reason) as info:
            RobotmemFile(path)
        assert str(path) in info.value.detail
        assert "The file was not modified" in info.value.detail
        assert sha256(path) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("ALTER TABLE memories ADD COLUMN embedding_model TEXT", "embedding_model"),
        ("PRAGMA user_version = 2", "user_version 2"),
        ("ALTER TABLE memory_tags ADD COLUMN weight REAL", "memory_tags has columns"),
    ],
)
def test_a_newer_robotmem_schema_is_refused_before_anything_is_written(
    robotmem_db: Path, change: str, message: str
) -> None:
    conn = sqlite3.connect(robotmem_db)
    conn.execute(change)
    conn.commit()
    conn.close()
    with pytest.raises(RobotmemUnreadable, match=message) as info:
        RobotmemFile(robotmem_db)
    assert "newer robotmem schema" in info.value.detail


def test_our_own_database_is_named_as_such(memory: Memory) -> None:
    with pytest.raises(RobotmemUnreadable, match="a robot-mcp-memory database, not robotmem's"):
        RobotmemFile(memory.settings.index_path)


def test_a_file_robotmem_holds_locked_is_busy_not_broken(robotmem_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RobotmemFile, "busy_timeout_s", 0.05)
    writer = sqlite3.connect(robotmem_db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # robotmem in the middle of a write
    try:
        with pytest.raises(RobotmemBusy, match="locked by another process") as info:
            RobotmemFile(robotmem_db)
        assert "run the import again" in info.value.detail
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    RobotmemFile(robotmem_db).close()  # and once it is done, the file opens


# ---------------------------------------------------------------------------- what robotmem never checked
def test_collection_names_robotmem_accepts_are_mapped_not_dropped() -> None:
    assert usable_collection("kitchen-lab") == "kitchen-lab"
    lab, cjk, other = usable_collection("lab 2/grasp"), usable_collection("实验室"), usable_collection("lab 2 grasp")
    assert lab.startswith("lab-2-grasp-")
    assert cjk.startswith("c-")
    assert len({lab, cjk, other}) == 3  # two names never fold into one
    assert usable_collection("实验室") == cjk  # the same name maps the same way every time


async def test_unusual_collections_and_binary_text_columns_come_across(memory: Memory, robotmem_db: Path) -> None:
    conn = sqlite3.connect(robotmem_db)
    conn.execute("UPDATE memories SET collection = '实验室' WHERE id IN (9, 10, 11)")
    conn.execute("UPDATE sessions SET collection = '实验室' WHERE id = 2")
    conn.execute("UPDATE memories SET collection = 'lab 2/grasp' WHERE id = 13")
    conn.execute("UPDATE memories SET category = CAST(x'6f6273e9' AS BLOB) WHERE id = 14")  # not UTF-8
    conn.execute("UPDATE memories SET content = CAST(content AS BLOB), context = CAST(context AS BLOB) WHERE id = 1")
    conn.execute("UPDATE memories SET perception_type = CAST('tactile' AS BLOB) WHERE id = 7")
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert not report.skipped_memories
    assert not report.skipped_sessions
    cjk, lab = usable_collection("实验室"), usable_collection("lab 2/grasp")
    assert report.renamed == {"实验室": cjk, "lab 2/grasp": lab}
    assert any("'实验室' is" in line for line in report.lines())
    svc = memory.experiences
    assert [h.memory.content for h in (await svc.recall(ADMIN, "倒水", collection=cjk)).hits]
    assert (await svc.recall(ADMIN, "loading dock ramp", collection=lab)).hits
    # every recall of the collection still works (a BLOB category once broke them all)
    hits = (await svc.recall(ADMIN, "", n=50)).hits
    by_id = {report.memory_ids[k]: k for k in report.memory_ids}
    mugs = [h.memory for h in hits if by_id[h.memory.id] == 1]
    assert mugs
    assert mugs[0].content.startswith("grip_force=12.5N held the wet mug")
    assert mugs[0].context.get("params")  # the BLOB context was read as JSON, not as its repr
    assert all(isinstance(h.memory.category, str) for h in hits)
    assert [h.memory.category for h in hits if by_id[h.memory.id] == 14] == ["obs\ufffd"]


async def test_perception_data_far_too_large_is_never_read(memory: Memory, robotmem_db: Path) -> None:
    conn = sqlite3.connect(robotmem_db)
    conn.execute(
        "UPDATE memories SET perception_data = randomblob(?) WHERE id = 8", (robotmem_import.MAX_DATA_READ + 1,)
    )
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert report.notes[robotmem_import.DATA_LEFT] == 1
    got = await memory.experiences.get(ADMIN, report.memory_ids[8])
    assert got.data is None
    assert got.metadata["imported_from"]["data_left_behind"] is True


async def test_robotmem_writing_during_the_import_does_not_skew_the_summary(memory: Memory, robotmem_db: Path) -> None:
    conn = sqlite3.connect(robotmem_db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")  # as robotmem runs: readers and its writer side by side
    total = source(robotmem_db)["memories"]

    def robotmem_learns(done: int, _total: int) -> None:
        conn.execute(
            "INSERT INTO memories(collection, type, content, context, category, confidence, status, created_at) "
            "VALUES ('default', 'fact', ?, '{}', 'observation', 0.9, 'active', '2026-11-30T00:00:00.000')",
            (f"learned while importing, after {done}",),
        )

    report = await robotmem_import.import_robotmem(memory.experiences, robotmem_db, progress=robotmem_learns, page=5)
    assert report.total_memories == total
    assert report.memories == total  # one moment's file, counted and read alike
    again = await run_import(memory, robotmem_db)
    assert again.memories == again.total_memories - total > 0  # the rest comes with the next import
    conn.close()


def test_a_damaged_page_midway_keeps_what_was_read_and_says_so(
    tmp_path: Path, robotmem_db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = RobotmemFile.memories

    def damaged(self: RobotmemFile, page: int = 500) -> Any:
        it = pages(self, 20)
        yield next(it)
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(RobotmemFile, "memories", damaged)
    data = str(tmp_path / "data")
    assert cli.main(["import-robotmem", "--data-dir", data, str(robotmem_db)]) == cli.EXIT_FAILED
    out = capsys.readouterr().out
    assert "memories: 20 imported of 37" in out
    assert "stopped: reading" in out
    assert "malformed" in out
    assert "run the import again" in out


# ---------------------------------------------------------------------------- the command
def test_the_command_imports_then_skips_and_reports(
    tmp_path: Path, robotmem_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "data")
    assert cli.main(["import-robotmem", "--data-dir", data, "--robot", "ur5-01", str(robotmem_db)]) == 0
    out = capsys.readouterr().out
    n = source(robotmem_db)["memories"]
    assert f"memories: {n} imported of {n}" in out
    assert "sessions: 3 imported of 3" in out
    assert cli.main(["import-robotmem", "--data-dir", data, str(robotmem_db)]) == 0
    out = capsys.readouterr().out
    assert f"memories: 0 imported of {n}" in out
    assert f"skipped {n} memories: already imported" in out
    assert cli.main(["stats", "--data-dir", data]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == n


def test_the_command_exits_65_on_a_file_that_is_not_robotmem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "memory.db"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    data = tmp_path / "data"
    assert cli.main(["import-robotmem", "--data-dir", str(data), str(garbage)]) == cli.EXIT_DATA == 65
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"robot-mcp-memory: {garbage} is not a robotmem memory.db")
    assert "Traceback" not in err
    assert not data.exists()  # nothing of ours was created for a file we cannot read
    assert cli.main(["import-robotmem", "--data-dir", str(data), str(tmp_path / "nope.db")]) == cli.EXIT_FAILED
    assert "no robotmem database at" in capsys.readouterr().err


# ---------------------------------------------------------------------------- a fresh file from robotmem itself
@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.skipif(not ROBOTMEM_PYTHON.exists(), reason=ROBOTMEM_MISSING)
async def test_a_file_robotmem_writes_now_imports_completely(memory: Memory, tmp_path: Path) -> None:
    out = tmp_path / "fresh" / "memory.db"
    out.parent.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ROBOTMEM_HOME": str(tmp_path / "home")}
    made = subprocess.run(  # noqa: ASYNC221 - a short child run; nothing else is waiting on this loop
        [str(ROBOTMEM_PYTHON), str(MAKER), str(out)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    summary = json.loads(made.stdout.strip().splitlines()[-1])
    report = await run_import(memory, out)
    assert report.memories == len(summary["ids"]) == source(out)["memories"]
    assert report.sessions == len(summary["sessions"])
    assert report.forgotten == 1
    assert report.superseded == summary["consolidated"][0]["superseded_count"]
    zh = await memory.experiences.recall(ADMIN, "倒水", collection="kitchen-lab")
    assert zh.hits


async def test_json_nested_past_pythons_limit_comes_across_as_text(memory: Memory, robotmem_db: Path) -> None:
    """robotmem stores a context its own json.loads could not read as the raw text; ours read it
    with a RecursionError, which ended the import with a traceback after the sessions."""
    deep = "[" * 5000 + "]" * 5000
    conn = sqlite3.connect(robotmem_db)
    conn.execute("UPDATE memories SET context = ? WHERE id = 2", (deep,))
    conn.execute("UPDATE memories SET perception_metadata = ? WHERE id = 6", (deep,))
    conn.execute("UPDATE sessions SET context = ? WHERE id = 3", (deep,))
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert report.sessions == report.total_sessions
    got = await memory.experiences.get(ADMIN, report.memory_ids[2])
    assert got.context == {"note": deep}


async def test_superseded_links_survive_a_run_that_stopped_partway(memory: Memory, robotmem_db: Path) -> None:
    """Memory 3 (superseded by 4) comes in the first page; the run stops before 4 is read. The
    next run finds 3 already here and must still link it."""

    class Stop(Exception):
        pass

    def stop_after_first_page(done: int, _total: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        await robotmem_import.import_robotmem(memory.experiences, robotmem_db, progress=stop_after_first_page, page=3)
    report = await run_import(memory, robotmem_db)
    ours = report.memory_ids
    for rid, by in source(robotmem_db)["supersede"].items():
        got = await memory.experiences.get(ADMIN, ours[rid])
        assert (got.status, got.superseded_by) == ("superseded", ours[by])


async def test_two_imports_of_one_file_at_once_bring_each_memory_once(
    memory: Memory, robotmem_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second import looked at the store (its largest id, what was imported) before the
    first one's pages were written, so its first look found an empty store; each page's own
    look, in its write transaction, must see what the first one wrote."""
    first = await run_import(memory, robotmem_db)
    looks, last = robotmem_import.imported_keys, robotmem_import.last_id
    first_looks = {"keys": True, "last": True}

    def stale_keys(conn: sqlite3.Connection, after: int = 0) -> dict[tuple[int, str], int]:
        if first_looks.pop("keys", False):
            return {}
        return looks(conn, after)

    def stale_last(conn: sqlite3.Connection) -> int:
        return 0 if first_looks.pop("last", False) else last(conn)

    monkeypatch.setattr(robotmem_import, "imported_keys", stale_keys)
    monkeypatch.setattr(robotmem_import, "last_id", stale_last)
    second = await run_import(memory, robotmem_db)
    assert second.memories == 0
    assert second.skipped_memories[robotmem_import.ALREADY] == first.memories
    assert second.memory_ids == first.memory_ids
    count = memory.index.read_blocking(lambda c: c.execute("SELECT count(*) FROM memories").fetchone()[0])
    assert count == first.memories


async def test_perception_data_that_is_not_json_we_can_hold_is_named_so(memory: Memory, robotmem_db: Path) -> None:
    conn = sqlite3.connect(robotmem_db)
    conn.execute("UPDATE memories SET perception_data = ? WHERE id = 7", ('{"label": "\\udc00"}',))
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert report.notes[robotmem_import.DATA_UNREADABLE] == 1
    assert robotmem_import.DATA_LEFT not in report.notes


async def test_a_session_robotmem_ended_without_starting_keeps_its_outcome(memory: Memory, robotmem_db: Path) -> None:
    """robotmem's end_session on an id it never started (memories learned under a custom id)
    records an outcome but no session row: the session recreated here keeps that outcome."""
    _add_memory(robotmem_db, "run-7", "the conveyor stops when the light curtain is crossed")
    conn = sqlite3.connect(robotmem_db)
    with conn:
        conn.execute(
            "INSERT INTO session_outcomes(session_id, score, created_at) VALUES (?, ?, ?)",
            ("run-7", 0.9, "2026-11-30T08:00:00.000"),
        )
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.notes[robotmem_import.ORPHAN_SESSION] == 1
    row = memory.index.read_blocking(
        lambda c: c.execute("SELECT outcome_score, ended_at FROM sessions WHERE id = 'run-7'").fetchone()
    )
    assert row[0] == pytest.approx(0.9)
    assert row[1] == pytest.approx(epoch("2026-11-30T08:00:00.000"))


async def test_a_context_too_deep_to_keep_as_json_and_numeric_data_come_across(
    memory: Memory, robotmem_db: Path
) -> None:
    """A context nested deeper than a learn keeps (but readable) came across as nothing — the
    memory was skipped — while one deeper still came as its text; both are the note now. Data
    robotmem stored as a number (SQLite keeps a REAL in a TEXT column) ended the import."""
    deep = "[" * 100 + "]" * 100
    conn = sqlite3.connect(robotmem_db)
    conn.execute("UPDATE memories SET context = ? WHERE id = 2", (deep,))
    conn.execute("UPDATE memories SET perception_data = 1.5 WHERE id = 6")
    conn.commit()
    conn.close()
    report = await run_import(memory, robotmem_db)
    assert report.memories == report.total_memories
    assert (await memory.experiences.get(ADMIN, report.memory_ids[2])).context == {"note": deep}
    assert (await memory.experiences.get(ADMIN, report.memory_ids[6])).data == 1.5
