from __future__ import annotations

import anyio
import anyio.abc
from starlette.types import Message, Receive, Scope, Send

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.mcp.server import SessionCap, SseBacklog, SseCap, build_server
from robot_mcp_memory.tenancy.principal import ADMIN, Principal


def test_transport_limits_are_mcp_defaults_or_tighter(memory: Memory) -> None:
    s = build_server(memory).settings
    assert s.max_request_body_size <= 4 * 1024 * 1024
    assert s.max_sessions is not None
    assert s.max_sessions <= 10_000
    assert s.session_idle_timeout is not None
    assert s.session_idle_timeout <= 30 * 60
    ts = s.transport_security
    assert ts is not None
    assert ts.enable_dns_rebinding_protection


async def test_sse_streams_beyond_the_cap_are_refused_with_503() -> None:
    release = anyio.Event()
    entered = anyio.Event()

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        entered.set()
        await release.wait()

    cap = SseCap(stream, limit=1)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope: Scope = {"type": "http", "method": "GET", "path": "/sse", "headers": []}
    async with anyio.create_task_group() as tg:
        tg.start_soon(cap, dict(scope), receive, send)
        await entered.wait()
        await cap(dict(scope), receive, send)
        assert sent[0]["status"] == 503
        release.set()
    assert cap.open == 0


async def test_one_robot_cannot_hold_every_sse_stream_but_others_still_get_one() -> None:
    """One robot token held all 1,000 streams and the admin got 503 (found by review)."""
    release = anyio.Event()
    entered: list[str] = []
    reached = {2: anyio.Event(), 4: anyio.Event()}  # streams entered

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        entered.append(scope["principal"].label)
        if len(entered) in reached:
            reached[len(entered)].set()
        await release.wait()

    cap = SseCap(stream, limit=10, per_robot=2)
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    def scope_of(principal: Principal) -> Scope:
        return {"type": "http", "method": "GET", "path": "/sse", "headers": [], "principal": principal}

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(cap, scope_of(Principal.robot("a")), receive, send)
        await reached[2].wait()
        await cap(scope_of(Principal.robot("a")), receive, send)  # a third for robot a: refused
        assert statuses == [503]
        tg.start_soon(cap, scope_of(Principal.robot("b")), receive, send)
        tg.start_soon(cap, scope_of(ADMIN), receive, send)
        await reached[4].wait()
        assert sorted(entered) == ["a", "a", "admin", "b"]
        release.set()
    assert cap.open == 0
    assert cap.by_robot == {}


class Sessions:
    """mcp's session manager as `SessionCap` sees it: each opening request gets a new session id
    (answered once `answer` is set, when there is one), and `live` holds the open ones."""

    def __init__(self, answer: anyio.Event | None = None) -> None:
        self.live: set[str] = set()
        self.made = 0
        self.answer = answer
        self.arrived = 0
        self.statuses: list[int] = []

    async def manager(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.arrived += 1
        if self.answer is not None:
            await self.answer.wait()  # a slow answer: the window a race would use
        sid = f"sid-{self.made}"
        self.made += 1
        self.live.add(sid)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"mcp-session-id", sid.encode())]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.statuses.append(message["status"])

    @staticmethod
    async def receive() -> Message:
        return {"type": "http.request", "body": b"{}"}

    @staticmethod
    def opening(principal: Principal, headers: list[tuple[bytes, bytes]] | None = None) -> Scope:
        return {"type": "http", "method": "POST", "path": "/mcp", "headers": headers or [], "principal": principal}


async def test_one_robot_cannot_hold_every_mcp_session_and_an_ended_one_frees_its_slot() -> None:
    fake = Sessions()
    cap = SessionCap(fake.manager, fake.live.__contains__, per_robot=2)
    a, b = Principal.robot("a"), Principal.robot("b")
    for _ in range(3):
        await cap(fake.opening(a), fake.receive, fake.send)
    assert fake.statuses == [200, 200, 503]
    await cap(fake.opening(b), fake.receive, fake.send)
    await cap(fake.opening(ADMIN), fake.receive, fake.send)
    assert fake.statuses[3:] == [200, 200]
    # a request inside an open session is never counted or refused
    await cap(fake.opening(a, [(b"mcp-session-id", b"sid-0")]), fake.receive, fake.send)
    assert fake.statuses[5] == 200
    fake.live.discard("sid-0")  # ended (DELETE) or idled out: the slot is free again
    await cap(fake.opening(a), fake.receive, fake.send)
    assert fake.statuses[6] == 200
    assert cap.open_sessions("a") == 2


async def test_opening_requests_sent_at_once_count_before_any_answer() -> None:
    """200 initializes sent at once all opened sessions: each was counted only once answered."""
    fake = Sessions(answer=anyio.Event())
    cap = SessionCap(fake.manager, fake.live.__contains__, per_robot=2)
    a = Principal.robot("a")
    async with anyio.create_task_group() as tg:
        tg.start_soon(cap, fake.opening(a), fake.receive, fake.send)
        tg.start_soon(cap, fake.opening(a), fake.receive, fake.send)
        for _ in range(1000):  # both are in the manager, waiting for their answers
            if fake.arrived == 2:
                break
            await anyio.lowlevel.checkpoint()
        assert fake.arrived == 2
        with anyio.fail_after(10):  # admitted, it would wait for the answer below: fail, not hang
            await cap(fake.opening(a), fake.receive, fake.send)  # a third while two are being answered
        assert fake.statuses == [503]
        assert fake.answer is not None
        fake.answer.set()
    assert fake.statuses == [503, 200, 200]
    assert cap.opening == {}
    assert cap.open_sessions("a") == 2


class SseStreams:
    """mcp's SSE endpoints as `SseBacklog` sees them: ``GET /sse`` writes the endpoint event
    (then each answer `answer` is told to write), a POST to ``/messages/`` is answered 202."""

    def __init__(self) -> None:
        self.answers: dict[str, anyio.abc.ObjectSendStream[bytes]] = {}
        self.opened = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            await receive()  # mcp reads the message, then answers 202 and hands it on
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b"Accepted"})
            return
        sid = scope["query_string"].decode()
        writer, reader = anyio.create_memory_object_stream[bytes](10)
        self.answers[sid] = writer
        await send({"type": "http.response.start", "status": 200, "headers": []})
        endpoint = f"event: endpoint\r\ndata: /messages/?session_id={sid}\r\n\r\n".encode()
        await send({"type": "http.response.body", "body": endpoint, "more_body": True})
        self.opened.set()
        async for data in reader:
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def answer(self, sid: str, rid: int) -> None:
        await self.answers[sid].send(
            f'event: message\r\ndata: {{"jsonrpc":"2.0","id":{rid},"result":{{}}}}\r\n\r\n'.encode()
        )


async def test_an_sse_session_that_owes_its_client_too_many_answers_is_refused_until_one_is_written() -> None:
    streams = SseStreams()
    guard = SseBacklog(streams, limit=2, per_robot=3)
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            statuses.append(message["status"])

    def scope_of(method: str, path: str, query: str, robot: str = "a") -> Scope:
        return {
            "type": "http",
            "method": method,
            "path": path,
            "query_string": query.encode(),
            "headers": [],
            "principal": Principal.robot(robot),
        }

    async def post(sid: str, rid: int, robot: str = "a") -> None:
        body = b'{"jsonrpc": "2.0", "id": %d, "method": "ping"}' % rid

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        await guard(scope_of("POST", "/messages/", f"session_id={sid}", robot), receive, send)

    async def never() -> Message:
        await anyio.sleep_forever()
        raise AssertionError

    s1, s2, s3 = ("1" * 32, "2" * 32, "3" * 32)
    async with anyio.create_task_group() as tg:
        for sid, robot in ((s1, "a"), (s2, "a"), (s3, "b")):
            streams.opened = anyio.Event()
            tg.start_soon(guard, scope_of("GET", "/sse", sid, robot), never, send)
            await streams.opened.wait()
        await post(s1, 1)
        await post(s1, 2)
        await post(s1, 3)  # s1 owes 2: refused
        assert statuses == [202, 202, 503]
        await streams.answer(s1, 1)
        await anyio.wait_all_tasks_blocked()
        await post(s1, 4)  # one answer was written: s1 owes 1 again
        await post(s2, 5)  # s2 owes 1: robot a owes 3 over its two streams
        await post(s2, 6)  # refused for robot a, though s2 itself owes only 1
        await post(s3, 7)  # robot b owes nothing
        assert statuses == [202, 202, 503, 202, 202, 503, 202]
        await post("f" * 32, 8)  # not a stream this guard saw: mcp answers (404 there)
        assert statuses[-1] == 202
        tg.cancel_scope.cancel()
    assert guard.owed == {}
    assert guard.robot_of == {}
    assert guard.robot_owed == {}


async def test_a_streamable_http_session_is_live_while_its_server_runs_and_not_after_a_delete(memory: Memory) -> None:
    """`LiveSessions`, `SessionCap`'s view of which sessions are open, on mcp's real session
    manager: a session opened by ``initialize`` is live, and once the client ends it (DELETE)
    it is not; the server version it reports is ours."""
    import httpx
    from starlette.applications import Starlette

    from robot_mcp_memory import __version__
    from robot_mcp_memory.surfaces.mcp.server import transport_routes

    mcp = build_server(memory)
    app = Starlette(routes=transport_routes(mcp))
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with (
        mcp.session_manager.run(),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http,
    ):
        opened = await http.post("/mcp", json=initialize, headers=headers)
        assert opened.status_code == 200
        assert f'"version":"{__version__}"' in opened.text.replace(" ", "")
        sid = opened.headers["mcp-session-id"]
        assert mcp.sessions.live(sid)
        assert not mcp.sessions.live("0" * 32)
        ended = await http.delete("/mcp", headers={**headers, "mcp-session-id": sid})
        assert ended.status_code == 200
        with anyio.fail_after(10):
            while mcp.sessions.live(sid):  # noqa: ASYNC110 - the session table is the signal; its server winds down after the DELETE
                await anyio.sleep(0.01)
    assert mcp.sessions.ids == set()
