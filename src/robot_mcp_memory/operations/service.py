"""Operator operations shared by the CLI and the dashboard: dump/load, backup, doctor, stats,
and importing a robotmem database (`import_robotmem`). Each takes an `ports.Installation` and
reaches storage only through its `OperatorStore` (backup: through `ports.Backups`).

`dump` writes process documents as one markdown file each (``processes/<id>.md``, hand-editable
and diffable — the spec's answer to "documents are no longer hand-editable") and `load` reads
them back exactly: a dump of a loaded dump is byte-identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from robot_mcp_memory.errors import (
    Conflict,
    InvalidInput,
    SchemaTooNew,
    StorageError,
    StoreNotWritable,
    StoreUnreadable,
)
from robot_mcp_memory.experiences.robotmem import ImportReport
from robot_mcp_memory.operations.archive import ARCHIVE
from robot_mcp_memory.operations.copy import UNFINISHED_COPY
from robot_mcp_memory.operations.ports import Backups, Installation, Progress
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.storage import files
from robot_mcp_memory.storage.clock import now_iso
from robot_mcp_memory.tenancy.principal import Principal

#: What a dump or a load moves besides processes, as an operator names it: (one, many, the
#: archive files counted). Tags, settings and the like travel too, inside these.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("memory", "memories", "memories"),
    ("session", "sessions", "sessions"),
    ("robot", "robots", "fleet_robots"),
    ("group", "groups", "fleet_groups"),
    ("lesson", "lessons", "lessons.lessons"),
)


def moved(processes: int, archived: Mapping[str, int]) -> list[tuple[int, str, str]]:
    """(count, one, many) for processes and every kind of `KINDS`, in that order."""
    return [(processes, "process", "processes")] + [(archived.get(table, 0), one, many) for one, many, table in KINDS]


@dataclass
class DumpReport:
    processes: int = 0
    files: list[str] = field(default_factory=list)
    archived: dict[str, int] = field(default_factory=dict)
    #: Files of an earlier dump in the same directory that this one did not write, now removed.
    removed: list[str] = field(default_factory=list)

    def kinds(self) -> list[tuple[int, str, str]]:
        return moved(self.processes, self.archived)


@dataclass
class LoadReport:
    processes: int = 0
    skipped: list[str] = field(default_factory=list)
    archived: dict[str, int] = field(default_factory=dict)

    def kinds(self) -> list[tuple[int, str, str]]:
        return moved(self.processes, self.archived)


async def dump(memory: Installation, principal: Principal, dest: Path, progress: Progress | None = None) -> DumpReport:
    """Write ``processes/<id>.md`` and ``archive/*.jsonl`` into `dest`. The processes and the other
    tables of index.db come from one snapshot (one read transaction), lessons.db from its own.
    Each file is replaced whole (never written through a symlink); the files an earlier dump wrote
    there (its `MANIFEST`) that this one did not are removed, so a later `load` cannot bring back
    what was deleted since — a file someone added by hand is never touched.

    Files are replaced one by one, so a dump stopped midway (kill, power cut, full disk) leaves
    some of this snapshot's files beside the earlier dump's: `UNFINISHED_DUMP` is written before
    the first file and removed after the last, and `load` refuses a directory that holds it.

    One dump at a time writes into a directory (`files.directory_lock`; another is refused as a
    `Conflict`): two at once shared the marker — the first to finish removed it while the second
    still wrote, so `load` took a mix of two snapshots, and the second then failed at its end —
    and their files interleaved."""
    memory.policy.require_admin(principal, "dump")
    out, folder = await asyncio.to_thread(_prepare, dest)
    with files.directory_lock(dest) as alone:
        if not alone:
            raise Conflict(
                f"another dump into {dest} is running; wait for it to finish (and dump again for a "
                "newer snapshot), or dump into another directory"
            )
        return await _dump(memory, dest, out, folder, progress)


async def _dump(memory: Installation, dest: Path, out: Path, folder: Path, progress: Progress | None) -> DumpReport:
    """`dump`'s writing, under the directory's lock."""
    unfinished = dest / UNFINISHED_DUMP
    await asyncio.to_thread(files.replace_text, unfinished, _UNFINISHED_NOTE.format(started=_now()))
    report = DumpReport()
    written: set[Path] = set()

    def each(doc: docmodel.ProcessDoc, n: int, total: int) -> None:
        path = out / f"{doc.id}.md"
        files.replace_text(path, doc.render())
        written.add(path)
        report.files.append(str(path))
        if progress:
            progress(n, total)

    report.processes, report.archived = await memory.operations.export(each, folder)
    written.update(folder / f"{name}.jsonl" for name in report.archived)
    report.removed = await asyncio.to_thread(_remove_stale, dest, written)
    await asyncio.to_thread(unfinished.unlink, missing_ok=True)  # the last step: every file is this dump's now
    return report


def _prepare(dest: Path) -> tuple[Path, Path]:
    """The dump's ``processes/`` and ``archive/`` folders, made if missing."""
    if dest.exists() and not dest.is_dir():
        raise InvalidInput(f"{dest} is not a directory; choose a directory (or a new path) for the dump")
    out, folder = dest / "processes", dest / ARCHIVE
    for sub in (out, folder):
        # Robots choose process ids, so they choose file names: a planted link to a folder
        # elsewhere would have the dump write (and replace) files there.
        if sub.is_symlink():
            raise InvalidInput(
                f"{sub} is a symbolic link; a dump writes only inside its own directory: "
                "remove the link or dump elsewhere"
            )
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)  # made here: only this user reads them
    out.mkdir(mode=0o700, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    return out, folder


#: The list of files a dump wrote, beside them: the next dump into the same directory removes
#: those it does not write again, and nothing else (a document added by hand stays).
MANIFEST = ".dump-manifest"
#: Beside the files while a dump writes them: a dump that did not finish (`dump`) left it.
UNFINISHED_DUMP = ".dump-unfinished"
_UNFINISHED_NOTE = (
    "A dump into this directory began at {started} and did not finish (it was interrupted, or is\n"
    "still running). Its files may be a mix of two snapshots, so `robot-mcp-memory load` refuses\n"
    "this directory until a dump into it finishes: run the dump again.\n"
)


def _remove_stale(dest: Path, written: set[Path]) -> list[str]:
    """Remove what the previous dump into `dest` wrote and this one did not (`MANIFEST`), then
    record what this one wrote; the removed paths."""
    manifest = dest / MANIFEST
    try:
        before = manifest.read_text(encoding="utf-8").splitlines() if manifest.is_file() else []
    except (OSError, UnicodeDecodeError):
        before = []
    now = {str(p.relative_to(dest)) for p in written}
    removed: list[str] = []
    for rel in sorted(set(before) - now):
        path = dest / rel
        inside = path.parent.resolve() in (dest.resolve() / "processes", dest.resolve() / ARCHIVE)
        if inside and path.suffix in (".md", ".jsonl") and (path.is_symlink() or path.is_file()):
            path.unlink()
            removed.append(str(path))
    files.replace_text(manifest, "".join(f"{rel}\n" for rel in sorted(now)))
    return removed


async def load(memory: Installation, principal: Principal, src: Path, progress: Progress | None = None) -> LoadReport:
    """Load ``processes/*.md`` from a dump directory (or a directory of .md files) as-is, and
    the dump's ``archive/`` (fleet, memories, sessions, tags, lessons) when it has one — all of
    index.db in one transaction, the search index rebuilt in it too: a load stopped at any point
    (kill -9, SIGTERM, a refused row, a full disk) leaves index.db as it was, never half loaded.

    lessons.db is another file, and no transaction spans two: its rows are loaded in a
    transaction left open until index.db's has committed, so a refusal in either leaves both as
    they were. Only a stop between the two commits leaves index.db loaded without the lessons; it
    is recorded in index.db (reported by `doctor`) until a load finishes (`ports.OperatorStore.restore`).

    What a load does to the rows already there (a merge; see `kit.archive`): an archive row
    replaces the row of the same key, rows the archive does not carry are kept. Documents that
    cannot be parsed are skipped and reported (`LoadReport.skipped`); the others load."""
    memory.policy.require_admin(principal, "load")
    folder = src / "processes" if (src / "processes").is_dir() else src
    if not folder.is_dir():
        raise InvalidInput(f"{src} is not a directory of process documents")
    _refuse_unfinished_dump(src)
    report = LoadReport()
    archived = src / ARCHIVE if (src / ARCHIVE).is_dir() else None
    # Ctrl-C cancels the awaiting coroutine, while the transaction runs on a worker thread: without
    # a word to it, the load went on and committed, and the command said "interrupted".
    stop = threading.Event()

    def interrupt() -> None:
        if stop.is_set():
            raise KeyboardInterrupt

    paths = sorted(folder.glob("*.md"))

    def documents() -> Iterator[docmodel.ProcessDoc]:
        """The documents to load, parsed one at a time (inside the transaction: never all in memory)."""
        seen: dict[str, str] = {}  # id -> the file that carried it
        for n, path in enumerate(paths, start=1):
            interrupt()
            if progress:
                progress(n, len(paths))
            try:
                # The operator's own files (a dump): a document stored before the frontmatter limits
                # must load back as it was dumped. This runs on the writer thread, not the event loop.
                doc = docmodel.parse(_read_document(path), bounded=False)
            except InvalidInput as exc:
                report.skipped.append(f"{path.name}: {exc.detail}")
                continue
            if doc.id in seen:
                report.skipped.append(
                    f"{path.name}: has the id '{doc.id}' of {seen[doc.id]}, which was loaded instead "
                    "(two documents titled the same?); give one of them its own 'id:' in the frontmatter"
                )
                continue
            seen[doc.id] = path.name
            if not doc.created or not doc.updated:
                now = doc.updated or doc.created or _now()
                doc = doc.model_copy(update={"created": doc.created or now, "updated": now})
            yield doc

    loading = asyncio.ensure_future(memory.operations.restore(documents(), archived, source=src, interrupt=interrupt))
    try:
        report.processes, report.archived = await asyncio.shield(loading)
    except asyncio.CancelledError:  # stop the transaction (it rolls back), then say so
        stop.set()
        with contextlib.suppress(BaseException):
            await loading
        raise
    return report


def _refuse_unfinished_dump(src: Path) -> None:
    """`InvalidInput` when `src` (or the dump it is the ``processes/`` folder of) holds a dump that
    did not finish (`UNFINISHED_DUMP`): its files may come from two snapshots — memories whose
    tags and sessions are missing — and nothing says which."""
    for where in (src, src.parent) if src.name == "processes" else (src,):
        if os.path.lexists(where / UNFINISHED_DUMP):
            raise InvalidInput(
                f"{where} holds a dump that did not finish (it was interrupted, or is still running): its "
                "files may be a mix of two snapshots, so nothing was loaded. Run `robot-mcp-memory dump "
                f"{where}` again, or load another dump"
            )


#: The largest .md file `load` reads: a document's character limit at 4 bytes a character.
MAX_DOCUMENT_BYTES = 4 * docmodel.MAX_DOCUMENT


def _read_document(path: Path) -> str:
    """The text of one document file, or `InvalidInput` saying why it cannot be loaded: not a
    regular file (a directory, a dangling symlink such as an editor's lock), unreadable, too big
    (checked before reading), or not UTF-8."""
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise InvalidInput("is a symlink to nothing (an editor's lock file?)") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot be read ({exc.strerror or type(exc).__name__})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput("is not a regular file")
    if info.st_size > MAX_DOCUMENT_BYTES:
        raise InvalidInput(f"is {info.st_size} bytes; a document is at most {MAX_DOCUMENT_BYTES} bytes")
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_DOCUMENT_BYTES + 1)  # the file may have grown since the stat
    except OSError as exc:
        raise InvalidInput(f"cannot be read ({exc.strerror or type(exc).__name__})") from exc
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise InvalidInput(f"is over {MAX_DOCUMENT_BYTES} bytes; a document is at most {MAX_DOCUMENT_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"is not UTF-8 text (byte {exc.start}); re-save it as UTF-8") from exc


def _now() -> str:
    return now_iso()


def backup(backups: Backups, memory_dir: Path, dest: Path, progress: Progress | None = None) -> list[Path]:
    """Online, consistent copies of the databases of `memory_dir` (`backups.databases`: index.db,
    and lessons.db when it exists) into `dest`.

    Every target is checked before anything is written (an existing file is never overwritten);
    the copies are made under temporary names and renamed into place together at the end. A
    failed or interrupted run removes what it wrote, and the directories it created."""
    sources = backups.databases(memory_dir)
    if not sources:
        raise InvalidInput(f"no database in {memory_dir}; check MEMORY_DATA_DIR")
    if dest.exists() and not dest.is_dir():
        raise InvalidInput(f"{dest} is not a directory; choose a new directory for the backup")
    targets = [dest / src.name for src in sources]
    taken = [str(t) for t in targets if t.exists() or t.is_symlink()]
    if taken:
        raise StorageError(f"{', '.join(taken)} already exists; choose a new backup location (nothing was written)")
    made = [d for d in (dest, *dest.parents) if not d.exists()]
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)  # made here: only this user reads it
    staged: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for src, target in zip(sources, targets, strict=True):
            tmp = files.temp_beside(target)
            staged.append((tmp, target))
            backups.copy(src, tmp, progress)
        for tmp, target in staged:
            os.replace(tmp, target)
            placed.append(target)
    except BaseException:  # Ctrl-C and SIGTERM too: leave nothing that blocks a retry
        for path in [*(tmp for tmp, _ in staged), *placed]:
            path.unlink(missing_ok=True)
        for d in made:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return targets


@dataclass
class Doctor:
    ok: bool
    lines: list[tuple[str, str, bool]]  # (check, detail, ok)


REINDEX = "run robot-mcp-memory reindex"


async def doctor(memory: Installation, full: bool = False, deep_index_check: bool | None = None) -> Doctor:
    """Health checks. `full`: the full integrity check instead of the quick one. Each full-text
    index's own check (`deep_index_check`, default: with `full`) may hold the write lock while it
    reads the index, so a serving process runs it only when asked; the CLI always does."""
    store = memory.operations
    deep = full if deep_index_check is None else deep_index_check
    # An index's own check writes (FTS5's is an INSERT): a store opened read-only cannot run it.
    skipped = deep and store.read_only
    deep = deep and not skipped
    lines: list[tuple[str, str, bool]] = []
    h = store.health(full=full)
    lines.append(("integrity", "ok" if not h.integrity else "; ".join(h.integrity[:5]), not h.integrity))
    supported = h.schema_supported
    lines.append(("schema", f"version {h.schema_version} (this server: {supported})", h.schema_version == supported))
    for ix in await store.text_indexes(deep=deep):
        detail = f"{ix.rows} rows, {ix.entries} index entries"
        if ix.problem is not None:
            detail += f"; the index is damaged ({ix.problem})"
        elif skipped:
            detail += " (FTS5's own check skipped: the directory is read-only)"
        lines.append((ix.name, detail if ix.ok else f"{detail}: {REINDEX}", ix.ok))
    unfinished = await store.unfinished_load()
    if unfinished is not None and unfinished.startswith(UNFINISHED_COPY):  # `copy.copy_installation`
        lines.append(
            (
                "copy",
                f"the {unfinished} did not finish or does not match its source: this installation is not a "
                "verified copy. Interrupted, it is still empty: run the copy again (robot-mcp-memory "
                "copy-to-postgres). If it holds rows, drop it (DROP SCHEMA … CASCADE) and copy into an empty one",
                False,
            )
        )
    elif unfinished is not None:  # stopped between index.db's commit and lessons.db's (`load`)
        lines.append(
            (
                "load",
                f"a load of {unfinished} did not finish: index.db holds it, lessons.db may not. Run "
                f"robot-mcp-memory load --data-dir {shlex.quote(str(memory.settings.data_dir.resolve()))} "
                f"{shlex.quote(unfinished)} again",
                False,
            )
        )
    if memory.settings.postgres:  # the server's disk and WAL are the cluster's, not this schema's
        lines.append(("size", f"{h.name} {h.size_bytes} bytes (tables and their indexes)", True))
    else:
        lines.append(("size", f"{h.name} {h.size_bytes} bytes, WAL {h.wal_bytes} bytes", True))
        lines.append(_disk(memory.settings.data_dir, read_only=store.read_only))
    return Doctor(ok=all(ok for _, _, ok in lines), lines=lines)


def _disk(data_dir: Path, *, read_only: bool = False) -> tuple[str, str, bool]:
    usage = shutil.disk_usage(data_dir)
    detail = f"{usage.free // (1024 * 1024)} MiB free of {usage.total // (1024 * 1024)} MiB"
    if read_only:  # a snapshot mount shows no free space, and nothing is written to it
        return ("disk", f"{detail} (read-only: nothing is written there)", True)
    return ("disk", detail, usage.free > 100 * 1024 * 1024)


def doctor_unopenable(data_dir: Path, exc: StoreUnreadable | SchemaTooNew | StoreNotWritable) -> Doctor:
    """The doctor's report on a database that could not be opened (nothing was modified):
    the reason and the remedy as a failed check, instead of the server's exit 65."""
    if isinstance(exc, SchemaTooNew):
        lines = [("schema", f"version {exc.found} (this server: {exc.supported}): upgrade robot-mcp-memory", False)]
    elif isinstance(exc, StoreNotWritable):  # a read-only directory holding a file to upgrade
        lines = [("access", f"{Path(exc.path).name}: {exc.reason}", False)]
    else:
        lines = [("integrity", f"{Path(exc.path).name}: {exc.reason}. {exc.remedy}", False)]
    if data_dir.is_dir():
        lines.append(_disk(data_dir))
    return Doctor(ok=False, lines=lines)


async def reindex(memory: Installation, principal: Principal) -> dict[str, int]:
    """Rebuild every full-text index of index.db from its rows, in one transaction: entries made, by index."""
    memory.policy.require_admin(principal, "reindex")
    return await memory.operations.rebuild_text_indexes()


async def stats(memory: Installation, *, serving: bool = True) -> dict[str, int]:
    """Rows per table of index.db, and ``lessons`` (the rows of lessons.db); for a `serving`
    process also the hot writes it dropped (a command run beside the server has its own counter,
    always 0: it said nothing about the server's)."""
    counts = await asyncio.to_thread(memory.operations.row_counts)  # a count per table: off the loop
    if serving:
        counts["hot_writes_dropped"] = memory.operations.hot_writes_dropped
    return counts


async def import_robotmem(
    memory: Installation,
    principal: Principal,
    path: Path,
    *,
    robot: str | None = None,
    collection_prefix: str = "",
    progress: Progress | None = None,
) -> ImportReport:
    """Bring a robotmem ``memory.db`` across (memories, perceptions, sessions, tags); idempotent.
    Fleet administration: writes are attributed to `robot` (default ``ROBOT_ID``)."""
    memory.policy.require_admin(principal, "importing a robotmem database")
    return await memory.operations.import_robotmem(
        path, robot=robot, collection_prefix=collection_prefix, progress=progress
    )
