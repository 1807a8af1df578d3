"""The operator's use cases against every `OperatorStore`: a toy one (tests/operations/toy_store.py)
and PostgreSQL's (`operations.postgres.store`, on a schema of its own). What they decide themselves —
the dump's files and manifest, which documents load, the doctor's verdict, who may hand over what,
readiness — holds on any backend that keeps the port's contract. The same use cases run against
SQLite in the other tests of this folder; the toy alone lets a test set a store's health by hand."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import Forbidden, InvalidInput
from robot_mcp_memory.operations import handover, readiness
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.operations.ports import Installation
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.tenancy.principal import ADMIN, STDIO, UNKNOWN, Principal
from tests.conftest import MAILROOM, doc
from tests.operations.conftest import PgFactory
from tests.operations.pg_installation import PgInstallation
from tests.operations.toy_store import NOTES, ToyInstallation


@pytest.fixture
def toy(tmp_path: Path) -> ToyInstallation:
    (tmp_path / "data").mkdir()
    return ToyInstallation(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "data")}))


STAMP = "2026-06-12T14:00:00Z"
DOOR = doc("open-door", "Open the lab door", "Push the bar.", robot=UNKNOWN, created=STAMP, updated=STAMP)


class Backend(Protocol):
    """One backend as these tests drive it: its installation, and the few reads and writes a test
    needs that the operator's port does not offer."""

    @property
    def installation(self) -> Installation: ...
    @property
    def rows_table(self) -> str:
        """The archive file of the rows seeded beside the documents."""
        ...

    def documents(self) -> dict[str, ProcessDoc]: ...
    def row_robots(self) -> dict[int, str]: ...
    async def seed(self) -> None: ...
    async def delete(self, pid: str) -> None: ...
    async def break_index(self) -> None: ...
    def fresh(self) -> Backend: ...


@dataclass
class Toy:
    installation: ToyInstallation
    rows_table: str = NOTES

    def documents(self) -> dict[str, ProcessDoc]:
        return dict(self.installation.operations.documents)

    def row_robots(self) -> dict[int, str]:
        return {k: str(r.get("robot")) for k, r in self.installation.operations.notes.items()}

    async def seed(self) -> None:
        store = self.installation.operations
        for text in (MAILROOM, DOOR):
            parsed = docmodel.parse(text)
            store.documents[parsed.id] = parsed
        store.notes = {1: {"id": 1, "robot": "rap-1", "text": "the hall conveyor"}, 2: {"id": 2, "robot": UNKNOWN}}

    async def delete(self, pid: str) -> None:
        del self.installation.operations.documents[pid]

    async def break_index(self) -> None:
        self.installation.operations.index_entries = 1

    def fresh(self) -> Backend:
        return Toy(ToyInstallation(self.installation.settings))


@dataclass
class Postgres:
    installation: PgInstallation
    make: PgFactory
    rows_table: str = "memories"

    def documents(self) -> dict[str, ProcessDoc]:
        return self.installation.documents()

    def row_robots(self) -> dict[int, str]:
        return {int(i): str(r) for i, r in self.installation.rows("SELECT id, robot FROM memories")}

    async def seed(self) -> None:
        for text in (MAILROOM, DOOR):
            await self.installation.processes.save(docmodel.parse(text))
        await self.installation.experiences().learn(Principal.robot("rap-1"), "the hall conveyor is stuck")
        await self.installation.experiences(UNKNOWN).learn(STDIO, "the lab door sticks when it rains")

    async def delete(self, pid: str) -> None:
        await self.installation.processes.delete(pid)

    async def break_index(self) -> None:
        self.installation.execute("DELETE FROM process_postings WHERE process_id = 'open-door'")

    def fresh(self) -> Backend:
        return Postgres(self.make(), self.make)


@pytest.fixture(params=["toy", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "toy":
        yield Toy(request.getfixturevalue("toy"))
    else:
        make: PgFactory = request.getfixturevalue("pg_installations")
        yield Postgres(make(), make)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_a_dump_loaded_into_another_store_dumps_back_byte_identical(backend: Backend, tmp_path: Path) -> None:
    await backend.seed()
    first = await operations.dump(backend.installation, ADMIN, tmp_path / "d1")
    assert first.processes == 2
    assert first.archived[backend.rows_table] == 2
    assert sorted(Path(f).name for f in first.files) == ["fetch-package-mailroom.md", "open-door.md"]

    other = backend.fresh()
    loaded = await operations.load(other.installation, ADMIN, tmp_path / "d1")
    assert (loaded.processes, loaded.skipped, loaded.archived) == (2, [], first.archived)
    assert other.documents() == backend.documents()
    assert other.row_robots() == backend.row_robots()
    await operations.dump(other.installation, ADMIN, tmp_path / "d2")
    assert _files(tmp_path / "d2") == _files(tmp_path / "d1")


async def test_a_dump_removes_the_files_its_predecessor_wrote_and_this_one_did_not(
    backend: Backend, tmp_path: Path
) -> None:
    await backend.seed()
    await operations.dump(backend.installation, ADMIN, tmp_path / "d")
    (tmp_path / "d" / "processes" / "by-hand.md").write_text(doc("by-hand", "Added by hand"), encoding="utf-8")
    await backend.delete("open-door")
    again = await operations.dump(backend.installation, ADMIN, tmp_path / "d")
    assert [Path(p).name for p in again.removed] == ["open-door.md"]
    left = sorted(p.name for p in (tmp_path / "d" / "processes").iterdir())
    assert left == ["by-hand.md", "fetch-package-mailroom.md"]
    assert not (tmp_path / "d" / operations.UNFINISHED_DUMP).exists()


async def test_a_broken_document_is_skipped_and_named_and_the_others_load(backend: Backend, tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "good.md").write_text(doc("good", "A good one"), encoding="utf-8")
    (src / "broken.md").write_text("---\nid: [unclosed\n---\n", encoding="utf-8")
    (src / "twin.md").write_text(doc("good", "The same id again"), encoding="utf-8")
    loaded = await operations.load(backend.installation, ADMIN, src)
    assert loaded.processes == 1
    assert [line.split(":")[0] for line in loaded.skipped] == ["broken.md", "twin.md"]
    assert backend.documents()["good"].title == "A good one"
    assert backend.documents()["good"].created  # a document without times gets them on load


async def test_a_refused_archive_line_leaves_the_store_as_it_was(backend: Backend, tmp_path: Path) -> None:
    await backend.seed()
    await operations.dump(backend.installation, ADMIN, tmp_path / "d")
    (tmp_path / "d" / "archive" / f"{backend.rows_table}.jsonl").write_text('{"robot": "rap-1"}\n', encoding="utf-8")
    other = backend.fresh()
    with pytest.raises(InvalidInput):
        await operations.load(other.installation, ADMIN, tmp_path / "d")
    assert other.documents() == {}
    assert other.row_robots() == {}


async def test_an_unfinished_dump_is_refused_before_the_store_is_touched(backend: Backend, tmp_path: Path) -> None:
    await backend.seed()
    await operations.dump(backend.installation, ADMIN, tmp_path / "d")
    (tmp_path / "d" / operations.UNFINISHED_DUMP).write_text("", encoding="utf-8")
    other = backend.fresh()
    with pytest.raises(InvalidInput):
        await operations.load(other.installation, ADMIN, tmp_path / "d")
    assert other.documents() == {}


async def test_a_robot_token_may_run_no_operator_use_case(backend: Backend, tmp_path: Path) -> None:
    await backend.seed()
    robot = Principal.robot("rap-1")
    with pytest.raises(Forbidden):
        await operations.dump(backend.installation, robot, tmp_path / "d")
    with pytest.raises(Forbidden):
        await operations.load(backend.installation, robot, tmp_path)
    with pytest.raises(Forbidden):
        await operations.reindex(backend.installation, robot)
    with pytest.raises(Forbidden):
        await handover.hand_over(backend.installation, robot, "shared", apply=True)
    with pytest.raises(Forbidden):
        await operations.import_robotmem(backend.installation, robot, tmp_path / "memory.db")
    assert not (tmp_path / "d").exists()
    assert backend.documents()["open-door"].robot == UNKNOWN


async def test_the_doctor_fails_an_index_that_lacks_entries_and_names_the_reindex(backend: Backend) -> None:
    await backend.seed()
    assert (await operations.doctor(backend.installation)).ok
    await backend.break_index()
    report = await operations.doctor(backend.installation)
    assert not report.ok
    failed = [(check, detail) for check, detail, ok in report.lines if not ok]
    assert [check for check, _ in failed if check != "integrity"] == ["process index"]
    assert failed[-1][1] == f"2 rows, 1 index entries: {operations.REINDEX}"
    assert (await operations.reindex(backend.installation, ADMIN))["process index"] == 2
    assert (await operations.doctor(backend.installation)).ok


async def test_stats_count_the_rows_and_the_hot_writes_dropped_only_for_a_serving_process(backend: Backend) -> None:
    await backend.seed()
    counts = await operations.stats(backend.installation)
    assert (counts["processes"], counts[backend.rows_table], counts["lessons"]) == (2, 2, 0)
    assert "hot_writes_dropped" in counts
    assert "hot_writes_dropped" not in await operations.stats(backend.installation, serving=False)


async def test_a_hand_over_counts_first_then_moves_every_unknown_row(backend: Backend) -> None:
    await backend.seed()
    counted = await handover.hand_over(backend.installation, ADMIN, "shared", apply=False)
    assert (counted.applied, counted.processes, counted.memories, counted.total) == (False, 1, 1, 2)
    assert backend.documents()["open-door"].robot == UNKNOWN
    moved = await handover.hand_over(backend.installation, ADMIN, " rap-2 ", apply=True)
    assert (moved.to, moved.applied, moved.total) == ("rap-2", True, 2)
    assert backend.documents()["open-door"].robot == "rap-2"
    assert sorted(backend.row_robots().values()) == ["rap-1", "rap-2"]
    assert (await handover.hand_over(backend.installation, ADMIN, "shared", apply=False)).total == 0


@pytest.mark.parametrize("target", ["unknown", "UNKNOWN", "not a robot", ""])
async def test_a_hand_over_refuses_a_target_that_is_not_shared_or_a_robot(backend: Backend, target: str) -> None:
    await backend.seed()
    with pytest.raises(InvalidInput):
        await handover.hand_over(backend.installation, ADMIN, target, apply=True)
    assert backend.documents()["open-door"].robot == UNKNOWN


async def test_readiness_reads_every_store_and_reports_the_embedder(backend: Backend) -> None:
    ready = await readiness.readiness(backend.installation)
    assert ready.ok
    assert ready.next_step is None
    assert [c.name for c in ready.checks][-1] == "embedder"
    assert all(c.detail == "reads" for c in ready.checks[:-1])


# ---------------------------------------------------------------------------- the toy alone: health set by hand
def _seed(toy: ToyInstallation) -> None:
    store = toy.operations
    for text in (MAILROOM, DOOR):
        parsed = docmodel.parse(text)
        store.documents[parsed.id] = parsed
    store.notes = {1: {"id": 1, "robot": "rap-1"}, 2: {"id": 2, "robot": UNKNOWN}}


async def test_the_doctor_reports_damage_a_newer_schema_and_an_unfinished_load(toy: ToyInstallation) -> None:
    toy.operations.integrity = ["page 7: btree damaged"]
    toy.operations.schema = (4, 3)
    toy.operations.unfinished = "/dumps/monday"
    report = await operations.doctor(toy)
    failed = {check: detail for check, detail, ok in report.lines if not ok}
    assert failed.keys() == {"integrity", "schema", "load"}
    assert failed["integrity"] == "page 7: btree damaged"
    assert "/dumps/monday" in failed["load"]
    assert ("size", "toy.db 4096 bytes, WAL 0 bytes", True) in report.lines


async def test_the_doctor_runs_the_deep_index_check_only_when_asked_and_never_read_only(toy: ToyInstallation) -> None:
    toy.operations.index_problem = "malformed inverted index"
    assert (await operations.doctor(toy)).ok  # a serving process skips the deep check by default
    assert not (await operations.doctor(toy, full=True)).ok
    toy.operations.read_only = True
    report = await operations.doctor(toy, deep_index_check=True)
    assert report.ok
    assert toy.operations.deep_checks == [False, True, False]
    assert any("skipped" in detail for check, detail, _ in report.lines if check == "process index")


async def test_readiness_fails_a_store_that_cannot_serve_and_names_the_next_step(toy: ToyInstallation) -> None:
    ready = await readiness.readiness(toy)
    assert ready.ok
    assert ready.next_step is None
    assert [(c.name, c.detail) for c in ready.checks] == [("toy.db", "reads"), ("embedder", "keyword")]
    toy.operations.problems["toy.db"] = "its integrity check found damage"
    toy.embedder = None
    ready = await readiness.readiness(toy)
    assert not ready.ok
    assert ready.next_step == readiness.NEXT_STEP
    assert [(c.name, c.ok, c.detail) for c in ready.checks] == [
        ("toy.db", False, "its integrity check found damage"),
        ("embedder", True, "off"),
    ]


async def test_the_toy_doctor_reindexes_to_one_entry_per_document(toy: ToyInstallation) -> None:
    _seed(toy)
    toy.operations.index_entries = 1
    assert await operations.reindex(toy, ADMIN) == {"process index": 2}
    assert (await operations.doctor(toy)).ok


async def test_stats_count_the_hot_writes_dropped_only_for_a_serving_process(toy: ToyInstallation) -> None:
    _seed(toy)
    toy.operations.hot_writes_dropped = 3
    assert await operations.stats(toy) == {"processes": 2, NOTES: 2, "lessons": 0, "hot_writes_dropped": 3}
    assert "hot_writes_dropped" not in await operations.stats(toy, serving=False)
