"""The Python API's arguments as a training loop passes them (found by review, D05-D14): numpy
numbers, malformed batch items, tuples and non-string keys, wrong types — each taken as its plain
value or refused with `InvalidInput` naming the argument, never a raw Python error or a silent
conversion; and the robotmem behaviours a drop-in user relies on (batch_learn, session(), update's
text context, result keys, ``":memory:"``, logging)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.errors import InvalidInput, NotFound

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[RobotMemory]:
    with RobotMemory(tmp_path / "data", robot_id="r1") as m:
        yield m


def _stored(mem: RobotMemory) -> list[str]:
    return sorted(m["content"] for m in mem.recall("", n=100))


# ---------------------------------------------------------------------------- D05 numpy numbers
def test_numpy_ids_counts_and_scores_are_their_python_values(mem: RobotMemory) -> None:
    ids = np.array([mem.learn(f"grip force {i} N on the mug")["memory_id"] for i in range(3)])
    assert mem.get(ids[0])["id"] == int(ids[0])
    assert mem.update(ids[1], "grip force 99 N on the mug")["new_content"] == "grip force 99 N on the mug"
    assert mem.forget(ids[0], "wrong force")["memory_id"] == int(ids[0])
    assert len(mem.recall("mug", n=np.int64(2))) == 2
    assert len(mem.recall("mug", n=2.0, min_confidence=np.float32(0.1))) == 2  # a whole float, as robotmem took it
    sid = mem.start_session()
    ended = mem.end_session(sid, outcome_score=np.float32(0.8))
    assert ended["outcome_score"] == pytest.approx(0.8)
    assert type(ended["outcome_score"]) is float


def test_numpy_values_inside_a_context_are_stored_as_plain_json(mem: RobotMemory) -> None:
    ctx = {
        "params": {"grip_force": np.float32(12.5), "trials": np.int64(3), "ok": np.bool_(True)},
        "spatial": {"position": np.array([0.4, 0.1, 0.9])},
    }
    mid = mem.learn("grip force 12.5 N held the mug", context=ctx)["memory_id"]
    got = mem.get(mid)
    assert got["params"] == {"grip_force": 12.5, "trials": 3, "ok": True}
    assert got["spatial"] == {"position": [0.4, 0.1, 0.9]}
    near = mem.recall("mug", spatial_sort={"target": np.array([0.4, 0.1, 0.9])})
    assert near[0]["distance"] == 0.0


# ---------------------------------------------------------------------------- D11 wrong types
@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda m, mid: m.recall(None), "query"),
        (lambda m, mid: m.recall(b"mug"), "query"),
        (lambda m, mid: m.recall("mug", n="3"), "n"),
        (lambda m, mid: m.recall("mug", n=None), "n"),
        (lambda m, mid: m.recall("mug", n=2.5), "n"),
        (lambda m, mid: m.recall("mug", n=True), "n"),
        (lambda m, mid: m.recall("mug", min_confidence="0.5"), "min_confidence"),
        (lambda m, mid: m.recall("mug", min_confidence=True), "min_confidence"),
        (lambda m, mid: m.get(2**70), "memory_id"),
        (lambda m, mid: m.get("1"), "memory_id"),
        (lambda m, mid: m.forget(True, "x"), "memory_id"),
        (lambda m, mid: m.update(np.float64(1.5), "x"), "memory_id"),
        (lambda m, mid: m.save_perception("camera frame", perception_type=5), "perception_type"),
        (lambda m, mid: m.end_session(m.start_session(), "0.5"), "outcome_score"),
        (lambda m, mid: m.end_session(m.start_session(), outcome_score=True), "outcome_score"),
        (lambda m, mid: m.end_session(m.start_session(), outcome_score=np.bool_(True)), "outcome_score"),
        (lambda m, mid: m.learn(b"grip bytes"), "insight"),
    ],
)
def test_a_wrong_type_is_invalid_input_naming_the_argument(
    mem: RobotMemory, call: Callable[[RobotMemory, int], Any], argument: str
) -> None:
    mid = mem.learn("grip force 12 N held the mug")["memory_id"]
    with pytest.raises(InvalidInput, match=f"^{argument} "):
        call(mem, mid)


def test_a_score_refused_leaves_the_session_open(mem: RobotMemory) -> None:
    sid = mem.start_session()
    with pytest.raises(InvalidInput):
        mem.end_session(sid, outcome_score=True)
    assert mem.end_session(sid, outcome_score=1.0)["outcome_score"] == 1.0


# ---------------------------------------------------------------------------- D06/D07 batches
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"insight": None}, "insight must be text"),
        ({"insight": 42}, "insight must be text"),
        ({"insight": b"grip bytes"}, "insight must be text"),
        (("only text",), "has 1 elements"),
        (("text", {"params": {}}, "a third"), "has 3 elements"),
        (5, "not a int"),
        (None, "not None"),
        ("", "insight must not be empty"),
        (("text", [1, 2]), "context must be a JSON object"),
        ({"insight": "x", "session_id": "no-such-session"}, "no session"),
    ],
)
def test_learn_many_refuses_a_bad_item_by_index_and_stores_nothing(mem: RobotMemory, bad: Any, says: str) -> None:
    sid = mem.start_session(collection="lab-b")
    items: list[Any] = ["first insight force 3 N", {"insight": "in lab B", "collection": "lab-b", "session_id": sid}]
    with pytest.raises((InvalidInput, NotFound), match=f"^item 2: .*{says}"):
        mem.learn_many([*items, bad])
    assert _stored(mem) == []
    assert mem.recall("", collection="lab-b") == []


def test_learn_many_takes_a_list_pair_like_a_tuple(mem: RobotMemory) -> None:
    (out,) = mem.learn_many([["list pair", {"params": {"f": 1}}]])
    assert mem.get(out["memory_id"])["params"] == {"f": 1}


def test_batch_learn_reports_a_bad_item_and_stores_the_others(mem: RobotMemory) -> None:
    """robotmem's batch_learn: a result per item, {"status": "error", …} for a refused one."""
    items: list[Any] = ["good one 1 force 1 N", "", {"insight": 42}, "good one 2 force 2 N", 7]
    out = mem.batch_learn(items)
    assert [o["status"] for o in out] == ["created", "error", "error", "created", "error"]
    assert out[1]["error"] == "item 1: insight must not be empty"
    assert out[2]["error"].startswith("item 2: insight must be text")
    assert _stored(mem) == ["good one 1 force 1 N", "good one 2 force 2 N"]
    gone = mem.batch_learn(["good one 3 force 3 N", {"insight": "lost", "session_id": "no-such-session"}])
    assert [o["status"] for o in gone] == ["created", "error"]
    assert "no session" in gone[1]["error"]
    assert "good one 3 force 3 N" in _stored(mem)


def test_batch_learn_names_a_refused_item_by_its_place_in_the_whole_batch(mem: RobotMemory) -> None:
    """A refusal the write finds (an unknown session) named the item's place among those that
    had passed the first check: result 3 said "item 1"."""
    items: list[Any] = ["", "a good one force 1 N", 7, {"insight": "lost", "session_id": "no-such-session"}]
    out = mem.batch_learn(items)
    assert out[3]["status"] == "error"
    assert out[3]["error"].startswith("item 3: ")


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda m: m.recall("mug", min_confidence=10**400), "min_confidence"),
        (lambda m: m.end_session(m.start_session(), outcome_score=-(10**400)), "outcome_score"),
    ],
)
def test_a_number_no_float_holds_is_refused_naming_the_argument(
    mem: RobotMemory, call: Callable[[RobotMemory], Any], says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):  # it was a raw OverflowError
        call(mem)


def test_decimals_are_numbers_as_robotmem_takes_them(mem: RobotMemory) -> None:
    from decimal import Decimal

    mid = mem.learn("grip force 12 N held the mug")["memory_id"]
    assert mem.get(Decimal(mid))["id"] == mid
    assert len(mem.recall("mug", n=Decimal(3), min_confidence=Decimal("0.1"))) == 1
    sid = mem.start_session()
    assert mem.end_session(sid, outcome_score=Decimal("0.5"))["status"] == "ended"
    with pytest.raises(InvalidInput, match="n must be a whole number"):
        mem.recall("mug", n=Decimal("2.5"))


# ---------------------------------------------------------------------------- D08 session()
def test_leaving_a_session_block_the_body_ended_is_quiet(mem: RobotMemory) -> None:
    with mem.session() as sid:
        mem.learn("grip force 3 N held", session_id=sid)
        mem.end_session(sid, outcome_score=1.0)
    with mem.session() as other:
        pass
    with pytest.raises(Exception, match="already ended"):
        mem.end_session(other)  # the block ended it


def test_the_body_exception_comes_through_a_session_block(mem: RobotMemory) -> None:
    def ended_then_failed() -> None:
        with mem.session() as sid:
            mem.end_session(sid, outcome_score=0.0)
            raise ValueError("the training step's own error")

    with pytest.raises(ValueError, match="the training step's own error"):
        ended_then_failed()
    with pytest.raises(KeyError), mem.session() as sid2:
        raise KeyError("boom")
    assert mem.end_session(mem.start_session())["status"] == "ended"
    with pytest.raises(Exception, match="already ended"):
        mem.end_session(sid2)  # ended on the way out, the exception notwithstanding


# ---------------------------------------------------------------------------- D09 update's context
def test_update_with_a_text_context_keeps_the_stored_context(mem: RobotMemory) -> None:
    ctx = {"params": {"grip_force": 12}, "task": {"success": True}, "spatial": {"position": [0.4, 0.1, 0.9]}}
    mid = mem.learn("grip force 12 N held the wet mug", context=ctx)["memory_id"]
    mem.update(mid, "grip force 12.5 N held the wet mug", context="re-measured with the new sensor")
    assert mem.get(mid)["context"] == ctx
    assert [m["id"] for m in mem.recall("mug", context_filter={"task.success": True})] == [mid]
    mem.update(mid, "grip force 12.5 N held the wet mug", context='{"task": {"success": false}}')
    assert mem.get(mid)["context"] == {"task": {"success": False}}  # a JSON object replaces it
    mem.update(mid, "grip force 12.5 N held the dry mug", context={"params": {"grip_force": 12.5}})
    assert mem.get(mid)["context"] == {"params": {"grip_force": 12.5}}


# ---------------------------------------------------------------------------- D10/D13 JSON values
def _nest(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = (v,)
    return v


@pytest.mark.parametrize("depth", [33, 300, 5000])
def test_tuples_nest_like_lists(mem: RobotMemory, depth: int) -> None:
    with pytest.raises(InvalidInput, match="nests more than 32 levels"):
        mem.learn("gripper probe with a deep context", context={"deep": _nest(depth)})
    with pytest.raises(InvalidInput, match="nests more than 32 levels"):
        mem.save_perception("camera frame", data=_nest(depth))
    assert _stored(mem) == []
    mid = mem.learn("gripper probe with a shallow context", context={"pose": (0.4, (0.1, 0.9))})["memory_id"]
    assert mem.get(mid)["context"] == {"pose": [0.4, [0.1, 0.9]]}


@pytest.mark.parametrize("key", [1, True, None, 1.5, ("a",)])
def test_a_key_that_is_not_a_string_is_refused(mem: RobotMemory, key: Any) -> None:
    with pytest.raises(InvalidInput, match="keys of a JSON object are strings"):
        mem.learn("per-joint torque limits", context={"params": {key: 0.5, "1": 0.7}})
    with pytest.raises(InvalidInput, match="metadata has the key"):
        mem.save_perception("torque sensor", metadata={"params": {key: 0.5}})
    assert _stored(mem) == []


# ---------------------------------------------------------------------------- D14 robotmem's keys
def test_results_carry_robotmems_keys_and_the_mcp_shapes_are_unchanged(mem: RobotMemory) -> None:
    mem.learn("grip_force=12 in src/grasp.py held the wet mug")
    sid = mem.start_session()
    p = mem.save_perception("camera sees the mug", data='{"bbox": [1, 2, 3, 4]}', session_id=sid)
    assert p["has_embedding"] is False  # keyword-only: no vector
    hits = {m["type"]: m for m in mem.recall("mug", include_data=True)}
    fact, seen = hits["fact"], hits["perception"]
    assert fact["human_summary"] == fact["content"]
    assert fact["perception_data"] is None
    assert fact["scope_files"] == ["src/grasp.py"]
    assert "grip_force" in fact["scope_entities"]
    assert seen["perception_data"] == {"bbox": [1, 2, 3, 4]}
    assert mem.recall("camera")[0]["perception_data"] is None  # data only when asked for
    assert mem.end_session(sid)["decayed_count"] == 0


def test_memory_is_a_temporary_directory_removed_at_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mem = RobotMemory(":memory:")
    where = mem.memory.settings.data_dir
    assert where.is_dir()
    assert where != tmp_path / ":memory:"
    mem.learn("a throwaway insight")
    mem.close()
    assert not where.exists()
    assert not (tmp_path / ":memory:").exists()


@pytest.mark.e2e  # starts a child interpreter
def test_memory_left_unclosed_leaves_nothing_behind(tmp_path: Path) -> None:
    """robotmem's ":memory:" leaves nothing; ours left a directory per instance never closed."""
    script = (
        "from robot_mcp_memory.api import RobotMemory\n"
        "m = RobotMemory(':memory:')\n"
        "m.learn('a throwaway insight')\n"
        "print(m.memory.settings.data_dir)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not Path(out.stdout.strip()).exists()


def test_a_data_dir_under_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with RobotMemory("~/robot-memory") as mem:
        mem.learn("stored under home")
    assert (tmp_path / "robot-memory" / "index.db").exists()
    assert not (tmp_path / "~").exists()


# ---------------------------------------------------------------------------- D12 logging
_HOST = """
import logging, sys
from robot_mcp_memory import logs
from robot_mcp_memory.api import RobotMemory
mem = RobotMemory(sys.argv[1], robot_id="r1")
log = logs.get("robot_mcp_memory.api")
log.warning("api.before_host_config", waited_s=60, token="tok-secret")
log.info("api.quiet_info")
assert logging.getLogger().handlers == [], logging.getLogger().handlers
logging.basicConfig(level=logging.INFO, format="HOST %(levelname)s %(name)s %(message)s")
logging.getLogger("train").info("epoch 1 reward 0.93")
log.warning("api.after_host_config", waited_s=61)
mem.close()
"""


@pytest.mark.e2e  # starts a child interpreter
def test_the_api_leaves_the_hosts_logging_alone(tmp_path: Path) -> None:
    """A fresh interpreter: the test runner configured logging in this one."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    run = subprocess.run(
        [sys.executable, "-c", _HOST, str(tmp_path / "data")], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    first = json.loads(lines[0])  # before the host configured logging: our JSON line
    assert (first["event"], first["level"], first["logger"], first["waited_s"]) == (
        "api.before_host_config",
        "warning",
        "robot_mcp_memory.api",
        60,
    )
    assert first["token"] == "[redacted]"
    assert lines[1:] == [
        "HOST INFO train epoch 1 reward 0.93",
        "HOST WARNING robot_mcp_memory.api api.after_host_config waited_s=61",
    ]
    assert run.stdout == ""


def test_an_integer_no_json_reader_can_hold_is_refused(mem: RobotMemory) -> None:
    """Over MCP a 400-digit number is refused on the way in; through the Python API it was stored
    and then sent to every client whose recall reached it (JavaScript reads it as Infinity)."""
    with pytest.raises(InvalidInput, match="too large"):
        mem.learn("a reading", context={"params": {"n": 10**400}})
    mid = mem.learn("a reading", context={"params": {"n": 2**63}})["memory_id"]
    assert mem.get(mid)["params"] == {"n": 2**63}
