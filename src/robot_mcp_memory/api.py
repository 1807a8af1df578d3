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
*blocking* store: every call completes on the calling thread — reads on that thread's read-only
connection, writes run and committed by the calling thread too whenever the store's writer is
idle (`SqliteStore.write_blocking`) — with no event loop and no thread hop, which is what a loop
calling ``learn``/``recall`` thousands of times wants. Results
are the dicts the MCP tools return (`experiences.views`); refusals raise the package's errors
(`errors.InvalidInput`, `errors.NotFound` …). The instance is thread-safe.

Calls are unscoped (like stdio): writes are attributed to `robot_id`, reads see every robot's
memories. Semantic search is off by default here (``embedder="none"``: keyword search, no model
to load); pass ``embedder="use"`` to load the server's default model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import InvalidInput, StorageError
from robot_mcp_memory.experiences.service import ExperienceService, JsonArg, run_sync
from robot_mcp_memory.experiences.views import (
    EndSessionResult,
    ForgetResult,
    LearnResult,
    MemoryView,
    PerceptionResult,
    RecallResult,
    UpdateResult,
)
from robot_mcp_memory.principal import LOCAL, Principal

_log = logs.get("robot_mcp_memory.api")

#: What a mapping item of `RobotMemory.learn_many` may hold: learn's keyword arguments.
_ITEM_KEYS = frozenset({"insight", "context", "collection", "session_id"})
#: One insight for `RobotMemory.learn_many`: its text, or (text, context), or learn's keyword arguments.
LearnItem = str | tuple[str, JsonArg] | Mapping[str, Any]


class RobotMemory:
    """The experience memory in ``data_dir`` (created if missing), as a synchronous object."""

    def __init__(
        self,
        data_dir: str | Path = "data",
        *,
        robot_id: str = "unknown",
        collection: str = "default",
        embedder: str = "none",
        wait_for_model: float = 60.0,
    ) -> None:
        """With an `embedder`, wait up to `wait_for_model` seconds for its model to load (``0``:
        do not wait), so the first recalls are already hybrid; a model that did not load in time
        (or failed) leaves recall keyword-only until it does, and a warning says so."""
        if not structlog.is_configured():
            logs.configure("warning")  # a library stays quiet unless its host configured logging
        settings = Settings.from_env(
            {"MEMORY_DATA_DIR": str(data_dir), "ROBOT_ID": robot_id, "MEMORY_EMBEDDER": embedder}
        )
        self._memory: Memory | None = Memory.open(settings)
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
        included) — the fast way to load an episode's worth, or a dataset."""
        coll = self._coll(collection)
        # Items in one transaction per (collection, session): a mapping may name its own, as
        # robotmem's batch_learn passes each mapping to learn(**item).
        groups: dict[tuple[str, str | None], list[tuple[int, tuple[str, JsonArg]]]] = {}
        count = 0
        for i, item in enumerate(items):
            count += 1
            key = (coll, session_id)
            if isinstance(item, str):
                pair: tuple[str, JsonArg] = (item, "")
            elif isinstance(item, tuple):
                pair = (item[0], item[1])
            else:
                unknown = set(item) - _ITEM_KEYS
                if unknown or "insight" not in item:
                    raise InvalidInput(
                        f"item {i}: a mapping takes learn's arguments ({', '.join(sorted(_ITEM_KEYS))}), "
                        f"with an insight{'; not ' + ', '.join(sorted(map(str, unknown))) if unknown else ''}"
                    )
                pair = (str(item["insight"]), item.get("context", ""))
                key = (self._coll(item.get("collection") or coll), item.get("session_id", session_id))
            groups.setdefault(key, []).append((i, pair))
        out: list[dict[str, Any]] = [{}] * count
        for (group_coll, group_session), members in groups.items():
            learned = run_sync(
                self._svc.learn_many(self._principal, [p for _, p in members], group_coll, group_session)
            )
            for (i, _), x in zip(members, learned, strict=True):
                out[i] = LearnResult.of(x).model_dump()
        return out

    batch_learn = learn_many  # robotmem's name

    def recall(
        self,
        query: str = "",
        n: int = 5,
        min_confidence: float = 0.3,
        session_id: str | None = None,
        context_filter: JsonArg = None,
        spatial_sort: JsonArg = None,
        collection: str | None = None,
        include_data: bool = False,
    ) -> list[dict[str, Any]]:
        """The most relevant memories, best first (each a dict with ``id``, ``content``,
        ``confidence``, ``score``, ``context`` and its ``params``/``spatial``/``robot``/``task``)."""
        coll = self._coll(collection)
        found = run_sync(
            self._svc.recall(
                self._principal, query, n, coll, min_confidence, session_id, context_filter, spatial_sort, include_data
            )
        )
        return [m.model_dump() for m in RecallResult.of(found, include_data).memories]

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
        return PerceptionResult.of(saved, perception_type, data is not None).model_dump()

    def get(self, memory_id: int) -> dict[str, Any]:
        """One memory by id, whatever its status (`errors.NotFound` if there is none)."""
        self._coll(None)
        return MemoryView.of(run_sync(self._svc.get(self._principal, memory_id))).model_dump()

    def forget(self, memory_id: int, reason: str) -> dict[str, Any]:
        """Soft-delete a memory with a reason. ``{"status": "forgotten", …}``."""
        self._coll(None)
        gone = run_sync(self._svc.forget(self._principal, memory_id, reason))
        return ForgetResult(memory_id=gone.id, content=gone.content[:100], reason=reason.strip()).model_dump()

    def update(self, memory_id: int, new_content: str, context: JsonArg = "") -> dict[str, Any]:
        """Correct a memory's content. ``{"status": "updated", "old_content", "new_content", …}``."""
        self._coll(None)
        return UpdateResult.of(
            run_sync(self._svc.update(self._principal, memory_id, new_content, context))
        ).model_dump()

    # ------------------------------------------------------------------ sessions
    def start_session(self, context: JsonArg = None, collection: str | None = None) -> str:
        """Start an episode; returns its session_id."""
        coll = self._coll(collection)
        return run_sync(self._svc.start_session(self._principal, coll, context)).id

    def end_session(self, session_id: str, outcome_score: float | None = None) -> dict[str, Any]:
        """End an episode: ``{"status": "ended", "summary", "consolidated", "related_memories", …}``."""
        self._coll(None)
        ended = run_sync(self._svc.end_session(self._principal, session_id, outcome_score))
        return EndSessionResult.of(ended).model_dump()

    @contextlib.contextmanager
    def session(self, context: JsonArg = None, collection: str | None = None) -> Iterator[str]:
        """``with mem.session(context=…) as sid:`` — starts an episode and always ends it."""
        sid = self.start_session(context, collection)
        try:
            yield sid
        finally:
            self.end_session(sid)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Wait for pending writes (access counters included) and close the database."""
        if self._closed:
            return
        self._closed = True
        if self._owned and self._memory is not None:
            self._memory.close()

    def __enter__(self) -> RobotMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RobotMemory(collection={self._collection!r}, closed={self._closed})"


__all__ = ["LearnItem", "RobotMemory"]
