"""ExperienceService: learn / recall / perceptions / forget / update / sessions, with the §6a policy.

Every method takes the caller's `Principal`. Memories carry the robot they came from — the
tenant's robot id, or the server's ``ROBOT_ID`` for an unscoped caller — and reads follow the
process rules: a scoped caller sees its own group's memories plus fleet-wide ``shared`` ones;
anything else reads as not found. Memory ids in and out are public ids (`model.PUBLIC_FROM`):
the stored ids are one dense sequence for the whole fleet and never leave the service.

The service never touches an event loop, a thread or a connection itself: it awaits its
`MemoryRepository` (and the optional `MemoryVectors`), ports (`ports.py`) that the composition root
wires to the SQLite adapter; recall's query plan is `recall.py`. Driven by the MCP tools those
awaits run on the reader pool and the writer thread; driven by the Python API over a blocking store
they complete without suspending (`run_sync`), so a training loop pays no event-loop hop per call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from robot_mcp_memory.errors import Conflict, Forbidden, InvalidInput, MemoryError_, NotFound
from robot_mcp_memory.experiences import classify, consolidate, dedup, recall
from robot_mcp_memory.experiences.filters import parse_filter
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
from robot_mcp_memory.experiences.ports import (
    Decide,
    Embedded,
    Ended,
    MemoryRepository,
    MemoryVectors,
    Probe,
    Scope,
    Transaction,
)
from robot_mcp_memory.experiences.recall import Hit, Mode, Recalled
from robot_mcp_memory.search import segment
from robot_mcp_memory.tenancy.policy import Policy
from robot_mcp_memory.tenancy.principal import Principal

T = TypeVar("T")
#: What a memory write reports per memory: its id, the duplicate it found, or (a batch's) refusal.
Out = TypeVar("Out", bound="int | dedup.Duplicate | MemoryError_")
#: One item of `ExperienceService.learn_batch`: (insight, context, collection, session_id).
BatchItem = tuple[str, "JsonArg", str, "str | None"]
JsonArg = Mapping[str, Any] | str | None
MAX_SESSION_ID = 64
#: Semantic dedup: how many nearest same-facts memories are compared.
DEDUP_NEIGHBOURS = 5


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
        store: MemoryRepository,
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

    async def _embed_query(self, text: str) -> Embedded | None:
        """A recall query's vector (`MemoryVectors.query_vector`), a miss on the store's workers."""
        v = self.vectors
        return None if v is None else await v.query_vector(text, self.store.offload)

    async def _semantic(self, new: NewMemory, vec: Embedded | None) -> tuple[tuple[int, float], ...]:
        """Dedup's semantic candidates: the nearest by cosine **among the memories whose facts digest
        (numbers, outcome, negation, source) equals the new one's**, in its robot, collection and
        type — filtered before ranking, so a same-facts paraphrase is never crowded out by closer
        texts with other numbers. The write re-checks them in its transaction."""
        v = self.vectors
        if v is None or vec is None:
            return ()
        found = await self.store.snapshot(lambda s: v.nearest(s, vec, DEDUP_NEIGHBOURS, s.same_facts_ids(new)))
        return tuple(found or ())

    async def _write_memories(
        self, job: Callable[[Transaction], list[Out]], robot: str, vecs: Sequence[Embedded | None]
    ) -> tuple[list[Out], dict[int, int]]:
        """`job` (an outcome per vector, in order: a written memory's stored id or a duplicate;
        none when it found nothing to change), with each written memory's vector stored in the
        same transaction and the in-memory index patched after the commit; and the public id of
        each memory the outcomes name, by stored id, as the transaction wrote them."""
        v = self.vectors

        def txn(t: Transaction) -> tuple[list[Out], dict[int, int]]:
            outs = job(t)
            if v is not None:
                for out, vec in zip(outs, vecs, strict=False):
                    if isinstance(out, int):
                        v.write(t, out, vec)
            named = [
                o.existing_id if isinstance(o, dedup.Duplicate) else o for o in outs if not isinstance(o, MemoryError_)
            ]
            return outs, t.public_ids(named)

        if v is None:
            return await self.store.transaction(txn)

        def after(done: tuple[list[Out], dict[int, int]]) -> None:
            v.written([(o, robot, vec) for o, vec in zip(done[0], vecs, strict=False) if isinstance(o, int)])

        return await self.store.transaction_then(txn, after)

    async def _visible_memory(self, principal: Principal, mid: int) -> Experience:
        """The memory shown as `mid` (a public id) with its stored id, if `principal` may see it."""
        exp = await self.store.snapshot(lambda s: s.select_public(mid))
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
        (out,), public = await self._write_memories(lambda t: [t.learn(new, probe, decide, now)], robot, [vec])
        return self._learned(new, out, public)

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

        def job(t: Transaction) -> list[int | dedup.Duplicate | MemoryError_]:
            outs: list[int | dedup.Duplicate | MemoryError_] = []
            for i, (new, probe, decide) in prepared:
                try:
                    outs.append(t.learn(new, probe, decide, now))
                except (NotFound, Conflict) as exc:  # the session check, before anything of the item is written
                    refusal = type(exc)(f"item {label[i]}: {exc.detail}")
                    if not report:
                        raise refusal from exc
                    outs.append(refusal)
            return outs

        written, public = await self._write_memories(job, robot, vecs)
        for (i, p), o in zip(prepared, written, strict=True):
            out[i] = o if isinstance(o, MemoryError_) else self._learned(p[0], o, public)
        return [o for o in out if o is not None]

    def _learned(self, new: NewMemory, out: int | dedup.Duplicate, public: Mapping[int, int]) -> Learned:
        if isinstance(out, dedup.Duplicate):
            return Learned(
                "duplicate",
                public[out.existing_id],
                out.method,
                out.similarity,
                robot=new.robot,
                collection=new.collection,
            )
        return Learned(
            "created",
            public[out],
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

        (out,), public = await self._write_memories(lambda t: [t.learn(new, probe, exact_only, now)], robot, vecs)
        learned = self._learned(new, out, public)
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
            context_filter=parse_filter(spec),
            spatial=parse_spatial(spatial_sort),
        )
        result = await recall.search(self.store, self.vectors, self._embed_query, scope, query, n, include_data)
        if result.hits:
            self.store.touch((h.memory.id for h in result.hits), scope.now)
        return Recalled(self._shown(principal, result.hits), result.mode)

    def _shown(self, principal: Principal, hits: list[Hit]) -> list[Hit]:
        """`hits` as `principal` may see them: public ids, and activity only where
        `Policy.sees_activity`."""
        see = self.policy.sees_activity
        return [
            replace(
                h, memory=h.memory.shown() if see(principal, h.memory.robot) else h.memory.shown().without_activity()
            )
            for h in hits
        ]

    # ------------------------------------------------------------------ forget / update / get
    async def get(self, principal: Principal, mid: int) -> Experience:
        return (await self._visible_memory(principal, check_memory_id(mid))).shown()

    async def forget(self, principal: Principal, public_id: int, reason: str) -> Experience:
        """Soft delete with a reason: the memory stays on disk, out of every recall."""
        public_id = check_memory_id(public_id)
        why = check_text(reason, "reason", MAX_REASON)
        exp = await self._active_own(principal, public_id)
        mid = exp.id
        now = time.time()
        v = self.vectors
        if v is None:
            done = await self.store.transaction(lambda t: t.forget(mid, why, now))
        else:

            def forget(t: Transaction) -> bool:
                ok = t.forget(mid, why, now)
                if ok:
                    v.write(t, mid, None)  # out of every recall: its vector too
                return ok

            done = await self.store.transaction_then(forget, lambda ok: v.written([], [mid] if ok else []))
        if not done:
            raise NotFound(f"memory {public_id} is no longer active")
        return exp.shown()

    async def update(self, principal: Principal, public_id: int, new_content: str, context: JsonArg = None) -> Updated:
        """Replace a memory's content (re-classified and re-indexed). A `context` that is a JSON
        object (a dict, or a string holding one) replaces the memory's context, and with it the
        user's tags (its ``tags``); plain text (not JSON) is robotmem's usage — a note that informs
        the re-classification while the stored context and the user's tags are kept; an empty one
        keeps them too. Category, auto tags, confidence and scope are inferred again from the new
        content, as learn infers them."""
        public_id = check_memory_id(public_id)
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
        old = await self._active_own(principal, public_id)
        mid = old.id
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

        def write(t: Transaction) -> list[int | dedup.Duplicate]:
            target = new
            current = t.select_one(mid)  # a concurrent update may have changed it
            if current is not None:
                replaced[0] = current.content
                if keep and current.context != ctx:  # "keep the context": as it is now, in this transaction
                    target = build(dict(current.context))
            return [mid] if t.update(mid, target, now, keep_user_tags=keep) else []

        (vec,) = await self._embed([text])
        now = time.time()
        outs, _ = await self._write_memories(write, old.robot, [vec])
        if not outs:
            raise NotFound(f"memory {public_id} is no longer active")
        return Updated((await self._visible_memory(principal, public_id)).shown(), replaced[0])

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
        await self.store.transaction(lambda t: t.insert_session(s))
        return s

    async def get_session(self, principal: Principal, session_id: str) -> Session:
        sid = _session_arg(session_id) or ""
        s = await self.store.snapshot(lambda at: at.select_session(sid))
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

        def end(t: Transaction) -> tuple[Ended | None, dict[int, int]]:
            done = t.end_session(s.id, outcome_score, now, consolidate.plan)
            return done, {} if done is None else t.public_ids({i for pair in done.consolidated for i in pair})

        ended, public = await self.store.transaction(end)
        if ended is None:
            raise Conflict(f"session '{session_id}' has already ended")
        hits = await self._related(principal, s, related) if related else []
        folded = [(public[a], public[b]) for a, b in ended.consolidated]
        return EndedSession(ended.session, ended.summary, folded, self._shown(principal, hits))

    async def _related(self, principal: Principal, s: Session, n: int) -> list[Hit]:
        """Proactive recall for the next episode: the collection's memories closest to this
        session's context and learnings, outside the session itself — none for an episode with
        neither (not the collection's most confident memories, which relate to nothing)."""
        own = await self.store.snapshot(lambda at: at.session_text(s.id))
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
        return await recall.ranked(self.store, scope, match, n, False)


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


__all__ = [
    "BatchItem",
    "EndedSession",
    "ExperienceService",
    "Hit",
    "Learned",
    "MemoryVectors",
    "Mode",
    "Recalled",
    "Updated",
    "run_sync",
]
