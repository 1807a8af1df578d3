"""FleetRegistry: robots, groups and the self-improvement switches, as rows of index.db.

Tables (declared in `db`, all ``definition``): ``fleet_robots`` (robot_id, name, group_id, meta,
created, updated), ``fleet_groups`` (group_id, name, customer, factory, self_improve, created,
updated) and ``fleet_settings`` (``global_self_improve``).

The registry is the fleet's single source of truth and the one central server is how it
propagates: every write goes through this object, on the store's writer thread. The policy asks
`group_mates` on **every** read, so membership is answered from an in-process `Snapshot` that is
rebuilt inside the same transaction as each fleet write and installed as soon as it commits —
a regrouping is visible to the very next call of every client, and no read touches SQLite.
Another process on the same data directory (``web`` beside ``serve``, a second server, the CLI)
writes the same tables: a background thread looks every `REFRESH_S` seconds whether anyone
committed (``PRAGMA data_version``) and, if the tables now say something else, installs them —
unless a write of this process installed a newer snapshot meanwhile.

Ids (robots and groups): 1-64 characters of letters, digits, ``_``, ``.``, ``-``, starting with a
letter or digit — the robot grammar of ``MEMORY_ROBOT_TOKENS``, so every token's robot can register.
Ids are exact (case-preserving, as tokens and document provenance are), but an id that differs
from an existing one only by case is refused as a conflict, so ``RAP-1`` and ``rap-1`` never
become two robots. ``shared`` (fleet-wide documents) and ``unknown`` (no provenance) are reserved
robot ids.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from robot_mcp_memory.errors import Conflict, InvalidInput, NotFound
from robot_mcp_memory.fleet.model import (
    ID_RULE,
    MAX_META_BYTES,
    Group,
    Robot,
    Snapshot,
    SnapshotMembership,
    check_group_id,
    check_robot_id,
)
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.storage.sqlite.store import now_iso

T = TypeVar("T")

GLOBAL_SELF_IMPROVE = "global_self_improve"


# ---------------------------------------------------------------------------- SQL (connection first)
_ROBOT_COLS = "robot_id, name, group_id, meta, created, updated"
_GROUP_COLS = "group_id, name, customer, factory, self_improve, created, updated"


def _robot(row: tuple[Any, ...]) -> Robot:
    rid, name, gid, meta, created, updated = row
    return Robot(rid, name, gid, json.loads(meta), created, updated)


def _group(row: tuple[Any, ...], robots: tuple[str, ...]) -> Group:
    gid, name, customer, factory, si, created, updated = row
    return Group(gid, name, customer, factory, None if si is None else bool(si), created, updated, robots)


def select_robot(conn: sqlite3.Connection, robot_id: str) -> Robot | None:
    row = conn.execute(f"SELECT {_ROBOT_COLS} FROM fleet_robots WHERE robot_id = ?", (robot_id,)).fetchone()  # noqa: S608
    return _robot(row) if row else None


def select_robots(conn: sqlite3.Connection, group_id: str | None = None) -> list[Robot]:
    """Every robot (`group_id` None) or the robots of one group, by id."""
    if group_id is None:
        rows = conn.execute(f"SELECT {_ROBOT_COLS} FROM fleet_robots ORDER BY robot_id")  # noqa: S608
    else:
        rows = conn.execute(
            f"SELECT {_ROBOT_COLS} FROM fleet_robots WHERE group_id = ? ORDER BY robot_id",  # noqa: S608
            (group_id,),
        )
    return [_robot(r) for r in rows]


def _members(conn: sqlite3.Connection, group_id: str) -> tuple[str, ...]:
    rows = conn.execute("SELECT robot_id FROM fleet_robots WHERE group_id = ? ORDER BY robot_id", (group_id,))
    return tuple(r[0] for r in rows)


def select_group(conn: sqlite3.Connection, group_id: str) -> Group | None:
    row = conn.execute(f"SELECT {_GROUP_COLS} FROM fleet_groups WHERE group_id = ?", (group_id,)).fetchone()  # noqa: S608
    return _group(row, _members(conn, group_id)) if row else None


def select_groups(conn: sqlite3.Connection) -> list[Group]:
    members: dict[str, list[str]] = {}
    for rid, gid in conn.execute(
        "SELECT robot_id, group_id FROM fleet_robots WHERE group_id IS NOT NULL ORDER BY robot_id"
    ):
        members.setdefault(gid, []).append(rid)
    rows = conn.execute(f"SELECT {_GROUP_COLS} FROM fleet_groups ORDER BY group_id")  # noqa: S608
    return [_group(r, tuple(members.get(r[0], ()))) for r in rows]


def select_global(conn: sqlite3.Connection) -> bool:
    """The global toggle; off when nobody ever switched it on."""
    row = conn.execute("SELECT value FROM fleet_settings WHERE key = ?", (GLOBAL_SELF_IMPROVE,)).fetchone()
    return bool(row) and row[0] == "1"


def load_snapshot(conn: sqlite3.Connection, generation: int) -> Snapshot:
    robot_groups: dict[str, str | None] = dict(conn.execute("SELECT robot_id, group_id FROM fleet_robots"))
    settings = {
        gid: None if si is None else bool(si)
        for gid, si in conn.execute("SELECT group_id, self_improve FROM fleet_groups")
    }
    members: dict[str, set[str]] = {}
    for rid, gid in robot_groups.items():
        if gid is not None:
            members.setdefault(gid, set()).add(rid)
    return Snapshot(
        generation=generation,
        robot_groups=robot_groups,
        group_settings=settings,
        members={g: frozenset(m) for g, m in members.items()},
        global_self_improve=select_global(conn),
    )


def _refuse_case_twin(conn: sqlite3.Connection, robot_id: str | None = None, group_id: str | None = None) -> None:
    """An id equal to an existing one but for case is a conflict, not a second robot/group."""
    if robot_id is not None:
        row = conn.execute(
            "SELECT robot_id FROM fleet_robots WHERE robot_id = ? COLLATE NOCASE AND robot_id != ?",
            (robot_id, robot_id),
        ).fetchone()
        if row:
            raise Conflict(f"robot '{row[0]}' already exists; ids differing only by case name the same robot")
    if group_id is not None:
        row = conn.execute(
            "SELECT group_id FROM fleet_groups WHERE group_id = ? COLLATE NOCASE AND group_id != ?",
            (group_id, group_id),
        ).fetchone()
        if row:
            raise Conflict(f"group '{row[0]}' already exists; ids differing only by case name the same group")


def _require_group(conn: sqlite3.Connection, group_id: str) -> None:
    if conn.execute("SELECT 1 FROM fleet_groups WHERE group_id = ?", (group_id,)).fetchone() is None:
        twin = conn.execute(
            "SELECT group_id FROM fleet_groups WHERE group_id = ? COLLATE NOCASE", (group_id,)
        ).fetchone()
        hint = f"did you mean '{twin[0]}'? " if twin else ""
        raise NotFound(
            f"no group '{group_id}': {hint}create it first with upsert_group(group_id='{group_id}'), "
            "or list_groups to see what exists"
        )


def _require_robot(conn: sqlite3.Connection, robot_id: str) -> Robot:
    robot = select_robot(conn, robot_id)
    if robot is None:
        twin = conn.execute(
            "SELECT robot_id FROM fleet_robots WHERE robot_id = ? COLLATE NOCASE", (robot_id,)
        ).fetchone()
        hint = f"did you mean '{twin[0]}'? " if twin else ""
        raise NotFound(f"no robot '{robot_id}': {hint}register it first with register_robot, or list_robots")
    return robot


def upsert_robot(
    conn: sqlite3.Connection, robot_id: str, name: str | None, group_id: str | None, now: str
) -> tuple[Robot, bool]:
    """Create or refresh a robot. None leaves the name / group as they are (a new robot starts
    unnamed and ungrouped). Returns the robot and whether it was created."""
    _refuse_case_twin(conn, robot_id=robot_id)
    if group_id is not None:
        _require_group(conn, group_id)
    existing = select_robot(conn, robot_id)
    if existing is None:
        conn.execute(
            "INSERT INTO fleet_robots(robot_id, name, group_id, meta, created, updated) VALUES (?,?,?,?,?,?)",
            (robot_id, name or "", group_id, "{}", now, now),
        )
    elif (name is not None and name != existing.name) or (group_id is not None and group_id != existing.group_id):
        conn.execute(
            "UPDATE fleet_robots SET name = coalesce(?, name), group_id = coalesce(?, group_id), updated = ? "
            "WHERE robot_id = ?",
            (name, group_id, now, robot_id),
        )
    return _require_robot(conn, robot_id), existing is None


def update_robot_meta(
    conn: sqlite3.Connection, robot_id: str, name: str | None, meta_patch: Mapping[str, Any] | None, now: str
) -> Robot:
    """Rename and/or merge `meta_patch` into the robot's meta (a key set to None is removed)."""
    robot = _require_robot(conn, robot_id)
    meta = dict(robot.meta)
    for key, value in (meta_patch or {}).items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    encoded = json.dumps(meta, ensure_ascii=False, sort_keys=True)
    if len(encoded.encode()) > MAX_META_BYTES:
        raise InvalidInput(f"meta would grow past {MAX_META_BYTES} bytes; remove keys (set them to null) first")
    if name is None and meta == robot.meta:
        return robot
    conn.execute(
        "UPDATE fleet_robots SET name = coalesce(?, name), meta = ?, updated = ? WHERE robot_id = ?",
        (name, encoded, now, robot_id),
    )
    return _require_robot(conn, robot_id)


def set_robot_group(
    conn: sqlite3.Connection, robot_id: str, group_id: str | None, now: str
) -> tuple[Robot, str | None]:
    """Move a robot into a group (None: ungroup). Returns the robot and its previous group."""
    robot = _require_robot(conn, robot_id)
    if group_id is not None:
        _require_group(conn, group_id)
    if group_id != robot.group_id:
        conn.execute("UPDATE fleet_robots SET group_id = ?, updated = ? WHERE robot_id = ?", (group_id, now, robot_id))
    return _require_robot(conn, robot_id), robot.group_id


def upsert_group(
    conn: sqlite3.Connection,
    group_id: str,
    name: str | None,
    customer: str | None,
    factory: str | None,
    self_improve: bool | None,
    now: str,
) -> tuple[Group, bool]:
    """Create or update a group. None leaves a field as it is (on creation: empty, and
    self_improve follows the global toggle). Returns the group and whether it was created."""
    _refuse_case_twin(conn, group_id=group_id)
    existing = select_group(conn, group_id)
    si = None if self_improve is None else int(self_improve)
    if existing is None:
        conn.execute(
            "INSERT INTO fleet_groups(group_id, name, customer, factory, self_improve, created, updated) "
            "VALUES (?,?,?,?,?,?,?)",
            (group_id, name or "", customer or "", factory or "", si, now, now),
        )
    else:
        wanted = (
            existing.name if name is None else name,
            existing.customer if customer is None else customer,
            existing.factory if factory is None else factory,
            existing.self_improve if self_improve is None else self_improve,
        )
        if wanted != (existing.name, existing.customer, existing.factory, existing.self_improve):
            conn.execute(
                "UPDATE fleet_groups SET name = coalesce(?, name), customer = coalesce(?, customer), "
                "factory = coalesce(?, factory), self_improve = coalesce(?, self_improve), updated = ? "
                "WHERE group_id = ?",
                (name, customer, factory, si, now, group_id),
            )
    group = select_group(conn, group_id)
    assert group is not None  # written above, in this transaction
    return group, existing is None


def delete_group(conn: sqlite3.Connection, group_id: str, now: str) -> tuple[Group, tuple[str, ...]]:
    """Delete a group and ungroup its robots (returned). Lessons live elsewhere and are untouched."""
    group = select_group(conn, group_id)
    if group is None:
        raise NotFound(f"no group '{group_id}'; list_groups shows what exists")
    conn.execute("UPDATE fleet_robots SET group_id = NULL, updated = ? WHERE group_id = ?", (now, group_id))
    conn.execute("DELETE FROM fleet_groups WHERE group_id = ?", (group_id,))
    return group, group.robots


def set_group_self_improve(conn: sqlite3.Connection, group_id: str, enabled: bool | None, now: str) -> Group:
    """Set a group's own switch; None makes it follow the global toggle again."""
    _require_group(conn, group_id)
    conn.execute(
        "UPDATE fleet_groups SET self_improve = ?, updated = ? WHERE group_id = ?",
        (None if enabled is None else int(enabled), now, group_id),
    )
    group = select_group(conn, group_id)
    assert group is not None  # checked above, in this transaction
    return group


def set_global_self_improve(conn: sqlite3.Connection, enabled: bool) -> bool:
    conn.execute(
        "INSERT INTO fleet_settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (GLOBAL_SELF_IMPROVE, "1" if enabled else "0"),
    )
    return enabled


# ---------------------------------------------------------------------------- the registry
#: How often (seconds) the registry looks for fleet writes by another process on its data directory.
REFRESH_S = 2.0


class FleetRegistry(SnapshotMembership):
    """Async façade over the SQL above, plus the membership snapshot (implements `Membership`)."""

    def __init__(self, db: SqliteStore, refresh_s: float = REFRESH_S) -> None:
        self.db = db
        self._generations = itertools.count(1)  # advanced only under the store's write lock
        self._swap = threading.Lock()  # installing a snapshot: this process's writes vs the refresher
        self._snap: Snapshot = db.read_blocking(lambda c: load_snapshot(c, 0))
        self._stop = threading.Event()
        self._refresher = threading.Thread(
            target=self._refresh_loop, args=(refresh_s,), name="fleet-refresh", daemon=True
        )
        self._refresher.start()

    def close(self) -> None:
        """Stop looking for other processes' fleet writes."""
        self._stop.set()
        self._refresher.join(5)

    def _refresh_loop(self, every: float) -> None:
        seen: int | None = None
        while not self._stop.wait(every):
            try:
                seen = self.refresh(seen)
            except Exception:  # a closed or unreadable store: the next look tries again
                seen = None

    def refresh(self, seen: int | None = None) -> int:
        """Install what the tables say now if another process changed them: ``seen`` is the
        ``data_version`` of the last look (None: look anyway). Returns this look's version."""
        before = self._snap.generation

        def read(c: sqlite3.Connection) -> tuple[int, Snapshot | None]:
            version = int(c.execute("PRAGMA data_version").fetchone()[0])
            return version, None if version == seen else load_snapshot(c, before)

        version, snap = self.db.read_blocking(read)
        if snap is not None:
            with self._swap:
                current = self._snap
                if current.generation != before:
                    # A write of ours installed a snapshot meanwhile; it may predate what this
                    # look read from another process: keep it, and look again next time.
                    return seen if seen is not None else -1
                if _membership(current) != _membership(snap):
                    self._snap = snap
        return version

    # ------------------------------------------------- membership (`SnapshotMembership` answers from it)
    @property
    def snapshot(self) -> Snapshot:
        return self._snap

    # ------------------------------------------------------------------ reads
    async def find_robot(self, robot_id: str) -> Robot | None:
        return await self.db.read(lambda c: select_robot(c, robot_id))

    async def robots(self, group_id: str | None = None) -> list[Robot]:
        return await self.db.read(lambda c: select_robots(c, group_id))

    async def find_group(self, group_id: str) -> Group | None:
        return await self.db.read(lambda c: select_group(c, group_id))

    async def groups(self) -> list[Group]:
        return await self.db.read(select_groups)

    # ------------------------------------------------------------------ writes
    async def register_robot(self, robot_id: str, name: str | None, group_id: str | None) -> tuple[Robot, bool]:
        now = now_iso()
        return await self._write(lambda c: upsert_robot(c, robot_id, name, group_id, now))

    async def set_robot_meta(self, robot_id: str, name: str | None, meta: Mapping[str, Any] | None) -> Robot:
        now = now_iso()
        return await self._write(lambda c: update_robot_meta(c, robot_id, name, meta, now))

    async def set_group(self, robot_id: str, group_id: str | None) -> tuple[Robot, str | None]:
        now = now_iso()
        return await self._write(lambda c: set_robot_group(c, robot_id, group_id, now))

    async def upsert_group(
        self,
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
        self_improve: bool | None = None,
    ) -> tuple[Group, bool]:
        now = now_iso()
        return await self._write(lambda c: upsert_group(c, group_id, name, customer, factory, self_improve, now))

    async def delete_group(self, group_id: str) -> tuple[Group, tuple[str, ...]]:
        now = now_iso()
        return await self._write(lambda c: delete_group(c, group_id, now))

    async def set_group_self_improve(self, group_id: str, enabled: bool | None) -> Group:
        now = now_iso()
        return await self._write(lambda c: set_group_self_improve(c, group_id, enabled, now))

    async def set_global_self_improve(self, enabled: bool) -> bool:
        return await self._write(lambda c: set_global_self_improve(c, enabled))

    async def reload(self) -> None:
        """Re-read the membership from the tables (after rows arrived another way: a load)."""
        await self._write(lambda _c: None)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a fleet write and install the snapshot rebuilt in its transaction once it commits —
        even when the awaiting caller was cancelled (the write commits regardless)."""

        def job(conn: sqlite3.Connection) -> tuple[T, Snapshot]:
            result = fn(conn)
            return result, load_snapshot(conn, next(self._generations))

        task = asyncio.ensure_future(self.db.write(job))
        task.add_done_callback(self._installed)
        result, snap = await asyncio.shield(task)
        self._install(snap)
        return result

    def _installed(self, task: asyncio.Future[tuple[Any, Snapshot]]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._install(task.result()[1])

    def _install(self, snap: Snapshot) -> None:
        with self._swap:
            if snap.generation > self._snap.generation:
                self._snap = snap


def _membership(s: Snapshot) -> tuple[Any, ...]:
    return (s.robot_groups, s.group_settings, s.members, s.global_self_improve)


__all__ = [
    "ID_RULE",
    "FleetRegistry",
    "Group",
    "Robot",
    "Snapshot",
    "check_group_id",
    "check_robot_id",
]
