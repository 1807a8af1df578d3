"""What `load` does to a store, and which dump directories it takes: one transaction (a refused
row loads nothing), a merge that leaves alone the rows an archive does not carry, and no dump
that did not finish. Stopping a real `load` process (kill -9, SIGTERM, SIGHUP) is in
tests/e2e/test_load_interrupted.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import StorageError
from robot_mcp_memory.lessons.sqlite.store import ParamStore
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.storage import files
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.surfaces import cli
from robot_mcp_memory.tenancy.principal import ADMIN
from tests.conftest import MAILROOM

Rows = dict[str, list[tuple[Any, ...]]]


def _learned(data: Path, texts: list[tuple[str, dict[str, Any]]], session: bool = False) -> list[int]:
    """Memories learned into `data` (with the hashing embedder, so they have vectors); their stored
    ids, which the archive's lines and the tables name (`_public`: what robots are shown)."""
    with RobotMemory(data, robot_id="rap-1", embedder="hashing", wait_for_model=5) as mem:
        sid = mem.start_session(context={"task": {"name": "pick"}}) if session else None
        ids = [int(mem.learn(t, context=c, session_id=sid)["memory_id"]) for t, c in texts]
        if sid is not None:
            mem.end_session(sid, outcome_score=0.5)
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        stored = dict(conn.execute("SELECT public_id, id FROM memory_public").fetchall())
    return [stored[i] for i in ids]


def _public(data: Path, memory_id: int) -> int:
    """The id the memory stored as `memory_id` is shown by."""
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        row = conn.execute("SELECT public_id FROM memory_public WHERE id = ?", (memory_id,)).fetchone()
    return memory_id if row is None else int(row[0])


def _dump(data: Path, dest: Path) -> Path:
    assert cli.main(["dump", "--data-dir", str(data), str(dest)]) == 0
    return dest


def _load(data: Path, src: Path) -> int:
    return cli.main(["load", "--data-dir", str(data), str(src)])


def _rows_of(data: Path) -> Rows:
    """Every row of the tables a load writes, the memory index's entries and the vectors."""
    tables = ("processes", "fleet_groups", "fleet_robots", "memories", "memory_tags", "memory_public", "sessions")
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}  # noqa: S608
        rows["memories_fts"] = conn.execute("SELECT rowid, content, context FROM memories_fts ORDER BY 1").fetchall()
        rows["vectors"] = conn.execute("SELECT domain, ref FROM vectors ORDER BY 1, 2").fetchall()
    return rows


def _tags(data: Path, memory_id: int) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        found = conn.execute("SELECT tag, source FROM memory_tags WHERE memory_id = ? ORDER BY tag", (memory_id,))
        return [(str(t), str(s)) for t, s in found]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


# ---------------------------------------------------------------------------- one transaction
def test_a_refused_archive_row_loads_nothing_not_even_the_files_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad memory_tags file stopped the load after the memories and the documents had committed
    (a transaction per file): the store was half loaded. The load is one transaction now."""
    _learned(tmp_path / "a", [("the hall conveyor is stuck", {})])
    src = _dump(tmp_path / "a", tmp_path / "dump")
    (src / "processes" / "mailroom.md").write_text(MAILROOM, encoding="utf-8")
    (src / "archive" / "memory_tags.jsonl").write_text('{"memory_id": 999, "tag": "x", "source": "auto"}\n')
    target = tmp_path / "b"
    _learned(target, [("camera saw a red mug", {"tags": ["kitchen"]})])
    before = _rows_of(target)
    assert _load(target, src) == cli.EXIT_FAILED
    assert _rows_of(target) == before
    err = capsys.readouterr().err
    assert "memory_tags.jsonl line 1 " in err
    assert "nothing was loaded" in err
    with RobotMemory(target, robot_id="rap-1") as mem:
        assert [h["content"] for h in mem.recall("red mug")] == ["camera saw a red mug"]
        assert mem.recall("conveyor") == []


def test_a_refused_lesson_loads_nothing_into_index_db_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lessons.db is another file: its rows were loaded after index.db had committed, so a bad
    lesson left every memory and document loaded (exit 1) — its transaction now waits for both."""
    _learned(tmp_path / "a", [("the hall conveyor is stuck", {})])
    src = _dump(tmp_path / "a", tmp_path / "dump")
    (src / "processes" / "mailroom.md").write_text(MAILROOM, encoding="utf-8")
    lesson = {"scope": "robot:rap-1", "key": "grip", "params": "nope", "created": "x", "updated": "x"}
    _write_jsonl(src / "archive" / "lessons.lessons.jsonl", [lesson])
    target = tmp_path / "b"
    _learned(target, [("camera saw a red mug", {})])
    before = _rows_of(target)
    assert _load(target, src) == cli.EXIT_FAILED
    assert "lessons.lessons.jsonl line 1 " in capsys.readouterr().err
    assert _rows_of(target) == before


def test_a_load_stopped_between_index_db_and_lessons_db_is_reported_by_doctor_until_loaded_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No transaction spans two files: a load that stops after index.db's commit and before
    lessons.db's (a full disk, kill -9 in between) leaves index.db loaded without the lessons,
    and says so — on the command's stderr, then in `doctor` until a load finishes."""
    _learned(tmp_path / "a", [("the hall conveyor is stuck", {})])
    src = _dump(tmp_path / "a", tmp_path / "dump")
    lesson = {"scope": "robot:rap-1", "key": "grip", "params": '{"force": 12.5}', "created": "x", "updated": "x"}
    _write_jsonl(src / "archive" / "lessons.lessons.jsonl", [lesson])
    real = ParamStore.writable

    async def failing_at_commit(self: ParamStore) -> SqliteStore:
        store = await real(self)
        write = store.write_blocking

        def write_then_fail(fn: Callable[[sqlite3.Connection], Any], after: Any = None) -> Any:
            def job(conn: sqlite3.Connection) -> Any:
                fn(conn)
                raise StorageError("the disk is full: the write was not stored.")

            return write(job, after)

        monkeypatch.setattr(store, "write_blocking", write_then_fail)
        return store

    monkeypatch.setattr(ParamStore, "writable", failing_at_commit)
    target = tmp_path / "b"
    monkeypatch.chdir(tmp_path)  # the load names the dump and the data directory relatively
    assert cli.main(["load", "--data-dir", "b", "dump"]) == cli.EXIT_FAILED
    assert "index.db was loaded, but lessons.db was not" in capsys.readouterr().err
    monkeypatch.undo()  # doctor runs from elsewhere: the command it gives must work from there
    assert cli.main(["doctor", "--data-dir", str(target)]) == cli.EXIT_FAILED
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1
    assert failed[0].startswith("FAIL load: ")
    assert failed[0].endswith(f"Run robot-mcp-memory load --data-dir {target} {src} again")
    assert _load(target, src) == 0
    assert cli.main(["doctor", "--data-dir", str(target)]) == 0
    with contextlib.closing(sqlite3.connect(target / "lessons.db")) as conn:
        assert conn.execute("SELECT key, params FROM lessons").fetchall() == [("grip", '{"force": 12.5}')]


# ---------------------------------------------------------------------------- a merge
def test_loading_a_group_keeps_the_robots_that_joined_it_after_the_dump(tmp_path: Path) -> None:
    """The group's row was replaced by delete-and-insert, and its ON DELETE SET NULL ungrouped
    every robot of it — rap-2, which the archive does not carry at all, lost its group's memories."""
    data = tmp_path / "data"
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}))
    try:
        asyncio.run(memory.fleet.upsert_group(ADMIN, "line-a", name="Line A"))
        asyncio.run(memory.fleet.register_robot(ADMIN, "rap-1", group="line-a"))
    finally:
        memory.close()
    src = _dump(data, tmp_path / "dump")
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}))
    try:
        asyncio.run(memory.fleet.register_robot(ADMIN, "rap-2", group="line-a"))
    finally:
        memory.close()
    assert _load(data, src) == 0
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        robots = conn.execute("SELECT robot_id, group_id FROM fleet_robots ORDER BY 1").fetchall()
    assert robots == [("rap-1", "line-a"), ("rap-2", "line-a")]


def test_an_archive_of_memories_alone_keeps_their_tags(tmp_path: Path) -> None:
    """Each loaded memory's row was deleted and inserted again, and the delete cascaded to its
    tags: memories.jsonl shipped alone (edited) wiped every tag of every memory in it."""
    data = tmp_path / "data"
    (mid,) = _learned(data, [("grasp the red mug by the handle", {"tags": ["kitchen", "mug"]})])
    tags = _tags(data, mid)
    assert ("kitchen", "user") in tags
    src = _dump(data, tmp_path / "dump")
    for name in ("memory_tags", "sessions", "fleet_groups", "fleet_robots", "fleet_settings"):
        (src / "archive" / f"{name}.jsonl").unlink(missing_ok=True)
    rows = _jsonl(src / "archive" / "memories.jsonl")
    rows[0]["content"] = "grasp the red cup by the handle"
    _write_jsonl(src / "archive" / "memories.jsonl", rows)
    assert _load(data, src) == 0
    assert _tags(data, mid) == tags
    with RobotMemory(data, robot_id="rap-1") as mem:
        (found,) = mem.recall("red cup")
        assert found["content"] == "grasp the red cup by the handle"
        assert set(found["tags"]) >= {"kitchen", "mug"}
        assert [h["id"] for h in mem.recall("kitchen")] == [_public(data, mid)]  # user tags are in the rebuilt index


def test_an_archive_with_tags_gives_each_loaded_memory_exactly_its_tags(tmp_path: Path) -> None:
    """When the archive carries the tags too, a loaded memory is its lines whole: a tag line
    removed by hand is removed; a memory the archive does not carry keeps its tags."""
    data = tmp_path / "data"
    edited, other = _learned(
        data,
        [("grasp the red mug by the handle", {"tags": ["kitchen", "mug"]}), ("the dock door jams", {"tags": ["dock"]})],
    )
    src = _dump(data, tmp_path / "dump")
    other_tags = _tags(data, other)
    _write_jsonl(
        src / "archive" / "memories.jsonl", [r for r in _jsonl(src / "archive" / "memories.jsonl") if r["id"] == edited]
    )
    _write_jsonl(
        src / "archive" / "memory_tags.jsonl",
        [r for r in _jsonl(src / "archive" / "memory_tags.jsonl") if r["memory_id"] == edited and r["tag"] != "mug"],
    )
    assert _load(data, src) == 0
    assert [t for t, _s in _tags(data, edited)] == sorted(
        r["tag"] for r in _jsonl(src / "archive" / "memory_tags.jsonl")
    )
    assert "mug" not in [t for t, _s in _tags(data, edited)]
    assert "kitchen" in [t for t, _s in _tags(data, edited)]  # the archive's lines, not nothing
    assert _tags(data, other) == other_tags
    assert other_tags


def test_a_loaded_row_is_its_line_whole_columns_it_leaves_out_take_their_defaults(tmp_path: Path) -> None:
    """A row is updated in place (no delete), yet it still becomes what its line says, as the
    insert it replaced made it: a column the line leaves out is reset, not kept."""
    data = tmp_path / "data"
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}))
    try:
        asyncio.run(memory.fleet.register_robot(ADMIN, "rap-1", name="arm one"))
    finally:
        memory.close()
    src = tmp_path / "dump"
    (src / "archive").mkdir(parents=True)
    robot = {"robot_id": "rap-1", "created": "2026-01-01T00:00:00Z", "updated": "2026-01-02T00:00:00Z"}
    _write_jsonl(src / "archive" / "fleet_robots.jsonl", [robot])
    assert _load(data, src) == 0
    with contextlib.closing(sqlite3.connect(data / "index.db")) as conn:
        assert conn.execute("SELECT robot_id, name, meta, updated FROM fleet_robots").fetchall() == [
            ("rap-1", "", "{}", "2026-01-02T00:00:00Z")
        ]


# ---------------------------------------------------------------------------- what load takes
@pytest.mark.parametrize(
    ("column", "value"),
    [("session_id", "a-session-nowhere"), ("superseded_by", 999)],
)
def test_a_memory_naming_a_session_or_successor_nowhere_is_refused(
    tmp_path: Path, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither is a foreign key (a memory outlives both), so an archive mixing two dumps loaded
    memories in sessions that exist nowhere: `end_session` said not_found, recall found them."""
    data = tmp_path / "data"
    _learned(data, [("the hall conveyor is stuck", {}), ("the dock door jams", {})], session=True)
    src = _dump(data, tmp_path / "dump")
    rows = _jsonl(src / "archive" / "memories.jsonl")
    rows[1][column] = value
    _write_jsonl(src / "archive" / "memories.jsonl", rows)
    assert _load(tmp_path / "b", src) == cli.EXIT_FAILED
    line = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("robot-mcp-memory:"))
    assert f"memories.jsonl line 2 has {column} {json.dumps(value)}, which names no row of " in line
    assert _rows_of(tmp_path / "b")["memories"] == []


def test_a_dump_stopped_midway_is_refused_by_load_until_a_dump_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dump replaces its files one by one: stopped after memories.jsonl, the directory held the
    new memories with the earlier dump's tags and sessions, and `load` took it (exit 0)."""
    data = tmp_path / "data"
    _learned(data, [("the hall conveyor is stuck", {"tags": ["hall"]})], session=True)
    dest = _dump(data, tmp_path / "dump")
    _learned(data, [("night shift: the dock light flickers", {"tags": ["night"]})], session=True)
    real = files.replacing

    @contextlib.contextmanager
    def stopped_at_the_tags(path: Path) -> Iterator[TextIO]:
        if path.name == "memory_tags.jsonl":
            raise KeyboardInterrupt  # Ctrl-C; kill -9 stops it there without even this
        with real(path) as fh:
            yield fh

    monkeypatch.setattr(files, "replacing", stopped_at_the_tags)
    assert cli.main(["dump", "--data-dir", str(data), str(dest)]) == 130
    monkeypatch.undo()
    capsys.readouterr()
    assert _load(tmp_path / "b", dest) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("robot-mcp-memory:")
    assert "did not finish" in err
    assert "nothing was loaded" in err
    assert _rows_of(tmp_path / "b")["memories"] == []
    assert _load(tmp_path / "b", dest / "processes") == cli.EXIT_FAILED  # its documents alone neither

    _dump(data, dest)
    assert _load(tmp_path / "b", dest) == 0
    assert len(_rows_of(tmp_path / "b")["memories"]) == 2
    assert not [p.name for p in dest.iterdir() if p.name.startswith(".dump-unfinished")]


# ---------------------------------------------------------------------------- derived data of loaded memories
def test_a_hand_edited_memory_is_found_as_the_duplicate_of_its_new_text(tmp_path: Path) -> None:
    """The documented edit (dump, fix the line, load back) kept the lexical key and facts digest
    of the old text, and dedup finds candidates only through them: learning the corrected text
    again made a second copy. A dump of an older release (keys that meant something else) too."""
    data = tmp_path / "data"
    ctx = {"params": {"x": 1}}
    _learned(data, [("The red cube sits on the left shelf", ctx), ("The arm parks at bay 3", {})])
    src = _dump(data, tmp_path / "dump")
    rows = _jsonl(src / "archive" / "memories.jsonl")
    rows[0]["content"] = "The red cube sits on the right shelf"
    rows[1]["content_hash"] = "a key of an older release"
    rows[1]["facts_hash"] = "a digest of an older release"
    _write_jsonl(src / "archive" / "memories.jsonl", rows)
    assert _load(data, src) == 0
    with RobotMemory(data, robot_id="rap-1", embedder="none") as mem:
        again = mem.learn("The red cube sits on the right shelf", context=ctx)
        assert again["status"] == "duplicate", again
        assert mem.learn("The arm parks at bay 3")["status"] == "duplicate"


def test_a_memory_line_without_its_dedup_keys_loads_and_gets_them(tmp_path: Path) -> None:
    """The keys are derived, and nobody can compute a lexical key by hand: a line without
    `content_hash` was refused ("misses the required field"). They are computed as a write does."""
    data = tmp_path / "data"
    with RobotMemory(data, robot_id="rap-1", embedder="none") as mem:
        mem.learn("Grip force 12 N held the wet mug", context={"params": {"grip_force": 12}})
        mem.save_perception("wet mug on the tray", perception_type="visual", data={"x": 1})
    src = _dump(data, tmp_path / "dump")
    stored = _jsonl(src / "archive" / "memories.jsonl")
    _write_jsonl(
        src / "archive" / "memories.jsonl",
        [{k: v for k, v in r.items() if k not in ("content_hash", "facts_hash")} for r in stored],
    )
    target = tmp_path / "b"
    assert _load(target, src) == 0
    _dump(target, tmp_path / "again")
    assert _jsonl(tmp_path / "again" / "archive" / "memories.jsonl") == stored  # keys exactly as learn made them
    with RobotMemory(target, robot_id="rap-1", embedder="none") as mem:
        assert mem.learn("Grip force 12 N held the wet mug", context={"params": {"grip_force": 12}})["status"] == (
            "duplicate"
        )


def test_loading_a_dump_back_keeps_the_vectors_of_unchanged_memories(tmp_path: Path) -> None:
    """Every loaded memory's vector was dropped, changed or not (7,326 of 7,328 on loading a dump
    back), and a running server made none until it restarted: hybrid recall ranked without them.
    Only a memory whose text changed, or that the line forgets, loses its vector now."""
    data = tmp_path / "data"
    ids = _learned(data, [("the hall conveyor is stuck", {}), ("the dock door jams", {}), ("the lift is slow", {})])
    src = _dump(data, tmp_path / "dump")
    rows = _jsonl(src / "archive" / "memories.jsonl")
    assert [r["id"] for r in rows] == ids
    rows[1]["content"] = "the dock door jams when it rains"
    rows[2]["status"] = "forgotten"
    _write_jsonl(src / "archive" / "memories.jsonl", rows)
    assert ("memory", str(ids[1])) in _rows_of(data)["vectors"]
    assert _load(data, src) == 0
    assert [ref for domain, ref in _rows_of(data)["vectors"] if domain == "memory"] == [str(ids[0])]


def test_a_second_dump_into_a_directory_being_dumped_into_is_refused_and_the_first_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two dumps at once shared `.dump-unfinished`: the one that finished first removed it while
    the other still wrote (a load then took the mix), and the other failed at its end with exit
    74 "No such file or directory (.dump-unfinished)" though it had written every file."""
    data = tmp_path / "data"
    _learned(data, [("the hall conveyor is stuck", {"tags": ["hall"]})], session=True)
    dest = tmp_path / "dump"
    real = files.replacing
    second: list[int] = []

    @contextlib.contextmanager
    def another_dump_meanwhile(path: Path) -> Iterator[TextIO]:
        if path.name == "memory_tags.jsonl" and not second:  # the first dump is midway
            second.append(-1)
            worker = threading.Thread(
                target=lambda: second.append(cli.main(["dump", "--data-dir", str(data), str(dest)]))
            )
            worker.start()
            worker.join()
            assert (dest / ".dump-unfinished").exists()  # the first one's: still there
        with real(path) as fh:
            yield fh

    monkeypatch.setattr(files, "replacing", another_dump_meanwhile)
    assert cli.main(["dump", "--data-dir", str(data), str(dest)]) == 0
    monkeypatch.undo()
    assert second[-1] == cli.EXIT_FAILED
    assert f"another dump into {dest} is running" in capsys.readouterr().err
    assert not (dest / ".dump-unfinished").exists()
    assert _load(tmp_path / "b", dest) == 0
    assert _rows_of(tmp_path / "b")["memory_tags"] == _rows_of(data)["memory_tags"]


def test_a_document_stored_before_the_frontmatter_limits_dumps_and_loads_back_whole(tmp_path: Path) -> None:
    """save_process now refuses a frontmatter past its limits; one already stored must survive
    an operator's dump and load, not be skipped as unparseable."""
    values = list(range(docmodel.MAX_FRONTMATTER_ENTRIES + 1))
    data = tmp_path / "data"
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "none"}))
    try:
        asyncio.run(memory.process_store.save(docmodel.ProcessDoc(id="hoard", title="Hoard", extra={"log": values})))
    finally:
        memory.close()
    src = _dump(data, tmp_path / "dump")
    fresh = tmp_path / "fresh"
    assert _load(fresh, src) == 0
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(fresh), "MEMORY_EMBEDDER": "none"}))
    try:
        loaded = asyncio.run(memory.process_store.get("hoard"))
    finally:
        memory.close()
    assert loaded is not None
    assert loaded.extra == {"log": values}
