"""Several server processes on one port (``MEMORY_WORKERS``): the parent supervises, each child serves.

The parent binds the listening sockets (`serve.listen`) and has opened the store once (migrations,
and any error a start reports, exactly as with one process) before `supervise` forks the children.
Each child inherits the sockets and serves on them with a store of its own, as a separate replica
on the same PostgreSQL database would (its own pool, caches, change-feed reader, backfill): the
kernel hands each new connection to one child. Only configured where any process can answer any
request (`config._workers_problems`).

The parent: restarts a child that dies (backoff doubling from `BACKOFF_S` to `BACKOFF_MAX_S`),
gives up — stops the others and returns 1 — once one child died `CRASHES_AT_START` times in a row
within `START_S` of being started, and on SIGTERM/SIGINT sends SIGTERM to every child and waits for
each (their graceful drain). A child is in a process group of its own (a Ctrl-C at the terminal
reaches the parent only, which passes one SIGTERM on) and gets SIGTERM when the parent dies
(Linux's parent-death signal), so no child outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from types import FrameType

from robot_mcp_memory import logs

_log = logs.get("robot_mcp_memory.surfaces.workers")

#: Seconds a child must live to count as started: dying sooner is a crash at start.
START_S = 10.0
#: Crashes at start in a row of one child after which the parent stops everything.
CRASHES_AT_START = 5
#: First and largest wait before a died child is started again.
BACKOFF_S = 0.5
BACKOFF_MAX_S = 10.0
#: prctl(2) option: the signal a child gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGTERM to this process when its parent dies (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _child(number: int, parent: int, serve_one: Callable[[int], None]) -> int:
    """Runs in a forked child: serves until stopped; the exit code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setpgid(0, 0)
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the death signal was asked for
        return 1
    logs.as_worker(number, os.getpid())
    _log.info("serve.worker")
    try:
        serve_one(number)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # reported by the parent's supervision as a died worker
        _log.error("serve.worker_failed", error=type(exc).__name__)
        return 1
    return 0


def supervise(workers: int, sockets: list[socket.socket], serve_one: Callable[[int], None]) -> int:
    """Fork `workers` children each running ``serve_one(number)`` on the inherited `sockets`;
    supervise them until SIGTERM/SIGINT (0) or a child keeps crashing at start (1)."""
    parent = os.getpid()
    children: dict[int, int] = {}  # pid -> worker number
    started: dict[int, float] = {}  # worker number -> when its current child was started
    crashes: dict[int, int] = dict.fromkeys(range(1, workers + 1), 0)
    stopping = False
    code = 0

    def stop_all(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            logs.stopping()
            _log.info("serve.stopping", signal=signal.Signals(signum).name, workers=len(children))
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def start(number: int) -> None:
        pid = os.fork()
        if pid == 0:
            exit_code = 1
            try:
                exit_code = _child(number, parent, serve_one)
            finally:
                os._exit(exit_code)
        children[pid] = number
        started[number] = time.monotonic()

    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    for number in range(1, workers + 1):
        start(number)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        number = children.pop(pid)
        if stopping:
            continue
        exit_code = os.waitstatus_to_exitcode(status)
        at_start = time.monotonic() - started[number] < START_S
        crashes[number] = crashes[number] + 1 if at_start else 1
        if at_start and crashes[number] >= CRASHES_AT_START:
            _log.error("serve.worker_keeps_crashing", worker=number, crashes=crashes[number], exit_code=exit_code)
            code = 1
            stop_all(signal.SIGTERM, None)
            continue
        wait = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (crashes[number] - 1))
        _log.warning("serve.worker_died", worker=number, pid=pid, exit_code=exit_code, restart_in_s=wait)
        deadline = time.monotonic() + wait
        while not stopping and time.monotonic() < deadline:  # a SIGTERM meanwhile ends the wait
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        if not stopping:
            start(number)
    # From here the parent only returns: a second signal must not kill it mid-cleanup.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sock in sockets:
        sock.close()
    return code
