"""A bare FastMCP server with one echo tool: the SDK's own floor, beside which `bench.load_sse`
measures ours (the same clients, the same transport, pinged the same way).

    python -m bench.bare_echo --transport sse|streamable-http --port N
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mcp.server.fastmcp import FastMCP


def build(port: int) -> FastMCP:
    mcp = FastMCP("bare", host="127.0.0.1", port=port, log_level="WARNING")

    @mcp.tool()
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    return mcp


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=("sse", "streamable-http"), default="sse")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    build(args.port).run(transport=args.transport)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
