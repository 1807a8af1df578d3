"""ResilientEmbedder: an embedder that never fails a tool and never delays ``initialize``.

States (`mode`)::

    off ── no embedder configured (MEMORY_EMBEDDER=none): keyword-only, for good
    loading ──load ok──► ready ──embed fails──► unavailable ──backoff due──► (one probe) ──ok──► ready
       └──load fails──► unavailable ──backoff due──► loading (again, in the background)

- The model loads on a background thread (``start()``), so the server answers MCP
  ``initialize`` at once; until it is ready, `embed` returns None and search runs keyword-only.
- A failure (load or embed) makes it ``unavailable`` for 60 s, then 120, 240, and 300 s at most
  between attempts. When due, exactly one caller probes (or one background reload starts);
  everyone else keeps getting None meanwhile. Success resets the backoff.
- A model that starts answering vectors of another size (`DimensionChanged`: re-pulled under
  the same name) is loaded again when due, under an id carrying the new size; stored vectors of
  the old size then count as missing and the backfill re-embeds them.
- Each transition to ``ready`` calls the `on_ready` listeners (the backfill of rows written
  while it was down hangs there). Listeners run on the thread that made the transition and
  must not block.

`embed` returns None rather than raising: "no vector" is an ordinary outcome the callers handle.
The clock is injectable so tests step through the backoff without sleeping.

`embed_query` keeps the vectors of the last `QUERY_CACHE_SIZE` query texts (an LRU): a fleet's
robots ask for the same task at mission start, and a query vector is the costliest part of a
hybrid find. An entry is keyed by (model id, exact text) and read only while the model is ready;
every load (a reload after a failure, a new size under a new id) empties it, so a vector of
another model, or of the same name re-pulled, is never served.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from robot_mcp_memory import logs
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import DimensionChanged, EmbedderUnavailable
from robot_mcp_memory.search import embedders
from robot_mcp_memory.search.embedders import Loadable, Vectors
from robot_mcp_memory.search.vectors import Vector

Mode = Literal["off", "loading", "ready", "unavailable"]
Embedded = tuple[str, Vector]
#: How a coroutine runs blocking work off its event loop (`asyncio.to_thread`, a store's pool).
Offload = Callable[[Callable[[], Embedded | None]], Awaitable[Embedded | None]]
BACKOFF_S: tuple[float, ...] = (60.0, 120.0, 240.0, 300.0)
#: How many query vectors `embed_query` keeps (least recently used dropped first): at 512
#: float32 dimensions ~2 KB each, plus the text (at most a tool's 4,000-character query).
QUERY_CACHE_SIZE = 1024

_log = logs.get("robot_mcp_memory.search.embedder")


class ResilientEmbedder:
    def __init__(
        self,
        backend: Loadable | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff: Sequence[float] = BACKOFF_S,
        background: bool = True,
        query_cache: int = QUERY_CACHE_SIZE,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.backoff = tuple(backoff)
        self.background = background
        self.failures = 0
        self.last_error: str | None = None
        self._mode: Mode = "off" if backend is None else "loading"
        self._loaded = False
        self._retry_at = 0.0
        self._busy = False  # a probe or a (re)load is in flight
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._settled = threading.Event()  # the first load has succeeded or failed
        self._listeners: list[Callable[[], None]] = []
        self._started = False
        #: (model id, query text) → its vector (read-only), most recently used last; guarded by
        #: `_cache_lock`, never held while a model runs.
        self._queries: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._query_cache = query_cache
        self._cache_lock = threading.Lock()
        self._loads = 0  # bumped by every load under `_cache_lock`: a vector made before it is not cached

    @classmethod
    def from_settings(cls, settings: Settings) -> ResilientEmbedder:
        """The configured backend, not started. The hashing embedder loads inline (it has
        nothing to load); every real model loads in the background."""
        return cls(embedders.from_settings(settings), background=settings.embedder != "hashing")

    # ------------------------------------------------------------------ state
    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def model_id(self) -> str | None:
        """The configured model's id once loaded (it may be temporarily unavailable then)."""
        return self.backend.model_id if self.backend is not None and self._loaded else None

    @property
    def dim(self) -> int:
        return self.backend.dim if self.backend is not None and self._loaded else 0

    def retry_in(self) -> float | None:
        if self._mode != "unavailable":
            return None
        return max(0.0, self._retry_at - self.clock())

    def on_ready(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the first successful load (for tests, benchmarks and CLI commands)."""
        return self._ready.wait(timeout)

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Block until the first load has succeeded *or failed*; then whether it is ready. A
        command waiting for the model does not sit out its whole timeout on a load that failed
        at once (an unreachable URL, a missing file)."""
        self._settled.wait(timeout)
        return self._ready.is_set()

    # ------------------------------------------------------------------ loading
    def start(self) -> None:
        """Begin loading: on a daemon thread, or right here when `background` is False."""
        if self.backend is None or self._started:
            return
        self._started = True
        with self._lock:
            self._busy = True
            self._mode = "loading"
        self._spawn_load()

    def _spawn_load(self) -> None:
        if self.background:
            threading.Thread(target=self._load, name="embedder-load", daemon=True).start()
        else:
            self._load()

    def _load(self) -> None:
        assert self.backend is not None
        began = time.perf_counter()
        try:
            self.backend.load()
        except Exception as exc:  # any failure of a third-party model is "unavailable"
            self._fail(exc, "load")
            return
        with self._cache_lock:
            self._queries.clear()  # whatever was cached came from an earlier load
            self._loads += 1
        with self._lock:
            self._loaded = True
        _log.info(
            "embedder.ready",
            model_id=self.backend.model_id,
            dim=self.backend.dim,
            load_ms=round((time.perf_counter() - began) * 1000, 1),
        )
        self._succeed()

    def _succeed(self) -> None:
        with self._lock:
            was = self._mode
            self._mode = "ready"
            self.failures = 0
            self.last_error = None
            self._busy = False
        self._ready.set()
        self._settled.set()
        if was != "ready":
            if was == "unavailable":
                _log.info("embedder.recovered", model_id=self.model_id)
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:
                    _log.exception("embedder.listener_failed")

    def _fail(self, exc: BaseException, during: str) -> None:
        """Count a failure and back off. `during`: ``load``, ``probe`` (the one caller trying a
        model that was unavailable) or ``embed`` (a caller while it was ready). Callers in flight
        when an outage begins all fail together: only the first counts, or one blip would jump
        the backoff straight to its longest step."""
        reason = exc.detail if isinstance(exc, EmbedderUnavailable) else f"{type(exc).__name__}"
        with self._lock:
            if during == "embed" and self._mode == "unavailable":
                return  # this outage is counted already; the probe in flight (if any) is not ours
            if isinstance(exc, DimensionChanged):
                self._loaded = False  # the next due try loads it again, under an id with the new size
            self.failures += 1
            delay = self.backoff[min(self.failures, len(self.backoff)) - 1]
            self._retry_at = self.clock() + delay
            self._mode = "unavailable"
            self._busy = False
            self.last_error = reason
        if during == "load":
            self._settled.set()
        _log.warning(
            "embedder.unavailable",
            during=during,
            reason=reason,
            failures=self.failures,
            retry_in_s=delay,
            search="keyword-only until it recovers",
        )

    # ------------------------------------------------------------------ embedding
    def _waiting(self) -> bool:
        """Loading, or backing off (or another caller is probing): `embed` answers None."""
        mode = self._mode
        return mode == "loading" or (mode == "unavailable" and (self._busy or self.clock() < self._retry_at))

    def would_embed(self) -> bool:
        """Whether `embed` would try now (False when off, loading or backing off). Lets a caller
        skip the hop to a worker thread when the answer would be None anyway — with
        ``MEMORY_EMBEDDER=none`` that hop was most of an MCP call's time outside SQL."""
        return self.backend is not None and not self._waiting()

    def embed(self, texts: Sequence[str]) -> Vectors | None:
        """Vectors for `texts`, or None when the embedder is off, loading, or backing off."""
        if self.backend is None:
            return None
        with self._lock:
            if self._waiting():
                return None
            mode = self._mode
            if mode == "unavailable":
                self._busy = True  # this caller probes (or restarts the load); others keep waiting
                if not self._loaded:
                    self._mode = "loading"
        if mode == "unavailable" and not self._loaded:
            self._spawn_load()
            return self._embed_now(texts) if not self.background and self._mode == "ready" else None
        return self._embed_now(texts, probe=mode == "unavailable")

    def embed_query(self, text: str) -> tuple[str, Vector] | None:
        """(model id, vector) of one query text, or None when `embed` would give none. A text
        embedded before under the same model id, since the last load, comes from the cache
        without running the model (while the model is ready; otherwise `embed` decides)."""
        if self.backend is None:
            return None
        model_id = self.model_id
        with self._cache_lock:
            loads = self._loads
            hit = self._cached(model_id, text)
        if hit is not None:
            return hit
        out = self.embed([text])
        after = self.model_id
        if out is None or after is None:
            return None
        vec = out[0].copy()
        vec.setflags(write=False)  # shared by every caller that hits it
        with self._cache_lock:
            # Cached only when no load ran since `loads` was read: then `after` names the model
            # that made the vector.
            if self._loads == loads and after == model_id and self._query_cache > 0:
                self._queries[(after, text)] = vec
                self._queries.move_to_end((after, text))
                while len(self._queries) > self._query_cache:
                    self._queries.popitem(last=False)
        return after, vec

    def cached_query(self, text: str) -> tuple[str, Vector] | None:
        """`embed_query`'s answer when the cache holds it, else None; never runs the model, so
        an event loop may ask before handing the miss to a worker thread."""
        with self._cache_lock:
            return self._cached(self.model_id, text)

    async def query_vector(self, text: str, offload: Offload) -> Embedded | None:
        """`embed_query` for a coroutine: a cached vector here on the loop (a dict lookup), a new
        one through `offload` (the model must never run on the loop), None at once when the
        embedder would not try — no thread hop for nothing."""
        if not self.would_embed():
            return None
        return self.cached_query(text) or await offload(lambda: self.embed_query(text))

    def _cached(self, model_id: str | None, text: str) -> tuple[str, Vector] | None:
        """A hit for (`model_id`, `text`) while the model is ready; `_cache_lock` held."""
        if model_id is None or self._mode != "ready":
            return None
        hit = self._queries.get((model_id, text))
        if hit is None:
            return None
        self._queries.move_to_end((model_id, text))
        return model_id, hit

    def cached_queries(self) -> int:
        """How many query vectors the cache holds now."""
        with self._cache_lock:
            return len(self._queries)

    def _embed_now(self, texts: Sequence[str], probe: bool = False) -> Vectors | None:
        assert self.backend is not None
        try:
            out = self.backend.embed(texts)
        except Exception as exc:
            self._fail(exc, "probe" if probe else "embed")
            return None
        if probe:
            self._succeed()
        return out

    def status(self) -> dict[str, object]:
        """For health output and logs (no secrets: ids, counts and reasons only)."""
        return {
            "mode": self._mode,
            "model_id": self.model_id,
            "dim": self.dim,
            "failures": self.failures,
            "retry_in_s": self.retry_in(),
            "last_error": self.last_error,
        }

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()


__all__ = ["BACKOFF_S", "Mode", "ResilientEmbedder"]
