"""Hybrid recall and semantic dedup for experiences, end to end with the hashing embedder (the
test fixture's `MEMORY_EMBEDDER=hashing`): vectors written with their memories, filters applied
before the vector ranking, keyword-only while the embedder is down, backfilled after, and
cosine dedup among same-facts memories only."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.ports import Weighed
from robot_mcp_memory.experiences.service import ExperienceService, run_sync
from robot_mcp_memory.experiences.sqlite import storage
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.search.embedders import HashingEmbedder, Vectors
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.tenancy.principal import STDIO
from tests.search.test_embedders import FakeClock

QUERY = "slipperiness"  # shares no keyword (porter stem) with "slipped"; shares its spelling


def vector_refs(memory: Memory) -> set[str]:
    """The public ids (as text) of the memories that have a vector (filed by their stored ids)."""
    rows = memory.index.read_blocking(lambda c: c.execute("SELECT ref FROM vectors WHERE domain = 'memory'").fetchall())
    shown = memory.index.read_blocking(lambda c: storage.public_ids(c, [int(r[0]) for r in rows]))
    return {str(shown[int(r[0])]) for r in rows}


def keyword_only(memory: Memory) -> ExperienceService:
    svc = memory.experiences
    return ExperienceService(svc.store, svc.policy, default_robot="tester")


async def test_a_paraphrase_with_no_shared_keyword_is_recalled_in_hybrid_mode(memory: Memory) -> None:
    svc = memory.experiences
    slipped = await svc.learn(STDIO, "gripper slipped", context={"task": {"success": False}})
    door = await svc.learn(STDIO, "the door opened easily", context={"task": {"success": True}})
    assert vector_refs(memory) == {str(slipped.memory_id), str(door.memory_id)}  # written with the rows
    assert (await keyword_only(memory).recall(STDIO, QUERY)).hits == []  # keyword search alone misses it
    found = await svc.recall(STDIO, QUERY)
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [slipped.memory_id]  # the unrelated one is not padded in
    assert found.hits[0].score == 1.0
    both = await svc.recall(STDIO, "door slipped", n=5)  # a keyword match and a semantic one, fused
    assert both.mode == "hybrid"
    assert len(both.hits) == 2
    # Filter-only recall is unchanged.
    assert (await svc.recall(STDIO, "", n=5)).mode == "filter"


async def test_a_filter_excludes_the_semantically_closest_memories_before_ranking(memory: Memory) -> None:
    svc = memory.experiences
    # 40 close failures (more than the vector list's pool of 30) and one farther success.
    await svc.learn_many(
        STDIO, [(f"gripper slipped during trial {i}", {"task": {"success": False}}) for i in range(40)]
    )
    wheels = await svc.learn(STDIO, "wheels slipped", context={"task": {"success": True}})
    closest = await svc.recall(STDIO, QUERY, n=1)
    assert closest.mode == "hybrid"
    assert closest.hits[0].memory.id != wheels.memory_id  # unfiltered, a failure is nearer
    found = await svc.recall(STDIO, QUERY, n=1, context_filter={"task.success": True})
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [wheels.memory_id]  # a post-filter over the top 30 would miss it
    elsewhere = await svc.recall(STDIO, QUERY, n=5, collection="other")
    assert elsewhere.hits == []


async def test_forget_and_update_replace_the_vector(memory: Memory) -> None:
    svc = memory.experiences
    a = await svc.learn(STDIO, "gripper slipped")
    b = await svc.learn(STDIO, "the arm stalled near the shelf")
    await svc.forget(STDIO, a.memory_id, "wrong robot")
    assert vector_refs(memory) == {str(b.memory_id)}
    assert (await svc.recall(STDIO, QUERY)).hits == []
    await svc.update(STDIO, b.memory_id, "wheels slipped")
    found = await svc.recall(STDIO, QUERY)
    assert [h.memory.id for h in found.hits] == [b.memory_id]


class Switchable(HashingEmbedder):
    """The hashing embedder, failing on command."""

    def __init__(self) -> None:
        super().__init__(256)
        self.down = False
        self.texts: list[str] = []  # every text the model was run on

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.down:
            raise RuntimeError("the embedding server said no")
        self.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture
def switchable(memory: Memory) -> tuple[Memory, Switchable, FakeClock, MemoryVectorIndex]:
    clock = FakeClock()
    backend = Switchable()
    emb = ResilientEmbedder(backend, clock=clock, background=False)
    vectors = memory.experiences.vectors
    assert isinstance(vectors, MemoryVectorIndex)
    assert vectors.backfiller.wait_idle(60)  # the startup run holds the old model (tests/search/test_hybrid.py)
    vectors.embedder = emb
    emb.on_ready(vectors.kick_backfill)
    emb.start()
    return memory, backend, clock, vectors


async def test_embedder_down_means_keyword_mode_then_the_backfill(
    switchable: tuple[Memory, Switchable, FakeClock, MemoryVectorIndex],
) -> None:
    memory, backend, clock, vectors = switchable
    svc = memory.experiences
    await svc.learn(STDIO, "the door opened easily")
    backend.down = True
    slipped = await svc.learn(STDIO, "gripper slipped")  # saved, without a vector
    assert slipped.status == "created"
    assert str(slipped.memory_id) not in vector_refs(memory)
    down = await svc.recall(STDIO, "gripper")
    assert down.mode == "keyword"
    assert [h.memory.id for h in down.hits] == [slipped.memory_id]  # keyword recall still answers
    assert (await svc.recall(STDIO, QUERY)).mode == "keyword"
    backend.down = False
    clock.advance(61)  # the backoff is due: the next embed probes, succeeds, and kicks the backfill
    await svc.recall(STDIO, QUERY)
    assert vectors.backfiller.wait_idle(120)
    assert str(slipped.memory_id) in vector_refs(memory)
    found = await svc.recall(STDIO, QUERY)
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [slipped.memory_id]


async def test_a_repeated_recall_query_is_not_embedded_again(
    switchable: tuple[Memory, Switchable, FakeClock, MemoryVectorIndex],
) -> None:
    memory, backend, _clock, _vectors = switchable
    svc = memory.experiences
    slipped = await svc.learn(STDIO, "gripper slipped")
    for _ in range(3):
        found = await svc.recall(STDIO, QUERY)
        assert found.mode == "hybrid"
        assert [h.memory.id for h in found.hits] == [slipped.memory_id]
    assert backend.texts.count(QUERY) == 1  # the query cache answers the repeats
    await svc.recall(STDIO, "the wheels slipped on the ramp")
    assert backend.texts.count("the wheels slipped on the ramp") == 1


async def test_the_blocking_api_runs_hybrid_without_suspending(memory: Memory) -> None:
    svc = memory.experiences.blocking()
    slipped = run_sync(svc.learn(STDIO, "gripper slipped"))
    found = run_sync(svc.recall(STDIO, QUERY))
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [slipped.memory_id]


#: The same in British and American spelling: more words differ than a substitution's two, so
#: only the vectors can see it (`dedup.substituted` is false).
BASE = "its grey colour is the colour of the aluminium in the centre of the tyre by the kerb at 12 N"
PARAPHRASE = "its gray color is the color of the aluminum in the center of the tire by the curb at 12 N"
#: The hashing embedder is a bag of words and spellings: such a paraphrase reaches a cosine of 0.77
#: there, where a language model puts it above `COSINE_DUPLICATE`. The stage is exercised at that
#: cosine instead.
HASHING_DUPLICATE = 0.75


async def test_semantic_dedup_is_cosine_among_same_facts_memories_and_numbers_decide(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dedup, "COSINE_DUPLICATE", HASHING_DUPLICATE)
    svc = memory.experiences
    base = await svc.learn(STDIO, BASE)
    # Nearer texts with other numbers: never candidates, however close (a global top 5 would be all of them).
    for force in range(13, 19):
        assert (await svc.learn(STDIO, PARAPHRASE.replace("12", str(force)))).status == "created"
    same = await svc.learn(STDIO, PARAPHRASE)
    assert same.status == "duplicate"
    assert same.method == "cosine"
    assert same.memory_id == base.memory_id
    vecs = HashingEmbedder(256).embed([BASE, PARAPHRASE])
    cosine = float(vecs[0] @ vecs[1])  # unit rows: the dot product is the cosine (not 1 - L2)
    assert same.similarity == pytest.approx(cosine, abs=1e-4)
    assert cosine == pytest.approx(float(np.dot(vecs[0], vecs[1]) / np.linalg.norm(vecs[0]) / np.linalg.norm(vecs[1])))
    other = await svc.learn(STDIO, PARAPHRASE.replace("12", "20"))
    assert other.status == "created"  # as close, but another number: another experience
    failed = await svc.learn(STDIO, PARAPHRASE + ", and it failed")
    assert failed.status == "created"  # an outcome is a fact too


async def test_the_experience_weight_still_ranks_in_hybrid_mode(memory: Memory) -> None:
    svc = memory.experiences
    real = await svc.learn(STDIO, "gripper slipped", context={"source": "real"})
    sim = await svc.learn(STDIO, "gripper slipped", context={"source": "sim"})  # newer, equally close
    assert real.status == sim.status == "created"  # another source: another experience
    found = await svc.recall(STDIO, QUERY, n=2)
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [real.memory_id, sim.memory_id]  # real-world data weighs more


async def test_the_server_path_overlapping_embedding_and_keyword_list_answers_like_the_blocking_one(
    memory: Memory,
) -> None:
    """Async (the server) embeds the query while the keyword list is read; the blocking API does
    one after the other, in one snapshot. Same answers."""
    from bench.experience_corpus import QUERIES as BENCH_QUERIES
    from bench.experience_corpus import corpus

    svc = memory.experiences
    items = [it for it in corpus(400, seed=3) if it.collection == "default"]
    await svc.learn_many(STDIO, [(it.insight, it.context) for it in items])
    blocking = svc.blocking()
    for q in BENCH_QUERIES:
        for f in (None, {"task.success": True}):
            served = await svc.recall(STDIO, q, n=5, context_filter=f)
            direct = run_sync(blocking.recall(STDIO, q, n=5, context_filter=f))
            assert served.mode == direct.mode == "hybrid"
            assert [(h.memory.id, h.score) for h in served.hits] == [(h.memory.id, h.score) for h in direct.hits]


async def test_a_memory_forgotten_after_the_keyword_list_was_read_is_not_returned(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlapped keyword list comes from an earlier snapshot: the vector read re-applies
    every filter to its memories, so one forgotten in between never comes back."""
    from robot_mcp_memory.experiences.sqlite import ranking_repo

    svc = memory.experiences
    kept = await svc.learn(STDIO, "the gripper slipped on the wet mug")
    gone = await svc.learn(STDIO, "the gripper slipped on the wet glass")
    before = await svc.recall(STDIO, "gripper slipped wet", n=5)
    assert {h.memory.id for h in before.hits} == {kept.memory_id, gone.memory_id}
    stale = memory.index.read_blocking(
        lambda c: ranking_repo.weighed(c, ranking_repo.Scope(None, "default", 0.3, time.time()), ["gripper"], 50)
    )
    await svc.forget(STDIO, gone.memory_id, "wrong object")
    calls: list[int] = []

    def earlier_snapshot(*args: object, **kwargs: object) -> list[Weighed]:
        calls.append(1)
        return stale  # as read just before the forget

    monkeypatch.setattr(ranking_repo, "weighed", earlier_snapshot)
    after = await svc.recall(STDIO, "gripper slipped wet", n=5)
    assert calls == [1]
    assert after.mode == "hybrid"
    assert [h.memory.id for h in after.hits] == [kept.memory_id]


async def test_vectors_another_process_writes_are_searched_and_its_stale_ones_never(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training loop's `RobotMemory` beside a server, on one data directory: the server ranked
    a memory the loop had updated by its old vector (score 1.0 for the wrong text), and never
    found the loop's new memories by meaning, until it restarted."""
    monkeypatch.setattr(vectorstore, "RELOAD_EVERY_S", 0.0)  # the interval is tested below
    svc = memory.experiences
    door = await svc.learn(STDIO, "the lab door opens with a badge")
    assert [h.memory.id for h in (await svc.recall(STDIO, "badge door")).hits] == [door.memory_id]
    cache = memory.experiences.vectors.cache  # type: ignore[union-attr]
    loads = cache.loads
    other = Memory.open(memory.settings)  # another process: its own store, its own stamps
    try:
        await other.experiences.update(STDIO, door.memory_id, "wheels slipped")
        slipped = await other.experiences.learn(STDIO, "gripper slipped")
    finally:
        other.close()
    found = await svc.recall(STDIO, QUERY, n=5)
    assert found.mode == "hybrid"
    assert {h.memory.id for h in found.hits} == {door.memory_id, slipped.memory_id}  # by meaning, both
    assert cache.loads == loads + 1  # read again once, for the other process's writes
    own = await svc.learn(STDIO, "pallet slipped")
    found = await svc.recall(STDIO, QUERY, n=5)
    assert own.memory_id in {h.memory.id for h in found.hits}
    assert cache.loads == loads + 1  # its own writes patch the index: no reload


async def test_another_processs_stream_of_writes_reloads_the_index_at_most_once_an_interval(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reload reads every vector (~34 ms at 10,000): beside a loop writing constantly, every
    search and every learn's dedup read reloaded."""
    svc = memory.experiences
    await svc.learn(STDIO, "gripper slipped")
    await svc.recall(STDIO, QUERY)
    cache = memory.experiences.vectors.cache  # type: ignore[union-attr]
    clock = [time.monotonic() + 1000.0]
    cache.clock = lambda: clock[0]
    other = Memory.open(memory.settings)
    try:
        await other.experiences.learn(STDIO, "wheels slipped")
        loads = cache.loads
        await svc.recall(STDIO, QUERY)  # the first look after a long while: reloaded
        assert cache.loads == loads + 1
        loads = cache.loads
        for i in range(5):
            await other.experiences.learn(STDIO, f"pallet {i} slipped")
            await svc.recall(STDIO, QUERY)
        assert cache.loads == loads  # within the interval: the index as it was
        clock[0] += vectorstore.RELOAD_EVERY_S
        found = await svc.recall(STDIO, QUERY, n=10)
        assert cache.loads == loads + 1
        assert len(found.hits) == 7  # every one of the other process's memories, by meaning
    finally:
        other.close()


async def test_a_hybrid_spatial_sort_by_distance_alone_finds_the_nearest_matches(memory: Memory) -> None:
    """Hybrid spatial recall blended proximity only into the 30 best by score and the 30 nearest
    by cosine: the nearest keyword matches, ranked low by score, were never candidates, so
    "weight": 1 (distance alone) returned matches 31–33 away where keyword recall returns 1–3."""
    svc = memory.experiences
    items = [
        (
            f"grasped the mug on shelf {i} " + " ".join(["cabinet"] * (i // 3)),
            {"spatial": {"position": [60.0 - i, 0, 0]}},
        )
        for i in range(60)
    ]
    await svc.learn_many(STDIO, items)
    spatial = {"field": "spatial.position", "target": [0, 0, 0], "weight": 1}
    hybrid = await svc.recall(STDIO, "mug", 3, spatial_sort=spatial)
    keyword = await keyword_only(memory).recall(STDIO, "mug", 3, spatial_sort=spatial)
    assert (hybrid.mode, keyword.mode) == ("hybrid", "keyword")
    assert [h.distance for h in keyword.hits] == [1.0, 2.0, 3.0]
    assert [h.distance for h in hybrid.hits] == [1.0, 2.0, 3.0]


def test_hybrid_recall_among_memories_of_one_text_answers_the_same_after_the_vectors_are_rewritten(
    tmp_path: Path,
) -> None:
    """Rows and vectors identical, byte for byte — only the order the vectors were written in
    differs (a dump and load, a backfill after an outage) — and recall named other memories."""
    from robot_mcp_memory.api import RobotMemory

    data = tmp_path / "data"
    with RobotMemory(data, robot_id="rap-1", embedder="hashing", wait_for_model=5) as mem:
        mem.learn_many([("grasp the mug by the handle", {"params": {"force": i}}) for i in range(40)])
        first = [h["id"] for h in mem.recall("grasp the mug handle", n=5)]
    conn = sqlite3.connect(data / "index.db", isolation_level=None)
    try:  # the same vectors, written again newest first
        rows = conn.execute("SELECT * FROM vectors WHERE domain = 'memory' ORDER BY rowid DESC").fetchall()
        conn.execute("DELETE FROM vectors WHERE domain = 'memory'")
        conn.executemany(f"INSERT INTO vectors VALUES ({', '.join('?' * len(rows[0]))})", rows)  # noqa: S608 - a placeholder per column
    finally:
        conn.close()
    with RobotMemory(data, robot_id="rap-1", embedder="hashing", wait_for_model=5) as mem:
        again = [h["id"] for h in mem.recall("grasp the mug handle", n=5)]
    assert len(first) == 5
    assert again == first


SIBLINGS = [f"Push the red cube to the fixture at 0.{i} m/s" for i in range(4, 10)]
TOKEN_TEXT = "Push the red cube to the fixture at 0.3 m/s; lab tag qwkzjvb"


@pytest.mark.parametrize("spatial", [False, True], ids=["by-score", "spatial-sort"])
async def test_a_unique_token_puts_its_memory_first_though_its_siblings_weigh_more(
    memory: Memory, spatial: bool
) -> None:
    """Fusion by ranks alone counted the one memory naming the token as one rank ahead by
    keyword: a real-world sibling, second by keyword and first by weighted cosine, outranked it
    (bench/eval_recall.py: 7 of 20 first at 1,200 memories with the default model)."""
    svc = memory.experiences
    token = await svc.learn(STDIO, TOKEN_TEXT, context={"source": "sim", "spatial": {"position": [0, 0, 0]}})
    await svc.learn_many(STDIO, [(t, {"source": "real", "spatial": {"position": [0, 0, 0]}}) for t in SIBLINGS])
    where = {"field": "spatial.position", "target": [0, 0, 0], "weight": 0.3} if spatial else None
    found = await svc.recall(STDIO, "push red cube fixture qwkzjvb", n=5, spatial_sort=where)
    assert found.mode == "hybrid"
    assert found.hits[0].memory.id == token.memory_id
    assert found.hits[0].score == 1.0
    assert len(found.hits) == 5  # the siblings still follow
    plain = await svc.recall(STDIO, "push red cube fixture", n=7, spatial_sort=where)
    assert plain.hits[0].memory.id != token.memory_id  # without the token, the weight decides as before


async def test_the_exact_text_of_a_memory_puts_it_first_above_a_near_duplicate_that_weighs_more(
    memory: Memory,
) -> None:
    svc = memory.experiences
    exact = await svc.learn(STDIO, "the gripper slipped on the wet red mug at 12 N", context={"source": "sim"})
    near = await svc.learn(STDIO, "the gripper slipped on the wet red mug at 12 N twice", context={"source": "real"})
    assert near.status == "created"  # another source: another experience
    found = await svc.recall(STDIO, "the gripper slipped on the wet red mug at 12 N", n=2)
    assert found.mode == "hybrid"
    assert [h.memory.id for h in found.hits] == [exact.memory_id, near.memory_id]


@pytest.mark.parametrize("hybrid", [True, False], ids=["hybrid", "keyword"])
async def test_a_question_naming_an_error_code_finds_the_memory_holding_it_first(memory: Memory, hybrid: bool) -> None:
    """The question's other words ("went", "wrong") are rarer here than the code's "e", so by
    relevance another memory came first, in either mode."""
    svc = memory.experiences if hybrid else keyword_only(memory)
    code = await svc.learn(STDIO, "the wrist drive stopped mid-pick; error code E-4471", context={"source": "sim"})
    await svc.learn(STDIO, "the gripper went the wrong way around the tray", context={"source": "real"})
    await svc.learn_many(STDIO, [(f"pick {i} done; error code E-{1000 + i}", {"source": "real"}) for i in range(6)])
    found = await svc.recall(STDIO, "what went wrong with E-4471", n=3)
    assert found.mode == ("hybrid" if hybrid else "keyword")
    assert found.hits[0].memory.id == code.memory_id
    assert found.hits[0].score == 1.0


@pytest.mark.parametrize("hybrid", [True, False], ids=["hybrid", "keyword"])
async def test_a_memory_of_another_colour_or_outcome_ranks_below_the_one_the_query_describes(
    memory: Memory, hybrid: bool
) -> None:
    """`search.agreement` in recall: the same task with another colour, or the same task that
    succeeded, weighs more here (real-world data) and shares most of the query's words; it
    contradicts a slot the query names and is demoted, in either mode."""
    svc = memory.experiences if hybrid else keyword_only(memory)
    target = await svc.learn(
        STDIO, "Pick the red cube from the tray failed because the vacuum seal leaked", context={"source": "sim"}
    )
    blue = await svc.learn(
        STDIO, "Pick the blue cube from the tray failed because the vacuum seal leaked", context={"source": "real"}
    )
    worked = await svc.learn(
        STDIO,
        "Pick the red cube from the tray succeeded even though the vacuum seal leaked",
        context={"source": "real"},
    )
    found = await svc.recall(STDIO, "why did pick the red cube from the tray fail", n=3)
    assert found.mode == ("hybrid" if hybrid else "keyword")
    assert found.hits[0].memory.id == target.memory_id
    assert {h.memory.id for h in found.hits[1:]} == {blue.memory_id, worked.memory_id}  # demoted, not hidden
    # n = 1: the one match ranked first by weight contradicts, so the pool is ranked instead
    assert [
        h.memory.id for h in (await svc.recall(STDIO, "why did pick the red cube from the tray fail", n=1)).hits
    ] == [target.memory_id]
    plain = await svc.recall(STDIO, "pick the cube from the tray", n=3)  # names no colour or outcome
    assert plain.hits[0].memory.id != target.memory_id  # the weight decides, as before


@pytest.mark.parametrize("n", [1, 2, 3])
async def test_a_raised_identifier_match_of_another_colour_is_still_demoted(memory: Memory, n: int) -> None:
    """The tier of memories naming every identifier of the query is raised above the rest after
    fusion; a memory of that tier naming another colour than the query's is demoted first, so
    the one naming both comes first whatever n (a check of fusion's first n alone left it out)."""
    svc = memory.experiences
    q = "what went wrong when the gripper dropped the red cube near the conveyor with error E-4471"
    await svc.learn(
        STDIO, "what went wrong when the gripper dropped the red cube near the conveyor belt", {"source": "real"}
    )
    await svc.learn(STDIO, "blue cube stuck: error E-4471", context={"source": "real"})
    red = await svc.learn(STDIO, "red cube stuck: error E-4471", context={"source": "sim"})
    found = await svc.recall(STDIO, q, n=n)
    assert found.mode == "hybrid"
    assert found.hits[0].memory.id == red.memory_id


async def test_with_spatial_sort_a_near_memory_of_another_colour_is_demoted_after_the_blend(memory: Memory) -> None:
    svc = memory.experiences
    far = await svc.learn(
        STDIO,
        "pick the red cube from the tray worked with the vacuum gripper",
        context={"source": "real", "spatial": {"position": [50, 0, 0]}},
    )
    near_blue = await svc.learn(
        STDIO,
        "pick the blue cube from the tray worked with the vacuum gripper",
        context={"source": "sim", "spatial": {"position": [0, 0, 0]}},
    )
    where = {"field": "spatial.position", "target": [0, 0, 0], "weight": 0.4}
    for n in (1, 2):
        found = await svc.recall(STDIO, "pick the red cube from the tray", n=n, spatial_sort=where)
        assert found.mode == "hybrid"
        assert [h.memory.id for h in found.hits] == [far.memory_id, near_blue.memory_id][:n]
