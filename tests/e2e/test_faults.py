"""Faults against the real server process: ``kill -9`` in a mixed write storm, database files it
cannot use, a full disk, a data directory that turns read-only, and a backup taken mid-storm.

Each test is bounded in count and time and uses 127.0.0.1 only. Waits are polls with a deadline
(the harness) or events; no test measures time.

The disk-full test needs no special privileges: the server runs under ``RLIMIT_FSIZE`` (CPython
ignores SIGXFSZ, so a write past the limit fails with EFBIG, which SQLite reports as an I/O error
on write). Where ``mount`` is permitted (root in a container or VM) the same test also runs on a
small tmpfs, where the disk really fills (ENOSPC, SQLITE_FULL). Read-only tests need root for
``chattr +i`` / a read-only bind mount and are skipped where those are not available.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL
from tests.conftest import MAILROOM, Client, doc
from tests.e2e.harness import ServerProcess, child_env, console_script, free_port, http_session, json_lines
from tests.e2e.test_startup_safety import EXIT_DATA, run_server, stderr_lines
from tests.e2e.writers import ADMIN, FLEET_ENV, WRITERS, Ledger, missing, set_up_fleet, writers

pytestmark = pytest.mark.e2e

#: kill -9 once this many writes were acknowledged in the round (varied, so the kill lands at
#: different points of the storm and of the WAL's life)
STORM_ROUNDS = (20, 45, 90, 30, 120, 60)
ROUND_DEADLINE_S = 30.0
DOCTOR_DEADLINE_S = 60.0
#: RLIMIT_FSIZE for the disk-full test: a fresh index.db plus a few dozen documents in its WAL
FSIZE_LIMIT = 1_500_000
TMPFS_SIZE = "1536k"
#: After the limit is lifted: above doctor's 100 MiB free-space floor (tmpfs only uses what is stored).
TMPFS_LIFTED = "256m"
FILL_MAX_WRITES = 500


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def doctor(data_dir: Path) -> subprocess.CompletedProcess[bytes]:
    """``robot-mcp-memory doctor --data-dir`` as an operator runs it (exit 0: no inconsistency)."""
    with anyio.fail_after(DOCTOR_DEADLINE_S):
        return await anyio.run_process(
            [str(console_script()), "doctor", "--data-dir", str(data_dir)],
            env=child_env(MEMORY_EMBEDDER="hashing"),
            check=False,
        )


def assert_doctor_ok(done: subprocess.CompletedProcess[bytes]) -> None:
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, f"doctor found a problem:\n{out}\n{done.stderr.decode(errors='replace')}"
    assert "FAIL" not in out, out


def assert_quiet_logs(server: ServerProcess) -> None:
    """No run of the server logged an error, an unexpected exception or a lock timeout."""
    for run in range(len(server.stderr_paths)):
        text = server.stderr(run)
        assert "database is locked" not in text, text
        errors = [line for line in json_lines(text) if line.get("level") in ("error", "critical")]
        assert errors == [], f"run {run + 1} logged errors: {errors}"


def table_counts(index: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        out: dict[str, Any] = {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: S608 - fixed names
            for t in ("processes", "processes_fts", "memories", "memories_fts")
        }
        out["quick_check"] = conn.execute("PRAGMA quick_check").fetchone()[0]
    finally:
        conn.close()
    return out


# ---------------------------------------------------------------------------- a. kill -9 mid-storm
async def test_every_write_acknowledged_in_a_mixed_storm_survives_kill_9_and_doctor_finds_no_fault(
    tmp_path: Path,
) -> None:
    server = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=FLEET_ENV)
    await server.start()
    ledger = Ledger()
    try:
        await set_up_fleet(server)
        for round_, kill_after in enumerate(STORM_ROUNDS):
            ledger.enough, ledger.enough_at, ledger.killed = anyio.Event(), ledger.acks + kill_after, False
            with anyio.fail_after(ROUND_DEADLINE_S):
                async with anyio.create_task_group() as tg:
                    for writer in writers(ledger, round_):
                        tg.start_soon(writer.run, server)
                    await ledger.enough.wait()
                    in_flight_at_kill = ledger.in_flight
                    ledger.killed = True
                    assert await server.kill() == -9
                    tg.cancel_scope.cancel()
            assert ledger.failures == [], f"round {round_}: writes failed before the kill"
            assert in_flight_at_kill > 0, "the kill should land while writes are in flight"

            assert_doctor_ok(await doctor(server.data_dir))  # the crashed file, before any restart
            counts = table_counts(server.index_path)  # doctor folded the WAL in: one file to read
            assert counts["processes"] == counts["processes_fts"], counts
            assert counts["memories"] == counts["memories_fts"], counts
            await server.start()
            lost = await missing(server, ledger)
            assert lost == [], f"round {round_}: acknowledged writes lost to kill -9: {lost}"
        kinds = (ledger.processes, ledger.outcomes, ledger.notes, ledger.memories, ledger.lessons, ledger.robots)
        assert all(kinds), "every kind of write was acknowledged at least once"
    finally:
        await server.stop()
    assert_quiet_logs(server)


# ---------------------------------------------------------------------------- b. files it cannot use
def make_index(data: Path, documents: int = 40) -> Path:
    """A real, closed index.db (one file: the WAL is checkpointed at close) holding `documents`."""

    async def fill(memory: Memory) -> None:
        for n in range(documents):
            body = f"## Steps\n1. carry crate {n} to bay {n % 7}\n" + f"- crate {n} detail\n" * 40
            await memory.processes.save(ADMIN_PRINCIPAL, doc(f"crate-{n}", f"Carry crate {n}", body))

    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data), "MEMORY_EMBEDDER": "hashing"}))
    try:
        anyio.run(fill, memory)
    finally:
        memory.close()
    index = data / "index.db"
    assert sorted(p.name for p in data.iterdir()) == ["index.db"]
    return index


def serve_once(data: Path) -> subprocess.CompletedProcess[str]:
    return run_server({"MCP_TRANSPORT": "sse", "MCP_PORT": str(free_port()), "MEMORY_DATA_DIR": str(data)})


def assert_refused_with_one_line(done: subprocess.CompletedProcess[str], path: Path, remedy: str) -> None:
    assert done.returncode == EXIT_DATA, done.stderr
    assert done.stdout == ""
    lines = stderr_lines(done)
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0]
    assert remedy in lines[0], lines[0]


def test_a_truncated_index_db_exits_65_naming_it_and_stays_byte_identical(tmp_path: Path) -> None:
    index = make_index(tmp_path / "data")
    size = index.stat().st_size
    with index.open("r+b") as fh:
        fh.truncate(size // 2 // 4096 * 4096)  # whole pages gone, the header intact
    before = sha256(index)

    done = serve_once(tmp_path / "data")

    assert_refused_with_one_line(done, index, "backup")
    assert sha256(index) == before


def test_an_index_db_from_a_newer_version_exits_65_and_stays_byte_identical(tmp_path: Path) -> None:
    index = make_index(tmp_path / "data", documents=2)
    conn = sqlite3.connect(index, isolation_level=None)
    conn.execute("UPDATE store_meta SET value = '999' WHERE key = 'schema_version'")
    conn.close()
    assert sorted(p.name for p in index.parent.iterdir()) == ["index.db"]
    before = sha256(index)

    done = serve_once(tmp_path / "data")

    assert_refused_with_one_line(done, index, "Upgrade")
    assert "999" in done.stderr
    assert sha256(index) == before


def test_a_garbage_lessons_db_exits_65_naming_lessons_db_and_stays_byte_identical(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_index(data, documents=2)
    lessons = data / "lessons.db"
    lessons.write_bytes(b'{"lessons": [{"scope": "group:g-a", "key": "gr')  # truncated JSON, as in the spec
    before = sha256(lessons)

    done = serve_once(data)

    assert_refused_with_one_line(done, lessons, "a copy of lessons.db")
    assert sha256(lessons) == before


async def test_zero_byte_database_files_hold_nothing_so_the_server_starts_fresh(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "index.db").write_bytes(b"")
    (data / "lessons.db").write_bytes(b"")
    server = ServerProcess(data_dir=data, log_dir=tmp_path, env=FLEET_ENV)
    await server.start()
    try:
        async with http_session(server, token=ADMIN) as admin:
            assert (await admin.call("save_process", markdown=MAILROOM))["action"] == "created"
            assert (await admin.call("set_self_improve", enabled=True))["global_self_improve"] is True
            assert "error" not in await admin.call("register_robot", robot_id="rap-4")
            recorded = await admin.call("record_params", robot="rap-4", key="grip", params={"force": 2})
            assert recorded["recorded"] is True
        assert await server.stop() == 0
        await server.start()
        async with http_session(server, token=ADMIN) as admin:
            assert "error" not in await admin.call("get_process", id="fetch-package-mailroom")
            lessons = (await admin.call("recall_params", robot="rap-4", key="grip"))["lessons"]
            assert [lesson["params"] for lesson in lessons] == [{"force": 2}]
    finally:
        await server.stop()


# ---------------------------------------------------------------------------- c. disk full, read-only
def _root_can(*probe: str) -> bool:
    if sys.platform != "linux" or shutil.which(probe[0]) is None:
        return False
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@dataclass
class Mount:
    """A mount the test made (tmpfs or bind), unmounted (lazily, if still busy) at the end."""

    target: Path

    @classmethod
    def try_tmpfs(cls, target: Path, size: str) -> Mount | None:
        target.mkdir(parents=True, exist_ok=True)
        if not _root_can("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(target)):
            return None
        return cls(target)

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.target)], check=True, timeout=30)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.target)], capture_output=True, timeout=30)


def fsize_limited(limit: int) -> list[str]:
    """The server command under RLIMIT_FSIZE (set in a wrapper that then execs the server)."""
    code = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
        "os.execv(sys.executable, [sys.executable, '-m', 'robot_mcp_memory'])"
    )
    return [sys.executable, "-c", code]


@pytest.fixture(params=["file-size-limit", "tmpfs"])
def full_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ServerProcess, Mount | None]]:
    """A server whose writes will run out of room: under RLIMIT_FSIZE, or on a 1.5 MB tmpfs."""
    data = tmp_path / "data"
    env = {**FLEET_ENV, "MEMORY_LOG_LEVEL": "warning"}  # stderr is a file of the server's too: keep it small
    if request.param == "file-size-limit":
        yield ServerProcess(data_dir=data, log_dir=tmp_path, env=env, command=fsize_limited(FSIZE_LIMIT)), None
        return
    mount = Mount.try_tmpfs(data, TMPFS_SIZE)
    if mount is None:
        pytest.skip(
            "mount is not permitted here: run the tests as root (with CAP_SYS_ADMIN in a container); "
            "the file-size-limit variant covers disk full"
        )
    try:
        yield ServerProcess(data_dir=data, log_dir=tmp_path, env=env), mount
    finally:
        mount.unmount()


def is_storage_refusal(result: dict[str, Any]) -> bool:
    """A clear refusal: the storage code, a message that says nothing was stored and names the
    disk, and no internals (SQL, the path)."""
    detail = str(result.get("detail", ""))
    return (
        result.get("error") == "storage"
        and "not stored" in detail
        and "disk" in detail
        and "sqlite" not in detail.lower()
        and "/" not in detail
    )


async def fill(admin: Client, ledger: Ledger, prefix: str) -> dict[str, Any]:
    """Save documents (and learn) until the server refuses; returns the refusal."""
    for i in range(FILL_MAX_WRITES):
        pid = f"{prefix}-{i}"
        body = "## Steps\n" + "".join(f"1. move pallet {i}-{w} past marker q{i}x{w}\n" for w in range(60))
        result = await admin.call("save_process", markdown=doc(pid, f"Move pallet {i}", body))
        if "error" in result:
            return result
        ledger.processes.add(pid)
        learned = await admin.call(
            "learn", insight=f"pallet {i} tipped at speed {i}.5", context={"storm": prefix, "seq": i}
        )
        if "error" in learned:
            return learned
        ledger.memories.setdefault(prefix, set()).add(learned["memory_id"])
    raise AssertionError(f"{FILL_MAX_WRITES} writes fitted: the disk never filled")


async def test_a_full_disk_refuses_writes_clearly_keeps_reads_and_loses_nothing(
    full_disk: tuple[ServerProcess, Mount | None],
) -> None:
    server, mount = full_disk
    ledger = Ledger()
    await server.start()
    try:
        async with http_session(server, token=ADMIN) as admin:
            refusal = await fill(admin, ledger, "full")
            assert is_storage_refusal(refusal), refusal
            if mount is not None:
                assert "disk is full" in refusal["detail"], refusal  # ENOSPC is SQLITE_FULL
            anchor = sorted(ledger.processes)[0]
            # Every kind of write either fits in what is left or is refused the same clear way.
            for tool, args in (
                ("save_process", {"markdown": doc("one-more", "One more", "## Steps\n1. x\n" * 400)}),
                ("record_outcome", {"id": anchor, "success": True}),
                ("record_outcome", {"id": anchor, "success": False, "note": "n" * 1900}),
                ("learn", {"insight": "a long insight " * 600}),
            ):
                result = await admin.call(tool, **args)
                assert "error" not in result or is_storage_refusal(result), (tool, result)
            # Reads keep working.
            for pid in sorted(ledger.processes):
                assert "error" not in await admin.call("get_process", id=pid), pid
            found = await admin.call("find_processes", query="move the pallet past the marker", k=5)
            assert len(found["processes"]) == 5
            listed = await admin.call("list_processes", limit=500)
            assert ledger.processes <= {p["id"] for p in listed["processes"]}
            recalled = await admin.call("recall", query="pallet tipped", n=5)
            assert len(recalled["memories"]) == 5
            if mount is not None:  # space freed under the running server: writes work again at once
                mount.resize(TMPFS_LIFTED)
                assert "error" not in await admin.call("save_process", markdown=doc("freed", "Space freed"))
                ledger.processes.add("freed")
        # Stopped while full: the WAL may stay beside index.db, and the next start folds it back in.
        assert await server.stop() == 0

        # The limit is lifted: nothing was lost, writes work again, doctor is content.
        server.command = ServerProcess(data_dir=server.data_dir, log_dir=server.log_dir).command
        await server.start()
        assert await missing(server, ledger) == []
        async with http_session(server, token=ADMIN) as admin:
            assert (await admin.call("save_process", markdown=MAILROOM))["action"] == "created"
        assert_doctor_ok(await doctor(server.data_dir))
    finally:
        await server.stop()


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Paths to make immutable (``chattr +i``) during the test; always made mutable again."""
    probe = tmp_path / "chattr-probe"
    probe.write_bytes(b"")
    if not _root_can("chattr", "+i", str(probe)):
        pytest.skip("chattr +i is not available here: run the tests as root, with e2fsprogs installed, on ext4 or xfs")
    subprocess.run(["chattr", "-i", str(probe)], check=True, timeout=30)
    paths: list[Path] = []
    try:
        yield paths
    finally:
        for path in paths:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True, timeout=30)


async def test_a_data_directory_that_turns_read_only_refuses_writes_clearly_and_keeps_reads(
    tmp_path: Path, immutable: list[Path]
) -> None:
    """Permission bits do not stop root, so the files are made immutable (``chattr +i``) under the
    running server, as a read-only remount of a failing disk would. The ``-shm`` index stays
    writable: it is memory-mapped, and a write fault on an immutable mapping is SIGBUS."""
    server = ServerProcess(
        data_dir=tmp_path / "data", log_dir=tmp_path, env={**FLEET_ENV, "MEMORY_LOG_LEVEL": "warning"}
    )
    ledger = Ledger()
    await server.start()
    try:
        async with http_session(server, token=ADMIN) as admin:
            for i in range(5):
                assert "error" not in await admin.call("save_process", markdown=doc(f"ro-{i}", f"Read only {i}"))
                ledger.processes.add(f"ro-{i}")
            learned = await admin.call("learn", insight="the shelf is 40 cm deep", context={"storm": "ro"})
            ledger.memories["ro"] = {learned["memory_id"]}

            immutable += [server.data_dir / "index.db", server.data_dir / "index.db-wal", server.data_dir]
            await anyio.run_process(["chattr", "+i", *map(str, immutable)])
            for tool, args in (
                ("save_process", {"markdown": doc("ro-new", "Not stored")}),
                ("record_outcome", {"id": "ro-0", "success": True}),
                ("record_outcome", {"id": "ro-0", "success": True, "note": "not stored"}),
                ("learn", {"insight": "the bin is 20 cm wide"}),
            ):
                result = await admin.call(tool, **args)
                assert is_storage_refusal(result), (tool, result)
            assert "error" not in await admin.call("get_process", id="ro-3")
            assert len((await admin.call("find_processes", query="read only", k=5))["processes"]) == 5
            assert [m["id"] for m in (await admin.call("recall", query="shelf deep"))["memories"]] == [
                learned["memory_id"]
            ]

            await anyio.run_process(["chattr", "-i", *map(str, immutable)])
            assert "error" not in await admin.call("save_process", markdown=doc("ro-back", "Writable again"))
            ledger.processes.add("ro-back")
        assert await server.restart() == 0
        assert await missing(server, ledger) == []
    finally:
        await server.stop()


@pytest.fixture
def read_only_bind(tmp_path: Path) -> Iterator[Path]:
    """A data directory (holding a real index.db) bind-mounted read-only onto itself."""
    data = tmp_path / "data"
    make_index(data, documents=2)
    if not _root_can("mount", "--bind", str(data), str(data)):
        pytest.skip("mount is not permitted here: run the tests as root (with CAP_SYS_ADMIN in a container)")
    mount = Mount(data)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(data)], check=True, timeout=30)
        yield data
    finally:
        mount.unmount()


def test_a_read_only_data_directory_at_startup_exits_65_saying_so_not_that_the_file_is_broken(
    read_only_bind: Path,
) -> None:
    index = read_only_bind / "index.db"
    before = sha256(index)

    done = serve_once(read_only_bind)

    assert_refused_with_one_line(done, index, "write access")
    assert "backup" not in done.stderr  # the file is fine: restoring or moving it aside would be wrong
    assert sha256(index) == before


# ---------------------------------------------------------------------------- d. backup mid-storm
@pytest.fixture
async def fleet_server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    server = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=FLEET_ENV)
    await server.start()
    try:
        await set_up_fleet(server)
        yield server
    finally:
        await server.stop()


async def test_a_backup_taken_while_several_clients_write_restores_to_a_consistent_database(
    tmp_path: Path, fleet_server: ServerProcess
) -> None:
    ledger, stop, dest = Ledger(), anyio.Event(), tmp_path / "backup"
    ledger.enough_at = 40
    with anyio.fail_after(ROUND_DEADLINE_S * 2):
        async with anyio.create_task_group() as tg:
            for writer in writers(ledger, 90):
                tg.start_soon(writer.run, fleet_server, stop)
            await ledger.enough.wait()
            before = ledger.snapshot()  # acknowledged before the backup started: must be in the copy
            done = await anyio.run_process(
                [str(console_script()), "backup", "--data-dir", str(fleet_server.data_dir), str(dest)],
                env=child_env(),
                check=False,
            )
            during = ledger.acks - before.acks
            stop.set()
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert during > 0, "writes should go on while the backup runs"
    assert ledger.failures == []
    assert sorted(p.name for p in dest.iterdir()) == ["index.db", "lessons.db"]

    counts = table_counts(dest / "index.db")
    assert counts["quick_check"] == "ok"
    assert counts["processes"] == counts["processes_fts"], counts
    assert counts["memories"] == counts["memories_fts"], counts
    assert counts["processes"] <= len(ledger.processes) + len(WRITERS), "more than was ever written"
    assert_doctor_ok(await doctor(dest))

    restored = ServerProcess(data_dir=dest, log_dir=tmp_path / "restored", env=FLEET_ENV)
    restored.log_dir.mkdir()
    await restored.start()
    try:
        assert await missing(restored, before) == []
    finally:
        await restored.stop()
    assert_quiet_logs(fleet_server)
