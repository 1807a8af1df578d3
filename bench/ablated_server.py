"""Our MCP server over stdio with the keyword cache switched off (the budget's ablation).

    python -m bench.ablated_server --no-keyword-cache

The settings come from the environment, as ``python -m robot_mcp_memory`` reads them; the server is
the one `surfaces.serve.serve` runs for ``MCP_TRANSPORT=stdio`` (its store in `StoreMode.BLOCKING`:
reads and writes on the event loop), only with `Memory.open`'s switch of the keyword cache given.
For `bench.bench_robotmem_compare`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.surfaces.serve import run_stdio


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-keyword-cache", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    memory = Memory.open(settings, mode=StoreMode.BLOCKING, keyword_cache=not args.no_keyword_cache)
    try:
        mcp = build_server(memory)
        anyio.run(run_stdio, mcp)
    finally:
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
