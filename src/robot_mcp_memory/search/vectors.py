"""Vectors: the BLOB codec and the in-memory index searched by cosine similarity.

- **Codec**: a vector is stored as little-endian float32 bytes (``4 × dim``), next to its
  model id and dimension. `decode` refuses a blob of the wrong length instead of guessing.
- **`VectorIndex`**: what search needs from an index — upsert, remove, and "top k by cosine
  among rows whose partition (the owning robot) is in `within`". The filter is applied before
  ranking, so a scoped caller gets its own best k, never the remains of everyone's top k.
- **`ExactIndex`**: a float32 matrix in RAM, rows unit length, one matrix-vector product per
  query, so its cost grows linearly with rows × dimensions (docs/search.md, "Why these
  constants"). Exact; right below ~1M vectors. A sqlite-vec or HNSW index can implement the same
  protocol later.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
#: Which rows a search may rank, given each row's ref as a number (`ExactIndex.search`).
KeyFilter = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]
_LE_F32 = np.dtype("<f4")
_blas: Any = None


def one_blas_thread() -> AbstractContextManager[Any]:
    """Run the enclosed numpy products on one BLAS thread. Requests already run in parallel; a
    multi-threaded matrix-vector product per request only makes OpenBLAS threads spin-wait for
    each other: no faster in the median, slower in the tail, and more CPU in all."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
        except ImportError:  # pragma: no cover - a declared dependency; degrade to numpy's default
            _blas = False
    return _blas.limit(limits=1, user_api="blas") if _blas else nullcontext()


def encode(vec: npt.ArrayLike) -> bytes:
    """A 1-d vector as little-endian float32 bytes."""
    arr = np.asarray(vec, dtype=_LE_F32)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-d vector, got shape {arr.shape}")
    return arr.tobytes()


def decode(blob: bytes, dim: int) -> Vector:
    """The vector stored in `blob`; ValueError if its length is not ``4 × dim``."""
    if len(blob) != 4 * dim:
        raise ValueError(f"a {dim}-d vector needs {4 * dim} bytes, got {len(blob)}")
    return np.frombuffer(blob, dtype=_LE_F32).astype(np.float32)


class VectorIndex(Protocol):
    model_id: str
    dim: int

    def __len__(self) -> int: ...

    def upsert(self, ref: str, partition: str, vec: Vector) -> None: ...

    def remove(self, ref: str) -> None: ...

    def search(
        self, query: Vector, k: int, within: Collection[str] | None = None, keys: KeyFilter | None = None
    ) -> list[tuple[str, float]]:
        """Up to `k` (ref, cosine) pairs, best first, among refs whose partition is in
        `within` (None: all) and, with `keys`, whose rows it allows. Rows and query are unit
        length, so cosine is a dot product. Equal cosines are ordered by ref, whatever order the
        vectors were stored in."""
        ...

    def search_among(self, query: Vector, k: int, refs: Iterable[str]) -> list[tuple[str, float]]:
        """Up to `k` (ref, cosine) pairs, best first, among `refs` only (a filtered id set)."""
        ...


#: Cosines closer than this are one: the same vector stored twice scores a few 1e-9 apart by
#: where its rows sit (BLAS sums a product in another order at a block's tail), and texts this
#: close are not told apart by meaning either.
TIE = 1e-6


class ExactIndex:
    """Exact cosine search over a growable float32 matrix. Thread-safe (one lock)."""

    def __init__(self, model_id: str, dim: int, capacity: int = 1024) -> None:
        self.model_id = model_id
        self.dim = dim
        self._matrix = np.zeros((max(capacity, 16), dim), dtype=np.float32)
        self._codes = np.zeros(max(capacity, 16), dtype=np.int32)
        self._keys = np.zeros(max(capacity, 16), dtype=np.int64)  # each row's `_ref_key`
        self._refs: list[str] = []
        self._row: dict[str, int] = {}
        self._partition_code: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def build(
        cls, model_id: str, dim: int, refs: Sequence[str], partitions: Sequence[str], matrix: npt.ArrayLike
    ) -> ExactIndex:
        rows = np.asarray(matrix, dtype=np.float32).reshape(len(refs), dim)
        index = cls(model_id, dim, capacity=len(refs) + 64)
        n = len(refs)
        index._matrix[:n] = rows
        index._refs = list(refs)
        index._row = {r: i for i, r in enumerate(refs)}
        index._codes[:n] = [index._code(p) for p in partitions]
        index._keys[:n] = [_ref_key(r) for r in refs]
        if len(index._row) != n:
            raise ValueError("duplicate refs")
        return index

    def __len__(self) -> int:
        return len(self._refs)

    def _code(self, partition: str) -> int:
        code = self._partition_code.get(partition)
        if code is None:
            code = self._partition_code[partition] = len(self._partition_code)
        return code

    def upsert(self, ref: str, partition: str, vec: Vector) -> None:
        v = np.asarray(vec, dtype=np.float32).reshape(self.dim)
        with self._lock:
            i = self._row.get(ref)
            if i is None:
                i = len(self._refs)
                if i == self._matrix.shape[0]:
                    grow = max(16, i)
                    self._matrix = np.concatenate([self._matrix, np.zeros((grow, self.dim), np.float32)])
                    self._codes = np.concatenate([self._codes, np.zeros(grow, np.int32)])
                    self._keys = np.concatenate([self._keys, np.zeros(grow, np.int64)])
                self._refs.append(ref)
                self._row[ref] = i
            self._matrix[i] = v
            self._codes[i] = self._code(partition)
            self._keys[i] = _ref_key(ref)

    def remove(self, ref: str) -> None:
        """Swap-remove: the last row moves into the hole (O(dim), no compaction needed)."""
        with self._lock:
            i = self._row.pop(ref, None)
            if i is None:
                return
            last = len(self._refs) - 1
            if i != last:
                moved = self._refs[last]
                self._matrix[i] = self._matrix[last]
                self._codes[i] = self._codes[last]
                self._keys[i] = self._keys[last]
                self._refs[i] = moved
                self._row[moved] = i
            self._refs.pop()

    def search(
        self, query: Vector, k: int, within: Collection[str] | None = None, keys: KeyFilter | None = None
    ) -> list[tuple[str, float]]:
        """`keys`: given each row's ref as a number (`_ref_key`: a memory id, -1 for any other
        ref), which rows may be ranked — applied before the ranking, as `within` is."""
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        with self._lock, one_blas_thread():
            n = len(self._refs)
            if n == 0 or k <= 0:
                return []
            scores = self._matrix[:n] @ q
            allowed: npt.NDArray[np.bool_] | None = None
            if within is not None:
                wanted = [self._partition_code[p] for p in within if p in self._partition_code]
                if not wanted:
                    return []
                allowed = np.isin(self._codes[:n], np.asarray(wanted, dtype=np.int32))
            if keys is not None:
                allowed = keys(self._keys[:n]) if allowed is None else allowed & keys(self._keys[:n])
            if allowed is not None:
                scores = np.where(allowed, scores, np.float32(-np.inf))
            return self._best(scores, None, k)

    def search_among(self, query: Vector, k: int, refs: Iterable[str]) -> list[tuple[str, float]]:
        """Exact top `k` among the rows of `refs` (unknown refs are skipped): the filter comes
        before the ranking. A small set is scored alone; a large one by the full product."""
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        with self._lock, one_blas_thread():
            n = len(self._refs)
            rows = np.fromiter((i for i in map(self._row.get, refs) if i is not None), dtype=np.int64)
            if rows.size == 0 or k <= 0:
                return []
            scores = self._matrix[rows] @ q if 4 * rows.size < n else (self._matrix[:n] @ q)[rows]
            return self._best(scores, rows, k)

    def _best(
        self, scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64] | None, k: int
    ) -> list[tuple[str, float]]:
        """The `k` best finite `scores` as (ref, score), best first; `rows` maps a score's position
        to its matrix row (None: the same). Scores within `TIE` of each other — the same text
        stored twice, or more — are one score, ordered by ref (`_order_ties`), never by where the
        rows sit in the matrix: that is the order vectors were written in, which a dump and load
        (or a backfill) changes, and the same store answered differently after one.

        Only the k best go to Python. The run of ties at the k-th place may go on past them (the
        same vector stored 50,000 times ties for every query): its members are found and the
        largest refs among them picked in numpy (`_pick`), so a big tie group costs a few
        vector passes, not a Python tuple and a sort step each."""
        m = scores.shape[0]
        take = min(k, m)
        if take < m:
            part = np.argpartition(-scores, take)
            top, left_out = part[:take], float(scores[part[take]])  # the best score not among them
        else:
            top, left_out = np.arange(m), -math.inf
        top = top[np.argsort(-scores[top], kind="stable")]
        best = scores[top]
        keep = np.isfinite(best)
        top, best = top[keep], best[keep]
        if top.size == 0:
            return []
        at = top if rows is None else rows[top]
        values = best.tolist()
        # Whole arrays to Python at once: indexing a numpy array element by element costs a
        # Python object and a bounds check per hit.
        found = list(zip([self._refs[i] for i in at.tolist()], values, strict=True))
        close = np.flatnonzero(best[:-1] - best[1:] <= TIE).tolist()  # i: found[i + 1] ties found[i]
        start = _last_run(values, close)
        first = values[start]
        if left_out >= first - TIE:  # the last run goes on past the k best: all within TIE below its first
            members = np.flatnonzero((scores >= np.float64(first - TIE)) & (scores <= np.float64(first)))
            picked = self._pick(members if rows is None else rows[members], len(values) - start)
            found[start:] = [(ref, first) for ref in picked]
            close = [i for i in close if i + 1 < start]  # the runs before it are ordered as ever
        if close:
            _order_ties(found, close)
        return found[:take]

    def _pick(self, at: npt.NDArray[np.int64], n: int) -> list[str]:
        """The `n` largest refs of matrix rows `at`, largest first, in `_order_ties`' order:
        compared as numbers in numpy when every one is a plain whole number (memory ids), else
        by (length, text) in Python."""
        keys = self._keys[at]
        if keys.min() < 0:
            return sorted((self._refs[i] for i in at.tolist()), key=lambda ref: (len(ref), ref), reverse=True)[:n]
        part = np.argpartition(-keys, n - 1)[:n] if n < keys.size else np.arange(keys.size)
        part = part[np.argsort(-keys[part])]
        return [self._refs[i] for i in at[part].tolist()]


def _ref_key(ref: str) -> int:
    """A ref's place in the tie order as a number: a plain whole number (a memory id; no leading
    zero, up to 18 digits) orders by (length, text) as by its value, so it is its value; any other
    ref is -1 (compared as text instead)."""
    plain = ref.isascii() and ref.isdigit() and len(ref) <= 18 and (ref == "0" or ref[0] != "0")
    return int(ref) if plain else -1


def _last_run(values: list[float], close: list[int]) -> int:
    """Where the last run of `values` (best first) starts, the runs split as `_order_ties` splits
    them: from the first of the chain of close neighbours that ends the list, each run takes the
    scores within `TIE` below its first."""
    last = len(values) - 1
    chained = set(close)
    i = last
    while i > 0 and i - 1 in chained:
        i -= 1
    while True:
        first = values[i]
        j = i + 1
        while j <= last and values[j] >= first - TIE:
            j += 1
        if j > last:
            return i
        i = j


def _order_ties(found: list[tuple[str, float]], close: list[int]) -> None:
    """Within `found` (best first), make each run of scores within `TIE` below the run's first
    score that one, and order the run by ref, the larger first — by length, then text, so
    numeric refs (memory ids) come newest first, as fusion breaks its own ties. `close` lists
    each i whose next score is within `TIE` of its own: only those places are looked at (a
    long list with a few ties costs a few steps, not one a hit)."""
    k = 0
    while k < len(close):
        start = close[k]
        end = start + 1  # a chain of close neighbours: found[start .. end]
        k += 1
        while k < len(close) and close[k] == end:
            end += 1
            k += 1
        i = start
        while i <= end:  # split the chain into runs within TIE of their first
            first = found[i][1]
            j = i + 1
            while j <= end and found[j][1] >= first - TIE:
                j += 1
            if j - i > 1:
                refs = sorted((ref for ref, _ in found[i:j]), key=lambda ref: (len(ref), ref), reverse=True)
                found[i:j] = [(ref, first) for ref in refs]
            i = j


__all__ = ["ExactIndex", "Vector", "VectorIndex", "decode", "encode"]


class SnapshotIndexes:
    """The vector indexes one read snapshot ranks by, looked up once per model (`lookup`: the
    backend's cache brought up to that snapshot, or None: no vector of that model stored), and
    the two questions a find asks them. An index of another size than the query's is none."""

    def __init__(self, lookup: Callable[[str], ExactIndex | None]) -> None:
        self._lookup = lookup
        self._indexes: dict[str, ExactIndex | None] = {}

    def index(self, model_id: str, dim: int) -> ExactIndex | None:
        if model_id not in self._indexes:
            self._indexes[model_id] = self._lookup(model_id)
        index = self._indexes[model_id]
        return index if index is not None and index.dim == dim else None

    def top(
        self, qvec: Vector, model_id: str, n: int, visible: Collection[str] | None
    ) -> list[tuple[str, float]] | None:
        """The `n` nearest visible refs by cosine, or None when no index of this model and size exists."""
        index = self.index(model_id, qvec.shape[0])
        return None if index is None else index.search(qvec, n, visible)

    def among(self, qvec: Vector, model_id: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of `ids` that has a vector of this model."""
        index = self.index(model_id, qvec.shape[0])
        return {} if index is None or not ids else dict(index.search_among(qvec, len(ids), ids))
