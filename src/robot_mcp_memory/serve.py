"""Running the server: stdio, or SSE + Streamable HTTP on one port under uvicorn."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import anyio
import uvicorn

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.server import build_server, http_app

_log = logs.get("robot_mcp_memory.serve")


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def serve(settings: Settings) -> None:
    memory = Memory.open(settings)
    try:
        mcp = build_server(memory)
        if settings.transport == "stdio":
            _log.info("serve.stdio", data_dir=str(settings.data_dir))
            anyio.run(mcp.run_stdio_async)
            return
        if not settings.auth_enabled:
            _log.warning(
                "auth.open",
                message="no MEMORY_TOKEN or MEMORY_ROBOT_TOKENS set: the HTTP transports accept anyone "
                "who can reach this port. Only run this way on a trusted network.",
            )
        app = http_app(memory, mcp)
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, log_level="warning", lifespan="on", log_config=None
        )
        _log.info(
            "serve.http",
            host=settings.host,
            port=settings.port,
            sse=f"http://{settings.host}:{settings.port}/sse",
            streamable_http=f"http://{settings.host}:{settings.port}/mcp",
        )
        # SIGTERM (systemd, docker stop) must still close the store: uvicorn shuts down gracefully on
        # it and then re-raises it, which with the default disposition kills the process before the
        # `finally` below (no drain of queued hot writes, no checkpoint, exit -15 instead of 0).
        # Made an exception, it unwinds through `finally`. (Not under stdio: there the stdin reader
        # thread would keep a terminated process alive until stdin closes.)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _stop_on_sigterm)
        uvicorn.Server(config).run()
    finally:
        memory.close()
        _log.info("serve.stopped")
