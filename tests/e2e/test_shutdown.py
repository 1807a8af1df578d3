"""SIGTERM with clients still connected: the server stops by itself, exit 0, store closed."""

from __future__ import annotations

import signal

import anyio
import pytest

from tests.conftest import MAILROOM
from tests.e2e.harness import ServerProcess, json_lines, sse_session

pytestmark = pytest.mark.e2e


async def test_sigterm_with_an_open_sse_stream_drains_and_exits_zero(server: ServerProcess) -> None:
    process = server.process
    assert process is not None
    async with sse_session(server) as client:
        await client.call("save_process", markdown=MAILROOM)
        await client.call("record_outcome", id="fetch-package-mailroom", success=True)
        process.send_signal(signal.SIGTERM)
        # Bounded: the open stream is cancelled after the graceful window, then the store closes.
        with anyio.fail_after(30):
            code = await process.wait()
    assert code == 0
    events = [e.get("event") for e in json_lines(server.stderr())]
    assert "serve.stopped" in events
    assert not server.index_path.with_name("index.db-wal").exists() or (
        server.index_path.with_name("index.db-wal").stat().st_size == 0
    )
    await server.stop()  # reap
