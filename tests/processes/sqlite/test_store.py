"""ProcessStore over a real index.db (spec §4, §7): search, reliability, outcomes, collisions."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.errors import NotFound
from robot_mcp_memory.processes.docmodel import OUTCOME_HEADING
from robot_mcp_memory.processes.service import ProcessService
from robot_mcp_memory.processes.sqlite import search as keyword_sql
from robot_mcp_memory.processes.sqlite import store as sql
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.tenancy.principal import ADMIN
from tests.conftest import MAILROOM, doc

WAIT = 10.0
MAILROOM_ID = "fetch-package-mailroom"

DISTRACTORS = [
    doc(
        "deliver-coffee-meeting-room",
        "Deliver coffee to the meeting room",
        "## Steps\n1. pick up the cup in the kitchen\n2. bring it to the meeting room\n",
        tags="[kitchen, delivery]",
    ),
    doc("return-to-dock", "Return to the charging dock", "## Steps\n1. navigate to the dock when the battery is low\n"),
    doc("greet-visitors", "Greet visitors in the lobby", "## Steps\n1. get their names and call the host\n"),
    doc("take-out-trash", "Take the trash to the loading dock", "## Steps\n1. get the bin from the kitchen\n"),
    doc("water-plants", "Water the plants in the office", "## Steps\n1. fill the can in the kitchen\n"),
]


@pytest.fixture
def processes(memory: Memory) -> ProcessService:
    return memory.processes


@pytest.fixture
def store(memory: Memory) -> ProcessStore:
    return memory.process_store


@pytest.fixture
async def library(processes: ProcessService) -> ProcessService:
    """The mailroom document among distractors that share some of its words."""
    for markdown in [*DISTRACTORS, MAILROOM]:
        await processes.save(ADMIN, markdown)
    return processes


def files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


def counts(memory: Memory) -> tuple[int, int]:
    """(rows in processes, entries in processes_fts)."""
    return memory.index.read_blocking(lambda c: (sql.count(c), sql.count_index(c)))


# ---------------------------------------------------------------------------- search
@pytest.mark.parametrize(
    "query",
    ["get me a parcel from the mail room", "fetch the package from the mailroom", "bring the parcel"],
)
async def test_phrasing_variants_find_the_mailroom_process_first(
    library: ProcessService, store: ProcessStore, query: str
) -> None:
    hits = await store.find(Query.parse(query), 3)
    assert hits[0].doc.id == MAILROOM_ID
    found = await library.find(ADMIN, query, k=3)
    assert found.hits[0].doc.id == MAILROOM_ID


async def test_at_equal_relevance_a_reliable_process_ranks_above_a_flaky_one(
    processes: ProcessService, store: ProcessStore
) -> None:
    for markdown in DISTRACTORS:
        await processes.save(ADMIN, markdown)
    body = "## Steps\n1. polish the brass door handles with the soft cloth\n"
    # Saved flaky first, and its id sorts first: only reliability can put the other one on top.
    await processes.save(ADMIN, doc("a-flaky", "Polish the brass handles", body, success_count=0, failure_count=5))
    await processes.save(ADMIN, doc("b-reliable", "Polish the brass handles", body, success_count=5, failure_count=0))

    hits = await store.find(Query.parse("polish the brass door handles"), 5)

    assert [h.doc.id for h in hits[:2]] == ["b-reliable", "a-flaky"]
    reliable, flaky = hits[0], hits[1]
    assert reliable.relevance == pytest.approx(flaky.relevance), "identical text: equal bm25"
    assert reliable.relevance > 0
    assert reliable.score > flaky.score > 0
    assert reliable.score == pytest.approx(reliable.relevance * 6 / 7)
    assert flaky.score == pytest.approx(flaky.relevance * 1 / 7)


@pytest.mark.parametrize(
    "query",
    [
        '"mailroom',
        "parcel*",
        "(mail room",
        "NEAR(parcel mailroom)",
        "parcel AND",
        "robot OR",
        "-mailroom",
        "title: parcel",
        'NOT "" * ( ) - : ^ { }',
        "",
    ],
)
async def test_queries_with_fts_syntax_never_fail(library: ProcessService, store: ProcessStore, query: str) -> None:
    hits = await store.find(Query.parse(query), 3)
    found = await library.find(ADMIN, query, k=3)
    if "parcel" in query or "mail" in query:
        assert hits[0].doc.id == MAILROOM_ID
        assert found.hits[0].doc.id == MAILROOM_ID


# ---------------------------------------------------------------------------- outcomes
async def test_record_outcome_updates_the_counters_and_survives_a_reindex(
    memory: Memory, library: ProcessService
) -> None:
    after = await library.record_outcome(ADMIN, MAILROOM_ID, True)
    await library.record_outcome(ADMIN, MAILROOM_ID, False)
    memory.index.flush(WAIT)
    assert (after.success_count, after.failure_count) == (4, 1)

    assert await library.reindex(ADMIN) == len(DISTRACTORS) + 1

    stored = await library.get(ADMIN, MAILROOM_ID)
    assert (stored.success_count, stored.failure_count) == (4, 2)
    assert stored.last_used != "2026-06-12T16:20:00Z"
    hits = await memory.process_store.find(Query.parse("parcel mailroom"), 1)
    assert (hits[0].doc.success_count, hits[0].doc.failure_count) == (4, 2)


async def test_an_outcome_note_lands_in_the_outcome_log_and_survives_a_reindex(library: ProcessService) -> None:
    await library.record_outcome(ADMIN, MAILROOM_ID, False, note="door closed after 18:00")
    await library.reindex(ADMIN)

    stored = await library.get(ADMIN, MAILROOM_ID)
    assert stored.failure_count == 2
    assert OUTCOME_HEADING in stored.body
    assert stored.body.rstrip().endswith("failure: door closed after 18:00")
    assert stored.body.startswith("## Steps")


async def test_record_outcome_for_a_missing_process_is_not_found(library: ProcessService) -> None:
    with pytest.raises(NotFound) as caught:
        await library.record_outcome(ADMIN, "no-such-process", True)
    assert caught.value.code == "not_found"


async def test_a_hot_outcome_runs_on_the_writer_thread_not_the_callers(memory: Memory, library: ProcessService) -> None:
    trace: list[tuple[int, str]] = []
    memory.index.on_writer(lambda c: c.set_trace_callback(lambda s: trace.append((threading.get_ident(), s))))

    await library.store.record_outcome(MAILROOM_ID, True)

    updates = [ident for ident, s in trace if s.startswith("UPDATE processes SET success_count")]
    assert len(updates) == 1
    assert updates[0] != threading.get_ident()


async def test_a_saved_document_has_committed_when_save_returns(memory: Memory, processes: ProcessService) -> None:
    trace: list[str] = []
    memory.index.on_writer(lambda c: c.set_trace_callback(trace.append))

    await processes.save(ADMIN, MAILROOM)

    insert_at = next(i for i, s in enumerate(trace) if s.startswith("INSERT INTO processes("))
    assert "COMMIT" in trace[insert_at:]
    assert memory.index.read_blocking(lambda c: sql.select_one(c, MAILROOM_ID)) is not None


async def test_an_outcome_whose_caller_is_cancelled_still_counts(memory: Memory, library: ProcessService) -> None:
    started, release = threading.Event(), threading.Event()

    def hold(_c: sqlite3.Connection) -> None:
        started.set()
        release.wait(WAIT)

    holder = threading.Thread(target=memory.index.on_writer, args=(hold,))
    holder.start()
    try:
        assert started.wait(WAIT)
        task = asyncio.create_task(library.store.record_outcome(MAILROOM_ID, True))
        await anyio.wait_all_tasks_blocked()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        release.set()
        holder.join(WAIT)
    memory.index.flush(WAIT)
    assert (await library.get(ADMIN, MAILROOM_ID)).success_count == 4


# ---------------------------------------------------------------------------- rows, index and disk
async def test_row_and_index_counts_agree_after_save_update_and_delete(
    memory: Memory, processes: ProcessService
) -> None:
    assert counts(memory) == (0, 0)
    for markdown in [*DISTRACTORS, MAILROOM]:
        await processes.save(ADMIN, markdown)
    assert counts(memory) == (6, 6)
    await processes.save(ADMIN, MAILROOM.replace("lower shelf", "upper shelf"))
    assert counts(memory) == (6, 6)
    await processes.save(ADMIN, MAILROOM.replace("m-9af31c", "m-other"))
    assert counts(memory) == (7, 7)
    await processes.delete(ADMIN, MAILROOM_ID)
    await processes.delete(ADMIN, "return-to-dock")
    assert counts(memory) == (5, 5)
    await processes.reindex(ADMIN)
    assert counts(memory) == (5, 5)
    found = {
        h.doc.id for h in await memory.process_store.find(Query.parse("charging dock battery parcel mailroom"), 10)
    }
    assert found.isdisjoint({MAILROOM_ID, "return-to-dock"})


async def test_the_body_lives_in_the_row_and_no_markdown_reaches_the_disk(
    memory: Memory, library: ProcessService
) -> None:
    await library.record_outcome(ADMIN, MAILROOM_ID, True, note="fine")
    await library.reindex(ADMIN)
    memory.index.flush(WAIT)

    body = memory.index.read_blocking(
        lambda c: c.execute("SELECT body FROM processes WHERE id = ?", (MAILROOM_ID,)).fetchone()[0]
    )
    assert body.startswith("## Steps")
    files = files_under(memory.settings.data_dir)
    assert files, "the database is there"
    assert [p for p in files if p.suffix.lower() in (".md", ".markdown")] == []
    assert not any(p.parent.name == "processes" for p in files)


# ---------------------------------------------------------------------------- save collisions
async def test_saving_the_same_id_from_the_same_mission_updates_it_and_keeps_the_counters(
    processes: ProcessService,
) -> None:
    first = await processes.save(ADMIN, MAILROOM)
    assert first.action == "created"
    edited = MAILROOM.replace("success_count: 3", "success_count: 0").replace("lower shelf", "upper shelf")

    saved = await processes.save(ADMIN, edited)

    assert (saved.action, saved.doc.id) == ("updated", MAILROOM_ID)
    stored = await processes.get(ADMIN, MAILROOM_ID)
    assert (stored.success_count, stored.failure_count) == (3, 1)
    assert stored.last_used == "2026-06-12T16:20:00Z"
    assert stored.created == "2026-06-12T14:00:00Z"
    assert stored.updated != "2026-06-12T14:00:00Z", "updated is bumped"
    assert "upper shelf" in stored.body


async def test_a_fork_of_a_long_id_is_still_a_slug(processes: ProcessService) -> None:
    """Cut to make room for ``-2``, the id must not end in a hyphen (``…a--2`` could then never be
    read or deleted)."""
    long_id = "a" * 113 + "-bbbbbb"
    doc = f"---\ntitle: long\nid: {long_id}\nsource_mission_id: mission-1\n---\nbody\n"
    await processes.save(ADMIN, doc)
    forked = await processes.save(ADMIN, doc.replace("mission-1", "mission-2"))
    assert forked.action == "forked"
    assert "--" not in forked.doc.id
    assert (await processes.get(ADMIN, forked.doc.id)).id == forked.doc.id


async def test_saving_the_same_id_from_other_missions_forks_to_numbered_ids(processes: ProcessService) -> None:
    await processes.save(ADMIN, MAILROOM)

    second = await processes.save(ADMIN, MAILROOM.replace("m-9af31c", "m-second"))
    third = await processes.save(ADMIN, MAILROOM.replace("m-9af31c", "m-third"))
    second_again = await processes.save(ADMIN, MAILROOM.replace("m-9af31c", "m-second").replace("lower", "top"))

    assert (second.action, second.doc.id, second.requested_id) == ("forked", f"{MAILROOM_ID}-2", MAILROOM_ID)
    assert (third.action, third.doc.id) == ("forked", f"{MAILROOM_ID}-3")
    assert (second_again.action, second_again.doc.id) == ("updated", f"{MAILROOM_ID}-2")
    original = await processes.get(ADMIN, MAILROOM_ID)
    assert original.source_mission_id == "m-9af31c"
    assert "lower shelf" in original.body
    _, total = await processes.list(ADMIN)
    assert total == 3


async def test_a_version_finds_that_version_not_the_same_digits_in_another_order(
    memory: Memory, processes: ProcessService, store: ProcessStore
) -> None:
    """Found by review: "1.2.10" was searched as "1" OR "2" OR "10", which "1.10.2" holds as well;
    the tie went to the id that sorts first. A dotted number is now the phrase of its pieces."""
    body = "## Steps\n1. flash the gripper controller\n2. power cycle the arm\n"
    await processes.save(ADMIN, doc("a-firmware", "Update the gripper firmware to 1.10.2", body))
    await processes.save(ADMIN, doc("b-firmware", "Update the gripper firmware to 1.2.10", body))
    hits = await store.find(Query.parse("gripper firmware 1.2.10"), 3)  # keyword search alone
    assert [h.doc.id for h in hits] == ["b-firmware", "a-firmware"]
    assert hits[0].relevance > hits[1].relevance
    listed = memory.index.read_blocking(
        lambda c: keyword_sql.keyword_candidates(c, Query.parse("gripper firmware 1.2.10").phrases, 3, None)
    )
    assert [pid for pid, _ in listed] == ["b-firmware", "a-firmware"]  # hybrid search's keyword list
    assert listed[0][1] > listed[1][1]
    only = await store.find(Query.parse("1.2.10"), 3)
    assert [h.doc.id for h in only] == ["b-firmware"]


async def test_a_chinese_word_inside_a_title_or_body_is_found(processes: ProcessService, store: ProcessStore) -> None:
    """Keyword search only found a Chinese title whole: the index held the run as one token
    (found by review). Now both sides split runs into words, as memory recall does."""
    await processes.save(ADMIN, "---\nid: cjk-process\ntitle: 把包裹从收发室取来\n---\n\n1. 去收发室\n")
    await processes.save(ADMIN, "---\nid: other\ntitle: Water the plants\n---\n\n1. go\n")
    for query in ("收发室", "包裹", "把包裹从收发室取来"):
        hits = await store.find(Query.parse(query), 3)  # the keyword list alone
        assert [h.doc.id for h in hits] == ["cjk-process"], query
