"""Running the server: stdio, or SSE + Streamable HTTP on one port under uvicorn."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Literal

import anyio
import anyio.abc
import uvicorn
from starlette.types import ASGIApp

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.server import MemoryMCP, build_server, http_app
from robot_mcp_memory.stdio import pipe_stdio

_log = logs.get("robot_mcp_memory.serve")

#: Seconds open connections (SSE streams) get after SIGTERM before they are cancelled.
GRACEFUL_SHUTDOWN_S = 5


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def run_http(app: ASGIApp, settings: Settings, lifespan: Literal["auto", "on", "off"] = "auto") -> None:
    """Run `app` under uvicorn until SIGTERM/SIGINT; returns (never kills the process) so the
    caller's ``finally`` closes the store: drains the writer queue and checkpoints the WAL."""
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        lifespan=lifespan,
        log_config=None,
        # Open SSE streams never end on their own: GRACEFUL_SHUTDOWN_S after SIGTERM they are
        # cancelled, so the shutdown always happens.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    # uvicorn shuts down gracefully on SIGTERM (systemd, docker stop) and then re-raises it, which
    # with the default disposition kills the process before the caller's `finally` (no drain of
    # queued hot writes, no checkpoint, exit -15 instead of 0). Made an exception, it unwinds.
    # (Not under stdio: there the stdin reader thread would keep a terminated process alive.)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    _Server(config).run()


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
    async with anyio.create_task_group() as tg:
        await tg.start(_stop_on_signals, stop, tg.cancel_scope)
        async with pipe_stdio(stop=stop, grace=GRACEFUL_SHUTDOWN_S) as (read_stream, write_stream):
            server = mcp._mcp_server
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
                everything.cancel()
                return
            logs.stopping()
            _log.info("serve.stopping", signal=signal.Signals(signum).name)
            stop.set()


def serve(settings: Settings) -> None:
    memory = Memory.open(settings)
    try:
        mcp = build_server(memory)
        if settings.transport == "stdio":
            _log.info("serve.stdio", data_dir=str(settings.data_dir))
            anyio.run(run_stdio, mcp)
            _ignore_stop_signals()
            return
        if not settings.auth_enabled:
            _log.warning(
                "auth.open",
                message="no MEMORY_TOKEN or MEMORY_ROBOT_TOKENS set: the HTTP transports accept anyone "
                "who can reach this port. Only run this way on a trusted network.",
            )
        _log.info(
            "serve.http",
            host=settings.host,
            port=settings.port,
            sse=f"http://{settings.host}:{settings.port}/sse",
            streamable_http=f"http://{settings.host}:{settings.port}/mcp",
        )
        run_http(http_app(memory, mcp), settings, lifespan="on")
    finally:
        memory.close()
        _log.info("serve.stopped")
