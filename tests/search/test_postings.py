"""`search.postings.PostingIndex`: `put_runs` (instances as a database's postings rows hold them)
stores the very index `put` (a tuple per instance) does — the same scores, to the bit."""

from __future__ import annotations

import random

import numpy as np
import pytest

from robot_mcp_memory.search.postings import PostingIndex, TooLarge

WEIGHTS = (0.0, 4.0, 2.0, 2.0, 1.0)
VOCAB = ("open", "the", "door", "red", "mug", "dock", "12", "3")


def random_entries(rng: random.Random, n: int) -> list[tuple[str, str, list[tuple[int, int, str]]]]:
    out = []
    for i in range(n):
        found = []
        for col in range(1, len(WEIGHTS)):
            for offset, token in enumerate(rng.choices(VOCAB, k=rng.randint(0, 12))):
                found.append((col, offset, token))
        out.append((f"d{i % (n - 3)}", rng.choice(("r1", "r2")), found))  # a few keys twice: replaced
    return out


def as_runs(
    entries: list[tuple[str, str, list[tuple[int, int, str]]]],
) -> tuple[list[tuple[str, str]], list[int], list[str], list[int], list[int], np.ndarray]:
    entry, tokens, cols, counts, offsets = [], [], [], [], []
    for n, (_, _, found) in enumerate(entries):
        runs: dict[tuple[str, int], list[int]] = {}
        for col, offset, token in found:
            runs.setdefault((token, col), []).append(offset)
        for (token, col), at in sorted(runs.items()):
            entry.append(n)
            tokens.append(token)
            cols.append(col)
            counts.append(len(at))
            offsets.extend(at)
    return [(k, o) for k, o, _ in entries], entry, tokens, cols, counts, np.array(offsets, np.int64)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_put_runs_stores_what_put_stores(seed: int) -> None:
    rng = random.Random(seed)
    entries = random_entries(rng, 60)
    one, other = PostingIndex(WEIGHTS), PostingIndex(WEIGHTS)
    one.put(entries)
    other.put_runs(*as_runs(entries))
    assert (one.rows, one.tokens) == (other.rows, other.tokens)
    for query in (["the"], ["open the door"], ["red", "mug", "12 3"], ["dock", "door", "the"]):
        phrases = [q.split() for q in query]
        a, b = one.score(phrases), other.score(phrases)
        assert dict(zip(a.keys, a.scores.tolist(), strict=True)) == dict(zip(b.keys, b.scores.tolist(), strict=True))
        assert a.docs == b.docs
        assert a.top(10, {"r1"}) == b.top(10, {"r1"})


def test_put_runs_refuses_what_the_keys_cannot_hold_and_stores_nothing() -> None:
    index = PostingIndex(WEIGHTS)
    with pytest.raises(TooLarge):
        index.put_runs([("a", "r")], [0], ["x"], [9], [1], np.array([0], np.int64))
    with pytest.raises(ValueError, match="add up"):
        index.put_runs([("a", "r")], [0], ["x"], [1], [2], np.array([0], np.int64))
    assert (index.rows, index.tokens) == (0, 0)
