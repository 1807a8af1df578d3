"""Running the server: stdio, or SSE + Streamable HTTP on one port under uvicorn."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import errno
import signal
import socket
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

import anyio
import anyio.abc
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import CannotListen
from robot_mcp_memory.operations import handover
from robot_mcp_memory.storage.daemon import DaemonThreads
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.surfaces import workers
from robot_mcp_memory.surfaces.mcp.server import MemoryMCP, build_server, http_app
from robot_mcp_memory.surfaces.mcp.stdio import pipe_stdio

_log = logs.get("robot_mcp_memory.surfaces.serve")

#: Seconds open connections (SSE streams) get after SIGTERM before they are cancelled.
GRACEFUL_SHUTDOWN_S = 5
#: Seconds a connection gets to send a request's headers (`Deadlines`).
HEADERS_TIMEOUT_S = 10.0
#: Seconds a connection's writing may stay paused — its client reads nothing while the kernel's
#: buffers and uvicorn's (64 KiB) are full — before it is cut (`Deadlines`).
WRITE_STALL_S = 10.0

#: The connection whose bytes are being handled: set by `Connection` around each hand-over of
#: received bytes to uvicorn, so the task uvicorn starts for a request (which copies the current
#: context) carries it to `Answering`.
_CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "robot_mcp_memory.connection", default=None
)


@dataclass(frozen=True)
class Deadlines:
    """The HTTP server's two deadlines on a connection, which uvicorn does not have.

    - `headers_s`: while no request is being answered, the connection must finish its next
      request's headers within this many seconds, or it is closed. Without it a connection that
      sent nothing, or half a request line, stayed open for good, so anyone who could reach the
      port, token or not, held open files until the server could accept no one. A request being
      answered (an SSE stream too) is never cut by this.
    - `write_stall_s`: writing that stays paused this long (asyncio's ``pause_writing``: the
      transport's buffer is over its high-water mark because the client reads nothing) aborts the
      connection. uvicorn stops an answer's writer while paused, but everything waiting to be
      written behind it piles up (mcp answers each call in a task of its own, which holds its
      result until the stream takes it). The app sees the client leave, and what waited for it
      is released. A client that reads, however slowly, resumes the writing and is never cut.

    Both are kept with public interfaces: `Connection` wraps the asyncio protocol uvicorn makes
    for each connection (`DeadlineConfig`), and `Answering`, an ASGI middleware, tells it when
    a request of its is being answered."""

    headers_s: float = HEADERS_TIMEOUT_S
    write_stall_s: float = WRITE_STALL_S


class Connection(asyncio.Protocol):
    """uvicorn's protocol for one connection (`inner`, which does all the HTTP), with `Deadlines`
    kept around it: every asyncio callback is handed on unchanged."""

    def __init__(self, inner: asyncio.Protocol, deadlines: Deadlines) -> None:
        self.inner = inner
        self.deadlines = deadlines
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.answering = 0  # requests begun and not yet answered in full
        self.path: str | None = None  # of the request answered last
        self.deadline: asyncio.TimerHandle | None = None
        self.stall: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        self.watch()

    def data_received(self, data: bytes) -> None:
        token = _CONNECTION.set(self)
        try:
            self.inner.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.unwatch()
        self.unstall()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()
        if self.stall is None:
            self.stall = self.loop.call_later(self.deadlines.write_stall_s, self.stalled)

    def resume_writing(self) -> None:
        self.unstall()
        self.inner.resume_writing()

    # ------------------------------------------------------------ told by `Answering`
    def begun(self, path: str | None) -> None:
        self.answering += 1
        self.path = path
        self.unwatch()

    def answered(self) -> None:
        self.answering -= 1
        self.watch()

    # ------------------------------------------------------------ the deadlines
    def closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def watch(self) -> None:
        """Start the headers deadline if no request is being answered and none runs."""
        if self.answering == 0 and self.deadline is None and not self.closing():
            self.deadline = self.loop.call_later(self.deadlines.headers_s, self.late)

    def unwatch(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def late(self) -> None:
        self.deadline = None
        if self.answering == 0 and self.transport is not None and not self.closing():
            self.transport.close()

    def unstall(self) -> None:
        if self.stall is not None:
            self.stall.cancel()
            self.stall = None

    def stalled(self) -> None:
        self.stall = None
        if self.transport is not None and not self.closing():
            seconds = self.deadlines.write_stall_s
            _log.warning("serve.reader_stalled", path=self.path, seconds=seconds, action="disconnected")
            self.transport.abort()


class Answering:
    """Tells the `Connection` an HTTP request came on when it is being answered: from the app's
    start until the last body message is sent (or the app returns). Pure ASGI; a request that
    came by no `Connection` (an in-process test client) passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _CONNECTION.get()
        if connection is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection.begun(scope.get("path"))
        pending = True

        def answered() -> None:
            nonlocal pending
            if pending:
                pending = False
                connection.answered()

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered()

        try:
            await self.app(scope, receive, sending)
        finally:
            answered()


class DeadlineConfig(uvicorn.Config):
    """`uvicorn.Config` serving `app` with `deadlines`: uvicorn's h11 protocol, each connection's
    protocol wrapped in a `Connection`, the app in `Answering`."""

    def __init__(self, app: ASGIApp, *, deadlines: Deadlines | None = None, **kwargs: Any) -> None:
        self.deadlines = deadlines or Deadlines()
        super().__init__(Answering(app), http="h11", **kwargs)

    def load(self) -> None:
        super().load()
        inner = self.http_protocol_class
        deadlines = self.deadlines

        def connection(*args: Any, **kwargs: Any) -> asyncio.Protocol:
            return Connection(inner(*args, **kwargs), deadlines)

        self.http_protocol_class = connection  # type: ignore[assignment]  # a factory, called as uvicorn calls the class


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to `host`:`port` — every address the host resolves to, as asyncio's
    ``create_server`` binds them — for `run_http`. Bound before anything says the server is serving:
    a port in use or a host that does not resolve is one `CannotListen` naming both and why
    (uvicorn logged its bare OSError after ``serve.http`` and exited 3)."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotListen(
            f"cannot listen on {where}: the host {host!r} does not resolve ({exc.strerror}). "
            "Check MCP_HOST (--host): an address of this machine, or a name that resolves to one."
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio: the IPv4 address gets its own socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise CannotListen(f"cannot listen on {where}: {_why(exc, host, port)}") from None
    return sockets


def _why(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"the address is already in use (another server on port {port}, or this one still "
            "stopping). Stop it, or choose another MCP_PORT (--port)."
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine. Check MCP_HOST (--host)."
    if exc.errno == errno.EACCES:
        return f"permission denied (port {port} needs privileges). Choose a port above 1023."
    return f"{exc.strerror or exc}."


def uvicorn_config(app: ASGIApp, settings: Settings, lifespan: Literal["auto", "on", "off"] = "auto") -> uvicorn.Config:
    """How uvicorn runs `app`. Forwarded headers (``X-Forwarded-For``/``-Proto``) are believed
    only from ``MEMORY_TRUSTED_PROXIES``; with none set they are ignored altogether (uvicorn's own
    default believes them from 127.0.0.1, so anything on the machine, or a proxy passing the header
    through, could name any client address and evade the per-address token throttle)."""
    proxies = list(settings.trusted_proxies)
    return DeadlineConfig(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        lifespan=lifespan,
        log_config=None,
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies,
        # Open SSE streams never end on their own: GRACEFUL_SHUTDOWN_S after SIGTERM they are
        # cancelled, so the shutdown always happens.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


def run_http(
    app: ASGIApp,
    settings: Settings,
    sockets: list[socket.socket],
    lifespan: Literal["auto", "on", "off"] = "auto",
) -> None:
    """Run `app` under uvicorn on `sockets` (from `listen`) until SIGTERM/SIGINT; returns (never
    kills the process) so the caller's ``finally`` closes the store: drains the writer queue and
    checkpoints the WAL."""
    config = uvicorn_config(app, settings, lifespan)
    # uvicorn shuts down gracefully on SIGTERM (systemd, docker stop) and then re-raises it, which
    # with the default disposition kills the process before the caller's `finally` (no drain of
    # queued hot writes, no checkpoint, exit -15 instead of 0). Made an exception, it unwinds.
    # (Under stdio, `run_stdio` takes SIGTERM and SIGINT on its event loop instead.)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    _more_open_files()
    try:
        _Server(config).run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()


#: Open files an HTTP server asks for (each connection is one): the usual soft limit of 1,024 is
#: a few hundred idle connections from running out, and then no one can connect.
OPEN_FILES = 65_536


def _more_open_files() -> None:
    """Raise this process's soft limit on open files towards `OPEN_FILES`, within the hard limit
    (as Go's runtime does at start); left as it is where the platform refuses."""
    try:
        import resource  # POSIX only

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, OSError, ValueError):
        pass


def _ignore_stop_signals() -> None:
    """From here the store closes: a client's second SIGTERM (or a second Ctrl-C) would kill the
    process mid-drain, losing the queued writes the first one was waiting for."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # From here on, a stream cut by the shutdown is expected, not an error (`logs.stopping`).
        logs.stopping()
        super().handle_exit(sig, frame)


async def run_stdio(mcp: MemoryMCP) -> None:
    """`FastMCP.run_stdio_async`, on `pipe_stdio`'s thread-free pipes, until end of input or
    SIGTERM/SIGINT. A signal stops the reading; the requests being answered get
    GRACEFUL_SHUTDOWN_S, then the session ends and this returns (the caller closes the store). A
    second signal cancels what is left at once."""
    stop = anyio.Event()
    # Blocking work handed to threads (an embedding call, a blocking write) runs on daemon threads:
    # asyncio waits for its default executor's threads before it returns, and one waiting on an
    # embedding server held the exit for up to MEMORY_EMBED_TIMEOUT after the grace.
    asyncio.get_running_loop().set_default_executor(DaemonThreads())
    async with anyio.create_task_group() as tg:
        await tg.start(_stop_on_signals, stop, tg.cancel_scope)
        async with pipe_stdio(stop=stop, grace=GRACEFUL_SHUTDOWN_S) as (read_stream, write_stream):
            server = mcp.lowlevel
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def _stop_on_signals(
    stop: anyio.Event, everything: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            if stop.is_set():
                _log.warning("serve.stopping_now", signal=signal.Signals(signum).name)
                break
            logs.stopping()
            _log.info("serve.stopping", signal=signal.Signals(signum).name)
            stop.set()
        else:
            return
    # Leaving the receiver put the default handlers back: a third signal would kill the process
    # before the store is closed. Ignored from here on, as they are once the session has ended.
    _ignore_stop_signals()
    everything.cancel()


def open_memory(settings: Settings, sockets: list[socket.socket], mode: StoreMode = StoreMode.SERVER) -> Memory:
    """The data directory's `Memory` in `mode`, after `sockets` were bound (`listen`); they are
    closed if it cannot be opened, so a refused start leaves no port held."""
    try:
        memory = Memory.open(settings, mode=mode)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    handover.log_hint(memory)
    return memory


def serve(settings: Settings) -> int:
    """Serve until stopped; the exit code (0, or 1 when `MEMORY_WORKERS` children kept crashing)."""
    stdio = settings.transport == "stdio"
    sockets = [] if stdio else listen(settings.host, settings.port)
    if settings.workers > 1:
        return serve_workers(settings, sockets)
    # stdio has one client, whose calls come one after another: its reads and the writes that
    # need not wait run on the event loop (`StoreMode.BLOCKING`). Only here — `web` and the HTTP
    # transports serve many.
    memory = open_memory(settings, sockets, StoreMode.BLOCKING if stdio else StoreMode.SERVER)
    try:
        mcp = build_server(memory)
        if stdio:
            _log.info("serve.stdio", data_dir=str(settings.data_dir))
            anyio.run(run_stdio, mcp)
            _ignore_stop_signals()
            return 0
        _log_serving(settings)
        run_http(http_app(memory, mcp), settings, sockets, lifespan="on")
    finally:
        memory.close()
        _log.info("serve.stopped")
    return 0


def _log_serving(settings: Settings) -> None:
    """The sockets are bound: it is serving HTTP — where (SSE only with one process), and a warning
    when no token guards it."""
    if not settings.auth_enabled:
        _log.warning(
            "auth.open",
            message="no MEMORY_TOKEN or MEMORY_ROBOT_TOKENS set: the HTTP transports accept anyone "
            "who can reach this port. Only run this way on a trusted network.",
        )
    base = f"http://{settings.host}:{settings.port}"
    where = {"sse": f"{base}/sse"} if settings.workers == 1 else {"workers": settings.workers}
    _log.info(
        "serve.http",
        host=settings.host,
        port=settings.port,
        **where,
        streamable_http=f"{base}/mcp",
        dashboard=f"{base}/",
    )


def serve_workers(settings: Settings, sockets: list[socket.socket]) -> int:
    """`settings.workers` processes on `sockets` (`workers.supervise`). The store is opened here
    once first: migrations run once, and a store that cannot open is reported as with one process."""
    # Keyword-only here: an embedder would start loading its model on a thread that `close` does
    # not wait for, and a fork must copy a process with no other thread running.
    open_memory(dataclasses.replace(settings, embedder="none"), sockets).close()
    if threading.active_count() > 1:  # the forks below copy only this thread: any other's locks stay held
        _log.warning("serve.threads_before_fork", threads=[t.name for t in threading.enumerate()])
    _log_serving(settings)

    def serve_one(number: int) -> None:
        memory = open_memory(settings, sockets)
        try:
            run_http(http_app(memory, build_server(memory)), settings, sockets, lifespan="on")
        finally:
            memory.close()
            _log.info("serve.worker_stopped")

    code = workers.supervise(settings.workers, sockets, serve_one)
    _log.info("serve.stopped")
    return code
