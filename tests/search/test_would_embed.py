"""`would_embed`: callers skip the worker-thread hop when the embedder would answer None anyway,
and still probe a backed-off embedder once its retry is due."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.search.embedders import Vectors
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import MAILROOM
from tests.search.test_embedders import FakeClock, Flaky


def test_would_embed_follows_the_states_embed_answers_none_in() -> None:
    assert not ResilientEmbedder(None).would_embed()  # off

    backend = Flaky()
    backend.gate = threading.Event()
    loading = ResilientEmbedder(backend)
    loading.start()
    assert loading.mode == "loading"
    assert not loading.would_embed()
    backend.gate.set()
    assert loading.wait_ready(10)
    assert loading.would_embed()

    clock = FakeClock()
    flaky = Flaky()
    r = ResilientEmbedder(flaky, clock=clock, background=False)
    r.start()
    assert r.would_embed()
    flaky.fail_embed = True
    assert r.embed(["x"]) is None  # fails: backing off
    assert not r.would_embed()
    clock.advance(60)
    assert r.would_embed()  # the retry is due: the next caller must still probe
    flaky.fail_embed = False
    assert r.embed(["x"]) is not None
    assert r.mode == "ready"


class _Refuses:
    """An embedder that fails the test if anyone asks it to embed."""

    def __call__(self, texts: Sequence[str]) -> Vectors:
        raise AssertionError("embed was called although the embedder is off")


@pytest.fixture
def keyword_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Memory:
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_EMBEDDER": "none"}))
    monkeypatch.setattr(MemoryVectorIndex, "embed", lambda self, texts: _Refuses()(texts))
    monkeypatch.setattr(ResilientEmbedder, "embed", lambda self, texts: _Refuses()(texts))
    return memory


async def test_with_the_embedder_off_nothing_is_sent_to_embed(keyword_only: Memory) -> None:
    memory = keyword_only
    try:
        await memory.processes.save(STDIO, MAILROOM)
        found = await memory.processes.find(STDIO, "fetch the package from the mailroom")
        assert found.mode == "keyword"
        assert found.hits[0].doc.id == "fetch-package-mailroom"
        learned = await memory.experiences.learn(STDIO, "the mailroom door sticks; push at 20 N", {})
        assert learned.status == "created"
        recalled = await memory.experiences.recall(STDIO, "mailroom door")
        assert recalled.mode == "keyword"
        assert [h.memory.id for h in recalled.hits] == [learned.memory_id]
    finally:
        memory.close()
