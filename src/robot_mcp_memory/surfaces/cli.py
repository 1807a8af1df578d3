"""The operator's command line: ``robot-mcp-memory [command]``.

With no command it serves, on the transport ``MCP_TRANSPORT`` names (the spec's convention).
Errors are one clear line on stderr and a non-zero exit; ``--debug`` shows a traceback.

Exit codes: 0 ok · 1 command failed · 2 usage · 65 the database cannot be used (unreadable,
foreign, newer schema, or not writable: restarting will not help; for ``import-robotmem``, the
robotmem file is not a robotmem database this version can read) · 69 ``serve``/``web`` cannot listen
on the host:port (in use, host does not resolve) · 74 a file or directory could not be
read or written (the message names it; a full disk while creating or upgrading the database) · 75 a
resource is busy for now (another process held the database's write lock while this one opened
it; a locked robotmem file) · 78 bad configuration · 130 stopped (Ctrl-C; SIGTERM during a copy).

With ``MEMORY_DATABASE_URL`` every command but ``backup`` (pg_dump's job) and ``import-robotmem``
(which writes SQLite: import, then ``copy-to-postgres``) works on PostgreSQL; the server is reached
once first, so a wrong URL is one line naming what to fix (`storage.postgres.reach`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from robot_mcp_memory import __version__, logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.errors import (
    CannotListen,
    ConfigError,
    MemoryError_,
    MigrationFailed,
    SchemaTooNew,
    StoreBusy,
    StoreNotWritable,
    StoreUnreadable,
    StoreWriteFailed,
)
from robot_mcp_memory.experiences.postgres.vectors import PostgresMemoryVectors
from robot_mcp_memory.experiences.sqlite import robotmem_import
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.operations import handover
from robot_mcp_memory.operations import service as operations
from robot_mcp_memory.storage.postgres import reach
from robot_mcp_memory.storage.sqlite import StoreMode
from robot_mcp_memory.surfaces import cli_copy
from robot_mcp_memory.tenancy.principal import LOCAL
from robot_mcp_memory.tenancy.tokens import ROBOT_RE, generate_token, parse_robot_tokens

EXIT_FAILED = 1
EXIT_DATA = 65
#: The file system refused a read or write (a path that is a file, no permission, a full disk) (EX_IOERR).
EXIT_IOERR = 74
#: ``serve``/``web`` cannot listen on the host:port: in use, or the host does not resolve (EX_UNAVAILABLE).
EXIT_UNAVAILABLE = 69
#: A resource is busy for now (a locked robotmem file): the same command may work in a moment (EX_TEMPFAIL).
EXIT_TEMPFAIL = 75
EXIT_CONFIG = 78

_log = logs.get("robot_mcp_memory.surfaces.cli")


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

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_)
        c.add_argument("--data-dir", help="overrides MEMORY_DATA_DIR")
        return c

    web = sub.add_parser("web", help="serve only the REST API and the dashboard (no MCP) on the port")
    web.add_argument("--host", help="overrides MCP_HOST")
    web.add_argument("--port", type=int, help="overrides MCP_PORT")
    web.add_argument("--data-dir", help="overrides MEMORY_DATA_DIR")

    cmd("dump", "write every process as markdown (processes/<id>.md) into a directory").add_argument(
        "dest", help="directory to write into (created if missing)"
    )
    cmd("load", "load process markdown files from a dump directory, exactly as written").add_argument(
        "src", help="a dump directory, or a directory of .md files"
    )
    cmd(
        "backup", "online, consistent copy of index.db (and lessons.db), safe while serving (on PostgreSQL: pg_dump)"
    ).add_argument("dest", help="a new directory for the copies")
    cmd("reindex", "rebuild the full-text indexes (processes and memories) from the stored rows")
    reembed = cmd(
        "reembed", "embed processes and memories lacking a vector of the current model (after a model change)"
    )
    reembed.add_argument("--force", action="store_true", help="re-embed everything, not only what is missing")
    reembed.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the model to load")
    doctor = cmd("doctor", "check integrity, index vs rows, schema version and disk; exit 1 on a problem")
    doctor.add_argument("--full", action="store_true", help="full integrity_check instead of quick_check")
    cmd("stats", "row counts as JSON")
    rm = cmd("import-robotmem", "import a robotmem memory.db: memories, perceptions, sessions, tags (idempotent)")
    rm.add_argument("path", help="robotmem's database (~/.robotmem/memory.db); read-only, never modified")
    rm.add_argument("--collection-prefix", default="", help="prepended to every robotmem collection name")
    rm.add_argument("--robot", help="the robot the memories are attributed to (default: ROBOT_ID)")
    cli_copy.add_parser(sub)
    hand = cmd(
        "hand-over",
        "give documents, memories and sessions saved without provenance (robot 'unknown') to 'shared' "
        "or to one robot, so robot tokens can see them; counts only, unless --apply",
    )
    hand.add_argument("--to", required=True, help="'shared' (every robot reads them) or a robot id")
    hand.add_argument("--apply", action="store_true", help="hand them over (without it: only count)")
    token = sub.add_parser("token", help="token helpers", description="token helpers")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    gen = token_sub.add_parser("generate", help="print a fresh admin token and a MEMORY_ROBOT_TOKENS map")
    gen.add_argument("robots", nargs="*", help="robot ids to issue tokens for")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with the flags given put over their variables. A refused
    value that came from a flag is named by the flag (``--port must be …``), not the variable
    the operator never set: each `ConfigError` problem begins with the variable's name."""
    overrides: dict[str, str] = {}
    flags: dict[str, str] = {}  # variable -> the flag that set it
    for attr, var in (
        ("transport", "MCP_TRANSPORT"),
        ("host", "MCP_HOST"),
        ("port", "MCP_PORT"),
        ("data_dir", "MEMORY_DATA_DIR"),
        ("target_url", "MEMORY_DATABASE_URL"),  # copy-to-postgres --to (hand-over's --to is a robot)
    ):
        value = getattr(args, attr, None)
        if value is not None:
            overrides[var] = str(value)
            flags[var] = "--to" if attr == "target_url" else "--" + attr.replace("_", "-")
    # The environment goes straight into Settings, its only reader (tests/test_architecture.py).
    try:
        return Settings.from_env({**os.environ, **overrides})
    except ConfigError as exc:
        named = [next((flags[v] + p[len(v) :] for v in flags if p.startswith(v + " ")), p) for p in exc.problems]
        raise ConfigError(named) from exc


#: Options of the program itself, which may come before a command.
_TOP_LEVEL = ("--debug",)
_HELP = ("-h", "--help", "--version")


def _with_default_command(argv: Sequence[str]) -> list[str]:
    """`argv` with ``serve`` put in where no command is named: without a command the program
    serves, so ``robot-mcp-memory --port 9200`` (and ``scripts/serve --host 0.0.0.0``) means
    ``robot-mcp-memory serve --port 9200``."""
    args = list(argv)
    i = 0
    while i < len(args) and args[i] in _TOP_LEVEL:
        i += 1
    if i == len(args) or (args[i].startswith("-") and args[i] not in _HELP):
        args.insert(i, "serve")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(_with_default_command(sys.argv[1:] if argv is None else argv))
    if args.command == "token":  # needs no settings: a bad unrelated variable must not block it
        return _token(args)
    try:
        settings = _settings(args)
    except ConfigError as exc:
        # one line, not a log event and then the same message again (docs/operations.md)
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_CONFIG
    quiet = args.command not in ("serve", "web") and not args.debug
    logs.configure("warning" if quiet else settings.log_level)
    try:
        return _dispatch(args, settings)
    except (StoreUnreadable, StoreNotWritable, SchemaTooNew, MigrationFailed) as exc:
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_DATA
    except StoreBusy as exc:  # another process held the lock: the same start works in a moment
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_TEMPFAIL
    except StoreWriteFailed as exc:  # a full disk: works again once there is room, without a restore
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_IOERR
    except CannotListen as exc:
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_UNAVAILABLE
    except MemoryError_ as exc:
        if args.debug:
            raise
        sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
        return EXIT_FAILED
    except OSError as exc:
        # a file system refusal (a path that is a file, no permission, a full disk): one line;
        # the servers report their own (a port in use is not an I/O error of a file)
        if args.debug or args.command in ("serve", "web"):
            raise
        sys.stderr.write(f"robot-mcp-memory: {_os_error(exc)}\n")
        return EXIT_IOERR
    except KeyboardInterrupt:
        return 130


def _os_error(exc: OSError) -> str:
    """`exc` for an operator: what failed and on which path, without Python's ``[Errno n]``."""
    reason = exc.strerror or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    where = f" ({' -> '.join(paths)})" if paths else ""
    return f"{reason}{where}; check the path and its permissions"


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    command = args.command
    if command == "serve":
        from robot_mcp_memory.surfaces.serve import serve

        return serve(settings)
    if command == "web":
        from robot_mcp_memory.surfaces.web.standalone import serve as serve_web

        serve_web(settings)
        return 0
    if command == cli_copy.COMMAND:
        return cli_copy.run(settings, _out)
    if settings.postgres and command == "import-robotmem":  # before opening (or reaching) anything
        sys.stderr.write(f"robot-mcp-memory: {_IMPORT_ON_POSTGRES}\n")
        return EXIT_FAILED
    if command == "backup":
        with _terminate_as_interrupt():  # a stopped backup removes what it wrote, as on Ctrl-C
            written = operations.backup(
                Memory.backups(settings), settings.data_dir, Path(args.dest), _progress("backup")
            )
        _out("\n".join(str(p) for p in written))
        return 0
    if command == "import-robotmem":
        try:  # check the file before opening (or creating) our own database
            robotmem_import.RobotmemFile(Path(args.path)).close()
        except robotmem_import.RobotmemUnreadable as exc:
            sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
            return EXIT_DATA
        except robotmem_import.RobotmemBusy as exc:
            sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
            return EXIT_TEMPFAIL
    if settings.database_url is not None:  # one line on what to fix, not a pool's 30 s wait
        reach.reach(settings.database_url)
    elif command in _READS_A_DATABASE and not settings.index_path.exists():
        # A mistyped --data-dir made an empty database that "passed" doctor and dumped nothing.
        sys.stderr.write(
            f"robot-mcp-memory: no database in {settings.data_dir} (no index.db): nothing to {command}. "
            "--data-dir (or MEMORY_DATA_DIR) names the directory the server keeps index.db in\n"
        )
        return EXIT_FAILED
    if command == "doctor":
        try:
            return asyncio.run(_with_memory(args, settings))
        except (StoreUnreadable, SchemaTooNew, StoreNotWritable) as exc:  # raised before anything was modified
            return _doctor_lines(operations.doctor_unopenable(settings.data_dir, exc))
    return asyncio.run(_with_memory(args, settings))


#: Commands that only read or rework what a database holds: on a directory without one they say
#: so instead of creating an empty database (``load`` and ``import-robotmem`` fill a new one).
_READS_A_DATABASE = frozenset({"doctor", "dump", "stats", "reindex", "reembed", "hand-over"})
#: With MEMORY_DATABASE_URL the robotmem import (which writes SQLite) says how to get there instead;
#: ``backup`` refuses through `PostgresBackups` (the backups of a database are pg_dump's).
_IMPORT_ON_POSTGRES = (
    "import-robotmem writes a SQLite data directory, not PostgreSQL: import into a fresh SQLite dir "
    "(without MEMORY_DATABASE_URL: robot-mcp-memory import-robotmem --data-dir <new dir> <memory.db>), then "
    "copy-to-postgres (robot-mcp-memory copy-to-postgres --data-dir <new dir> --to <url>)"
)
#: Commands that only read: on a data directory they cannot write (a snapshot, a read-only mount)
#: they open the database read-only instead of refusing it.
_ONLY_READS = frozenset({"doctor", "dump", "stats"})


def _counted(kinds: list[tuple[int, str, str]]) -> str:
    """``3 processes, 1 memory, 0 sessions …``: every kind a dump or a load moves, zeros too."""
    return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in kinds)


def _doctor_lines(report: operations.Doctor) -> int:
    for check, detail, ok in report.lines:
        _out(f"{'ok  ' if ok else 'FAIL'} {check}: {detail}")
    return 0 if report.ok else EXIT_FAILED


async def _with_memory(args: argparse.Namespace, settings: Settings) -> int:
    try:
        # A command does its own work, in the foreground, one call after another (`StoreMode`).
        memory = Memory.open(settings, mode=StoreMode.BLOCKING, backfill=False)
    except StoreNotWritable:
        if args.command not in _ONLY_READS:
            raise
        memory = Memory.open(settings, mode=StoreMode.BLOCKING, backfill=False, read_only=True)
    try:
        if args.command == "dump":
            dumped = await operations.dump(memory, LOCAL, Path(args.dest), _progress("dump"))
            stale = f" (removed {len(dumped.removed)} files of an earlier dump)" if dumped.removed else ""
            _out(f"dumped {_counted(dumped.kinds())} to {args.dest}{stale}")
            return 0
        if args.command == "load":
            loaded = await operations.load(memory, LOCAL, Path(args.src), _progress("load"))
            _out(f"loaded {_counted(loaded.kinds())}; skipped {len(loaded.skipped)}")
            for line in loaded.skipped:
                sys.stderr.write(f"skipped {line}\n")
            return 0 if not loaded.skipped else EXIT_FAILED
        if args.command == "reindex":
            indexed = await operations.reindex(memory, LOCAL)
            _out(json.dumps({"indexed": indexed["processes_fts"], "memories_indexed": indexed["memories_fts"]}))
            return 0
        if args.command == "reembed":
            embedder = memory.embedder
            if (
                embedder is None
                or embedder.mode == "off"
                or not await asyncio.to_thread(embedder.wait_settled, args.wait)
            ):
                sys.stderr.write(
                    "robot-mcp-memory: the embedder is off or did not load (MEMORY_EMBEDDER); nothing re-embedded\n"
                )
                return EXIT_FAILED
            done = await memory.processes.reembed(LOCAL, _progress("processes"), force=args.force)
            memories = 0
            vectors = memory.experiences.vectors
            if isinstance(vectors, MemoryVectorIndex | PostgresMemoryVectors):
                memories = await asyncio.to_thread(vectors.backfill_blocking, _progress("memories"), force=args.force)
            _out(json.dumps({"embedded": done, "memories_embedded": memories}))
            return 0
        if args.command == "doctor":
            return _doctor_lines(await operations.doctor(memory, full=args.full, deep_index_check=True))
        if args.command == "stats":
            _out(json.dumps(await operations.stats(memory, serving=False), indent=2, sort_keys=True))
            return 0
        if args.command == "hand-over":
            moved = await handover.hand_over(memory, LOCAL, args.to, apply=args.apply)
            kinds = f"{moved.processes} processes, {moved.memories} memories, {moved.sessions} sessions"
            if moved.applied:
                _out(f"handed {kinds} from 'unknown' to '{moved.to}'")
            elif moved.total:
                _out(f"would hand {kinds} from 'unknown' to '{moved.to}'; run again with --apply to do it")
            else:
                _out("nothing carries robot 'unknown': nothing to hand over")
            return 0
        if args.command == "import-robotmem":
            try:
                imported = await operations.import_robotmem(
                    memory,
                    LOCAL,
                    Path(args.path),
                    robot=args.robot,
                    collection_prefix=args.collection_prefix,
                    progress=_progress("import"),
                )
            except robotmem_import.RobotmemUnreadable as exc:
                sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
                return EXIT_DATA
            except robotmem_import.RobotmemBusy as exc:
                sys.stderr.write(f"robot-mcp-memory: {exc.detail}\n")
                return EXIT_TEMPFAIL
            _out("\n".join(imported.lines()))
            return EXIT_FAILED if imported.failed is not None else 0
    finally:
        memory.close()
    raise AssertionError(args.command)  # argparse rejects unknown commands


def _token(args: argparse.Namespace) -> int:
    """Print lines the server accepts: the map is checked by the server's own parser before printing."""
    bad = [r for r in args.robots if not ROBOT_RE.match(r)]  # before joining: ',' or ':' would re-split
    if bad:
        sys.stderr.write(f"robot-mcp-memory: not valid robot ids: {', '.join(bad)}\n")
        return EXIT_FAILED
    admin = generate_token()
    robots = ",".join(f"{r}:{generate_token()}" for r in args.robots)
    try:
        parse_robot_tokens(robots, admin)
    except ValueError as exc:
        problems = exc.args[0] if exc.args and isinstance(exc.args[0], list) else [str(exc)]
        sys.stderr.write(f"robot-mcp-memory: not valid robot ids: {'; '.join(map(str, problems))}\n")
        return EXIT_FAILED
    _out(f"MEMORY_TOKEN={admin}")
    if robots:
        _out(f"MEMORY_ROBOT_TOKENS={robots}")
    return 0


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside this block (in the main thread), so ``finally`` and
    ``except`` clauses clean up instead of the process vanishing mid-write."""

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _progress(label: str) -> Callable[[int, int], None]:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""
    tty = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        if not tty or total <= 0:
            return
        width = 30
        filled = int(width * done / total)
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show
