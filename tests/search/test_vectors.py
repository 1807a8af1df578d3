from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robot_mcp_memory.search.sqlite import vectorstore
from robot_mcp_memory.search.sqlite.vectorstore import VectorCache
from robot_mcp_memory.search.vectors import ExactIndex, Vector, VectorIndex, decode, encode
from robot_mcp_memory.storage.sqlite import index_db as db

finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(hnp.arrays(np.float32, st.integers(1, 600), elements=finite_f32))
def test_vector_codec_round_trips_bit_for_bit(vec: Vector) -> None:
    blob = encode(vec)
    assert len(blob) == 4 * vec.shape[0]
    out = decode(blob, vec.shape[0])
    assert out.dtype == np.float32
    assert out.tobytes() == vec.astype("<f4").tobytes()


def test_codec_is_little_endian_float32() -> None:
    assert encode([1.0]) == b"\x00\x00\x80\x3f"


def test_decode_refuses_a_blob_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="needs 16 bytes"):
        decode(b"\x00" * 12, 4)


def test_encode_refuses_a_matrix() -> None:
    with pytest.raises(ValueError, match="1-d"):
        encode(np.zeros((2, 2)))


def unit(rng: np.random.Generator, n: int, dim: int) -> Vector:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    out: Vector = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def test_exact_index_agrees_with_brute_force_cosine() -> None:
    rng = np.random.default_rng(7)
    m = unit(rng, 500, 32)
    refs = [f"p{i}" for i in range(500)]
    index: VectorIndex = ExactIndex.build("m", 32, refs, ["a"] * 500, m)
    q = unit(rng, 1, 32)[0]
    expected = np.argsort(-(m @ q))[:10]
    got = index.search(q, 10)
    assert [r for r, _ in got] == [refs[i] for i in expected]
    assert got[0][1] == pytest.approx(float(m[expected[0]] @ q), abs=1e-6)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


def test_the_partition_filter_applies_before_ranking() -> None:
    rng = np.random.default_rng(1)
    m = unit(rng, 200, 16)
    q = m[0]
    parts = ["mine" if i >= 190 else "theirs" for i in range(200)]
    index = ExactIndex.build("m", 16, [f"p{i}" for i in range(200)], parts, m)
    got = index.search(q, 5, within={"mine"})
    assert len(got) == 5  # five of mine, although the global top 5 are all theirs
    assert all(int(r[1:]) >= 190 for r, _ in got)
    assert index.search(q, 5, within=set()) == []
    assert index.search(q, 5, within={"nobody"}) == []
    assert len(index.search(q, 50, within={"mine"})) == 10


def test_upsert_replaces_grows_and_remove_swaps() -> None:
    index = ExactIndex("m", 2, capacity=1)
    for i in range(40):  # beyond the initial capacity
        index.upsert(f"p{i}", "a", np.array([1.0, 0.0], np.float32))
    index.upsert("p3", "b", np.array([0.0, 1.0], np.float32))
    assert len(index) == 40
    assert index.search(np.array([0.0, 1.0], np.float32), 1)[0] == ("p3", 1.0)
    assert index.search(np.array([0.0, 1.0], np.float32), 1, within={"b"}) == [("p3", 1.0)]
    index.remove("p3")
    index.remove("p0")
    index.remove("missing")
    assert len(index) == 38
    refs = {r for r, _ in index.search(np.array([1.0, 0.0], np.float32), 100)}
    assert refs == {f"p{i}" for i in range(40)} - {"p0", "p3"}
    assert index.search(np.array([0.0, 1.0], np.float32), 5, within={"b"}) == []


def test_an_empty_index_finds_nothing() -> None:
    assert ExactIndex("m", 4).search(np.ones(4, np.float32), 3) == []


def test_a_search_in_a_snapshot_older_than_the_cache_keeps_the_cache(tmp_path: Path) -> None:
    """A search that began before this process's own write, finishing after a newer search had
    checked the cache, took its older stamp for another process's write: it reloaded the index
    from its old snapshot and installed it, losing that write's vector for good (and, under
    concurrent learns, reloaded the whole index on most searches)."""
    store = db.open_index(tmp_path / "index.db")
    cache = VectorCache(store.instance)

    def up(ref: str, i: int) -> None:
        vec = np.zeros(4, dtype=np.float32)
        vec[i] = 1

        def job(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO processes(id, title, created, updated) VALUES (?, ?, 'x', 'x')", (ref, ref))
            vectorstore.upsert(c, "process", ref, "m@4", vec)

        store.write_blocking(job)
        cache.after_write("process", upserts=[(ref, "p", "m@4", vec)])

    try:
        up("a", 0)
        store.read_blocking(lambda c: cache.index(c, "process", "m@4"))
        old = sqlite3.connect(f"{(tmp_path / 'index.db').resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        old.execute("BEGIN")
        old.execute("SELECT value FROM store_meta").fetchall()  # its snapshot starts here
        up("b", 1)
        store.read_blocking(lambda c: cache.index(c, "process", "m@4"))  # a newer search checks
        loads = cache.loads
        cache.index(old, "process", "m@4")  # the older one finishes
        old.execute("COMMIT")
        old.close()
        assert cache.loads == loads  # nothing reloaded: no other process wrote
        idx = store.read_blocking(lambda c: cache.index(c, "process", "m@4"))
        assert idx is not None
        assert {ref for ref, _ in idx.search(np.array([0, 1, 0, 0], dtype=np.float32), 5, None)} == {"a", "b"}
    finally:
        store.close()


@pytest.mark.parametrize("among", [False, True], ids=["search", "search_among"])
def test_equal_cosines_rank_by_ref_whatever_order_the_vectors_were_stored_in(among: bool) -> None:
    """The same text learned 40 times (other params) has one vector; which 5 of them made the cut,
    and in which order, followed the rows' order in the matrix — the order they were written in,
    which a dump and load (or a backfill) changes. Now: by ref, the larger (newer) first. The
    copies sit at every position of a matrix of other vectors, where BLAS rounds the same product
    a few 1e-9 apart."""
    rng = np.random.default_rng(3)
    others = unit(rng, 700, 64)
    same = unit(rng, 1, 64)[0]
    q = unit(rng, 1, 64)[0]
    q = (q + 3 * same) / np.linalg.norm(q + 3 * same)  # the copies are the nearest of all
    copies = [str(i) for i in range(1, 41)]
    refs = copies + [f"other-{i}" for i in range(700)]
    matrix = dict.fromkeys(copies, same) | {f"other-{i}": others[i] for i in range(700)}
    answers = []
    for order in (refs, refs[::-1], list(rng.permutation(refs))):
        index = ExactIndex.build("m", 64, order, ["a"] * len(order), np.stack([matrix[r] for r in order]))
        got = index.search_among(q, 5, reversed(order)) if among else index.search(q, 5)
        answers.append(got)
    assert answers[0] == answers[1] == answers[2]
    assert [r for r, _ in answers[0]] == ["40", "39", "38", "37", "36"]


class _CountingRefs(list[str]):
    """An index's refs, counting the reads by position (each is one Python object made)."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        type(self).reads += 1
        return super().__getitem__(i)


@pytest.mark.parametrize("among", [False, True], ids=["search", "search_among"])
def test_a_large_tie_group_is_ordered_by_ref_without_reading_every_member(among: bool) -> None:
    """The same text learned 5,000 times ties for any query: every tied row became a Python
    (ref, score) pair and was sorted by ref, on every recall (4.3 ms at 10,000, 23 ms at 50,000).
    The k largest refs of the group are picked among its numeric refs in numpy now."""
    rng = np.random.default_rng(5)
    same = unit(rng, 1, 32)[0]
    refs = [str(i) for i in rng.permutation(np.arange(1, 5001))] + ["other", "0042"]
    matrix = np.stack([same] * 5000 + list(unit(rng, 2, 32)))
    index = ExactIndex.build("m", 32, refs, ["a"] * len(refs), matrix)
    index._refs = _CountingRefs(index._refs)
    q = unit(rng, 1, 32)[0]
    q = (q + 3 * same) / np.linalg.norm(q + 3 * same)  # the copies are the nearest of all
    _CountingRefs.reads = 0
    got = index.search_among(q, 5, refs) if among else index.search(q, 5)
    assert [r for r, _ in got] == ["5000", "4999", "4998", "4997", "4996"]
    assert len({score for _, score in got}) == 1
    assert _CountingRefs.reads <= 50


def test_a_tie_group_of_refs_that_are_not_plain_numbers_is_ordered_by_length_then_text() -> None:
    """Refs other than memory ids (a process id, a number written with a leading zero) tie in
    `_order_ties`' order: the longer first, then the larger text."""
    rng = np.random.default_rng(6)
    same = unit(rng, 1, 16)[0]
    refs = ["7", "0042", "other", "12", "ab"]
    index = ExactIndex.build("m", 16, refs, ["a"] * 5, np.stack([same] * 5))
    assert [r for r, _ in index.search(same, 3)] == ["other", "0042", "ab"]
    index.upsert("ab", "a", unit(rng, 1, 16)[0])  # no longer tied: plain numbers alone compete
    index.remove("other")
    index.remove("0042")
    assert [r for r, _ in index.search(same, 2)] == ["12", "7"]
