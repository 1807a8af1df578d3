"""ExperienceService: learn / recall / perceptions / forget / update / sessions, with the §6a policy.

Every method takes the caller's `Principal`. Memories carry the robot they came from — the
tenant's robot id, or the server's ``ROBOT_ID`` for an unscoped caller — and reads follow the
process rules: a scoped caller sees its own group's memories plus fleet-wide ``shared`` ones;
anything else reads as not found.

The service never touches an event loop or a thread itself: it awaits its `ExperienceStore`
(and the optional `MemoryVectors`). Driven by the MCP tools those awaits run on the reader pool
and the writer thread; driven by the Python API over a blocking store they complete without
suspending (`run_sync`), so a training loop pays no event-loop hop per call.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

from robot_mcp_memory.errors import Conflict, Forbidden, InvalidInput, MemoryError_, NotFound
from robot_mcp_memory.experiences import classify, consolidate, dedup
from robot_mcp_memory.experiences.lexicon import Analysis
from robot_mcp_memory.experiences.model import (
    MAX_BATCH,
    MAX_FILTER_BYTES,
    MAX_INSIGHT,
    MAX_METADATA_BYTES,
    MAX_N,
    MAX_QUERY,
    MAX_REASON,
    REAL_WEIGHT,
    Experience,
    NewMemory,
    Session,
    Spatial,
    as_int,
    as_real,
    check_collection,
    check_memory_id,
    check_perception_type,
    check_text,
    json_shaped,
    parse_context,
    parse_data,
    parse_object,
    parse_spatial,
    utf8,
)
from robot_mcp_memory.experiences.ports import Decide, Order, Probe, Ranked, Weighed
from robot_mcp_memory.experiences.sqlite import ranking_repo, storage
from robot_mcp_memory.experiences.sqlite.filter_repo import Mask
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter
from robot_mcp_memory.experiences.sqlite.ranking_repo import Scope, distance_of
from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore
from robot_mcp_memory.search import fusion, segment
from robot_mcp_memory.search.sqlite.vectorstore import Embedded
from robot_mcp_memory.search.vectors import KeyFilter
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal

T = TypeVar("T")
#: What a memory write reports per memory: its id, the duplicate it found, or (a batch's) refusal.
Out = TypeVar("Out", bound="int | dedup.Duplicate | MemoryError_")
#: One item of `ExperienceService.learn_batch`: (insight, context, collection, session_id).
BatchItem = tuple[str, "JsonArg", str, "str | None"]
Mode = Literal["keyword", "hybrid", "filter"]
JsonArg = Mapping[str, Any] | str | None
MAX_SESSION_ID = 64
#: Hybrid recall: candidates per list before reciprocal-rank fusion.
HYBRID_POOL = 30
#: Hybrid recall first takes these many × the pool of nearest memories of the visible robots, in
#: turn, and keeps those passing the filters; only when fewer than the pool pass even the widest
#: does it make the filter's mask (`filter_repo`: reading every memory in scope once, ~3 ms at
#: 10,000 memories and ~60–80 ms at 100,000 with a `context_filter`) and rank among the memories
#: it allows — exact either way. A filter passed by one memory in ten is mostly answered by the
#: second probe.
PROBE_FACTORS = (4, 32)
#: Among the memories a filter's mask allows (`filter_repo`), the first round takes this many ×
#: the pool of nearest (then eight times as many each round): nearly all of them pass every filter
#: (the mask knows the collection, the context filter, robots and who is active; not confidence).
MASK_ROUND_FACTOR = 2
#: No round among what a mask allows takes more than this many: past it (the mask allows far more
#: than pass — a high min_confidence), every id in scope is read, as without a mask.
MASK_ROUNDS_UP_TO = 4096
MIN_COSINE = fusion.MIN_COSINE
#: Semantic dedup: how many nearest same-facts memories are compared.
DEDUP_NEIGHBOURS = 5


class MemoryVectors(Protocol):
    """The seam for embedding search (`vector_repo.MemoryVectorIndex`). With none, recall is
    keyword-only and dedup skips its semantic stage.

    - `embed` makes (model id, unit vector) per text, None each when the embedder is off or down.
      Blocking: the service runs it off the event loop, before a write is queued — unless
      `would_embed` says it would answer None anyway (no thread hop then).
    - `nearest` ranks by cosine **only among `within`** (ids that passed every filter in SQL, read
      in the same snapshot `conn`); None when no vector of the query's model is stored yet.
      `nearest_any` ranks among the memories of some robots — and, given `ids`, those it allows
      (a filter's `filter_repo.Mask`) — before any other filter (recall checks its answer in SQL).
    - `write` stores a memory's vector inside the memory's own write transaction (None: deletes
      an old one, now stale); `written` hears of the commit (new vectors, forgotten ids).
    - `weights` (keyword, vector) and `k`: the weighted reciprocal-rank fusion."""

    weights: tuple[float, float]
    k: int

    def would_embed(self) -> bool: ...

    def embed(self, texts: Sequence[str]) -> list[Embedded | None]: ...

    def nearest(self, conn: Any, query: Embedded, k: int, within: Sequence[int]) -> list[tuple[int, float]] | None: ...

    def nearest_any(
        self, conn: Any, query: Embedded, k: int, robots: Collection[str] | None, ids: KeyFilter | None = None
    ) -> list[tuple[int, float]] | None: ...

    def write(self, conn: Any, memory_id: int, embedded: Embedded | None) -> None: ...

    def written(self, changes: Sequence[tuple[int, str, Embedded | None]], forgotten: Sequence[int] = ()) -> None: ...


@dataclass(frozen=True)
class Learned:
    status: Literal["created", "duplicate"]
    memory_id: int
    method: dedup.Method | None = None
    similarity: float | None = None
    category: str = ""
    confidence: float = 0.0
    tags: tuple[str, ...] = ()
    robot: str = ""
    collection: str = ""
    scope: dict[str, list[str]] = field(default_factory=dict)
    embedded: bool = False  # a vector was stored with it (created, with an embedder up)
    has_data: bool = False  # a perception stored with data (once decoded: data='null' is none)


@dataclass(frozen=True)
class Hit:
    memory: Experience
    score: float  # normalised: the best hit is 1.0
    confidence: float  # decayed at read time
    distance: float | None = None


@dataclass(frozen=True)
class Recalled:
    hits: list[Hit]
    mode: Mode


@dataclass(frozen=True)
class Updated:
    memory: Experience
    old_content: str


@dataclass(frozen=True)
class EndedSession:
    session: Session
    summary: dict[str, Any]
    consolidated: list[tuple[int, int]]
    related: list[Hit]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a service coroutine over a *blocking* store to completion, without an event loop.

    Every await inside completes immediately (blocking reads/writes), so the first ``send``
    finishes it. A coroutine that tries to suspend is a bug: it is closed and reported."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("the experience service suspended under a blocking store; use the async API")


class ExperienceService:
    def __init__(
        self,
        store: ExperienceStore,
        policy: Policy,
        *,
        default_robot: str = "unknown",
        vectors: MemoryVectors | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.default_robot = default_robot
        self.vectors = vectors

    def blocking(self) -> ExperienceService:
        """The same service over a blocking store (for `run_sync`)."""
        return ExperienceService(
            self.store.blocking_twin(), self.policy, default_robot=self.default_robot, vectors=self.vectors
        )

    # ------------------------------------------------------------------ helpers
    def _author(self, principal: Principal) -> str:
        return self.policy.pin_author(principal, "unknown", self.default_robot)

    def _fact(
        self, robot: str, collection: str, text: str, ctx: dict[str, Any], session_id: str | None
    ) -> tuple[NewMemory, Probe, Decide]:
        """Classify a fact and prepare its duplicate probe (one tokenisation for everything)."""
        a = Analysis(text)
        keys = dedup.fact_keys(text, ctx, a)
        c = classify.classify(a, ctx)
        tags = tuple((t, "auto") for t in c.tags) + tuple((t, "user") for t in c.user_tags if t not in c.tags)
        new = NewMemory(
            robot=robot,
            collection=collection,
            type="fact",
            content=text,
            category=c.category,
            confidence=c.confidence,
            context=ctx,
            content_hash=keys.content_hash,
            source_weight=_source_weight(ctx),
            facts_hash=keys.facts_hash,
            session_id=session_id,
            metadata={"scope": c.scope} if c.scope else {},
            tags=tags,
        )
        words = list(dict.fromkeys(a.tokens))
        probe = Probe(new.content_hash)
        return new, probe, lambda e, lx, s: dedup.judge(text, e, lx, s, words, keys.sequence)

    async def _embed(self, texts: Sequence[str]) -> list[Embedded | None]:
        """Vectors for memories about to be written (or a query), made before the write is queued:
        the writer thread serves every write and must never wait on a model."""
        v = self.vectors
        if v is None or not v.would_embed():
            return [None] * len(texts)
        return await self.store.offload(lambda: v.embed(texts))

    async def _semantic(self, new: NewMemory, vec: Embedded | None) -> tuple[tuple[int, float], ...]:
        """Dedup's semantic candidates: the nearest by cosine **among the memories whose facts digest
        (numbers, outcome, negation, source) equals the new one's**, in its robot, collection and
        type — filtered before ranking, so a same-facts paraphrase is never crowded out by closer
        texts with other numbers. The write re-checks them in its transaction."""
        v = self.vectors
        if v is None or vec is None:
            return ()
        found = await self.store.read(lambda c: v.nearest(c, vec, DEDUP_NEIGHBOURS, storage.same_facts_ids(c, new)))
        return tuple(found or ())

    async def _write_memories(
        self, job: Callable[[Any], list[Out]], robot: str, vecs: Sequence[Embedded | None]
    ) -> list[Out]:
        """`job` (an outcome per vector, in order: a written memory's id or a duplicate; none when
        it found nothing to change), with each written memory's vector stored in the same
        transaction and the in-memory index patched after the commit."""
        v = self.vectors
        if v is None:
            return await self.store.write(job)

        def txn(c: Any) -> list[Out]:
            outs = job(c)
            for out, vec in zip(outs, vecs, strict=False):
                if isinstance(out, int):
                    v.write(c, out, vec)
            return outs

        def after(outs: list[Out]) -> None:
            v.written([(o, robot, vec) for o, vec in zip(outs, vecs, strict=False) if isinstance(o, int)])

        return await self.store.write_then(txn, after)

    async def _visible_memory(self, principal: Principal, mid: int) -> Experience:
        exp = await self.store.read(lambda c: storage.select_one(c, mid))
        if exp is None or not self.policy.can_see(principal, exp.robot):
            raise NotFound(f"no memory with id {mid}; recall shows the memories you can use")
        return exp

    async def _active_own(self, principal: Principal, mid: int) -> Experience:
        exp = await self._visible_memory(principal, mid)
        if exp.status != "active":
            raise NotFound(f"memory {mid} is {exp.status}; only active memories can be changed")
        if principal.robot_id is not None and exp.robot == "shared":
            raise Forbidden("fleet-wide 'shared' memories serve every robot; only an operator can change them")
        return exp

    # ------------------------------------------------------------------ learn
    async def learn(
        self,
        principal: Principal,
        insight: str,
        context: JsonArg = None,
        collection: str = "default",
        session_id: str | None = None,
    ) -> Learned:
        """Store an insight unless it duplicates one this robot already has (numbers and outcomes
        decide, see `dedup`)."""
        text = check_text(insight, "insight", MAX_INSIGHT)
        ctx = parse_context(context)
        robot = self._author(principal)
        new, probe, decide = self._fact(robot, check_collection(collection), text, ctx, _session_arg(session_id))
        (vec,) = await self._embed([text])
        probe = Probe(probe.content_hash, await self._semantic(new, vec))
        now = time.time()
        (out,) = await self._write_memories(lambda c: [storage.learn(c, new, probe, decide, now)], robot, [vec])
        return self._learned(new, out)

    async def learn_many(
        self,
        principal: Principal,
        items: Sequence[tuple[str, JsonArg]],
        collection: str = "default",
        session_id: str | None = None,
    ) -> list[Learned]:
        """Learn many insights in one transaction (imports, training loops, benchmarks); each is
        checked for duplicates against everything stored before it, the batch included. All or
        nothing: any refused item (named by its index) stores none of them."""
        done = await self.learn_batch(principal, [(i, c, collection, session_id) for i, c in items])
        return [d for d in done if isinstance(d, Learned)]

    async def learn_batch(
        self,
        principal: Principal,
        items: Sequence[BatchItem],
        *,
        report: bool = False,
        numbers: Sequence[int] | None = None,
    ) -> list[Learned | MemoryError_]:
        """Learn ``(insight, context, collection, session_id)`` items in one transaction, each
        checked for duplicates against everything stored before it, the batch included.

        Every item is checked before anything is written. By default a refused item — a bad
        argument, or a session that does not exist or has ended — raises (`InvalidInput`,
        `NotFound`, `Conflict`, naming the item's index) and nothing of the batch is stored. With
        `report`, as robotmem's ``batch_learn``: the refusal takes the item's place in the result
        and the other items are stored."""
        if len(items) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH:,} insights per batch; split it")
        robot = self._author(principal)
        label = list(numbers) if numbers is not None else list(range(len(items)))  # how refusals name items
        out: list[Learned | MemoryError_ | None] = [None] * len(items)
        prepared: list[tuple[int, tuple[NewMemory, Probe, Decide]]] = []
        for i, (insight, context, collection, session_id) in enumerate(items):
            try:
                text = check_text(insight, "insight", MAX_INSIGHT)
                ctx = parse_context(context)
                coll, sid = check_collection(collection), _session_arg(session_id)
            except InvalidInput as exc:
                refusal = InvalidInput(f"item {label[i]}: {exc.detail}")
                if not report:
                    raise refusal from exc
                out[i] = refusal
                continue
            prepared.append((i, self._fact(robot, coll, text, ctx, sid)))
        vecs = await self._embed([p[0].content for _, p in prepared])
        now = time.time()

        def job(c: Any) -> list[int | dedup.Duplicate | MemoryError_]:
            outs: list[int | dedup.Duplicate | MemoryError_] = []
            for i, (new, probe, decide) in prepared:
                try:
                    outs.append(storage.learn(c, new, probe, decide, now))
                except (NotFound, Conflict) as exc:  # the session check, before anything of the item is written
                    refusal = type(exc)(f"item {label[i]}: {exc.detail}")
                    if not report:
                        raise refusal from exc
                    outs.append(refusal)
            return outs

        written = await self._write_memories(job, robot, vecs)
        for (i, p), o in zip(prepared, written, strict=True):
            out[i] = o if isinstance(o, MemoryError_) else self._learned(p[0], o)
        return [o for o in out if o is not None]

    def _learned(self, new: NewMemory, out: int | dedup.Duplicate) -> Learned:
        if isinstance(out, dedup.Duplicate):
            return Learned(
                "duplicate", out.existing_id, out.method, out.similarity, robot=new.robot, collection=new.collection
            )
        return Learned(
            "created",
            out,
            None,
            None,
            new.category,
            new.confidence,
            tuple(t for t, _ in new.tags),
            new.robot,
            new.collection,
            dict(new.metadata.get("scope", {})),
        )

    # ------------------------------------------------------------------ perceptions
    async def save_perception(
        self,
        principal: Principal,
        description: str,
        perception_type: str = "visual",
        data: Any = None,
        metadata: JsonArg = None,
        collection: str = "default",
        session_id: str | None = None,
    ) -> Learned:
        """Store what a sensor perceived. `metadata` is the perception's context (pose, sensor,
        task…): recall filters and spatial sort read it like a fact's context. `data` is any JSON
        value up to 256 KB. Only an identical perception (same description, kind, data, metadata
        and session) is a duplicate; the same description with new data is a new perception."""
        desc = check_text(description, "description", MAX_INSIGHT)
        ptype = check_perception_type(perception_type)
        payload = None if data is None else parse_data(data)
        meta = parse_object(metadata, "metadata", MAX_METADATA_BYTES)
        robot = self._author(principal)
        c = classify.classify_perception(desc, ptype, meta)
        new = NewMemory(
            robot=robot,
            collection=check_collection(collection),
            type="perception",
            content=desc,
            category=c.category,
            confidence=c.confidence,
            context=meta,
            content_hash=dedup.perception_hash(desc, ptype, payload, meta),
            source_weight=_source_weight(meta),
            session_id=_session_arg(session_id),
            perception_type=ptype,
            data=payload,
            metadata={"scope": c.scope} if c.scope else {},
            tags=tuple(dict.fromkeys((t, "auto") for t in c.tags)) + tuple((t, "user") for t in c.user_tags),
        )
        probe = Probe(new.content_hash, same_session=True)
        vecs = await self._embed([desc])
        now = time.time()

        def exact_only(
            exact: list[dedup.Candidate], _l: list[dedup.Candidate], _s: list[dedup.Candidate]
        ) -> dedup.Duplicate | None:
            return dedup.Duplicate(exact[0].id, "exact", 1.0) if exact else None

        (out,) = await self._write_memories(lambda c_: [storage.learn(c_, new, probe, exact_only, now)], robot, vecs)
        learned = self._learned(new, out)
        embedded = vecs[0] is not None and self.vectors is not None and isinstance(out, int)
        # what was stored decides, not the argument: data='null' (JSON null) stores none
        return replace(learned, embedded=embedded, has_data=payload is not None)

    # ------------------------------------------------------------------ recall
    async def recall(
        self,
        principal: Principal,
        query: str = "",
        n: int = 5,
        collection: str = "default",
        min_confidence: float = 0.3,
        session_id: str | None = None,
        context_filter: JsonArg = None,
        spatial_sort: JsonArg = None,
        include_data: bool = False,
    ) -> Recalled:
        """Ranked memories that pass every filter. Writes nothing: access counters go to the hot
        path without waiting."""
        n = as_int(n, "n")
        if not 1 <= n <= MAX_N:
            raise InvalidInput(f"n must be between 1 and {MAX_N}")
        min_confidence = as_real(min_confidence, "min_confidence")
        if not 0.0 <= min_confidence <= 1.0:
            raise InvalidInput("min_confidence must be between 0 and 1")
        if not isinstance(query, str):
            raise InvalidInput(f"query must be text (a str; '' for filters only), not a {type(query).__name__}")
        if len(utf8(query, "query")) > MAX_QUERY:
            raise InvalidInput(f"query is longer than {MAX_QUERY} characters")
        spec = parse_object(context_filter, "context_filter", MAX_FILTER_BYTES)
        scope = Scope(
            visible=self.policy.visible_robots(principal),
            collection=check_collection(collection),
            min_confidence=min_confidence,
            now=time.time(),
            session_id=_session_arg(session_id),
            condition=compile_filter(spec, "m.context"),
            spatial=parse_spatial(spatial_sort),
        )
        result = await self._search(scope, query, n, include_data)
        if result.hits:
            self.store.touch((h.memory.id for h in result.hits), scope.now)
        return Recalled(self._shown(principal, result.hits), result.mode)

    def _shown(self, principal: Principal, hits: list[Hit]) -> list[Hit]:
        """`hits` as `principal` may see them (`Policy.sees_activity`)."""
        see = self.policy.sees_activity
        return [h if see(principal, h.memory.robot) else replace(h, memory=h.memory.without_activity()) for h in hits]

    async def _search(self, scope: Scope, query: str, n: int, include_data: bool) -> Recalled:
        match = segment.match_phrases(query) if query.strip() else None
        if query.strip() and not match:
            return Recalled([], "keyword")  # punctuation only: nothing to search for
        if match is not None and self.vectors is not None:
            hybrid = await self._hybrid(scope, query, match, n, include_data)
            if hybrid is not None:
                return hybrid
        hits = await self._ranked(scope, match, n, include_data)
        return Recalled(hits, "keyword" if match is not None else "filter")

    async def _ranked(self, scope: Scope, match: Sequence[str] | None, n: int, include_data: bool) -> list[Hit]:
        """Keyword or filter-only ranking, entirely in SQL (with spatial_sort, by the blend of
        relevance and proximity, computed over every match in one pass)."""
        sp = scope.spatial
        order: Order = "score" if sp is None else "blend"
        cover, kw, masks = self.store.covering, self.store.keywords, self.store.filters
        rows = await self.store.read(
            lambda c: ranking_repo.rank(c, scope, match, order, n, include_data, cover, kw, masks)
        )
        return _normalised([(r, r.score if r.blend is None else r.blend) for r in rows], sp)

    async def _hybrid(
        self, scope: Scope, query: str, match: Sequence[str], n: int, include_data: bool
    ) -> Recalled | None:
        """Keyword and vector lists, both within the filters (the vector list ranks only the ids
        that passed every filter in SQL, in the same snapshot), each ordered by relevance × the
        experience weight (source × (0.5 + 0.5 × decayed confidence)) as keyword recall orders
        its matches, fused by weighted RRF; then the spatial blend and normalisation. None when
        no query vector or no stored vector exists: the caller runs keyword recall and says so."""
        v = self.vectors
        assert v is not None
        if not v.would_embed():
            return None
        pool = max(HYBRID_POOL, 3 * n)
        cover, kw, masks = self.store.covering, self.store.keywords, self.store.filters
        sp = scope.spatial
        early: list[Weighed] | None = None
        if sp is None and not self.store.blocking:
            # The query's embedding (a worker thread) and the keyword list (a reader) need nothing
            # of each other: run them together (~1.3 ms of ~5.6 at 10,000 memories). The list
            # comes from an earlier snapshot than the vector list, so `read` re-applies every
            # filter to its memories in its own.
            keyword_list = self.store.read(lambda c: ranking_repo.weighed(c, scope, match, pool, cover, kw, masks))
            (qvec,), early = await asyncio.gather(self._embed([query]), keyword_list)
        else:
            (qvec,) = await self._embed([query])
        if qvec is None:
            return None

        def nearest(c: Any) -> list[tuple[int, float]] | None:
            """The `pool` nearest memories passing every filter. Exact: when at least `pool` of
            the `wide` nearest pass, no passing memory ranked below them can be nearer; when
            `wide` holds every vector of those robots, nothing was left out.

            The nearest of every robot's come first, as long as the filter has no mask
            (`filter_repo`); when too few of them pass, the filter's mask is made — by reading
            every context once — and from then on the nearest are taken among the memories it
            allows (`within`), kept current through the change log."""
            sessionless = ranking_repo.maskable(scope)
            mask = masks.mask(c, scope.collection, scope.condition, make="no") if sessionless else None
            if mask is not None:
                return within(c, mask)
            probe = v.nearest_any(c, qvec, PROBE_FACTORS[-1] * pool, scope.visible)  # one product, every probe
            if probe is None:
                return None
            passing: set[int] = set()
            checked = 0
            for factor in PROBE_FACTORS:
                head = probe[: factor * pool]
                passing |= ranking_repo.ids_passing(c, scope, [m for m, _ in head[checked:]], covering=cover)
                checked = len(head)
                kept = [(m, cos) for m, cos in head if m in passing]
                if len(kept) >= pool or len(head) < factor * pool:
                    return kept[:pool]
            mask = masks.mask(c, scope.collection, scope.condition, make="now") if sessionless else None
            if mask is None:  # in a session, or ids that suit no array (in the billions): every id in scope
                return v.nearest(c, qvec, pool, ranking_repo.ids_in_scope(c, scope, covering=cover))
            return within(c, mask)

        def within(c: Any, mask: Mask) -> list[tuple[int, float]] | None:
            """The `pool` nearest passing every filter, among the memories `mask` allows (of the
            visible robots): each round the nearest `wide` of them, checked in SQL, until `pool`
            pass or none is left — exact, as every memory passing the filters is among those the
            mask allows."""
            wide, checked = MASK_ROUND_FACTOR * pool, 0
            passing: set[int] = set()
            allowed = mask.allowing(scope.visible)  # the robots as the table has them, not the vectors' filing
            while True:
                head = v.nearest_any(c, qvec, wide, None, allowed)
                if head is None:
                    return None
                passing |= ranking_repo.ids_passing(c, scope, [m for m, _ in head[checked:]], covering=cover)
                checked = len(head)
                kept = [(m, cos) for m, cos in head if m in passing]
                if len(kept) >= pool or len(head) < wide:
                    return kept[:pool]
                wide *= 8
                if wide > MASK_ROUNDS_UP_TO:  # what the mask allows mostly fails the rest (a confidence)
                    return v.nearest(c, qvec, pool, ranking_repo.ids_in_scope(c, scope, covering=cover))

        top = fusion.best_possible(v.weights, v.k) or 1.0

        def fuse(
            keyword: Sequence[int], vec: Sequence[tuple[int, float]], weight: Mapping[int, float]
        ) -> dict[str, float]:
            vec_order = sorted(
                ((m, max(cos, 0.0) * weight[m]) for m, cos in vec if cos >= MIN_COSINE and m in weight),
                key=lambda x: (-x[1], -x[0]),
            )
            return fusion.rrf([[str(m) for m in keyword], [str(m) for m, _ in vec_order]], v.weights, v.k)

        def read(c: Any) -> list[tuple[Ranked, float]] | None:
            vec = nearest(c)
            if vec is None:
                return None
            if sp is None:  # fused on numbers; only the `n` kept have their rows read
                if early is None:
                    keyword = ranking_repo.weighed(c, scope, match, pool, cover, kw, masks)
                    known = {w.id: w for w in keyword}
                    extra = [m for m, cos in vec if m not in known and cos >= MIN_COSINE]
                    known.update((w.id, w) for w in ranking_repo.weighed_ids(c, scope, extra, cover))
                else:  # from the earlier snapshot: every candidate is checked again in this one
                    ids = {w.id for w in early} | {m for m, cos in vec if cos >= MIN_COSINE}
                    known = {w.id: w for w in ranking_repo.weighed_ids(c, scope, ids, cover)}
                    keyword = [replace(known[w.id], relevance=w.relevance) for w in early if w.id in known]
                    known.update((w.id, w) for w in keyword)
                fused = fuse([w.id for w in keyword], vec, {m: w.weight for m, w in known.items()})
                best = sorted(((int(ref), value / top) for ref, value in fused.items()), key=lambda x: (-x[1], -x[0]))
                rows = storage.rows_of(c, [m for m, _ in best[:n]], include_data)
                return [(known[m].ranked(rows[m]), s) for m, s in best[:n] if m in rows]
            # spatial_sort blends in each candidate's distance, read from its context
            ranked = ranking_repo.rank(c, scope, match, "score", pool, include_data, cover, kw, masks)
            rows_by = {r.memory.id: r for r in ranked}
            # and the `n` keyword matches best by the blend itself (keyword recall's spatial order,
            # exact over every match): a near one ranked low by score alone was never a candidate,
            # so weight 1 ("by distance alone") missed the nearest matches
            for r in ranking_repo.rank(c, scope, match, "blend", n, include_data, cover):
                rows_by.setdefault(r.memory.id, r)
            extra = [m for m, cos in vec if m not in rows_by and cos >= MIN_COSINE]
            rows_by.update((r.memory.id, r) for r in ranking_repo.by_ids(c, scope, extra, include_data))
            fused = fuse([r.memory.id for r in ranked], vec, {m: _weight(r) for m, r in rows_by.items()})
            fused.update((str(m), 0.0) for m in rows_by if str(m) not in fused)  # blended in by proximity
            scored = [(rows_by[int(ref)], value / top) for ref, value in fused.items()]
            if scored:
                most = max(s for _, s in scored) or 1.0
                scored = [(r, _blend(sp, s / most, r.dist2)) for r, s in scored]
            scored.sort(key=lambda x: (-x[1], -x[0].memory.id))
            return scored[:n]

        scored = await self.store.read(read)
        if scored is None:
            return None
        return Recalled(_normalised(scored, sp), "hybrid")

    # ------------------------------------------------------------------ forget / update / get
    async def get(self, principal: Principal, mid: int) -> Experience:
        return await self._visible_memory(principal, check_memory_id(mid))

    async def forget(self, principal: Principal, mid: int, reason: str) -> Experience:
        """Soft delete with a reason: the memory stays on disk, out of every recall."""
        mid = check_memory_id(mid)
        why = check_text(reason, "reason", MAX_REASON)
        exp = await self._active_own(principal, mid)
        now = time.time()
        v = self.vectors
        if v is None:
            done = await self.store.write(lambda c: storage.forget(c, mid, why, now))
        else:

            def forget(c: Any) -> bool:
                ok = storage.forget(c, mid, why, now)
                if ok:
                    v.write(c, mid, None)  # out of every recall: its vector too
                return ok

            done = await self.store.write_then(forget, lambda ok: v.written([], [mid] if ok else []))
        if not done:
            raise NotFound(f"memory {mid} is no longer active")
        return exp

    async def update(self, principal: Principal, mid: int, new_content: str, context: JsonArg = None) -> Updated:
        """Replace a memory's content (re-classified and re-indexed). A `context` that is a JSON
        object (a dict, or a string holding one) replaces the memory's context, and with it the
        user's tags (its ``tags``); plain text (not JSON) is robotmem's usage — a note that informs
        the re-classification while the stored context and the user's tags are kept; an empty one
        keeps them too. Category, auto tags, confidence and scope are inferred again from the new
        content, as learn infers them."""
        mid = check_memory_id(mid)
        text = check_text(new_content, "new_content", MAX_INSIGHT)
        note = ""
        if context is None or (isinstance(context, str) and not context.strip()):
            keep = True
        elif isinstance(context, str) and not json_shaped(context):
            keep, note = True, parse_context(context)["note"]  # bounded and checked like learn's note
        else:
            keep = False
        replacement = None if keep else parse_context(context)
        if replacement == {}:  # `{}` adds nothing to keep: like an empty context
            keep, replacement = True, None
        old = await self._active_own(principal, mid)
        ctx = old.context if replacement is None else replacement

        def build(ctx: dict[str, Any]) -> NewMemory:
            told = {**ctx, "note": note} if note else ctx  # what the classifier reads, not what is stored
            if old.type == "perception":
                c = classify.classify_perception(text, old.perception_type or "visual", told)
            else:
                c = classify.classify(text, told)
            content_hash, facts_hash = dedup.memory_keys(old.type, text, ctx, old.perception_type, old.data)
            return NewMemory(
                robot=old.robot,
                collection=old.collection,
                type=old.type,
                content=text,
                category=c.category,
                confidence=c.confidence,
                context=ctx,
                content_hash=content_hash,
                source_weight=_source_weight(ctx),
                facts_hash=facts_hash,
                # scope and tags exactly as learn (a fact) or save_perception (a perception) makes them
                metadata={"scope": c.scope} if c.scope else {},
                tags=tuple(dict.fromkeys((t, "auto") for t in c.tags))
                + tuple((t, "user") for t in c.user_tags if old.type == "perception" or t not in c.tags),
            )

        new = build(ctx)

        replaced = [old.content]  # the content this update replaced, as its transaction found it

        def write(c: Any) -> list[int | dedup.Duplicate]:
            target = new
            current = storage.select_one(c, mid)  # a concurrent update may have changed it
            if current is not None:
                replaced[0] = current.content
                if keep and current.context != ctx:  # "keep the context": as it is now, in this transaction
                    target = build(dict(current.context))
            return [mid] if storage.update(c, mid, target, now, keep_user_tags=keep) else []

        (vec,) = await self._embed([text])
        now = time.time()
        outs = await self._write_memories(write, old.robot, [vec])
        if not outs:
            raise NotFound(f"memory {mid} is no longer active")
        return Updated(await self._visible_memory(principal, mid), replaced[0])

    # ------------------------------------------------------------------ sessions
    async def start_session(
        self, principal: Principal, collection: str = "default", context: JsonArg = None
    ) -> Session:
        s = Session(
            id=uuid.uuid4().hex,
            robot=self._author(principal),
            collection=check_collection(collection),
            context=parse_context(context),
            started_at=time.time(),
        )
        await self.store.write(lambda c: storage.insert_session(c, s))
        return s

    async def get_session(self, principal: Principal, session_id: str) -> Session:
        sid = _session_arg(session_id) or ""
        s = await self.store.read(lambda c: storage.select_session(c, sid))
        if s is None or not self.policy.can_see(principal, s.robot):
            raise NotFound(f"no session '{session_id}'; start_session returns a session_id to use")
        return s

    async def end_session(
        self, principal: Principal, session_id: str, outcome_score: float | None = None, related: int = 5
    ) -> EndedSession:
        """End an episode: record its outcome, consolidate its redundant memories (never a failure
        into a success, never protected categories or perceptions), and recall what is related
        for the next episode. Confidence is never rewritten here (decay is computed at read time)."""
        if outcome_score is not None:
            outcome_score = as_real(outcome_score, "outcome_score")
            if not 0.0 <= outcome_score <= 1.0:
                raise InvalidInput("outcome_score must be between 0 (failure) and 1 (full success)")
        s = await self.get_session(principal, session_id)
        if principal.robot_id is not None and s.robot != principal.robot_id:
            raise Forbidden(f"session '{session_id}' belongs to {s.robot}; a robot can only end its own sessions")
        now = time.time()
        ended = await self.store.write(lambda c: storage.end_session(c, s.id, outcome_score, now, consolidate.plan))
        if ended is None:
            raise Conflict(f"session '{session_id}' has already ended")
        hits = await self._related(principal, s, related) if related else []
        return EndedSession(ended.session, ended.summary, ended.consolidated, self._shown(principal, hits))

    async def _related(self, principal: Principal, s: Session, n: int) -> list[Hit]:
        """Proactive recall for the next episode: the collection's memories closest to this
        session's context and learnings, outside the session itself — none for an episode with
        neither (not the collection's most confident memories, which relate to nothing)."""
        own = await self.store.read(lambda c: storage.session_text(c, s.id))
        match = segment.match_phrases(" ".join([*_values(s.context), own]))
        if not match:
            return []
        scope = Scope(
            visible=self.policy.visible_robots(principal),
            collection=s.collection,
            min_confidence=0.3,
            now=time.time(),
            exclude_session=s.id,
        )
        return await self._ranked(scope, match, n, False)


# ---------------------------------------------------------------------------- pure helpers
def _source_weight(ctx: Mapping[str, Any]) -> float:
    return REAL_WEIGHT if dedup.source_of(ctx) == "real" else 1.0


def _session_arg(session_id: str | None) -> str | None:
    if session_id is None or session_id == "":
        return None
    if not isinstance(session_id, str) or len(session_id) > MAX_SESSION_ID:
        raise InvalidInput(f"session_id must be at most {MAX_SESSION_ID} characters (start_session returns one)")
    return utf8(session_id, "session_id")


def _values(ctx: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for v in ctx.values():
        if isinstance(v, Mapping):
            out.extend(_values(v))
        elif isinstance(v, str):
            out.append(v)
    return out


def _weight(r: Ranked) -> float:
    """A ranked memory's experience weight: source × (0.5 + 0.5 × decayed confidence)."""
    return r.score / r.relevance if r.relevance else 0.0


def _blend(sp: Spatial, relevance: float, dist2: float | None) -> float:
    return (1.0 - sp.weight) * relevance + sp.weight * sp.proximity(dist2)


def _distance(r: Ranked, sp: Spatial) -> float | None:
    """What recall reports: the square root of the ranking's squared distance, or — where that
    square overflowed to infinity — the distance itself, read from the context (`distance_of`)."""
    d2 = r.dist2
    if d2 is not None and math.isfinite(d2):
        return math.sqrt(max(0.0, d2))
    return distance_of(r.memory.context, sp)


def _normalised(scored: Sequence[tuple[Ranked, float]], sp: Spatial | None) -> list[Hit]:
    best = max((s for _, s in scored), default=0.0)
    return [
        Hit(
            r.memory,
            round(s / best, 6) if best > 0 else 0.0,
            r.confidence,
            None if sp is None or r.dist2 is None else _distance(r, sp),
        )
        for r, s in scored
    ]


__all__ = [
    "BatchItem",
    "EndedSession",
    "ExperienceService",
    "Hit",
    "Learned",
    "MemoryVectors",
    "Recalled",
    "Updated",
    "run_sync",
]
