"""A `load` stopped at any moment — kill -9, SIGTERM (systemd, ``docker stop``), SIGHUP (a closed
terminal) — leaves index.db as it was or wholly loaded, never in between: the real command in
its own process, over real files. It once committed a transaction per file: stopped after the
memories, every tag of every loaded memory was gone and keyword search still held the old text,
and `doctor` passed."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.surfaces import cli
from tests.e2e.harness import child_env
from tests.operations.test_dump_load import Rows, _rows_of

pytestmark = [pytest.mark.e2e, pytest.mark.serial]


#: Memories the archive adds, each with a perception's data: enough that the load's transaction
#: spills into the WAL (SQLite's page cache holds ~2 MB) long before it commits.
ADDED = 3000
DATA_CHARS = 2000
#: WAL bytes past which a load is known to be midway: its transaction has spilled pages there.
MIDWAY_WAL_BYTES = 1 << 20
DEADLINE_S = 120.0


@dataclass(frozen=True)
class Loads:
    store: Path  # copied before each load
    archive: Path  # the dump the load reads
    before: Rows
    after: Rows  # what a load that ran to its end made
    probe: int  # a memory the archive rewords
    probe_text: str


def _command(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "robot_mcp_memory", *args, "--data-dir", str(data)]


def _env() -> dict[str, str]:
    return child_env(MEMORY_EMBEDDER="none", MEMORY_LOG_LEVEL="warning")


def _load(data: Path, archive: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _command(data, "load", str(archive)), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def loads(tmp_path_factory: pytest.TempPathFactory) -> Loads:
    """A store of tagged memories in an episode, with vectors; its dump with every memory
    reworded (the operator's fix-the-lines-and-load) and `ADDED` tagged perceptions more."""
    root = tmp_path_factory.mktemp("loads")
    store = root / "store"
    with RobotMemory(store, robot_id="rap-1", embedder="hashing", wait_for_model=5) as mem:
        sid = mem.start_session(context={"task": {"name": "pick"}})
        for i in range(20):
            learned = mem.learn(
                f"bottle {i}: grasp it by the neck at {i} cm", context={"tags": ["kitchen"]}, session_id=sid
            )
            assert learned["status"] == "created"
        mem.end_session(sid, outcome_score=0.8)
    archive = root / "dump"
    assert cli.main(["dump", "--data-dir", str(store), str(archive)]) == 0
    memories = _jsonl(archive / "archive" / "memories.jsonl")
    tags = _jsonl(archive / "archive" / "memory_tags.jsonl")
    probe, probe_text = memories[0]["id"], memories[0]["content"]
    first = max(m["id"] for m in memories) + 1
    for m in memories:
        m["content"] = m["content"].replace("bottle", "flask")
    template = memories[-1]
    for mid in range(first, first + ADDED):
        data = json.dumps({"frame": mid, "depth": "x" * DATA_CHARS})
        memories.append(
            {
                **template,
                "id": mid,
                "type": "perception",
                "perception_type": "visual",
                "content": f"frame {mid}",
                "data": data,
            }
        )
        tags += [
            {"memory_id": mid, "tag": "camera", "source": "user"},
            {"memory_id": mid, "tag": "visual", "source": "auto"},
        ]
    _write_jsonl(archive / "archive" / "memories.jsonl", memories)
    _write_jsonl(archive / "archive" / "memory_tags.jsonl", tags)
    loaded = root / "loaded"
    shutil.copytree(store, loaded)
    done = _load(loaded, archive)
    assert done.wait(DEADLINE_S) == 0
    return Loads(store, archive, _rows_of(store), _rows_of(loaded), probe, probe_text)


def _stop_when(proc: subprocess.Popen[bytes], seen: Callable[[], bool], sig: signal.Signals) -> None:
    """Send `sig` to `proc` as soon as `seen()` is true (or leave it be if it ends first)."""
    deadline = time.monotonic() + DEADLINE_S
    while proc.poll() is None:
        if seen():
            proc.send_signal(sig)
            break
        assert time.monotonic() < deadline, "the load neither ended nor got midway"
        time.sleep(0.002)
    proc.wait(DEADLINE_S)


def _doctor_passes(data: Path) -> bool:
    return subprocess.run(_command(data, "doctor"), env=_env(), capture_output=True, timeout=DEADLINE_S).returncode == 0


#: Attempts at catching a load midway before the test gives up: a loaded machine can deschedule
#: this process past the load's commit, which is seen (the load is frozen first) and tried again.
ATTEMPTS = 4


def _committed(data: Path, loads: Loads) -> bool:
    """Whether the load's transaction has committed: a new reader sees the probe reworded."""
    with contextlib.closing(sqlite3.connect(f"file:{data / 'index.db'}?mode=ro", uri=True)) as reader:
        try:
            row = reader.execute("SELECT content FROM memories WHERE id = ?", (loads.probe,)).fetchone()
        except sqlite3.OperationalError:
            return False
    return bool(row is not None and row[0] != loads.probe_text)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_load_stopped_midway_leaves_the_store_as_it_was(loads: Loads, tmp_path: Path, sig: signal.Signals) -> None:
    """SIGINT (Ctrl-C) too: the transaction runs on a worker thread, which went on and committed
    the whole load while the command said it was interrupted (exit 130).

    Midway is made certain, not hoped for: once the WAL shows the transaction spilling, the load is
    frozen (SIGSTOP, which acts at once wherever it runs), checked not to have committed, and only
    then sent `sig` and let go (SIGCONT)."""
    for attempt in range(ATTEMPTS):
        data = tmp_path / f"data-{attempt}"
        shutil.copytree(loads.store, data)
        wal = data / "index.db-wal"
        proc = _load(data, loads.archive)
        deadline = time.monotonic() + DEADLINE_S
        while proc.poll() is None and not (wal.exists() and wal.stat().st_size > MIDWAY_WAL_BYTES):
            assert time.monotonic() < deadline, "the load neither ended nor got midway"
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)
            if not _committed(data, loads):
                proc.send_signal(sig)
                proc.send_signal(signal.SIGCONT)
                proc.wait(DEADLINE_S)
                # Known race, left open (see the issue notes): a handled signal (SIGINT, SIGTERM)
                # that lands while the transaction's COMMIT is already running cannot stop it;
                # the load is then whole, not half, and is tried again. A half load still fails.
                if sig in (signal.SIGKILL, signal.SIGHUP) or _rows_of(data) != loads.after:
                    break
                continue
            proc.send_signal(signal.SIGCONT)
        proc.wait(DEADLINE_S)  # ended (or committed) before it could be stopped: try again
    else:
        pytest.fail(f"no load of {ATTEMPTS} was caught midway: make the archive bigger")
    stopped = 130 if sig == signal.SIGINT else -sig  # Python's own exit on Ctrl-C; else the signal
    assert proc.returncode == stopped
    assert _rows_of(data) == loads.before
    assert _doctor_passes(data)


def test_what_a_reader_sees_of_a_load_killed_at_once_is_all_of_it(loads: Loads, tmp_path: Path) -> None:
    """The moment another connection sees anything of the load, all of it is in: kill -9 then
    leaves the store wholly loaded (a load committing file by file was killed with its memories
    in and their tags gone)."""
    data = tmp_path / "data"
    shutil.copytree(loads.store, data)
    proc = _load(data, loads.archive)
    with contextlib.closing(sqlite3.connect(f"file:{data / 'index.db'}?mode=ro", uri=True)) as reader:

        def changed() -> bool:
            try:
                row = reader.execute("SELECT content FROM memories WHERE id = ?", (loads.probe,)).fetchone()
            except sqlite3.OperationalError:  # the schema is being read while the writer commits
                return False
            return bool(row is not None and row[0] != loads.probe_text)

        _stop_when(proc, changed, signal.SIGKILL)
    assert _rows_of(data) == loads.after
    assert _doctor_passes(data)
