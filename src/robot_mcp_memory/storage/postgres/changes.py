"""The change feed: what changed in the shared tables, for replicas that keep caches of them.

Several replicas share one PostgreSQL and each keeps in-memory indexes built from its tables. A
writer records each change it makes (`ChangeFeed.record`, on the caller's connection, so the entry
commits or rolls back with the change); a reader patches its cache from `ChangeFeed.since`, run in
its own snapshot. The feed knows no domain: a component (a domain adapter's cache) names its
entries and decides what a ``ref`` and an ``op`` mean.

Why not a sequence: a ``bigserial`` is drawn when a row is inserted, not when its transaction
commits, so a later value can become visible before an earlier one and a reader that resumes after
the highest value it saw skips the earlier one for good. The feed's cursor is a **snapshot**
instead, and each entry carries its writer's transaction id (``xid8``, ``pg_current_xact_id()``).

The invariant. A snapshot S is PostgreSQL's ``pg_current_snapshot()``: ``xmin`` (every
transaction below it had finished when S was taken), ``xmax`` (none at or above it had) and the
``xip`` list (those between that were still in progress). A transaction id x is visible in S
exactly when ``x < xmax`` and x is not in ``xip`` (``pg_visible_in_snapshot``); an entry is visible
in S when its writer committed and is visible in S. A read in snapshot S' with cursor C (the
snapshot of the previous read) returns precisely the entries visible in S' whose writer is not
visible in C — ``writer_xid >= C.xmin AND NOT pg_visible_in_snapshot(writer_xid, C)`` — and S' is
the next cursor. Because a later snapshot sees everything an earlier one saw, the reads of one
cursor chain partition the committed entries: each is returned by exactly one read (the first
whose snapshot sees its writer), none twice, none never; a rolled-back entry by none; an entry
whose writer was in progress at a read is returned by the first later read that sees it commit.

What the invariant needs:

- **The reader's own snapshot.** `since` runs in a ``REPEATABLE READ`` transaction (the store's
  `read`; it refuses anything weaker), so the entries, the cursor and every other read the caller
  makes in that transaction (the rows the entries name) describe one state.
- **One server per cursor chain.** Successive reads of one cursor go to the same server (the
  primary, or one standby): snapshots are ordered in time only on one server.
- **Order.** Batches are in commit order (an entry of a later batch committed after every entry
  of an earlier one). Within a batch entries are in insertion order (``id``); two transactions
  that change one row serialize on its lock, so when each records its entry after taking the
  lock, the later writer's entry is later. Safest: treat an entry as "ref changed" and read the
  ref's state in the same snapshot; the payload is the writer's hint.
- **Pruning never loses silently.** `prune` deletes the entries every registered reader has
  passed (a reader registers the cursors it has applied with `acknowledge`) and those older than
  a horizon, and in the same transaction raises the component's watermark to the largest writer
  id it deleted and records itself as the last prune. A prune visible in cursor C deleted only
  entries committed before it, so visible in C: it cost C nothing. When the last prune is not
  visible in C and the watermark is not below C's ``xmin`` (everything below ``xmin`` C had
  already been returned), an entry C needs may be gone, so the read returns `Reload` — the
  reader rebuilds its cache in that same snapshot and continues from `Reload.cursor`, which sees
  that prune — never a partial batch (`ChangeFeed.prune` argues it case by case). A
  registration not refreshed within the horizon is forgotten, so a replica that died does not
  hold the log forever.
- **Wake-ups are a hint.** `record` also sends a ``NOTIFY`` (delivered at commit) and `Listener`
  waits for one, so a replica may read early; a reader that polls on a timeout alone misses
  nothing, and a lost notification costs one poll interval.

Tables (component ``changes`` of `PostgresStore.migrate`, applied under its advisory lock):
``change_log`` (the entries), ``change_readers`` (each reader's acknowledged position) and
``change_pruned`` (each component's watermark and its last prune). SQL binds every value and uses no server-side
prepared statement (the store's pool turns them off), so it runs behind PgBouncer; `Listener`
alone holds session state (``LISTEN``) and needs a direct connection.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from robot_mcp_memory import logs
from robot_mcp_memory.errors import InvalidInput, StorageError
from robot_mcp_memory.storage.postgres.engine import Connection, Migrated, Migration, PostgresStore

_log = logs.get("robot_mcp_memory.storage.postgres.changes")

#: The component whose migrations create the feed's tables.
COMPONENT = "changes"
#: The one channel every feed notifies on; the payload is ``<schema>.<component>``.
CHANNEL = "robot_memory_changes"
#: Isolation levels whose snapshot lasts the whole transaction.
_SNAPSHOT_LEVELS = frozenset({"repeatable read", "serializable"})


def _create(conn: Connection) -> None:
    conn.execute(
        "CREATE TABLE change_log ("
        " id BIGSERIAL PRIMARY KEY,"
        " component TEXT NOT NULL,"
        " ref TEXT NOT NULL,"
        " op TEXT NOT NULL,"
        " writer_xid XID8 NOT NULL,"
        " written_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
        " payload JSONB)"
    )
    conn.execute("CREATE INDEX change_log_by_writer ON change_log (component, writer_xid)")
    conn.execute("CREATE INDEX change_log_by_age ON change_log (component, written_at)")
    conn.execute(
        "CREATE TABLE change_readers ("
        " component TEXT NOT NULL,"
        " reader TEXT NOT NULL,"
        " passed XID8 NOT NULL,"
        " seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),"
        " PRIMARY KEY (component, reader))"
    )
    conn.execute(
        "CREATE TABLE change_pruned (component TEXT PRIMARY KEY, through XID8 NOT NULL, pruned_by XID8 NOT NULL)"
    )


#: Append-only: a new step goes at the end, an applied one never changes.
MIGRATIONS: tuple[Migration, ...] = (_create,)


def migrate(store: PostgresStore) -> Migrated:
    """Create or bring up to date the feed's tables in `store`'s schema."""
    return store.migrate(COMPONENT, MIGRATIONS)


def create_record_trigger(
    conn: Connection, component: str, table: str, ref: str, columns: Sequence[str], *, name: str
) -> None:
    """A row trigger on `table` that records `component`'s entries as `ChangeFeed.record` does, in
    the writing transaction, whichever code writes: the row's `ref` column as ``put`` on an insert
    and on an update that sets one of `columns`, as ``delete`` on a delete (and the old `ref` on
    an update that changes it). After the row's change, so under its lock (the order `record`
    asks for). No ``NOTIFY``: a reader that polls misses nothing (`Listener` is a hint). The
    function is bound to the migration's ``search_path`` (the store's schema); `name` names both
    it and the trigger (a migration step; not idempotent)."""
    if not component or "\x00" in component:
        raise InvalidInput("a change-feed component is a non-empty name")
    ident, col = sql.Identifier(name), sql.Identifier(ref)
    conn.execute(
        sql.SQL(
            "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $body$ "
            "BEGIN "
            "IF TG_OP <> 'DELETE' THEN INSERT INTO change_log (component, ref, op, writer_xid) "
            "VALUES ({component}, NEW.{col}, 'put', pg_current_xact_id()); END IF; "
            "IF TG_OP = 'DELETE' THEN INSERT INTO change_log (component, ref, op, writer_xid) "
            "VALUES ({component}, OLD.{col}, 'delete', pg_current_xact_id()); "
            "ELSIF TG_OP = 'UPDATE' THEN IF OLD.{col} IS DISTINCT FROM NEW.{col} THEN "
            "INSERT INTO change_log (component, ref, op, writer_xid) "
            "VALUES ({component}, OLD.{col}, 'delete', pg_current_xact_id()); END IF; END IF; "
            "RETURN NULL; END $body$"
        ).format(fn=ident, component=sql.Literal(component), col=col)
    )
    conn.execute(
        sql.SQL(
            "CREATE TRIGGER {name} AFTER INSERT OR DELETE OR UPDATE OF {columns} ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION {fn}()"
        ).format(
            name=ident,
            columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
            table=sql.Identifier(table),
            fn=ident,
        )
    )


@dataclass(frozen=True)
class Cursor:
    """A reader's position: the snapshot of its last read (``pg_snapshot``'s fields).

    Every entry whose writer is visible here has been returned; no other has.
    """

    xmin: int
    xmax: int
    xip: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """From ``pg_snapshot``'s text form, ``xmin:xmax:xip1,xip2,…``."""
        try:
            low, high, running = text.split(":")
            cursor = cls(int(low), int(high), tuple(int(x) for x in running.split(",") if x))
        except ValueError as exc:
            raise InvalidInput(f"not a change-feed cursor: {text[:80]!r}") from exc
        if not (cursor.xmin <= cursor.xmax and all(cursor.xmin <= x < cursor.xmax for x in cursor.xip)):
            raise InvalidInput(f"not a change-feed cursor: {text[:80]!r}")
        return cursor

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(map(str, self.xip))}"

    def sees(self, xid: int) -> bool:
        """Whether transaction `xid` is visible in this snapshot (as ``pg_visible_in_snapshot``)."""
        return xid < self.xmax and xid not in self.xip

    def includes(self, other: Cursor) -> bool:
        """Whether every transaction visible in `other` is visible here too: this snapshot is
        `other`'s or a later one (on the same server). A cache brought to `other` describes a
        state this snapshot has passed only then."""
        running = set(other.xip)
        return self.xmax >= other.xmax and all(x in running for x in self.xip if x < other.xmax)


@dataclass(frozen=True)
class Change:
    """One entry: `ref` of `component` was changed (`op`) by transaction `xid`."""

    id: int
    component: str
    ref: str
    op: str
    xid: int
    payload: Any


class Batch(NamedTuple):
    """What a read returned: the entries new to this cursor, and the cursor to read from next."""

    entries: tuple[Change, ...]
    cursor: Cursor


@dataclass(frozen=True)
class Reload:
    """Entries this cursor had not been returned were pruned: rebuild the cache in full in the
    same snapshot as this read, then continue from `cursor` (that snapshot)."""

    cursor: Cursor
    pruned_through: int


@dataclass(frozen=True)
class Pruned:
    """What `prune` did: entries deleted, stale registrations forgotten, the watermark after it."""

    deleted: int
    forgotten: int
    through: int | None


# One statement, so the snapshot it reports is the one its scan used.
_SINCE = (
    "SELECT pg_current_snapshot()::text, current_setting('transaction_isolation'), h.through::text,"
    " pg_visible_in_snapshot(h.pruned_by, %(cursor)s::pg_snapshot), c.id, c.ref, c.op, c.writer_xid::text, c.payload"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN change_pruned AS h ON h.component = %(component)s"
    " LEFT JOIN change_log AS c ON c.component = %(component)s"
    "  AND c.writer_xid >= %(xmin)s::xid8"
    "  AND NOT pg_visible_in_snapshot(c.writer_xid, %(cursor)s::pg_snapshot)"
    " ORDER BY c.id"
)
_START = "SELECT pg_current_snapshot()::text, current_setting('transaction_isolation')"


def _snapshot(text: str, isolation: str) -> Cursor:
    if isolation not in _SNAPSHOT_LEVELS:
        raise StorageError(
            "a change-feed read must run in a REPEATABLE READ transaction (PostgresStore.read), "
            f"not {isolation!r}: the cursor must describe the snapshot the caller reads in"
        )
    return Cursor.parse(text)


@dataclass(frozen=True)
class ChangeFeed:
    """One component's entries in the change log (the tables are `migrate`'s)."""

    component: str

    def __post_init__(self) -> None:
        if not self.component or "\x00" in self.component:
            raise InvalidInput("a change-feed component is a non-empty name")

    # ------------------------------------------------------------------ writing
    def record(self, conn: Connection, ref: str, op: str, payload: Any = None, *, notify: bool = True) -> None:
        """Record that `ref` changed, in the caller's transaction on `conn` (it commits or rolls
        back with the change). Record after taking the lock on what changed, so two writers of one
        row record in the order they commit. `notify` wakes listeners at commit."""
        self.record_many(conn, [(ref, op, payload)], notify=notify)

    def record_many(self, conn: Connection, entries: Sequence[tuple[str, str, Any]], *, notify: bool = True) -> None:
        """`record` for several (ref, op, payload) at once, in order."""
        if not entries:
            return
        for ref, op, _ in entries:
            if not op or "\x00" in ref or "\x00" in op:
                raise InvalidInput("a change-feed entry needs an op, and no U+0000 in its ref or op")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO change_log (component, ref, op, writer_xid, payload)"
                " VALUES (%s, %s, %s, pg_current_xact_id(), %s)",
                [
                    (self.component, ref, op, None if payload is None else Jsonb(payload))
                    for ref, op, payload in entries
                ],
            )
        if notify:
            conn.execute("SELECT pg_notify(%s, current_schema() || '.' || %s)", (CHANNEL, self.component))

    # ------------------------------------------------------------------ reading
    def start(self, conn: Connection) -> Cursor:
        """The cursor of the caller's snapshot: call it in the transaction that loads the cache in
        full, and the next `since` returns exactly what that load did not see."""
        text, isolation = conn.execute(_START).fetchone() or ("", "")
        return _snapshot(text, isolation)

    def since(self, cursor: Cursor, conn: Connection) -> Batch | Reload:
        """Every entry committed and visible in the caller's snapshot that no read before it on
        this cursor chain returned, exactly once (the module docstring); or `Reload` when the
        pruning removed one it had not returned."""
        rows = conn.execute(
            _SINCE, {"component": self.component, "xmin": str(cursor.xmin), "cursor": str(cursor)}
        ).fetchall()
        if not rows:
            raise StorageError("the change-feed read returned no row")  # the outer row is always there
        now = _snapshot(rows[0][0], rows[0][1])
        through, prune_seen = rows[0][2], rows[0][3]
        if through is not None and not prune_seen and int(through) >= cursor.xmin:
            return Reload(now, int(through))
        entries = tuple(
            Change(int(id_), self.component, ref, op, int(xid), payload)
            for _, _, _, _, id_, ref, op, xid, payload in rows
            if id_ is not None
        )
        return Batch(entries, now)

    # ------------------------------------------------------------------ pruning
    def acknowledge(self, conn: Connection, reader: str, cursor: Cursor) -> None:
        """Register that `reader` has applied everything up to `cursor` (a write transaction): the
        entries it has passed may then be pruned, and it is kept from the others for one horizon."""
        if not reader or "\x00" in reader:
            raise InvalidInput("a change-feed reader is a non-empty name")
        conn.execute(
            "INSERT INTO change_readers (component, reader, passed, seen_at) VALUES (%s, %s, %s::xid8, now())"
            " ON CONFLICT (component, reader) DO UPDATE"
            " SET passed = GREATEST(change_readers.passed, excluded.passed), seen_at = excluded.seen_at",
            (self.component, reader, str(cursor.xmin)),
        )

    def forget(self, conn: Connection, reader: str) -> None:
        """Drop `reader`'s registration (a replica stopping for good)."""
        conn.execute("DELETE FROM change_readers WHERE component = %s AND reader = %s", (self.component, reader))

    def prune(self, conn: Connection, *, horizon: timedelta) -> Pruned:
        """In a write transaction: forget registrations older than `horizon`, delete the entries
        every remaining registered reader has passed and those written more than `horizon` ago,
        and raise the watermark past them (a reader behind it is told to reload).

        Why a reader polling meanwhile loses nothing silently. Let a read on cursor C run in
        snapshot S, and call an entry *owed* when its writer committed, is visible in S and is not
        visible in C. An owed entry's writer id is at least ``C.xmin``: PostgreSQL puts every
        transaction in progress below a snapshot's ``xmax`` in its ``xip``, and ``xmin`` is the
        least of them, so a transaction below ``xmin`` had ended when C was taken and, if it
        committed, is visible in C. Every prune that deletes an entry writes the one
        ``change_pruned`` row (``through`` = the largest writer id ever deleted, ``pruned_by`` =
        itself); prunes of a component take the advisory lock below and hold it to their commit,
        so the row S sees is that of the last prune to commit before S. Take any prune Q:

        - Q committed after S was taken (or is still running): its deletions are not visible in
          S, which still reads every row Q deleted.
        - Q is visible in C: it committed before C was taken, and deleted only rows committed
          before its DELETE ran, so visible in C: none was owed.
        - Q committed before S but is not visible in C: then neither is the last prune (it
          committed after Q, and a snapshot that sees a commit sees every earlier one), and any
          owed entry Q deleted has ``C.xmin <= id <= through``: the read returns `Reload` with S,
          which sees that prune; the caller rebuilds in S.

        So a read that returns a `Batch` has every owed entry. Deleting below the least
        acknowledged ``xmin`` deletes only entries visible in every registered reader's cursor
        (acknowledged after it applied them) and keeps the watermark below that ``xmin``: only the
        horizon ever sends a registered reader to `Reload`. Nothing needs prune ids to follow
        their commit order (a caller's transaction may hold an id before it calls this). Each
        schedule is a test (tests/storage/postgres/test_changes_schedules.py), and the race in
        test_changes.py prunes while four writers and two readers run.

        ``through`` must be the largest deleted id *as an xid8*: taken in text order once, a prune
        whose entries straddled 999/1000 reported too low a watermark, and a reader it had cost
        entries got no `Reload` (the race's rare misses; a schedule in test_changes.py)."""
        if horizon < timedelta(0):
            raise InvalidInput("a change-feed horizon is not negative")
        # Prunes of one component run one at a time to their commit: the watermark only rises, and
        # the row a snapshot sees names the last prune committed before it.
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '.changes.prune.' || %s, 0))",
            (self.component,),
        )
        forgotten = conn.execute(
            "DELETE FROM change_readers WHERE component = %s AND seen_at < now() - %s::interval",
            (self.component, horizon),
        ).rowcount
        row = conn.execute(
            "SELECT passed::text FROM change_readers WHERE component = %s ORDER BY passed LIMIT 1",
            (self.component,),
        ).fetchone()
        passed = None if row is None else row[0]
        deleted, newest = conn.execute(
            "WITH gone AS (DELETE FROM change_log WHERE component = %(component)s"
            "  AND (writer_xid < %(passed)s::xid8 OR written_at <= now() - %(horizon)s::interval)"
            "  RETURNING writer_xid)"
            # Ordered by the xid8 itself: ``ORDER BY writer_xid`` beside ``writer_xid::text`` sorts
            # the text output column, and "999" > "1000" made a prune across a digit boundary
            # report too low a watermark (readers it had cost entries got no Reload).
            " SELECT count(*), (SELECT g.writer_xid FROM gone AS g ORDER BY g.writer_xid DESC LIMIT 1)::text FROM gone",
            {"component": self.component, "passed": passed, "horizon": horizon},
        ).fetchone() or (0, None)
        if newest is not None:
            conn.execute(
                "INSERT INTO change_pruned (component, through, pruned_by) VALUES (%s, %s::xid8, pg_current_xact_id())"
                " ON CONFLICT (component) DO UPDATE"
                " SET through = GREATEST(change_pruned.through, excluded.through), pruned_by = excluded.pruned_by",
                (self.component, newest),
            )
        row = conn.execute("SELECT through::text FROM change_pruned WHERE component = %s", (self.component,)).fetchone()
        through = None if row is None else int(row[0])
        if deleted or forgotten:
            _log.info(
                "postgres.changes.pruned",
                component=self.component,
                deleted=int(deleted),
                forgotten=forgotten,
                through=through,
            )
        return Pruned(int(deleted), forgotten, through)


class Listener:
    """Waits for the feed's ``NOTIFY`` on a connection of its own (``LISTEN`` is session state: give
    it a direct URL, not a PgBouncer in transaction mode). A hint only: `wait` returns early when
    a write committed, and on a timeout or a lost connection returns nothing — the reader reads
    anyway; the connection is made again on the next `wait`."""

    def __init__(self, url: str, schema: str) -> None:
        self.url = url
        self.schema = schema
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def _connected(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None or self._conn.closed:
            conn = psycopg.connect(self.url, autocommit=True, prepare_threshold=None)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
            self._conn = conn
        return self._conn

    def listen(self) -> None:
        """Connect and listen now (a write committed after this returns wakes the next `wait`)."""
        try:
            self._connected()
        except psycopg.Error as exc:
            self._lost(exc)

    def wait(self, timeout_s: float) -> frozenset[str]:
        """The components of this schema notified within `timeout_s` (returns at the first one,
        with any others already arrived); empty on a timeout or a lost connection."""
        deadline = time.monotonic() + timeout_s
        prefix = f"{self.schema}."
        try:
            conn = self._connected()
            woken: set[str] = set()
            remaining = timeout_s
            while not woken and remaining > 0:
                for note in conn.notifies(timeout=remaining, stop_after=1):
                    if note.payload.startswith(prefix):
                        woken.add(note.payload[len(prefix) :])
                remaining = deadline - time.monotonic()
            for note in conn.notifies(timeout=0):
                if note.payload.startswith(prefix):
                    woken.add(note.payload[len(prefix) :])
            return frozenset(woken)
        except psycopg.Error as exc:
            self._lost(exc)
            time.sleep(max(0.0, deadline - time.monotonic()))  # a lost listener still paces the caller's loop
            return frozenset()

    def _lost(self, exc: psycopg.Error) -> None:
        _log.warning("postgres.changes.listener_lost", reason=str(exc).splitlines()[0][:200] if str(exc) else "")
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


__all__ = [
    "CHANNEL",
    "COMPONENT",
    "MIGRATIONS",
    "Batch",
    "Change",
    "ChangeFeed",
    "Cursor",
    "Listener",
    "Pruned",
    "Reload",
    "create_record_trigger",
    "migrate",
]
