"""ExperienceService: the write pipeline, recall ranking, sessions and the tenancy rules."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from robot_mcp_memory.experiences.model import MAX_N
from robot_mcp_memory.experiences.service import ExperienceService
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.experiences.sqlite.repository import SqliteMemories
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.tenancy.principal import ADMIN, STDIO, Principal
from tests.experiences.conftest import age, put_in_group, shared_writer, stored_id

RAP1, RAP2, RAP3 = Principal.robot("rap-1"), Principal.robot("rap-2"), Principal.robot("rap-3")


async def test_memories_carry_the_tenant_or_the_configured_robot(memory: Memory) -> None:
    svc = memory.experiences
    mine = await svc.learn(RAP1, "the lab door sticks in the morning")
    theirs = await svc.learn(STDIO, "the lab door sticks in the evening")
    assert mine.robot == "rap-1"
    assert theirs.robot == "tester"  # ROBOT_ID of the test settings
    assert (await svc.get(ADMIN, mine.memory_id)).robot == "rap-1"


async def test_a_robot_reads_its_group_and_shared_memories_and_nothing_else(memory: Memory) -> None:
    await put_in_group(memory, "kitchen", "rap-1", "rap-2")
    svc = memory.experiences
    a = await svc.learn(RAP1, "the kettle lid sticks")
    b = await svc.learn(RAP2, "the kettle handle is hot")
    c = await svc.learn(RAP3, "the kettle is in the cupboard")
    s = await shared_writer(memory).learn(ADMIN, "the kettle must be empty before moving it")
    seen = {h.memory.id for h in (await svc.recall(RAP1, "kettle", n=10)).hits}
    assert seen == {a.memory_id, b.memory_id, s.memory_id}
    assert {h.memory.id for h in (await svc.recall(RAP3, "kettle", n=10)).hits} == {c.memory_id, s.memory_id}
    assert {h.memory.id for h in (await svc.recall(ADMIN, "kettle", n=10)).hits} == {
        a.memory_id,
        b.memory_id,
        c.memory_id,
        s.memory_id,
    }
    for call in (svc.get(RAP3, a.memory_id), svc.forget(RAP3, a.memory_id, "x"), svc.update(RAP3, a.memory_id, "y")):
        with pytest.raises(NotFound):
            await call
    with pytest.raises(Forbidden):
        await svc.forget(RAP1, s.memory_id, "wrong")
    await svc.forget(RAP2, a.memory_id, "group mates may correct each other")


async def test_sessions_are_pinned_to_their_robot(memory: Memory) -> None:
    svc = memory.experiences
    s = await svc.start_session(RAP1, context={"task": {"name": "pour"}})
    with pytest.raises(NotFound):
        await svc.learn(RAP3, "pouring is messy", session_id=s.id)
    with pytest.raises(NotFound):
        await svc.end_session(RAP3, s.id)
    with pytest.raises(NotFound):
        await svc.learn(RAP1, "pouring is messy", session_id="no-such-session")
    await svc.end_session(RAP1, s.id)
    with pytest.raises(Conflict):
        await svc.end_session(RAP1, s.id)


async def test_a_group_mate_may_read_a_session_but_only_its_robot_ends_it(memory: Memory) -> None:
    """Ending a session consolidates (supersedes) its robot's memories: a group mate must not."""
    await put_in_group(memory, "kitchen", "rap-1", "rap-2")
    svc = memory.experiences
    s = await svc.start_session(RAP1, context={"task": {"name": "pour"}})
    assert (await svc.get_session(RAP2, s.id)).robot == "rap-1"
    with pytest.raises(Forbidden):
        await svc.end_session(RAP2, s.id)
    assert (await svc.get_session(RAP1, s.id)).ended_at is None
    await svc.end_session(RAP1, s.id)


async def test_the_same_text_from_robots_of_other_groups_is_two_memories(memory: Memory) -> None:
    """Dedup looks only at the learning robot's own memories: another group's memory of the same
    text neither swallows the new one nor reveals its id."""
    await put_in_group(memory, "kitchen", "rap-1")
    await put_in_group(memory, "garage", "rap-3")
    svc = memory.experiences
    first = await svc.learn(RAP1, "the lab door sticks in the morning")
    second = await svc.learn(RAP3, "the lab door sticks in the morning")
    assert (first.status, second.status) == ("created", "created")
    assert first.memory_id != second.memory_id
    assert [h.memory.id for h in (await svc.recall(RAP3, "lab door")).hits] == [second.memory_id]


async def test_what_was_forgotten_can_be_learned_again(memory: Memory) -> None:
    """Dedup compares with active memories only: re-teaching what was forgotten stores it again."""
    svc = memory.experiences
    m = await svc.learn(STDIO, "the blue crate weighs 7 kg")
    await svc.forget(STDIO, m.memory_id, "mislabelled")
    again = await svc.learn(STDIO, "the blue crate weighs 7 kg")
    assert again.status == "created"
    assert again.memory_id != m.memory_id
    assert [h.memory.id for h in (await svc.recall(STDIO, "blue crate")).hits] == [again.memory_id]


async def test_forget_is_a_soft_delete_with_a_reason(memory: Memory) -> None:
    svc = memory.experiences
    m = await svc.learn(STDIO, "the blue box weighs 2 kg")
    await svc.forget(STDIO, m.memory_id, "it weighs 3 kg")
    assert (await svc.recall(STDIO, "blue box")).hits == []
    gone = await svc.get(STDIO, m.memory_id)
    assert gone.status == "forgotten"
    assert gone.forget_reason == "it weighs 3 kg"
    with pytest.raises(NotFound):
        await svc.forget(STDIO, m.memory_id, "again")


async def test_update_reclassifies_and_reindexes(memory: Memory) -> None:
    svc = memory.experiences
    m = await svc.learn(STDIO, "the blue box weighs 2 kg", context={"params": {"mass": 2}})
    up = await svc.update(STDIO, m.memory_id, "never lift the blue crate above the shoulder")
    assert up.old_content == "the blue box weighs 2 kg"
    assert up.memory.category == "constraint"
    assert up.memory.context == {"params": {"mass": 2}}  # an empty context keeps the old one
    assert [h.memory.id for h in (await svc.recall(STDIO, "crate")).hits] == [m.memory_id]
    assert (await svc.recall(STDIO, "weighs")).hits == []


async def test_concurrent_updates_each_report_the_content_they_replaced(memory: Memory) -> None:
    """Two updates pipelined on one memory both said they replaced the original text: the old
    content was read before the write was queued, not in its transaction."""
    svc = memory.experiences
    m = await svc.learn(STDIO, "the blue box weighs 2 kg")
    texts = ("the blue box weighs 3 kg", "the blue box weighs 4 kg")
    held, release = threading.Event(), threading.Event()

    def hold(_conn: Any) -> None:  # the writer is busy: both updates read before either writes
        held.set()
        release.wait(30)

    holder = threading.Thread(target=memory.index.on_writer, args=(hold,))
    holder.start()
    assert held.wait(30)
    updates = asyncio.gather(*(svc.update(STDIO, m.memory_id, t) for t in texts))
    for _ in range(3000):  # until both have read and queued their writes (the order is the writer's)
        if memory.index._queue.qsize() >= 2:
            break
        await asyncio.sleep(0.01)
    assert memory.index._queue.qsize() >= 2  # else the race this test is about never happened
    release.set()
    done = await updates
    holder.join(30)
    ran_first = next(i for i, u in enumerate(done) if u.old_content == "the blue box weighs 2 kg")
    ran_second = 1 - ran_first
    assert done[ran_second].old_content == texts[ran_first]  # a chain, whichever ran first
    assert (await svc.get(STDIO, m.memory_id)).content == texts[ran_second]


@pytest.fixture
def blocking_memory(settings: Settings) -> Iterator[Memory]:
    """A `Memory` as a stdio server opens it (`StoreMode.BLOCKING`), beside the `memory` fixture's."""
    m = Memory.open(replace(settings, data_dir=settings.data_dir.with_name("blocking")), mode=StoreMode.BLOCKING)
    yield m
    m.close()


async def _learn_where(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The threads that ran a learn's transaction and its after-commit patch of the vector
    index, in order; the memories learned are recalled."""
    svc = memory.experiences
    assert svc.vectors is not None
    ran: list[tuple[str, int]] = []
    learn, written = storage.learn, svc.vectors.written

    def learning(*args: Any) -> Any:
        ran.append(("learn", threading.get_ident()))
        return learn(*args)

    def patched(*args: Any) -> None:
        ran.append(("after", threading.get_ident()))
        written(*args)

    with monkeypatch.context() as patch:
        patch.setattr(storage, "learn", learning)
        patch.setattr(svc.vectors, "written", patched)
        await svc.learn(STDIO, "the red valve sticks when cold")
    found = await svc.recall(STDIO, "valve sticks")
    assert [h.memory.content for h in found.hits] == ["the red valve sticks when cold"]
    return ran


async def test_a_learn_commits_and_patches_the_vector_index_on_the_loops_thread_only_over_a_blocking_store(
    memory: Memory, blocking_memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stdio server (`StoreMode.BLOCKING`) runs a learn's transaction and its after-commit patch
    of the vector index on the event loop's thread, in that order; a server of many clients
    (`StoreMode.SERVER`) hands them to another thread. Either way the memory is recalled."""
    loop = threading.get_ident()
    ran = await _learn_where(memory, monkeypatch)
    assert [what for what, _ in ran] == ["learn", "after"]
    assert all(ident != loop for _, ident in ran)
    assert await _learn_where(blocking_memory, monkeypatch) == [("learn", loop), ("after", loop)]


async def test_filter_only_recall_works_without_a_query(memory: Memory) -> None:
    svc = memory.experiences
    ok = await svc.learn(STDIO, "approach slowly", context={"task": {"success": True}})
    await svc.learn(STDIO, "approach quickly", context={"task": {"success": False}})
    found = await svc.recall(STDIO, "", context_filter={"task.success": True})
    assert found.mode == "filter"
    assert [h.memory.id for h in found.hits] == [ok.memory_id]


async def test_scores_are_normalised_so_the_best_hit_is_one(memory: Memory) -> None:
    svc = memory.experiences
    for text in ("grasp the mug", "grasp the mug by the handle, grasp it firmly", "the mug is red"):
        await svc.learn(STDIO, text)
    hits = (await svc.recall(STDIO, "grasp mug", n=3)).hits
    assert hits[0].score == 1.0
    assert all(0 < h.score <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_real_world_experience_ranks_above_simulation(memory: Memory) -> None:
    svc = memory.experiences
    sim = await svc.learn(STDIO, "wipe the table in circles", context={"task": {"source": "sim"}})
    real = await svc.learn(STDIO, "wipe the table in circles", context={"env": {"sim_or_real": "real"}})
    assert [h.memory.id for h in (await svc.recall(STDIO, "wipe table")).hits] == [real.memory_id, sim.memory_id]


async def test_spatial_sort_blends_distance_with_relevance(memory: Memory) -> None:
    svc = memory.experiences

    async def at(text: str, x: float) -> int:
        return (await svc.learn(STDIO, text, context={"spatial": {"position": [x, 0.0, 0.0]}})).memory_id

    near = await at("the cup is fragile", 0.1)
    far = await at("the cup is fragile, handle the cup gently, the cup cracks", 5.0)
    none = (await svc.learn(STDIO, "a fragile cup without a position")).memory_id
    spec = {"field": "spatial.position", "target": [0, 0, 0]}
    ranked = [h.memory.id for h in (await svc.recall(STDIO, "cup", n=5, spatial_sort=spec)).hits]
    assert ranked[0] == near
    assert set(ranked) == {near, far, none}
    within = await svc.recall(STDIO, "cup", n=5, spatial_sort={**spec, "max_distance": 1.0})
    assert [h.memory.id for h in within.hits] == [near]
    assert within.hits[0].distance == pytest.approx(0.1)
    no_blend = await svc.recall(STDIO, "cup", n=5, spatial_sort={**spec, "weight": 0.0})
    assert no_blend.hits[0].memory.id == far  # with weight 0 only relevance orders


@pytest.mark.parametrize(
    "spatial",
    [{"target": "here"}, {"target": []}, {"target": [1] * 17}, {"target": [1], "max_distance": -1}, {"x": 1}],
)
async def test_a_malformed_spatial_sort_is_refused(memory: Memory, spatial: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        await memory.experiences.recall(STDIO, "cup", spatial_sort=spatial)


async def test_time_decay_is_computed_at_read_time_from_age(memory: Memory) -> None:
    svc = memory.experiences
    m = await svc.learn(STDIO, "the printer jams on thick paper")  # confidence 0.8
    age(memory, m.memory_id, 69.3)  # one half-life
    hit = (await svc.recall(STDIO, "printer")).hits[0]
    assert hit.confidence == pytest.approx(0.4, abs=1e-3)
    assert hit.memory.confidence == 0.8  # the stored value never changes
    assert (await svc.recall(STDIO, "printer", min_confidence=0.5)).hits == []
    age(memory, m.memory_id, 1000)
    assert (await svc.recall(STDIO, "printer")).hits[0].confidence == pytest.approx(0.4, abs=1e-3)  # the floor


async def test_session_recall_and_related_memories(memory: Memory) -> None:
    svc = memory.experiences
    before = await svc.learn(STDIO, "pour the kettle slowly to avoid splashing")
    s = await svc.start_session(STDIO, context={"task": {"name": "pour kettle"}})
    inside = await svc.learn(STDIO, "the kettle spout drips when tilted past 60 degrees", session_id=s.id)
    assert [h.memory.id for h in (await svc.recall(STDIO, "kettle", session_id=s.id)).hits] == [inside.memory_id]
    ended = await svc.end_session(STDIO, s.id, outcome_score=0.75)
    assert ended.session.outcome_score == 0.75
    assert ended.session.ended_at is not None
    assert ended.summary["memories"] == 1
    assert [h.memory.id for h in ended.related] == [before.memory_id]  # the session's own are excluded


async def test_related_memories_leave_out_the_unconfident(memory: Memory) -> None:
    """Proactive recall uses recall's default floor (0.3): a memory trusted less is no advice."""
    svc = memory.experiences
    kept = await svc.learn(STDIO, "pour the kettle slowly to avoid splashing")
    doubtful = await svc.learn(STDIO, "pour the kettle from high above the cup")
    memory.index.write_blocking(
        lambda c: c.execute(
            "UPDATE memories SET confidence = 0.2 WHERE id = ?", (stored_id(memory, doubtful.memory_id),)
        )
    )
    s = await svc.start_session(STDIO, context={"task": {"name": "pour kettle"}})
    assert [h.memory.id for h in (await svc.end_session(STDIO, s.id)).related] == [kept.memory_id]


async def test_recall_and_batches_refuse_sizes_past_their_limits(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MCP and REST schemas bound these too; the Python API has only the service's checks."""
    from robot_mcp_memory.experiences import service

    svc = memory.experiences
    await svc.learn(STDIO, "the kettle is heavy")
    assert (await svc.recall(STDIO, "kettle", n=MAX_N)).hits
    for n in (0, MAX_N + 1):
        with pytest.raises(InvalidInput, match="n must be between"):
            await svc.recall(STDIO, "kettle", n=n)
    monkeypatch.setattr(service, "MAX_BATCH", 3)
    items = [(f"crate {i} weighs {i} kg", None) for i in range(4)]
    assert len(await svc.learn_many(STDIO, items[:3])) == 3
    with pytest.raises(InvalidInput, match="at most 3 insights"):
        await svc.learn_many(STDIO, items)


async def test_an_episode_with_nothing_to_go_on_has_no_related_memories(memory: Memory) -> None:
    svc = memory.experiences
    await svc.learn(STDIO, "very confident fact about welding seams at 900 C")
    s = await svc.start_session(STDIO)
    assert (await svc.end_session(STDIO, s.id)).related == []


async def test_consolidation_keeps_each_memory_in_its_own_collection(memory: Memory) -> None:
    svc = memory.experiences
    s = await svc.start_session(STDIO)
    ids = [
        (await svc.learn(STDIO, text, collection=coll, session_id=s.id)).memory_id
        for text, coll in [
            ("the red mug sits on the left side of the top shelf", "default"),
            ("a red mug sits on the left side of the top shelf near the lamp", "default"),
            ("the red mug sits on the left side of a top shelf", "kitchen"),
        ]
    ]
    # corrected into a lexical duplicate of the first, which learn would have caught
    await svc.update(STDIO, ids[1], "A red mug sits on the left side of the top shelf.")
    ended = await svc.end_session(STDIO, s.id)
    # the two in default fold together; the kitchen one, as close to the first, stays out
    assert [set(pair) for pair in ended.consolidated] == [{ids[0], ids[1]}]
    assert len((await svc.recall(STDIO, "red mug shelf", collection="default")).hits) == 1
    assert [h.memory.id for h in (await svc.recall(STDIO, "red mug shelf", collection="kitchen")).hits] == [ids[2]]


@pytest.mark.parametrize("score", [-0.1, 1.5, float("nan")])
async def test_outcome_score_is_between_zero_and_one(memory: Memory, score: float) -> None:
    s = await memory.experiences.start_session(STDIO)
    with pytest.raises(InvalidInput):
        await memory.experiences.end_session(STDIO, s.id, score)


async def test_learn_many_dedups_within_the_batch(memory: Memory) -> None:
    out = await memory.experiences.learn_many(
        STDIO, [("grip the can at 5 N", None), ("Grip the can at 5 N.", None), ("grip the can at 6 N", None)]
    )
    assert [x.status for x in out] == ["created", "duplicate", "created"]
    assert out[1].memory_id == out[0].memory_id


async def test_a_file_without_the_ranking_index_still_recalls(memory: Memory) -> None:
    """Files made by the first build of migration 4 lack idx_memories_rank: ranking reads the table."""
    m = await memory.experiences.learn(STDIO, "the cart wheel squeaks")
    memory.index.write_blocking(lambda c: c.execute("DROP INDEX idx_memories_rank"))
    store = ExperienceStore(memory.index)
    assert store.covering is False
    svc = ExperienceService(SqliteMemories(store), memory.policy, default_robot="tester")
    assert [h.memory.id for h in (await svc.recall(STDIO, "cart wheel")).hits] == [m.memory_id]


@pytest.mark.parametrize("others", [0, 40])
async def test_a_duplicate_is_found_however_many_memories_share_its_facts(memory: Memory, others: int) -> None:
    """Found by review: with more than 32 memories of one digest the lexical stage asked the
    full-text index, whose stemmer split words dedup's own joined ("interferes"/"interfered"), so
    the same pair was a duplicate among few memories and stored twice among many. The lexical key
    gives one answer either way."""
    svc = memory.experiences
    things = ["kettle", "toaster", "blender", "ladle", "whisk", "colander", "grater", "skillet"]
    places = ["oven", "sink", "window", "fridge", "pantry"]
    for i, (thing, place) in enumerate((t, p) for t in things for p in places):
        if i >= others:
            break
        tag = "".join(chr(97 + (i * 7 + k) % 26) for k in range(5))  # a word of its own
        assert (await svc.learn(STDIO, f"a {thing} rests by the {place}, marked {tag}")).status == "created"
    first = await svc.learn(STDIO, "the heavy kettle is stored near the oven")
    again = await svc.learn(STDIO, "Please: the heavy kettle is stored near an oven!")
    assert (again.status, again.method, again.memory_id) == ("duplicate", "jaccard", first.memory_id)
    repeat = await svc.learn(STDIO, "THE heavy kettle is stored near the oven.")
    assert (repeat.status, repeat.method, repeat.memory_id) == ("duplicate", "exact", first.memory_id)
    assert (await svc.learn(STDIO, "The camera interferes with the gripper cable")).status == "created"
    assert (await svc.learn(STDIO, "The camera interfered with the gripper cable")).status == "created"


async def test_an_ended_session_takes_no_more_memories(memory: Memory) -> None:
    """Learns into an ended session were stored: never consolidated, and its summary was wrong
    (found by review)."""
    svc = memory.experiences
    s = await svc.start_session(STDIO)
    await svc.learn(STDIO, "the door sticks in the cold", session_id=s.id)
    await svc.end_session(STDIO, s.id)
    with pytest.raises(Conflict, match="has ended"):
        await svc.learn(STDIO, "the door sticks less when warm", session_id=s.id)
    with pytest.raises(Conflict, match="has ended"):
        await svc.save_perception(STDIO, "door seen", session_id=s.id)


async def test_keeping_the_context_keeps_the_one_stored_now(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """update(context="") read the context before queueing its write and wrote that back, undoing
    a concurrent update's context (found by review). Here the memory is read stale on purpose."""
    svc = memory.experiences
    learned = await svc.learn(STDIO, "push the cart slowly", {"params": {"v": 1}})
    stale = await svc._active_own(STDIO, learned.memory_id)  # as the service reads it: its stored id
    await svc.update(STDIO, learned.memory_id, "push the cart slowly please", {"params": {"v": 2}})
    original = svc._active_own

    async def read_before_the_other_update(principal: Any, mid: int) -> Any:
        await original(principal, mid)
        return stale  # as if read before the concurrent update committed

    monkeypatch.setattr(svc, "_active_own", read_before_the_other_update)
    await svc.update(STDIO, learned.memory_id, "push the cart quite slowly", "")
    final = await svc.get(STDIO, learned.memory_id)
    assert final.content == "push the cart quite slowly"
    assert final.context == {"params": {"v": 2}}


def test_an_old_duplicate_is_found_behind_many_newer_texts_sharing_some_of_its_words(tmp_path: Any) -> None:
    """The lexical stage took the 50 newest texts the full-text query proposed: 60 newer ones
    sharing four of its ten words hid the duplicate (keyword-only, the Python API's default,
    where no semantic stage catches it)."""
    from robot_mcp_memory.api import RobotMemory

    with RobotMemory(tmp_path / "data", robot_id="r1") as mem:
        text = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
        first = mem.learn(text)
        for i in range(60):
            filler = " ".join("q" + chr(97 + i // 26) + chr(97 + i % 26) + chr(97 + j) + "z" for j in range(4))
            assert mem.learn(f"charlie alpha hotel golf {filler}")["status"] == "created"
        again = mem.learn("the " + text)
        assert again["status"] == "duplicate", again
        assert again["existing_id"] == first["memory_id"]
