"""The browser-session store's rules (`tenancy.ports.Sessions`), on every implementation: expiry,
the caps, revocation, and that no id is kept at rest."""

from __future__ import annotations

import hashlib

from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.tenancy.ports import Sessions
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from robot_mcp_memory.tenancy.sessions import SessionStore
from tests.tenancy.conftest import MakeSessions


def at_rest(store: Sessions) -> tuple[set[bytes], str]:
    """What the store keeps: the keys, and everything (keys included) as text."""
    if isinstance(store, SessionStore):
        return set(store._sessions), repr(store._sessions)
    assert isinstance(store, PostgresSessions)
    db: PostgresStore = store.db
    rows = db.read_blocking(lambda c: c.execute("SELECT * FROM web_sessions").fetchall())
    return {bytes(r[0]) for r in rows}, repr(rows)


async def test_sessions_expire_and_are_capped(make_sessions: MakeSessions) -> None:
    now = [1000.0]
    store = make_sessions(ttl_s=60, max_sessions=2, clock=lambda: now[0])
    first, _ = await store.create(ADMIN)
    assert await store.lookup(first) is not None
    now[0] += 59.999
    assert await store.lookup(first) is not None
    now[0] = 1060.0  # the ttl is absolute: at exactly ttl_s the session is over
    assert await store.lookup(first) is None
    a, _ = await store.create(Principal.robot("a"))
    b, _ = await store.create(Principal.robot("b"))
    c, _ = await store.create(Principal.robot("c"))
    assert await store.lookup(a) is None  # the oldest went first
    assert await store.lookup(b) is not None
    assert await store.lookup(c) is not None
    assert await store.count() == 2


async def test_a_lookup_does_not_extend_a_session(make_sessions: MakeSessions) -> None:
    now = [0.0]
    store = make_sessions(ttl_s=10, clock=lambda: now[0])
    sid, made = await store.create(Principal.robot("a"))
    for t in (3.0, 6.0, 9.0):
        now[0] = t
        found = await store.lookup(sid)
        assert found is not None
        assert (found.principal, found.csrf_token, found.expires_at) == (made.principal, made.csrf_token, 10.0)
    now[0] = 10.0
    assert await store.lookup(sid) is None
    assert await store.count() == 0


async def test_one_robot_logging_in_over_and_over_drops_only_its_own_oldest_sessions(
    make_sessions: MakeSessions,
) -> None:
    """A robot token logging in 10,000 times logged the admin out."""
    store = make_sessions(max_sessions=10, per_robot=3)
    admin, _ = await store.create(ADMIN)
    other, _ = await store.create(Principal.robot("b"))
    robot = [(await store.create(Principal.robot("a")))[0] for _ in range(50)]
    assert await store.lookup(admin) is not None
    assert await store.lookup(other) is not None
    assert [await store.lookup(s) is not None for s in robot[-4:]] == [False, True, True, True]
    assert await store.count() == 5


async def test_a_robot_named_like_an_unscoped_principal_cannot_push_out_its_sessions(
    make_sessions: MakeSessions,
) -> None:
    """Robot ids may be ``admin``: its own sessions are those of robot ``admin``, not the admin's."""
    store = make_sessions(per_robot=2)
    admin, _ = await store.create(ADMIN)
    for _ in range(5):
        await store.create(Principal.robot("admin"))
    found = await store.lookup(admin)
    assert found is not None
    assert found.principal == ADMIN
    assert await store.count() == 3


async def test_sessions_are_stored_by_digest_not_by_id_and_end_once(make_sessions: MakeSessions) -> None:
    store = make_sessions()
    sid, session = await store.create(ADMIN)
    keys, everything = at_rest(store)
    assert keys == {hashlib.sha256(sid.encode()).digest()}
    assert sid not in everything
    assert session.csrf_token != sid
    assert await store.end(sid) is True
    assert await store.lookup(sid) is None
    assert await store.end(sid) is False


async def test_an_unknown_id_finds_nothing_and_ends_nothing(make_sessions: MakeSessions) -> None:
    store = make_sessions()
    kept, _ = await store.create(Principal.robot("a"))
    assert await store.lookup("made-up-session-id") is None
    assert await store.lookup("") is None
    assert await store.end("made-up-session-id") is False
    assert await store.lookup(kept) is not None


async def test_each_session_has_its_own_csrf_token_and_the_lookup_returns_it(make_sessions: MakeSessions) -> None:
    store = make_sessions()
    made = [await store.create(Principal.robot("a")) for _ in range(3)]
    assert len({s.csrf_token for _, s in made}) == 3
    for sid, session in made:
        found = await store.lookup(sid)
        assert found is not None
        assert (found.principal, found.csrf_token) == (Principal.robot("a"), session.csrf_token)
