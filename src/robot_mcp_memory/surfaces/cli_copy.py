"""``robot-mcp-memory copy-to-postgres --to postgresql://…``: a fleet moving from its SQLite data
directory (``--data-dir`` / ``MEMORY_DATA_DIR``) into PostgreSQL, by `operations.copy.copy_installation`.

What the operator sees: one progress line per table on stderr as it is exported, restored and
verified (documents every tenth), then on stdout every table's count in the source and in the
target. The target must be empty (a refusal otherwise, exit 1, nothing written); an unreachable or
malformed URL is one line naming user, host, port and database — never the password; a stop
(Ctrl-C, SIGTERM) rolls the restore back and leaves the target labelled, which ``doctor`` reports.

Neither side loads an embedding model: vectors are not copied (`copy`), they are made again there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Callable

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import StoreNotWritable
from robot_mcp_memory.operations import copy
from robot_mcp_memory.storage.postgres import reach
from robot_mcp_memory.storage.sqlite import StoreMode

COMMAND = "copy-to-postgres"
#: The exit of a copy stopped by the operator (as the shell reports Ctrl-C).
EXIT_INTERRUPTED = 130


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_ = (
        "copy this SQLite data directory into an empty PostgreSQL database (documents, fleet, memories, "
        "sessions, tags, lessons; ids kept), verifying every table's count"
    )
    c = sub.add_parser(COMMAND, help=help_, description=help_)
    c.add_argument("--data-dir", help="the SQLite data directory to copy; overrides MEMORY_DATA_DIR")
    c.add_argument(
        "--to",
        dest="target_url",
        required=True,
        metavar="URL",
        help="postgresql://user:password@host:5432/database (must be empty)",
    )


class _Stopped(Exception):
    """Raised inside the restore once the operator stopped the copy: its transaction rolls back."""


def run(settings: Settings, out: Callable[[str], None]) -> int:
    """Copy ``settings.data_dir`` into ``settings.database_url`` (the ``--to`` URL)."""
    assert settings.database_url is not None  # --to is required
    source = dataclasses.replace(settings, database_url=None, embedder="none")
    if not source.index_path.exists():
        sys.stderr.write(
            f"robot-mcp-memory: no database in {source.data_dir} (no index.db): nothing to copy. --data-dir "
            "(or MEMORY_DATA_DIR) names the directory the server keeps index.db in\n"
        )
        return 1
    at = reach.where(settings.database_url)
    reach.reach(settings.database_url)
    label = str(source.index_path.resolve())
    try:
        report = asyncio.run(_copy(source, dataclasses.replace(settings, embedder="none"), label))
    except (_Stopped, KeyboardInterrupt, asyncio.CancelledError):
        sys.stderr.write(
            f"robot-mcp-memory: the copy was stopped; PostgreSQL at {at} is labelled as an unfinished copy "
            "(doctor reports it). Run copy-to-postgres again: an interrupted restore left it empty\n"
        )
        return EXIT_INTERRUPTED
    width = max(len(t.table) for t in report.tables)
    out(f"copied {label} into PostgreSQL at {at}; every table's count verified (source = target):")
    for t in report.tables:
        out(f"  {t.table:<{width}}  {t.source} = {t.target}")
    out(
        "vectors are not copied: with MEMORY_DATABASE_URL set, `robot-mcp-memory reembed` makes the documents' "
        "and the memories' (a server makes them in the background too)"
    )
    return 0


async def _copy(source_settings: Settings, target_settings: Settings, label: str) -> copy.CopyReport:
    try:
        source = Memory.open(source_settings, mode=StoreMode.BLOCKING, backfill=False)
    except StoreNotWritable:  # a snapshot or a read-only mount: the copy only reads it
        source = Memory.open(source_settings, mode=StoreMode.BLOCKING, backfill=False, read_only=True)
    try:
        target = Memory.open_postgres(target_settings, mode=StoreMode.BLOCKING, backfill=False)
        try:
            return await _stoppable(source, target, label)
        finally:
            target.close()
    finally:
        source.close()


async def _stoppable(source: Memory, target: Memory, label: str) -> copy.CopyReport:
    """The copy, stopped by Ctrl-C or SIGTERM: the restore runs on a worker thread, so cancelling
    the awaiting task alone would let it commit; `interrupt` makes it raise and roll back."""
    stop = threading.Event()

    def interrupt() -> None:
        if stop.is_set():
            raise _Stopped

    copying = asyncio.ensure_future(
        copy.copy_installation(
            source.operations,
            target.operations,
            label=label,
            scratch=source.settings.data_dir,
            progress=_Progress(),
            interrupt=interrupt,
        )
    )
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
        loop.add_signal_handler(signal.SIGTERM, lambda: main.cancel() if main else None)
    try:
        return await asyncio.shield(copying)
    except asyncio.CancelledError:
        stop.set()
        with contextlib.suppress(Exception):
            await copying
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


class _Progress:
    """`copy.CopyProgress` as lines on stderr: ``copy-to-postgres: restore memories 10000/10000``;
    documents at every tenth of them (and the last), every other table once per stage."""

    def __call__(self, stage: str, table: str, done: int, total: int) -> None:
        if table == "processes" and stage != "verify" and done != total and done % max(1, total // 10):
            return
        sys.stderr.write(f"{COMMAND}: {stage} {table} {done}/{total}\n")
        sys.stderr.flush()
