"""The Python API: the experience memory for scripts and training loops that do not speak MCP.

robotmem-like and synchronous::

    from robot_mcp_memory.api import RobotMemory

    with RobotMemory("data", robot_id="ur5-01") as mem:
        sid = mem.start_session(context={"task": {"name": "grasp_mug"}})
        mem.learn("grip force 12.5 N held the wet mug", context={"params": {"grip_force": 12.5}}, session_id=sid)
        for m in mem.recall("grasp the mug", context_filter={"task.success": True}):
            print(m["content"], m["params"])
        mem.end_session(sid, outcome_score=1.0)

It opens the same ``index.db`` a server would (several processes may share a data directory:
SQLite's WAL keeps them consistent) and runs the same `ExperienceService` the MCP tools run, over a
store opened in its *blocking* mode (`StoreMode.BLOCKING`): every call completes on the calling
thread — reads on that thread's read-only connection, writes run and committed by the calling
thread too whenever the store's writer is idle (`SqliteStore.write_blocking`) — with no event
loop and no thread hop, which is what a loop calling ``learn``/``recall`` thousands of times
wants. Results are the dicts the MCP tools return (`experiences.views`); refusals raise the
package's errors (`errors.InvalidInput`, `errors.NotFound` …). The instance is thread-safe.

Calls are unscoped (like stdio): writes are attributed to `robot_id`, reads see every robot's
memories. Semantic search is off by default here (``embedder="none"``: keyword search, no model
to load); pass ``embedder="use"`` to load the server's default model.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, SupportsFloat, SupportsIndex

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings, server_database_url, server_store
from robot_mcp_memory.errors import Conflict, InvalidInput, MemoryError_, StorageError
from robot_mcp_memory.experiences.model import MAX_BATCH, as_int, as_real, check_memory_id
from robot_mcp_memory.experiences.service import BatchItem, ExperienceService, JsonArg, Learned, run_sync
from robot_mcp_memory.experiences.views import (
    EndSessionResult,
    ForgetResult,
    LearnResult,
    MemoryView,
    PerceptionResult,
    RecallResult,
    UpdateResult,
)
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.tenancy.principal import LOCAL, Principal

_log = logs.get("robot_mcp_memory.api")

#: What a mapping item of `RobotMemory.learn_many` may hold: learn's keyword arguments.
_ITEM_KEYS = frozenset({"insight", "context", "collection", "session_id"})
#: One insight for `RobotMemory.learn_many`: its text, or (text, context), or learn's keyword arguments.
LearnItem = str | tuple[str, JsonArg] | list[Any] | Mapping[str, Any]
#: An id or a count: an int, a numpy integer (anything with ``__index__``), a whole float (``5.0``) or Decimal.
Whole = SupportsIndex | float | Decimal
#: A score or a confidence: any real number, numpy's included.
Number = SupportsFloat | SupportsIndex
#: ``RobotMemory(":memory:")`` (robotmem's test idiom): a temporary directory, removed at close.
IN_MEMORY = ":memory:"


class RobotMemory:
    """The experience memory in ``data_dir`` (created if missing), as a synchronous object."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        robot_id: str | None = None,
        collection: str = "default",
        embedder: str = "none",
        wait_for_model: float = 60.0,
        database_url: str | None = None,
    ) -> None:
        """With an `embedder`, wait up to `wait_for_model` seconds for its model to load (``0``:
        do not wait), so the first recalls are already hybrid; a model that did not load in time
        (or failed) leaves recall keyword-only until it does, and a warning says so.

        ``data_dir`` may start with ``~``; ``":memory:"`` (robotmem's idiom for a throwaway memory)
        is a new temporary directory, removed at `close`. Left out, ``data_dir`` and ``robot_id``
        are the server's (``MEMORY_DATA_DIR``, ``ROBOT_ID``), else ``data`` and ``unknown`` — as
        robotmem's ``RobotMemory()`` opens the one store its server uses, from any directory.

        ``database_url`` (``postgresql://…``) opens that PostgreSQL database instead, as a server with
        ``MEMORY_DATABASE_URL`` does (the same `Settings` path). Left out, it is the server's
        ``MEMORY_DATABASE_URL`` — but only when ``data_dir`` is left out too: a directory named here
        (``":memory:"`` included) is always that SQLite directory, so a test's throwaway memory never
        lands in the fleet's database. Naming both is refused (`InvalidInput`).
        Logging: the root logger and the host's configuration are left alone (`logs.for_library`)."""
        logs.for_library()
        self._scratch: Path | None = None
        self._scratch_removal: weakref.finalize[..., Any] | None = None
        server_dir, server_robot = server_store()
        if database_url is not None and data_dir is not None:
            raise InvalidInput("name either data_dir (a SQLite directory) or database_url (PostgreSQL), not both")
        if database_url is None and data_dir is None:
            database_url = server_database_url()
        if data_dir is None:
            data_dir = server_dir or "data"
        if robot_id is None:
            robot_id = server_robot or "unknown"
        if str(data_dir) == IN_MEMORY:
            self._scratch = Path(tempfile.mkdtemp(prefix="robot-mcp-memory-"))
            # Removed at close — or when the instance is collected, or the interpreter exits, for
            # one never closed (robotmem's ":memory:" leaves nothing behind either).
            self._scratch_removal = weakref.finalize(self, shutil.rmtree, str(self._scratch), True)
            where = self._scratch
        else:
            where = Path(data_dir).expanduser()
        env = {"MEMORY_DATA_DIR": str(where), "ROBOT_ID": robot_id, "MEMORY_EMBEDDER": embedder}
        if database_url is not None:
            env["MEMORY_DATABASE_URL"] = database_url
        settings = Settings.from_env(env)
        try:
            self._memory: Memory | None = Memory.open(settings, mode=StoreMode.BLOCKING)
        except BaseException:
            self._remove_scratch()
            raise
        self._owned = True
        self._init(self._memory.experiences, collection)
        model = self._memory.embedder
        if model is not None and model.mode != "off" and wait_for_model > 0 and not model.wait_settled(wait_for_model):
            _log.warning(
                "api.embedder_not_ready",
                embedder=embedder,
                waited_s=wait_for_model,
                reason=model.last_error or "still loading",
                search="keyword-only until the model loads",
            )

    @classmethod
    def attach(cls, memory: Memory, *, collection: str = "default", principal: Principal = LOCAL) -> RobotMemory:
        """Use an already open `Memory` (its owner closes it), e.g. from a command or a test."""
        self = cls.__new__(cls)
        self._memory = memory
        self._scratch = None
        self._owned = False
        self._init(memory.experiences, collection, principal)
        return self

    def _init(self, svc: ExperienceService, collection: str, principal: Principal = LOCAL) -> None:
        self._svc = svc.blocking()
        self._collection = collection
        self._principal = principal
        self._closed = False

    @property
    def memory(self) -> Memory:
        """The open `Memory` underneath (for commands, importers and benchmarks)."""
        if self._memory is None or self._closed:
            raise StorageError("this RobotMemory is closed")
        return self._memory

    def _coll(self, collection: str | None) -> str:
        if self._closed:
            raise StorageError("this RobotMemory is closed")
        return collection or self._collection

    # ------------------------------------------------------------------ memories
    def learn(
        self, insight: str, context: JsonArg = "", session_id: str | None = None, collection: str | None = None
    ) -> dict[str, Any]:
        """Remember an insight. ``{"status": "created", "memory_id", "auto_inferred", …}`` or
        ``{"status": "duplicate", "existing_id", "method", "similarity", …}``."""
        coll = self._coll(collection)
        learned = run_sync(self._svc.learn(self._principal, insight, context, coll, session_id))
        return LearnResult.of(learned).model_dump()

    def learn_many(
        self, items: Iterable[LearnItem], session_id: str | None = None, collection: str | None = None
    ) -> list[dict[str, Any]]:
        """Learn many insights in one transaction (each still checked for duplicates, the batch
        included) — the fast way to load an episode's worth, or a dataset. An item is a text, a
        ``(text, context)`` pair (tuple or list), or a mapping of learn's arguments (``insight``,
        ``context``, ``collection``, ``session_id``). All or nothing: every item is checked before
        anything is written, and a refused one (`InvalidInput`, or `NotFound`/`Conflict` for its
        session, naming the item's index) stores none. At most 10,000 items per call."""
        coll = self._coll(collection)
        batch = [_item(i, x, coll, session_id) for i, x in enumerate(items)]
        done = run_sync(self._svc.learn_batch(self._principal, batch))
        return [LearnResult.of(d).model_dump() for d in done if isinstance(d, Learned)]

    def batch_learn(self, insights: Iterable[LearnItem]) -> list[dict[str, Any]]:
        """robotmem's ``batch_learn``: one result per item, in order — learn's result, or
        ``{"status": "error", "error": …}`` for a refused item while the others are stored. Items
        as `learn_many`'s; stored in transactions of up to 10,000."""
        coll = self._coll(None)
        out: list[dict[str, Any]] = []
        chunk: list[tuple[int, BatchItem]] = []

        def flush() -> None:
            done = run_sync(
                self._svc.learn_batch(
                    self._principal, [b for _, b in chunk], report=True, numbers=[at for at, _ in chunk]
                )
            )
            for (at, _), d in zip(chunk, done, strict=True):
                out[at] = _error(d) if isinstance(d, MemoryError_) else LearnResult.of(d).model_dump()
            chunk.clear()

        for i, x in enumerate(insights):
            out.append({})
            try:
                chunk.append((i, _item(i, x, coll, None)))
            except InvalidInput as exc:
                out[i] = _error(exc)
            if len(chunk) == MAX_BATCH:
                flush()
        flush()
        return out

    def recall(
        self,
        query: str = "",
        n: Whole = 5,
        min_confidence: Number = 0.3,
        session_id: str | None = None,
        context_filter: JsonArg = None,
        spatial_sort: JsonArg = None,
        collection: str | None = None,
        include_data: bool = False,
    ) -> list[dict[str, Any]]:
        """The most relevant memories, best first (each a dict with ``id``, ``content``,
        ``confidence``, ``score``, ``context`` and its ``params``/``spatial``/``robot``/``task``)."""
        coll = self._coll(collection)
        count, floor = as_int(n, "n"), as_real(min_confidence, "min_confidence")
        found = run_sync(
            self._svc.recall(
                self._principal, query, count, coll, floor, session_id, context_filter, spatial_sort, include_data
            )
        )
        views = RecallResult.of(found, include_data).memories
        spatial = spatial_sort is not None and spatial_sort != ""
        return [
            _robotmem_keys(v.model_dump(), h.memory.metadata, spatial) for v, h in zip(views, found.hits, strict=True)
        ]

    def save_perception(
        self,
        description: str,
        perception_type: str = "visual",
        data: Any = None,
        metadata: JsonArg = None,
        session_id: str | None = None,
        collection: str | None = None,
    ) -> dict[str, Any]:
        """Store a perception (``data``: any JSON value up to 256 KB). ``{"memory_id", …}``."""
        coll = self._coll(collection)
        saved = run_sync(
            self._svc.save_perception(self._principal, description, perception_type, data, metadata, coll, session_id)
        )
        return PerceptionResult.of(saved, perception_type, saved.has_data).model_dump()

    def get(self, memory_id: Whole) -> dict[str, Any]:
        """One memory by id, whatever its status (`errors.NotFound` if there is none)."""
        self._coll(None)
        return MemoryView.of(run_sync(self._svc.get(self._principal, check_memory_id(memory_id)))).model_dump()

    def forget(self, memory_id: Whole, reason: str) -> dict[str, Any]:
        """Soft-delete a memory with a reason. ``{"status": "forgotten", …}``."""
        self._coll(None)
        gone = run_sync(self._svc.forget(self._principal, check_memory_id(memory_id), reason))
        return ForgetResult(memory_id=gone.id, content=gone.content[:100], reason=reason.strip()).model_dump()

    def update(self, memory_id: Whole, new_content: str, context: JsonArg = "") -> dict[str, Any]:
        """Correct a memory's content. ``{"status": "updated", "old_content", "new_content", …}``."""
        self._coll(None)
        return UpdateResult.of(
            run_sync(self._svc.update(self._principal, check_memory_id(memory_id), new_content, context))
        ).model_dump()

    # ------------------------------------------------------------------ sessions
    def start_session(self, context: JsonArg = None, collection: str | None = None) -> str:
        """Start an episode; returns its session_id."""
        coll = self._coll(collection)
        return run_sync(self._svc.start_session(self._principal, coll, context)).id

    def end_session(self, session_id: str, outcome_score: Number | None = None) -> dict[str, Any]:
        """End an episode: ``{"status": "ended", "summary", "consolidated", "related_memories", …}``."""
        self._coll(None)
        score = None if outcome_score is None else as_real(outcome_score, "outcome_score")
        ended = run_sync(self._svc.end_session(self._principal, session_id, score))
        return EndSessionResult.of(ended).model_dump()  # with robotmem's decayed_count, always 0

    @contextlib.contextmanager
    def session(self, context: JsonArg = None, collection: str | None = None) -> Iterator[str]:
        """``with mem.session(context=…) as sid:`` — starts an episode and ends it on leaving the
        block, unless the body already ended it (``end_session(sid, outcome_score=…)`` inside).
        An exception of the body always comes through: a failure to end the session then is
        logged (``api.session_end_failed``), as robotmem does."""
        sid = self.start_session(context, collection)
        try:
            yield sid
        except BaseException:
            try:
                self._end_if_open(sid)
            except Exception as exc:  # never in place of the body's own exception
                _log.warning("api.session_end_failed", session_id=sid, error=f"{type(exc).__name__}: {exc}")
            raise
        self._end_if_open(sid)

    def _end_if_open(self, sid: str) -> None:
        if self._closed:
            return
        if run_sync(self._svc.get_session(self._principal, sid)).ended_at is not None:
            return
        with contextlib.suppress(Conflict):  # ended meanwhile by another thread: ended all the same
            self.end_session(sid)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Wait for pending writes (access counters included) and close the database."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owned and self._memory is not None:
                self._memory.close()
        finally:
            self._remove_scratch()

    def _remove_scratch(self) -> None:
        if self._scratch_removal is not None:
            self._scratch_removal()  # once: a finalizer runs at most one time
        self._scratch = None

    def __enter__(self) -> RobotMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RobotMemory(collection={self._collection!r}, closed={self._closed})"


def _item(i: int, item: object, collection: str, session_id: str | None) -> BatchItem:
    """A `learn_many` item as (insight, context, collection, session_id), or `InvalidInput` naming
    its index. Nothing is converted: an insight that is not text is refused, as learn refuses it."""
    if isinstance(item, str):
        return (item, "", collection, session_id)
    if isinstance(item, tuple | list):
        if len(item) != 2:
            raise InvalidInput(f"item {i}: a pair is (insight, context); this one has {len(item)} elements")
        insight, context = item
    elif isinstance(item, Mapping):
        unknown = [k for k in item if k not in _ITEM_KEYS]
        if unknown or "insight" not in item:
            raise InvalidInput(
                f"item {i}: a mapping takes learn's arguments ({', '.join(sorted(_ITEM_KEYS))}), with an insight"
                + (f"; not {', '.join(sorted(map(repr, unknown)))}" if unknown else "")
            )
        insight, context = item["insight"], item.get("context", "")
        collection = item.get("collection") or collection
        session_id = item.get("session_id", session_id)
    else:
        raise InvalidInput(
            f"item {i}: an item is a text, an (insight, context) pair or a mapping of learn's arguments, "
            f"not {'None' if item is None else 'a ' + type(item).__name__}"
        )
    if not isinstance(insight, str):
        kind = "None" if insight is None else f"a {type(insight).__name__}"
        raise InvalidInput(f"item {i}: insight must be text (a str), not {kind}")
    return (insight, context, collection, session_id)


def _error(exc: MemoryError_) -> dict[str, Any]:
    """robotmem's per-item failure in `RobotMemory.batch_learn`, with our error code."""
    return {"status": "error", "error": exc.detail, "code": exc.code}


def _robotmem_keys(view: dict[str, Any], metadata: Mapping[str, Any], spatial: bool = False) -> dict[str, Any]:
    """A recall item with the keys robotmem's carried, as far as they map (docs/experiences.md):
    ``human_summary`` (the first 200 characters), ``perception_data`` (the data, when asked for
    with include_data), ``scope_files``/``scope_entities`` (what the classifier found in the text;
    lists, where robotmem gave JSON strings), and with a `spatial` sort ``_spatial_distance`` (our
    ``distance``: None where robotmem gave infinity, a memory without the coordinates)."""
    scope = metadata.get("scope")
    scope = scope if isinstance(scope, Mapping) else {}
    if spatial:
        view = view | {"_spatial_distance": view["distance"]}
    return view | {
        "human_summary": view["content"][:200],
        "perception_data": view["data"] if view["type"] == "perception" else None,
        "scope_files": list(scope.get("files", [])),
        "scope_entities": list(scope.get("entities", [])),
    }


__all__ = ["IN_MEMORY", "LearnItem", "Number", "RobotMemory", "Whole"]
