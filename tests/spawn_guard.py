"""A pytest plugin: a test that starts a process without the ``e2e`` marker fails.

The unmarked pass (``pytest -m "not e2e"``) is the fast one, in-process only; a process started
from it (a server, the CLI, a child interpreter, a shell script) costs an interpreter start or
more per test and escapes xdist's accounting of the cores. An audit hook sees every way CPython
starts a process (`subprocess.Popen`, and under it asyncio's and anyio's subprocesses;
`os.posix_spawn`, `os.system`, `os.fork`, the `os.spawn*` family) and records it against the
test running; the test's report for that phase then fails, naming the command.

The one exception is `infrastructure()`: the session's PostgreSQL cluster (tests/conftest.py,
`pg_cluster`), a shared service started once per session by whichever ``postgres`` test needs it
first, not a process any test is about.

Loaded by tests/conftest.py; tests/test_spawn_guard.py runs it on a test file of its own."""

from __future__ import annotations

import contextlib
import platform
import sys
from collections.abc import Iterator
from typing import Any

import pytest

#: The audit events of starting a process (CPython's audit events table).
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.system", "os.fork", "os.forkpty", "os.spawn"})

#: The test being run, or None between tests and during collection.
_running: list[pytest.Item] = []
#: Processes the running test started since its last report: (event, what it ran).
_started: list[tuple[str, str]] = []
#: Depth of `infrastructure()` blocks open: spawns inside them are not any test's.
_exempt: list[int] = [0]
#: Whether the audit hook is installed (it cannot be removed: one per interpreter).
_hooked: list[bool] = []


def _describe(event: str, args: tuple[Any, ...]) -> str:
    if event == "subprocess.Popen" and len(args) >= 2:
        return f"{args[0]!s} {args[1]!r}"
    return repr(args[:2])


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in SPAWN_EVENTS and _running and _exempt[0] == 0:
        _started.append((event, _describe(event, args)))


@contextlib.contextmanager
def infrastructure() -> Iterator[None]:
    """Processes started inside this block belong to the session's shared services, not a test."""
    _exempt[0] += 1
    try:
        yield
    finally:
        _exempt[0] -= 1


def pytest_configure(config: pytest.Config) -> None:
    # The standard library's one lazy process: `platform.processor()` runs ``uname -p`` the first
    # time an interpreter asks, then caches it. Asked here, no test is charged with it, whichever
    # test of a worker would have asked first.
    platform.processor()
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked.append(True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running.append(item)
    _started.clear()
    try:
        yield
    finally:
        _running.pop()
        _started.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    started, _started[:] = list(_started), []
    if not started or item.get_closest_marker("e2e") is not None or report.failed:
        return
    listed = "\n".join(f"  {event}: {what}" for event, what in started)
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} started {len(started)} process(es) during {report.when} without the `e2e` marker:\n"
        f"{listed}\n"
        "Mark it `@pytest.mark.e2e` (with why on the same line), or keep it in-process: "
        'the unmarked pass (`pytest -m "not e2e"`) starts no process.'
    )
