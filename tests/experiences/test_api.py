"""The Python API: the documented example runs, and the API is the tools' behaviour, synchronously."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.errors import InvalidInput, NotFound, StorageError
from robot_mcp_memory.experiences.sqlite.vector_repo import MemoryVectorIndex
from robot_mcp_memory.storage.sqlite import StoreMode

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiences.md"


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = DOC.read_text(encoding="utf-8").split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), str(DOC), "exec"), {})
    assert (tmp_path / "data" / "index.db").exists()


def test_calls_work_without_an_event_loop_and_from_many_threads(tmp_path: Path) -> None:
    with RobotMemory(tmp_path, robot_id="ur5-01", collection="bench") as mem:
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            try:
                for i in range(20):
                    mem.learn(f"thread {k} trial {i} used force {k * 100 + i} N")
                    mem.recall(f"thread {k}")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        hits = mem.recall("force", n=100, collection="bench")
        assert len(hits) == 80
        assert {h["recorded_by"] for h in hits} == {"ur5-01"}


def test_the_store_is_opened_for_a_blocking_caller_and_runs_its_calls_on_the_callers_thread(tmp_path: Path) -> None:
    """`StoreMode.BLOCKING`: no reader pool, and a learn's transaction runs on the thread that called it."""
    with RobotMemory(tmp_path, robot_id="ur5-01") as mem:
        index = mem.memory.index
        assert index.mode is StoreMode.BLOCKING
        ran: list[int] = []
        index.on_writer(lambda c: c.set_trace_callback(lambda sql: ran.append(threading.get_ident())))
        mem.learn("the gripper slips on wet mugs")
        mem.recall("gripper")
        assert ran  # the learn's statements were traced
        assert set(ran) == {threading.get_ident()}
        assert not [t for t in threading.enumerate() if t.name.startswith("sqlite-read-index.db")]


def test_refusals_raise_the_packages_errors(tmp_path: Path) -> None:
    mem = RobotMemory(tmp_path)
    with pytest.raises(InvalidInput):
        mem.recall("x", context_filter={"a": {"$like": 1}})
    with pytest.raises(NotFound):
        mem.forget(12345, "nope")
    mem.close()
    with pytest.raises(StorageError):
        mem.learn("after close")


def test_learn_many_accepts_text_pairs_and_keyword_dicts(tmp_path: Path) -> None:
    with RobotMemory(tmp_path) as mem:
        out = mem.batch_learn(["open the door slowly", ("the door sticks", {"task": {"success": False}}),
                               {"insight": "open the door slowly", "context": ""}])  # fmt: skip
        assert [o["status"] for o in out] == ["created", "created", "duplicate"]
        assert mem.get(out[1]["memory_id"])["task"] == {"success": False}


def test_a_batch_item_may_name_its_own_collection_and_session(tmp_path: Path) -> None:
    """robotmem's batch_learn passes each mapping to learn(**item): its collection and session
    count (they were dropped, and the memory landed in the default collection)."""
    with RobotMemory(tmp_path) as mem:
        sid = mem.start_session(collection="lab-a")
        out = mem.batch_learn(
            [
                {"insight": "the lab A door sticks", "collection": "lab-a", "session_id": sid},
                "the default door opens inwards",
                {"insight": "the lab B shelf wobbles", "collection": "lab-b"},
            ]
        )
        assert [o["status"] for o in out] == ["created", "created", "created"]
        assert [o["collection"] for o in out] == ["lab-a", "default", "lab-b"]
        assert [m["content"] for m in mem.recall("door sticks", collection="lab-a", session_id=sid)] == [
            "the lab A door sticks"
        ]
        assert [m["content"] for m in mem.recall("shelf", collection="lab-b")] == ["the lab B shelf wobbles"]
        with pytest.raises(InvalidInput, match=r"item 0: .*not 'colection'"):
            mem.learn_many([{"insight": "typo", "colection": "lab-a"}])
        (typo,) = mem.batch_learn([{"insight": "typo", "colection": "lab-a"}])
        assert typo["status"] == "error"
        assert "colection" in typo["error"]


def test_with_a_model_the_first_recall_already_runs_hybrid(tmp_path: Path) -> None:
    """A training loop opening `RobotMemory(embedder="use")` recalled at once, while the model
    was still loading: keyword-only, silently, so a paraphrase found nothing."""
    with RobotMemory(tmp_path, robot_id="ur5-01", embedder="use") as mem:
        mem.learn("the lab door opens with a badge, then push the handle")
        vectors = mem.memory.experiences.vectors
        assert isinstance(vectors, MemoryVectorIndex)
        assert vectors.backfiller.wait_idle(60)
    with RobotMemory(tmp_path, robot_id="ur5-01", embedder="use") as mem:  # a new process, as a loop starts
        found = mem.recall("entering the laboratory")
    assert [m["content"] for m in found] == ["the lab door opens with a badge, then push the handle"]


def test_left_out_the_data_dir_and_robot_are_the_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """robotmem's RobotMemory() opens the store its server uses from any directory; ours opened
    ./data as robot 'unknown' whatever MEMORY_DATA_DIR and ROBOT_ID said."""
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "server"))
    monkeypatch.setenv("ROBOT_ID", "ur5-01")
    monkeypatch.chdir(tmp_path)
    with RobotMemory() as mem:
        made = mem.learn("the conveyor belt stalls at 0.8 m/s")
        assert made["robot"] == "ur5-01"
    assert (tmp_path / "server" / "index.db").exists()
    assert not (tmp_path / "data").exists()


def test_robotmem_keys_of_a_spatial_recall_and_an_episode_summary(tmp_path: Path) -> None:
    """A ported robotmem script reads ``m["_spatial_distance"]`` after a spatial sort and
    ``summary["memory_count"]`` / ``by_type`` / ``by_category`` after end_session."""
    with RobotMemory(tmp_path, robot_id="r1") as mem:
        sid = mem.start_session()
        mem.learn("grasp the mug at the sink", {"spatial": {"position": [3, 4, 0]}}, session_id=sid)
        mem.save_perception("mug seen at the sink", "visual", session_id=sid)
        hits = mem.recall("grasp mug", spatial_sort={"field": "spatial.position", "target": [0, 0, 0]})
        by_type = {h["type"]: h for h in hits}
        assert by_type["fact"]["_spatial_distance"] == pytest.approx(5.0) == by_type["fact"]["distance"]
        assert by_type["perception"]["_spatial_distance"] is None  # no coordinates (robotmem: infinity)
        assert "_spatial_distance" not in mem.recall("grasp mug")[0]
        ended = mem.end_session(sid)
        summary = ended["summary"]
        assert summary["memory_count"] == 2
        assert summary["by_type"] == {"fact": 1, "perception": 1}
        assert sum(summary["by_category"].values()) == 2


def test_spatial_sort_over_a_seven_joint_configuration(tmp_path: Path) -> None:
    """robotmem sorts by any coordinate list; ours took 1 to 4 numbers, refusing a 7-joint arm's."""
    home = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]
    with RobotMemory(tmp_path, robot_id="r1") as mem:
        mem.learn("reach the shelf from home", {"params": {"joints": home}})
        mem.learn("reach the shelf from the side", {"params": {"joints": [1.0, 0.2, 0.3, -1.0, 0.5, 1.0, 0.0]}})
        hits = mem.recall("reach shelf", spatial_sort={"field": "params.joints", "target": home, "weight": 1})
        assert hits[0]["content"] == "reach the shelf from home"
        assert hits[0]["distance"] == pytest.approx(0.0)
        with pytest.raises(InvalidInput, match="1 to 16 numbers"):
            mem.recall("reach shelf", spatial_sort={"field": "params.joints", "target": [0.0] * 17})


def test_a_data_dir_named_stays_sqlite_even_with_a_database_url_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test's throwaway memory never lands in the fleet's database: only a RobotMemory that names
    no store takes the server's MEMORY_DATABASE_URL (nothing listens on port 1: no connection tried)."""
    monkeypatch.setenv("MEMORY_DATABASE_URL", "postgresql://fleet:secret@127.0.0.1:1/memory")
    with RobotMemory(tmp_path / "mine") as mem:
        mem.learn("the conveyor belt stalls at 0.8 m/s")
    assert (tmp_path / "mine" / "index.db").exists()
    with pytest.raises(InvalidInput):
        RobotMemory(tmp_path / "mine", database_url="postgresql://fleet:secret@127.0.0.1:1/memory")
