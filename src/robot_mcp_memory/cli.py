"""The operator's command line: ``robot-mcp-memory [command]``.

With no command it serves, on the transport ``MCP_TRANSPORT`` names (the spec's convention).
Errors are one clear line on stderr and a non-zero exit; ``--debug`` shows a traceback.

Exit codes: 0 ok · 1 command failed · 2 usage · 65 the database cannot be used (unreadable,
foreign or newer schema: restarting will not help) · 78 bad configuration.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from robot_mcp_memory import __version__, logs
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import ConfigError, MemoryError_, SchemaTooNew, StoreUnreadable

EXIT_FAILED = 1
EXIT_DATA = 65
EXIT_CONFIG = 78

_log = logs.get("robot_mcp_memory.cli")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="robot-mcp-memory",
        description="The memory a robot fleet shares, served over MCP. Without a command: serve.",
    )
    p.add_argument("--version", action="version", version=f"robot-mcp-memory {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve MCP over stdio, or SSE + Streamable HTTP on one port")
    serve.add_argument("--transport", choices=["stdio", "sse"], help="overrides MCP_TRANSPORT")
    serve.add_argument("--host", help="overrides MCP_HOST")
    serve.add_argument("--port", type=int, help="overrides MCP_PORT")
    serve.add_argument("--data-dir", help="overrides MEMORY_DATA_DIR")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    env = dict(os.environ)
    for attr, var in (
        ("transport", "MCP_TRANSPORT"),
        ("host", "MCP_HOST"),
        ("port", "MCP_PORT"),
        ("data_dir", "MEMORY_DATA_DIR"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            env[var] = str(value)
    return Settings.from_env(env)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ConfigError as exc:
        logs.configure("info")
        _log.error("config.invalid", problems=exc.problems)
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_CONFIG
    logs.configure(settings.log_level)
    try:
        return _dispatch(args, settings)
    except (StoreUnreadable, SchemaTooNew) as exc:
        _log.error("store.unusable", reason=exc.detail)
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_DATA
    except MemoryError_ as exc:
        if args.debug:
            raise
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    command = args.command or "serve"
    if command == "serve":
        from robot_mcp_memory.serve import serve

        serve(settings)
        return 0
    raise AssertionError(command)  # argparse rejects unknown commands
