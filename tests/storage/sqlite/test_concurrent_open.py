"""Training loops (`RobotMemory`, each in its own process) started together on one new data
directory, with the real schema and its migrations: every one opens it and stores its memory, and
the file ends at the last version. A late process used to re-run steps 1-4 over the finished file,
write version 4 over it and fail at step 5 ("duplicate column name: fts_rowid"); from then on the
server, `doctor` and the API refused the store on every start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.storage.sqlite import SqliteStore
from robot_mcp_memory.storage.sqlite import index_db as db
from tests.storage.sqlite.test_store_open import start_together

#: A training loop: it says it is ready, waits for the go file, opens the data directory and
#: learns one thing. Each migration step holds the lock a little longer than on an empty file (as
#: on a real store), so the processes read the version while another one is migrating; each step
#: run is logged.
_LOOP = r"""
import sys, time
from pathlib import Path
from robot_mcp_memory.storage.sqlite import index_db as db
from robot_mcp_memory.api import RobotMemory

data, go, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

def slow(i, step):
    def run(conn):
        step(conn)
        with open(data.parent / "steps.log", "a") as log:
            log.write(f"{i}\n")
        time.sleep(0.03)
    return run

db.MIGRATIONS[:] = [slow(i, step) for i, step in enumerate(db.MIGRATIONS)]
db._baseline = slow("baseline", db._baseline)
Path(f"{go}.{me}").touch()
while not go.exists():
    time.sleep(0.002)
with RobotMemory(data, robot_id=me) as memory:
    print(memory.learn(f"the gripper of {me} slips on wet mugs")["status"])
"""


#: Where each trial's file starts: new (created from the baseline), or at an old version (migrated
#: step by step from there).
STARTS = [0, 0, 4, 12]


@pytest.mark.e2e  # starts a child interpreter
@pytest.mark.parametrize("start", STARTS)
def test_training_loops_started_together_on_a_new_data_directory_all_open_it_at_the_last_version(
    tmp_path: Path, start: int
) -> None:
    data = tmp_path / "data"
    if start:
        data.mkdir()
        SqliteStore.open(data / "index.db", db.schema(), db.MIGRATIONS[:start]).close()

    done = start_together(tmp_path, _LOOP, [str(data), "{go}", "{me}"], n=3)

    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr[-1500:] for d in done if d.returncode]
    assert [d.stdout.strip() for d in done] == ["created"] * 3
    conn = sqlite3.connect(data / "index.db")
    try:
        version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0]
        stored = sorted(r[0] for r in conn.execute("SELECT content FROM memories"))
    finally:
        conn.close()
    assert int(version) == len(db.MIGRATIONS)
    ran = (tmp_path / "steps.log").read_text().split()
    expected = ["baseline"] if start == 0 else [str(i) for i in range(start, len(db.MIGRATIONS))]
    assert sorted(ran, key=lambda r: -1 if r == "baseline" else int(r)) == expected, "a step ran twice (or not at all)"
    assert stored == [f"the gripper of p{i} slips on wet mugs" for i in range(3)]
    with RobotMemory(data, robot_id="p0") as memory:  # and it opens again
        assert sorted(m["content"] for m in memory.recall("gripper slips")) == stored
