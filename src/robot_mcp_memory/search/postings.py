"""An inverted index held in memory: each token's documents, its weighted frequency in each and its
positions, each document's length and owner, and FTS5's bm25 over them, to the bit
(`search.bm25`). A backend fills it with the very tokens its FTS5 index holds (or would hold) and
keeps it current; this module knows no database.

Why: FTS5 scores a query by walking every match and reading each one's length from its own
records, then the adapter joins each match to its row to learn its owner. A find whose words
match most of the store spends most of its time there (docs/benchmarks.md). Here a phrase is an
array lookup and a query's scores are a few array passes, whatever the number of matches.

Invariants:

- **Slots.** Every stored entry has a slot; a slot never changes its entry. Replacing or
  removing an entry kills its slot (`_alive` false) and a replacement takes a new one, so a
  token's arrays only ever grow at their end, in slot order, and a read leaves out dead slots.
  When the dead outnumber the living, every array is rewritten without them (`_compact`).
- **Exact arithmetic.** A phrase's weighted frequency in a document is `bm25.weighted_frequency`
  of its instance counts per column; idf counts the living documents holding the phrase; the
  row and token counts are the living entries' (FTS5's averages record when the index mirrors
  one). So `scores` returns the double ``-bm25()`` would, and `top` orders ties by key as
  ``ORDER BY score DESC, id`` does (BINARY collation is code-point order for valid text).
- **Phrases.** A phrase of several tokens matches where its tokens stand at consecutive offsets
  of one column, as FTS5 counts a phrase's instances.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from robot_mcp_memory.search import bm25

#: (column, offset, token) of one instance; columns are numbered as the bm25 weights are.
Instance = tuple[int, int, str]

#: An instance's key in a token's `inst` array: slot << 32 | column << 24 | offset.
_SLOT_SHIFT = 32
_COL_SHIFT = 24
#: Offsets must stay below this (a phrase adds its length to an offset within the key's bits).
MAX_OFFSET = (1 << _COL_SHIFT) - 256
MAX_COLUMNS = 255


class TooLarge(ValueError):
    """An entry the keys cannot hold (an offset past `MAX_OFFSET`): the caller ranks otherwise."""


@dataclass
class _Token:
    """One token's postings, as chunks appended in slot order: `docs` (each slot holding it once,
    ascending), `f` (its weighted frequency there) and `inst` (every instance's key, ascending)."""

    docs: list[bm25.Ids] = field(default_factory=list)
    f: list[bm25.Floats] = field(default_factory=list)
    inst: list[bm25.Ids] = field(default_factory=list)

    def arrays(self) -> tuple[bm25.Ids, bm25.Floats, bm25.Ids]:
        if len(self.docs) != 1:
            self.docs = [np.concatenate(self.docs) if self.docs else np.empty(0, np.int64)]
            self.f = [np.concatenate(self.f) if self.f else np.empty(0, np.float64)]
            self.inst = [np.concatenate(self.inst) if self.inst else np.empty(0, np.int64)]
        return self.docs[0], self.f[0], self.inst[0]


@dataclass(frozen=True)
class Batch:
    """Instances of several entries as arrays: instance i is token ``names[token[i]]`` at offset
    ``offset[i]`` of column ``col[i]`` of entry ``doc[i]``."""

    names: Sequence[str]
    token: bm25.Ids
    doc: bm25.Ids
    col: bm25.Ids
    offset: bm25.Ids


def _distinct_rows(counts: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """The distinct rows of non-negative `counts` and each row's index among them (as
    ``np.unique(axis=0, return_inverse=True)``, in another order): each row packed into one
    integer when its values fit, a sort of one column instead of many."""
    width = counts.shape[1]
    bits = 62 // width if width else 0
    if bits and len(counts) and int(counts.max()) < (1 << bits):
        packed = np.zeros(len(counts), np.int64)
        for j in range(width):
            packed |= counts[:, j] << (bits * j)
        _, at, inverse = np.unique(packed, return_index=True, return_inverse=True)
        return counts[at], np.asarray(inverse).reshape(-1)
    rows, inverse = np.unique(counts, axis=0, return_inverse=True)
    return rows, np.asarray(inverse).reshape(-1)


_EMPTY_IDS: bm25.Ids = np.empty(0, np.int64)
_EMPTY_F: bm25.Floats = np.empty(0, np.float64)


class PostingIndex:
    """Entries (a key, its owner, its instances) and bm25 over them; not thread-safe (its owner
    locks). `weights`: the bm25 weight of each column, as given to ``bm25()``."""

    def __init__(self, weights: Sequence[float]) -> None:
        if len(weights) > MAX_COLUMNS:
            raise ValueError("too many columns")
        self.weights = tuple(float(w) for w in weights)
        self._slot_of: dict[str, int] = {}
        #: Each slot's key, a dead slot's too: a slot never changes its key, so an answer given
        #: before (`Scored`) reads its keys here after the index moved on; compaction makes a new list.
        self._key_of: list[str] = []
        self._owner = np.zeros(0, np.int32)
        self._doclen = np.zeros(0, np.float64)
        self._alive = np.zeros(0, np.bool_)
        self._codes: dict[str, int] = {}
        self._tokens: dict[str, _Token] = {}
        #: Living entries and their tokens over all columns (integers: the sums are exact).
        self.rows = 0
        self.tokens = 0

    def __len__(self) -> int:
        return self.rows

    def __contains__(self, key: object) -> bool:
        return key in self._slot_of

    # ------------------------------------------------------------------ writing
    def remove(self, keys: Iterable[str]) -> None:
        for key in keys:
            slot = self._slot_of.pop(key, None)
            if slot is not None:
                self._kill(slot)
        self._maybe_compact()

    def _kill(self, slot: int) -> None:
        self._alive[slot] = False
        self.rows -= 1
        self.tokens -= int(self._doclen[slot])

    def put(self, entries: Sequence[tuple[str, str, Sequence[Instance]]]) -> None:
        """Store (key, owner, instances) entries, each replacing the key's entry if any. Raises
        `TooLarge` (storing nothing) for an offset or column the keys cannot hold."""
        codes: dict[str, int] = {}
        t_codes: list[int] = []
        cols: list[int] = []
        offsets: list[int] = []
        lengths: list[int] = []
        for _key, _owner, found in entries:
            lengths.append(len(found))
            if found:
                c, o, t = zip(*found, strict=True)
                cols.extend(c)
                offsets.extend(o)
                t_codes.extend([codes.setdefault(token, len(codes)) for token in t])
        at = np.repeat(np.arange(len(entries), dtype=np.int64), lengths)
        self._store([(k, o) for k, o, _ in entries], list(codes), np.array(t_codes, np.int64), at, cols, offsets)

    def put_runs(
        self,
        entries: Sequence[tuple[str, str]],
        entry: Sequence[int],
        tokens: Sequence[str],
        cols: Sequence[int],
        counts: Sequence[int],
        offsets: bm25.Ids,
    ) -> None:
        """`put` of instances given as runs, as a database's postings rows hold them: run i is
        token ``tokens[i]`` in column ``cols[i]`` of entry ``entries[entry[i]]`` (key, owner) at
        ``counts[i]`` offsets, which follow one another in `offsets` run after run. The same
        index as `put` of the same instances, without a tuple per instance."""
        if not len(entry) == len(tokens) == len(cols) == len(counts):
            raise ValueError("one entry, token, column and count per run")
        n = np.array(counts, np.int64)
        if int(n.sum()) != len(offsets) or (len(n) and int(n.min()) < 0):
            raise ValueError("the runs' counts do not add up to the offsets")
        codes: dict[str, int] = {}
        t_run = np.array([codes.setdefault(token, len(codes)) for token in tokens], np.int64)
        at = np.repeat(np.array(entry, np.int64), n)
        self._store(entries, list(codes), np.repeat(t_run, n), at, np.repeat(np.array(cols, np.int64), n), offsets)

    def put_batch(self, entries: Sequence[tuple[str, str]], batch: Batch) -> None:
        """`put` of the (key, owner) `entries` with the instances of `batch` (its `doc` numbers
        them in `entries`), without a tuple per instance."""
        self._store(entries, list(batch.names), batch.token, batch.doc, batch.col, batch.offset)

    def _store(
        self,
        entries: Sequence[tuple[str, str]],
        names: list[str],
        t: bm25.Ids,
        at: bm25.Ids,
        cols: Sequence[int] | bm25.Ids,
        offsets: Sequence[int] | bm25.Ids,
    ) -> None:
        """Store `entries` (key, owner), each replacing the key's entry if any, with the instances
        (token code `t` naming `names`, entry index `at`, column, offset), or `TooLarge` and
        nothing stored."""
        try:
            c = np.asarray(cols, np.int64)
            o = np.asarray(offsets, np.int64)
        except OverflowError as exc:
            raise TooLarge("an offset or column past the index's keys") from exc
        if len(c) and (
            int(c.min()) < 0 or int(c.max()) >= len(self.weights) or int(o.min()) < 0 or int(o.max()) >= MAX_OFFSET
        ):
            raise TooLarge("an offset or column past the index's keys")
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= len(entries)):
            raise ValueError("an instance of no entry")
        lengths = np.bincount(at, minlength=len(entries)).tolist()
        first = len(self._key_of)
        self._grow(first + len(entries))
        for n, (key, owner) in enumerate(entries):
            old = self._slot_of.get(key)
            if old is not None:
                self._kill(old)
            slot = first + n
            self._slot_of[key] = slot
            self._key_of.append(key)
            self._owner[slot] = self._code(owner)
            self._doclen[slot] = lengths[n]
            self._alive[slot] = True
            self.rows += 1
            self.tokens += lengths[n]
        if len(t):
            self._append(names, t, at + first, c, o)
        self._maybe_compact()

    def _append(self, names: list[str], t: bm25.Ids, s: bm25.Ids, c: bm25.Ids, o: bm25.Ids) -> None:
        """Append a batch's instances (token code, slot, column, offset) to their tokens, by runs."""
        order = np.lexsort((o, c, s, t))
        t, s, c, o = t[order], s[order], c[order], o[order]
        inst = (s << _SLOT_SHIFT) | (c << _COL_SHIFT) | o
        # Runs of one (token, slot, column): its instance count there.
        edge = np.ones(len(t), np.bool_)
        edge[1:] = (t[1:] != t[:-1]) | (s[1:] != s[:-1]) | (c[1:] != c[:-1])
        run_at = np.flatnonzero(edge)
        run_n = np.diff(np.append(run_at, len(t)))
        rt, rs, rc = t[run_at], s[run_at], c[run_at]
        # Pairs of one (token, slot): its counts per column, then its weighted frequency.
        pair_edge = np.ones(len(rt), np.bool_)
        pair_edge[1:] = (rt[1:] != rt[:-1]) | (rs[1:] != rs[:-1])
        pair_of_run = np.cumsum(pair_edge) - 1
        pairs = int(pair_of_run[-1]) + 1
        counts = np.zeros((pairs, len(self.weights)), np.int64)
        counts[pair_of_run, rc] = run_n
        pair_f = self._frequencies(counts)
        pair_at = np.flatnonzero(pair_edge)
        pt, ps = rt[pair_at], rs[pair_at]
        # Each token's slice of the pairs and of the instances.
        tok_pairs = np.flatnonzero(np.concatenate(([True], pt[1:] != pt[:-1])))
        tok_inst = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1])))
        bounds_p = np.append(tok_pairs, len(pt))
        bounds_i = np.append(tok_inst, len(t))
        for j in range(len(tok_pairs)):
            name = names[int(pt[bounds_p[j]])]
            got = self._tokens.get(name)
            if got is None:
                got = self._tokens[name] = _Token()
            # Views of the batch's arrays: a full read's lists share them rather than copy them.
            got.docs.append(ps[bounds_p[j] : bounds_p[j + 1]])
            got.f.append(pair_f[bounds_p[j] : bounds_p[j + 1]])
            got.inst.append(inst[bounds_i[j] : bounds_i[j + 1]])

    def _frequencies(self, counts: npt.NDArray[np.int64]) -> bm25.Floats:
        """`bm25.weighted_frequency` of each row of instance counts per column, computed once
        per distinct row (a few dozen, whatever the number of rows)."""
        if not len(counts):
            return _EMPTY_F
        rows, inverse = _distinct_rows(counts)
        fu = np.array([bm25.weighted_frequency(tuple(int(x) for x in r), self.weights) for r in rows], np.float64)
        return fu[inverse]

    def _code(self, owner: str) -> int:
        code = self._codes.get(owner)
        if code is None:
            code = self._codes[owner] = len(self._codes) + 1  # 0: a dead slot's
        return code

    def _grow(self, size: int) -> None:
        if size <= len(self._alive):
            return
        size = max(size, 2 * len(self._alive), 1024)
        more = size - len(self._alive)
        self._owner = np.concatenate([self._owner, np.zeros(more, np.int32)])
        self._doclen = np.concatenate([self._doclen, np.zeros(more, np.float64)])
        self._alive = np.concatenate([self._alive, np.zeros(more, np.bool_)])

    def _maybe_compact(self) -> None:
        dead = len(self._key_of) - self.rows
        if dead > max(1024, self.rows):
            self._compact()

    def _compact(self) -> None:
        """Rewrite every array without the dead slots, the living renumbered in order."""
        used = len(self._key_of)
        alive = self._alive[:used]
        new_of = np.cumsum(alive) - 1  # a living slot's new number
        for name in list(self._tokens):
            docs, f, inst = self._tokens[name].arrays()
            keep = alive[docs]
            if not keep.any():
                del self._tokens[name]
                continue
            slots = inst >> _SLOT_SHIFT
            keep_i = alive[slots]
            low = inst[keep_i] & ((1 << _SLOT_SHIFT) - 1)
            self._tokens[name] = _Token(
                [new_of[docs[keep]].astype(np.int64)],
                [f[keep]],
                [(new_of[slots[keep_i]].astype(np.int64) << _SLOT_SHIFT) | low],
            )
        living = np.flatnonzero(alive)
        self._key_of = [self._key_of[int(s)] for s in living]
        self._slot_of = {k: n for n, k in enumerate(self._key_of)}
        size = len(living)
        self._owner = self._owner[living].copy()
        self._doclen = self._doclen[living].copy()
        self._alive = np.ones(size, np.bool_)
        self._grow(size)

    # ------------------------------------------------------------------ reading
    def phrase(self, tokens: Sequence[str]) -> bm25.Term:
        """The living documents holding the phrase `tokens` (consecutive offsets of one column)
        and its weighted frequency in each; none for no token. `TooLarge` for 256 tokens or
        more (an offset plus the phrase's length must stay within the offset's bits)."""
        if len(tokens) >= 256:
            raise TooLarge("a phrase longer than the keys' offset margin")
        if not tokens:
            return bm25.Term(_EMPTY_IDS, _EMPTY_F)
        first = self._tokens.get(tokens[0])
        if first is None:
            return bm25.Term(_EMPTY_IDS, _EMPTY_F)
        docs, f, inst = first.arrays()
        if len(tokens) == 1:
            keep = self._alive[docs]
            return bm25.Term(docs[keep], f[keep])
        found = inst[self._alive[inst >> _SLOT_SHIFT]]
        for i, token in enumerate(tokens[1:], start=1):
            other = self._tokens.get(token)
            if other is None or not len(found):
                return bm25.Term(_EMPTY_IDS, _EMPTY_F)
            found = found[np.isin(found + i, other.arrays()[2])]
        if not len(found):
            return bm25.Term(_EMPTY_IDS, _EMPTY_F)
        slots = found >> _SLOT_SHIFT
        cols = (found >> _COL_SHIFT) & ((1 << (_SLOT_SHIFT - _COL_SHIFT)) - 1)
        held, at = np.unique(slots, return_inverse=True)
        counts = np.zeros((len(held), len(self.weights)), np.int64)
        np.add.at(counts, (np.asarray(at).reshape(-1), cols), 1)
        return bm25.Term(held.astype(np.int64), self._frequencies(counts))

    def score(self, phrases: Sequence[Sequence[str]]) -> Scored:
        """Every living document holding one of `phrases` (each a phrase's tokens, in query
        order; OR-ed), its ``-bm25()``, owner and key, and how many documents hold each phrase."""
        terms = [self.phrase(p) for p in phrases]
        slots, values = bm25.scores(terms, self._doclen, self.rows, self.tokens)
        return Scored(
            total=self.rows,
            docs=tuple(len(t.ids) for t in terms),
            keys=Keys(self._key_of, slots),
            owners=self._owner[slots].copy(),
            codes=dict(self._codes),
            scores=values,
        )

    def keys(self, slots: Iterable[int]) -> list[str]:
        key_of = self._key_of
        return [key_of[s] for s in np.asarray(slots).tolist()]


class Keys(Sequence[str]):
    """The keys of some slots, read when asked (a query's matches may be thousands, and a find
    reads the keys of a few dozen)."""

    def __init__(self, key_of: list[str], slots: bm25.Ids) -> None:
        self._key_of = key_of
        self._slots = slots

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._key_of[s] for s in self._slots[i].tolist()]
        return self._key_of[int(self._slots[i])]


@dataclass(frozen=True)
class Scored:
    """A query's matches (`PostingIndex.score`): `keys[i]` scored `scores[i]` and belongs to the
    owner coded `owners[i]` (`codes`: owner → code); `docs[j]` documents of `total` hold phrase j."""

    total: int
    docs: tuple[int, ...]
    keys: Sequence[str]
    owners: npt.NDArray[np.int32]
    codes: dict[str, int]
    scores: bm25.Floats

    def positions(self, visible: Collection[str] | None) -> npt.NDArray[np.intp]:
        """Positions of the matches one of `visible` owns (None: every match), in no order."""
        at = np.arange(len(self.keys))
        if visible is None:
            return at
        codes = np.array([self.codes[o] for o in visible if o in self.codes], np.int32)
        return at[np.isin(self.owners, codes)]

    def top(self, n: int, visible: Collection[str] | None) -> list[tuple[str, float]]:
        """The `n` best visible (key, score) by score, then key: every tie at the cut considered."""
        if n < 1:
            return []
        at = self.positions(visible)
        if len(at) > n:
            cut = np.partition(self.scores[at], len(at) - n)[len(at) - n]  # the n-th best score
            at = at[self.scores[at] >= cut]
        pairs = [(self.keys[i], s) for i, s in zip(at.tolist(), self.scores[at].tolist(), strict=True)]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:n]


__all__ = ["MAX_OFFSET", "Batch", "Instance", "Keys", "PostingIndex", "Scored", "TooLarge"]
