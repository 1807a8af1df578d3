"""Moving a fleet from SQLite to PostgreSQL (`operations.copy.copy_installation`): a SQLite
installation with a realistic mix — the robotmem fixture's memories, perceptions, sessions and tags,
documents with outcome records from several tenants, a fleet, lessons — copied into a fresh
schema answers the same reads there; every table's count is verified, and a target that is not
empty, or a copy whose counts differ, is refused and labelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import Conflict, InvalidInput, StorageError
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.operations import copy
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.operations.ports import OperatorStore
from robot_mcp_memory.operations.postgres.store import PostgresBackups
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Author
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import ADMIN, STDIO
from tests.conftest import MAILROOM, doc
from tests.operations.conftest import PgFactory
from tests.operations.pg_installation import PgInstallation

pytestmark = pytest.mark.postgres

ROBOTMEM = Path(__file__).parent.parent / "fixtures" / "robotmem-0.1.3.db"
QUERIES = ("package mailroom", "door", "dock charger", "shelf", "grip mug")
RECALLS = ("mug", "door", "sweep floor", "red cup", "charger", "kitchen")


async def _seed(memory: Memory, tmp_path: Path) -> None:
    await operations.import_robotmem(memory, ADMIN, ROBOTMEM)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "mailroom.md").write_text(MAILROOM, encoding="utf-8")
    for i, (title, body) in enumerate(
        [
            ("Open the lab door", "Push the bar, then hold the door for the cart."),
            ("Dock at the charger", "Back into the dock charger slowly; check the contacts."),
            ("Clear the parcel shelf", "Take every parcel off the shelf to the mailroom."),
        ]
    ):
        owner = "shared" if i == 0 else "rap-1"
        (docs / f"p{i}.md").write_text(doc(f"p-{i}", title, body, tags=f"[t{i}, x]", robot=owner), encoding="utf-8")
    await operations.load(memory, ADMIN, docs)
    store = memory.process_store
    await store.record_outcome("p-0", True, "opened fine", Author("rap-1", "group:lab"))
    await store.record_outcome("p-0", False, "door jammed", Author("rap-2", "solo:rap-2"))
    await store.record_outcome("fetch-package-mailroom", True, "delivered", Author("rap-1", "group:lab"))
    registry = memory.fleet_registry
    await registry.upsert_group("lab", name="The lab", customer="acme", factory="north", self_improve=True)
    await registry.register_robot("rap-1", "Rap one", "lab")
    await registry.register_robot("rap-2", None, None)
    await registry.set_robot_meta("rap-2", None, {"arm": "ur5", "payload_kg": 3})
    await registry.set_global_self_improve(True)
    lessons = memory.lesson_store
    await lessons.record("group:lab", "grip.mug", "kitchen", {"force": 12}, True, "rap-1")
    await lessons.record("group:lab", "grip.mug", "kitchen", {"force": 12}, False, "rap-1")
    await lessons.record("robot:rap-2", "dock.speed", "", {"v": 0.2}, True, "rap-2")


def _processes(found: Any) -> list[tuple[str, float]]:
    return [(h.doc.id, round(h.score, 9)) for h in found]


async def _reads(
    processes: Any, memories: ExperienceService, fleet: Any, lessons: Any, collections: list[str]
) -> dict[str, Any]:
    """What the installation answers: find hits with scores, recall ids per collection, the fleet, the lessons."""
    answers: dict[str, Any] = {}
    for q in QUERIES:
        answers[f"find {q}"] = _processes(await processes.find(Query.parse(q), 10))
    for c in collections:
        for q in RECALLS:
            recalled = await memories.recall(STDIO, q, n=20, collection=c, min_confidence=0.0)
            answers[f"recall {c} {q}"] = [h.memory.id for h in recalled.hits]
        listed = await memories.recall(STDIO, "", n=50, collection=c, min_confidence=0.0)
        answers[f"list {c}"] = sorted(h.memory.id for h in listed.hits)
    answers["robots"] = await fleet.robots()
    answers["groups"] = await fleet.groups()
    answers["lessons"] = await lessons.page(None, 100, 0)
    return answers


def _collections(memory: Memory) -> list[str]:
    return sorted(
        {str(r[0]) for r in memory.index.read_blocking(lambda c: c.execute("SELECT collection FROM memories"))}
    )


async def test_a_sqlite_installation_copied_into_postgresql_answers_the_same_reads(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    await _seed(memory, tmp_path)
    target = pg_installations()
    seen: list[tuple[str, str, int, int]] = []
    report = await copy.copy_installation(
        memory.operations, target.operations, label="index.db", progress=lambda *a: seen.append(a)
    )
    assert report.ok
    counts = report.counts()
    assert counts["memories"][0] >= 37  # the robotmem fixture's memories and perceptions
    assert counts["sessions"][0] > 0
    assert counts["memory_tags"][0] > 0
    assert counts["processes"] == (4, 4)
    assert counts["process_outcomes"] == (3, 3)
    assert counts["process_tenant_counts"] == (2, 2)  # two tenants counted on the shared document
    assert counts["fleet_robots"] == (2, 2)
    assert counts["fleet_groups"] == (1, 1)
    assert counts["lessons"] == (2, 2)
    assert {stage for stage, _, _, _ in seen} == {"export", "restore", "verify"}
    assert ("verify", "memories", counts["memories"][1], counts["memories"][0]) in seen
    assert await target.operations.unfinished_load() is None

    collections = _collections(memory)
    assert len(collections) == 3
    keyword = Policy(memory.fleet_registry)
    before = await _reads(
        memory.process_store,
        ExperienceService(memory.memories, keyword),
        memory.fleet_registry,
        memory.lesson_store,
        collections,
    )
    target.fleet.refresh()
    after = await _reads(target.processes, target.experiences(), target.fleet, target.lessons, collections)
    assert after == before
    assert any(before[f"find {q}"] for q in QUERIES)
    assert any(v for k, v in before.items() if k.startswith("recall"))
    # The documents, their outcome logs included, read back the same.
    sqlite_docs = {d.id: d for d in await _all_docs(memory)}
    assert target.documents().keys() == sqlite_docs.keys()
    assert (await operations.doctor(target)).ok


async def _all_docs(memory: Memory) -> list[ProcessDoc]:
    got: list[ProcessDoc] = []
    await memory.operations.export(lambda d, n, t: got.append(d), memory.settings.data_dir / "scratch")
    return got


async def test_ids_are_kept_and_the_next_memory_gets_a_new_one(memory: Memory, pg_installations: PgFactory) -> None:
    await operations.import_robotmem(memory, ADMIN, ROBOTMEM)
    target = pg_installations()
    await copy.copy_installation(memory.operations, target.operations, label="index.db")
    source_ids = sorted(int(r[0]) for r in memory.index.read_blocking(lambda c: c.execute("SELECT id FROM memories")))
    assert sorted(int(r[0]) for r in target.rows("SELECT id FROM memories")) == source_ids
    learned = await target.experiences().learn(STDIO, "a memory written after the move")
    (stored,) = target.rows(f"SELECT id FROM memory_public WHERE public_id = {int(learned.memory_id)}")  # noqa: S608
    assert int(stored[0]) > max(source_ids)  # the sequence moved past the copied ids


async def test_a_copy_into_a_target_that_is_not_empty_is_refused_and_changes_nothing(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    await _seed(memory, tmp_path)
    target = pg_installations()
    await target.fleet.register_robot("rap-9", None, None)
    before = target.operations.row_counts()
    with pytest.raises(Conflict) as refused:
        await copy.copy_installation(memory.operations, target.operations, label="index.db")
    assert "1 fleet_robots" in refused.value.detail
    assert target.operations.row_counts() == before
    assert await target.operations.unfinished_load() is None


class _Lossy:
    """A real target that loses one lesson as its restore commits: what a verification must catch."""

    def __init__(self, target: PgInstallation) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target.operations, name)

    async def restore(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        done = await self.target.operations.restore(*args, **kwargs)
        self.target.execute("DELETE FROM lessons WHERE key = 'dock.speed'")
        return done


async def test_a_copy_whose_counts_differ_fails_and_leaves_the_target_labelled(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    await _seed(memory, tmp_path)
    target = pg_installations()
    lossy: OperatorStore = _Lossy(target)  # forwards every other port method
    with pytest.raises(StorageError) as failed:
        await copy.copy_installation(memory.operations, lossy, label="index.db")
    assert "lessons: 2 in the source, 1 copied" in failed.value.detail
    label = await target.operations.unfinished_load()
    assert label is not None
    assert "counts differ" in label
    report = await operations.doctor(target)
    assert not report.ok
    assert [check for check, _, ok in report.lines if not ok] == ["copy"]


async def test_the_robotmem_import_and_backups_on_postgresql_say_what_to_do_instead(
    pg_installations: PgFactory, tmp_path: Path
) -> None:
    target = pg_installations()
    with pytest.raises(InvalidInput):
        await operations.import_robotmem(target, ADMIN, ROBOTMEM)
    with pytest.raises(InvalidInput):
        operations.backup(PostgresBackups(), tmp_path, tmp_path / "backup")
    assert not (tmp_path / "backup").exists()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_a_sqlite_dump_loaded_into_postgresql_dumps_back_byte_identical(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    """Both backends write the same archive: the files are the language a move speaks."""
    await _seed(memory, tmp_path)
    await operations.dump(memory, ADMIN, tmp_path / "from-sqlite")
    target = pg_installations()
    await operations.load(target, ADMIN, tmp_path / "from-sqlite")
    await operations.dump(target, ADMIN, tmp_path / "from-postgres")
    assert _files(tmp_path / "from-postgres") == _files(tmp_path / "from-sqlite")


async def test_the_deep_index_check_finds_postings_that_differ_from_the_text_and_reindex_mends_them(
    memory: Memory, pg_installations: PgFactory
) -> None:
    await operations.import_robotmem(memory, ADMIN, ROBOTMEM)
    target = pg_installations()
    await copy.copy_installation(memory.operations, target.operations, label="index.db")
    target.execute(
        "UPDATE memory_postings SET term = 'zzzz' WHERE (term, memory_id, col) = "
        "(SELECT term, memory_id, col FROM memory_postings WHERE memory_id = 1 AND col = 0 LIMIT 1)"
    )
    assert (await operations.doctor(target)).ok  # lengths still agree: only the deep check reads the text
    deep = await operations.doctor(target, full=True)
    assert [check for check, _, ok in deep.lines if not ok] == ["memory index"]
    assert (await operations.reindex(target, ADMIN))["memory index"] == _count(target, "memories")
    assert (await operations.doctor(target, full=True)).ok


def _count(target: PgInstallation, table: str) -> int:
    return target.operations.row_counts()[table]


async def test_the_doctor_reports_a_memory_whose_session_does_not_exist(
    memory: Memory, pg_installations: PgFactory
) -> None:
    await operations.import_robotmem(memory, ADMIN, ROBOTMEM)
    target = pg_installations()
    await copy.copy_installation(memory.operations, target.operations, label="index.db")
    target.execute("UPDATE memories SET session_id = 'gone' WHERE id = 1")
    report = await operations.doctor(target)
    assert [check for check, _, ok in report.lines if not ok] == ["integrity"]


async def test_a_copy_back_from_postgresql_into_a_fresh_sqlite_directory_is_verified_too(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    await _seed(memory, tmp_path)
    middle = pg_installations()
    there = await copy.copy_installation(memory.operations, middle.operations, label="index.db")
    back = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "back"), "ROBOT_ID": "tester"}))
    try:
        again = await copy.copy_installation(middle.operations, back.operations, label="PostgreSQL schema")
        assert again.counts() == there.counts()
        assert await back.operations.unfinished_load() is None  # verified: the label is gone
        await operations.dump(memory, ADMIN, tmp_path / "first")
        await operations.dump(back, ADMIN, tmp_path / "round-trip")
        assert _files(tmp_path / "round-trip") == _files(tmp_path / "first")
    finally:
        back.close()


class _Stop(Exception):
    """What an operator's stop raises inside a restore."""


async def test_a_restore_stopped_midway_on_postgresql_leaves_the_schema_as_it_was(
    memory: Memory, pg_installations: PgFactory, tmp_path: Path
) -> None:
    await _seed(memory, tmp_path)
    await operations.dump(memory, ADMIN, tmp_path / "d")
    target = pg_installations()
    await target.fleet.register_robot("rap-9", None, None)
    before = target.operations.row_counts()
    calls = 0

    def interrupt() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # after the documents, inside the archive's tables
            raise _Stop

    docs: list[ProcessDoc] = []
    await memory.operations.export(lambda d, n, t: docs.append(d), tmp_path / "scratch")
    with pytest.raises(_Stop):
        await target.operations.restore(docs, tmp_path / "d" / "archive", source=tmp_path / "d", interrupt=interrupt)
    assert calls == 3
    assert target.operations.row_counts() == before
    assert target.documents() == {}
