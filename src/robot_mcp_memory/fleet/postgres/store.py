"""PostgresFleet: the fleet registry (`FleetRepository`) as rows of a PostgreSQL schema shared by replicas.

Tables (component ``fleet``): ``fleet_groups``, ``fleet_robots`` and ``fleet_settings`` with the
SQLite adapter's columns, and ``fleet_state``, one row whose ``version`` every fleet write bumps.

Invariants:

- **Fleet writes are serialized.** Each write's first statement bumps ``fleet_state.version``
  and so holds that row's lock until it commits: fleet writes from every replica run one at a
  time, as they do on SQLite's single writer, and the membership snapshot rebuilt inside the
  write is exactly the state at that version.
- **The version orders snapshots across replicas.** A snapshot's `generation` is the version it
  was read at; one replaces the installed snapshot only if newer. A background look every
  `REFRESH_S` seconds reads the version and, when another replica moved it, loads the tables in
  one snapshot — so a replica sees another's fleet writes within a look, its own at once.
- **Case twins cannot both exist.** Ids are unique on ``lower(id)`` as well (ids are ASCII, so
  ``lower`` is SQLite's ``NOCASE``): two replicas registering ``RAP-1`` and ``rap-1`` at once
  leave one robot and one `Conflict`.
- **Orders are byte orders** (``COLLATE "C"``), as SQLite's, whatever the database's locale.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from psycopg import errors as pg_errors

from robot_mcp_memory.errors import Conflict, InvalidInput, NotFound
from robot_mcp_memory.fleet.model import MAX_META_BYTES, Group, Robot, Snapshot, SnapshotMembership
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.storage.postgres import Connection, Migration, PostgresStore

T = TypeVar("T")

COMPONENT = "fleet"
GLOBAL_SELF_IMPROVE = "global_self_improve"
#: How often (seconds) a replica looks for fleet writes by another one.
REFRESH_S = 2.0


def _create(conn: Connection) -> None:
    conn.execute(
        """CREATE TABLE fleet_groups (
            group_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            customer TEXT NOT NULL DEFAULT '',
            factory TEXT NOT NULL DEFAULT '',
            self_improve BOOLEAN,  -- NULL: follow the global toggle
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE UNIQUE INDEX fleet_groups_nocase ON fleet_groups (lower(group_id))")
    conn.execute(
        """CREATE TABLE fleet_robots (
            robot_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            group_id TEXT REFERENCES fleet_groups(group_id) ON DELETE SET NULL,  -- NULL: ungrouped
            meta TEXT NOT NULL DEFAULT '{}',
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE UNIQUE INDEX fleet_robots_nocase ON fleet_robots (lower(robot_id))")
    conn.execute("CREATE INDEX fleet_robots_group ON fleet_robots (group_id)")
    conn.execute("CREATE TABLE fleet_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE fleet_state (id SMALLINT PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL DEFAULT 0)")
    conn.execute("INSERT INTO fleet_state(id, version) VALUES (1, 0)")


#: Append-only. Step i brings the fleet tables from version i to version i + 1.
MIGRATIONS: list[Migration] = [_create]


# ---------------------------------------------------------------------------- SQL (connection first)
_ROBOT_COLS = "robot_id, name, group_id, meta, created, updated"
_GROUP_COLS = "group_id, name, customer, factory, self_improve, created, updated"


def _robot(row: tuple[Any, ...]) -> Robot:
    rid, name, gid, meta, created, updated = row
    return Robot(rid, name, gid, json.loads(meta), created, updated)


def _group(row: tuple[Any, ...], robots: tuple[str, ...]) -> Group:
    gid, name, customer, factory, si, created, updated = row
    return Group(gid, name, customer, factory, si, created, updated, robots)


def select_robot(conn: Connection, robot_id: str) -> Robot | None:
    row = conn.execute(f"SELECT {_ROBOT_COLS} FROM fleet_robots WHERE robot_id = %s", (robot_id,)).fetchone()  # noqa: S608 - fixed names
    return _robot(row) if row else None


def select_robots(conn: Connection, group_id: str | None = None) -> list[Robot]:
    if group_id is None:
        rows = conn.execute(f'SELECT {_ROBOT_COLS} FROM fleet_robots ORDER BY robot_id COLLATE "C"')  # noqa: S608
    else:
        rows = conn.execute(
            f'SELECT {_ROBOT_COLS} FROM fleet_robots WHERE group_id = %s ORDER BY robot_id COLLATE "C"',  # noqa: S608
            (group_id,),
        )
    return [_robot(r) for r in rows]


def _members(conn: Connection, group_id: str) -> tuple[str, ...]:
    rows = conn.execute(
        'SELECT robot_id FROM fleet_robots WHERE group_id = %s ORDER BY robot_id COLLATE "C"', (group_id,)
    )
    return tuple(r[0] for r in rows)


def select_group(conn: Connection, group_id: str) -> Group | None:
    row = conn.execute(f"SELECT {_GROUP_COLS} FROM fleet_groups WHERE group_id = %s", (group_id,)).fetchone()  # noqa: S608
    return _group(row, _members(conn, group_id)) if row else None


def select_groups(conn: Connection) -> list[Group]:
    members: dict[str, list[str]] = {}
    for rid, gid in conn.execute(
        'SELECT robot_id, group_id FROM fleet_robots WHERE group_id IS NOT NULL ORDER BY robot_id COLLATE "C"'
    ):
        members.setdefault(gid, []).append(rid)
    rows = conn.execute(f'SELECT {_GROUP_COLS} FROM fleet_groups ORDER BY group_id COLLATE "C"')  # noqa: S608
    return [_group(r, tuple(members.get(r[0], ()))) for r in rows]


def select_global(conn: Connection) -> bool:
    row = conn.execute("SELECT value FROM fleet_settings WHERE key = %s", (GLOBAL_SELF_IMPROVE,)).fetchone()
    return row is not None and row[0] == "1"


def select_version(conn: Connection) -> int:
    row = conn.execute("SELECT version FROM fleet_state WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def load_snapshot(conn: Connection, generation: int) -> Snapshot:
    robot_groups: dict[str, str | None] = {
        r[0]: r[1] for r in conn.execute("SELECT robot_id, group_id FROM fleet_robots")
    }
    settings: dict[str, bool | None] = {
        r[0]: r[1] for r in conn.execute("SELECT group_id, self_improve FROM fleet_groups")
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


def _bump(conn: Connection) -> int:
    """Take the fleet's write lock (the state row) and return the version this write makes."""
    row = conn.execute("UPDATE fleet_state SET version = version + 1 WHERE id = 1 RETURNING version").fetchone()
    assert row is not None  # seeded by the migration
    return int(row[0])


def _refuse_case_twin(conn: Connection, robot_id: str | None = None, group_id: str | None = None) -> None:
    if robot_id is not None:
        row = conn.execute(
            "SELECT robot_id FROM fleet_robots WHERE lower(robot_id) = lower(%s) AND robot_id <> %s",
            (robot_id, robot_id),
        ).fetchone()
        if row:
            raise Conflict(f"robot '{row[0]}' already exists; ids differing only by case name the same robot")
    if group_id is not None:
        row = conn.execute(
            "SELECT group_id FROM fleet_groups WHERE lower(group_id) = lower(%s) AND group_id <> %s",
            (group_id, group_id),
        ).fetchone()
        if row:
            raise Conflict(f"group '{row[0]}' already exists; ids differing only by case name the same group")


def _require_group(conn: Connection, group_id: str) -> None:
    if conn.execute("SELECT 1 FROM fleet_groups WHERE group_id = %s", (group_id,)).fetchone() is None:
        twin = conn.execute(
            "SELECT group_id FROM fleet_groups WHERE lower(group_id) = lower(%s)", (group_id,)
        ).fetchone()
        hint = f"did you mean '{twin[0]}'? " if twin else ""
        raise NotFound(
            f"no group '{group_id}': {hint}create it first with upsert_group(group_id='{group_id}'), "
            "or list_groups to see what exists"
        )


def _require_robot(conn: Connection, robot_id: str) -> Robot:
    robot = select_robot(conn, robot_id)
    if robot is None:
        twin = conn.execute(
            "SELECT robot_id FROM fleet_robots WHERE lower(robot_id) = lower(%s)", (robot_id,)
        ).fetchone()
        hint = f"did you mean '{twin[0]}'? " if twin else ""
        raise NotFound(f"no robot '{robot_id}': {hint}register it first with register_robot, or list_robots")
    return robot


def upsert_robot(
    conn: Connection, robot_id: str, name: str | None, group_id: str | None, now: str
) -> tuple[Robot, bool]:
    """Create or refresh a robot; None leaves the name / group as they are. (robot, created)."""
    _refuse_case_twin(conn, robot_id=robot_id)
    if group_id is not None:
        _require_group(conn, group_id)
    created = conn.execute(
        "INSERT INTO fleet_robots(robot_id, name, group_id, meta, created, updated) VALUES (%s, %s, %s, '{}', %s, %s) "
        "ON CONFLICT (robot_id) DO NOTHING RETURNING robot_id",
        (robot_id, name or "", group_id, now, now),
    ).fetchone()
    if created is None:
        conn.execute(
            "UPDATE fleet_robots SET name = coalesce(%s, name), group_id = coalesce(%s, group_id), updated = %s "
            "WHERE robot_id = %s AND (name IS DISTINCT FROM coalesce(%s, name) "
            "OR group_id IS DISTINCT FROM coalesce(%s, group_id))",
            (name, group_id, now, robot_id, name, group_id),
        )
    return _require_robot(conn, robot_id), created is not None


def update_robot_meta(
    conn: Connection, robot_id: str, name: str | None, meta_patch: Mapping[str, Any] | None, now: str
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
        "UPDATE fleet_robots SET name = coalesce(%s, name), meta = %s, updated = %s WHERE robot_id = %s",
        (name, encoded, now, robot_id),
    )
    return _require_robot(conn, robot_id)


def set_robot_group(conn: Connection, robot_id: str, group_id: str | None, now: str) -> tuple[Robot, str | None]:
    robot = _require_robot(conn, robot_id)
    if group_id is not None:
        _require_group(conn, group_id)
    if group_id != robot.group_id:
        conn.execute(
            "UPDATE fleet_robots SET group_id = %s, updated = %s WHERE robot_id = %s", (group_id, now, robot_id)
        )
    return _require_robot(conn, robot_id), robot.group_id


def upsert_group(
    conn: Connection,
    group_id: str,
    name: str | None,
    customer: str | None,
    factory: str | None,
    self_improve: bool | None,
    now: str,
) -> tuple[Group, bool]:
    """Create or update a group; None leaves a field as it is. (group, created)."""
    _refuse_case_twin(conn, group_id=group_id)
    created = conn.execute(
        "INSERT INTO fleet_groups(group_id, name, customer, factory, self_improve, created, updated) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (group_id) DO NOTHING RETURNING group_id",
        (group_id, name or "", customer or "", factory or "", self_improve, now, now),
    ).fetchone()
    if created is None:
        conn.execute(
            "UPDATE fleet_groups SET name = coalesce(%(name)s, name), "
            "customer = coalesce(%(customer)s, customer), factory = coalesce(%(factory)s, factory), "
            "self_improve = coalesce(%(si)s, self_improve), updated = %(now)s "
            "WHERE group_id = %(gid)s AND (name, customer, factory, self_improve) IS DISTINCT FROM "
            "(coalesce(%(name)s, name), coalesce(%(customer)s, customer), coalesce(%(factory)s, factory), "
            "coalesce(%(si)s, self_improve))",
            {"name": name, "customer": customer, "factory": factory, "si": self_improve, "now": now, "gid": group_id},
        )
    group = select_group(conn, group_id)
    assert group is not None  # written above, in this transaction
    return group, created is not None


def delete_group(conn: Connection, group_id: str, now: str) -> tuple[Group, tuple[str, ...]]:
    group = select_group(conn, group_id)
    if group is None:
        raise NotFound(f"no group '{group_id}'; list_groups shows what exists")
    conn.execute("UPDATE fleet_robots SET group_id = NULL, updated = %s WHERE group_id = %s", (now, group_id))
    conn.execute("DELETE FROM fleet_groups WHERE group_id = %s", (group_id,))
    return group, group.robots


def set_group_self_improve(conn: Connection, group_id: str, enabled: bool | None, now: str) -> Group:
    _require_group(conn, group_id)
    conn.execute(
        "UPDATE fleet_groups SET self_improve = %s, updated = %s WHERE group_id = %s", (enabled, now, group_id)
    )
    group = select_group(conn, group_id)
    assert group is not None  # checked above, in this transaction
    return group


def set_global_self_improve(conn: Connection, enabled: bool) -> bool:
    conn.execute(
        "INSERT INTO fleet_settings(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (GLOBAL_SELF_IMPROVE, "1" if enabled else "0"),
    )
    return enabled


# ---------------------------------------------------------------------------- the registry
class PostgresFleet(SnapshotMembership):
    """Async façade over the SQL above, plus the membership snapshot (implements `FleetRepository`)."""

    def __init__(self, db: PostgresStore, refresh_s: float = REFRESH_S) -> None:
        self.db = db
        db.migrate(COMPONENT, MIGRATIONS)
        self._swap = threading.Lock()  # installing a snapshot: this replica's writes vs the look
        self._snap: Snapshot = db.read_blocking(lambda c: load_snapshot(c, select_version(c)))
        self._stop = threading.Event()
        self._refresher = threading.Thread(
            target=self._refresh_loop, args=(refresh_s,), name="fleet-refresh-pg", daemon=True
        )
        self._refresher.start()

    def close(self) -> None:
        self._stop.set()
        self._refresher.join(5)

    def _refresh_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.refresh()
            except Exception:  # the database unreachable for a moment: the next look tries again
                continue

    def refresh(self) -> bool:
        """Install what the tables say now if another replica wrote since our snapshot; True if it did."""
        current = self._snap.generation

        def read(c: Connection) -> Snapshot | None:
            version = select_version(c)
            return load_snapshot(c, version) if version > current else None

        snap = self.db.read_blocking(read)
        return snap is not None and self._install(snap)

    def _install(self, snap: Snapshot) -> bool:
        with self._swap:
            if snap.generation > self._snap.generation:
                self._snap = snap
                return True
            return False

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

    async def _write(self, fn: Callable[[Connection], T]) -> T:
        """Run a fleet write under the fleet's lock and install the snapshot rebuilt in its
        transaction once it commits — even when the awaiting caller was cancelled."""

        def job(conn: Connection) -> tuple[T, Snapshot]:
            version = _bump(conn)
            try:
                result = fn(conn)
            except pg_errors.UniqueViolation as exc:  # a case twin committed by another replica meanwhile
                raise Conflict("that id already exists (ids differing only by case name the same one)") from exc
            return result, load_snapshot(conn, version)

        task = asyncio.ensure_future(self.db.write(job))
        task.add_done_callback(self._installed)
        result, snap = await asyncio.shield(task)
        self._install(snap)
        return result

    def _installed(self, task: asyncio.Future[tuple[Any, Snapshot]]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._install(task.result()[1])


__all__ = ["COMPONENT", "MIGRATIONS", "PostgresFleet", "load_snapshot"]
