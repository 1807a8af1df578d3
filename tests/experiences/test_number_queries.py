"""A dotted number in a recall query is searched as that number, not as its digits.

Found by review: "12.5" was searched as "12" OR "5", so "grip force 19.5 N at 0.12 m/s" scored as
much as "grip force 12.5 N"; newest first among equals, the memory with the value asked for
dropped out of the top 5. Recalling parameters by value is what robotmem users do."""

from __future__ import annotations

from pathlib import Path

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.principal import STDIO

#: (grip force, speed): the 12.5 N memory is learned first, so a tie would put it last.
TRIALS = [(12.5, 0.3), (5.0, 0.12), (19.5, 0.12), (12.0, 0.5), (5.2, 0.12), (15.5, 0.12), (12.2, 0.5)]


def _trial(force: float, speed: float) -> tuple[str, dict[str, object]]:
    text = f"push with grip force {force} N at speed {speed} m/s succeeded"
    return text, {"params": {"grip_force": force, "speed": speed}}


def test_the_memory_with_the_value_asked_for_comes_first(tmp_path: Path) -> None:
    with RobotMemory(tmp_path, robot_id="arm-01") as mem:  # keyword recall (no embedder)
        for force, speed in TRIALS:
            mem.learn(*_trial(force, speed))
        for query in ("grip force 12.5 N", "push with grip force 12.5 N"):
            got = mem.recall(query, n=5)
            assert [m["params"]["grip_force"] for m in got][:1] == [12.5], query
            assert got[0]["score"] > got[1]["score"], query  # above, not tied with, "19.5 N at 0.12"


async def test_hybrid_recall_puts_the_value_asked_for_first(memory: Memory) -> None:
    await memory.experiences.learn_many(STDIO, [_trial(f, s) for f, s in TRIALS])
    found = await memory.experiences.recall(STDIO, "grip force 12.5 N", 5)
    assert found.mode == "hybrid"
    assert found.hits[0].memory.context["params"]["grip_force"] == 12.5


def test_a_number_finds_only_itself_with_its_unit_written_either_way(tmp_path: Path) -> None:
    """ "12.5" no longer finds "19.5 N at 0.12 m/s" or "12 N, 5 tries"; "12.5 N" and "12.5N" find
    each other (`segment.number_variants`). "12.50" is another number as written."""
    with RobotMemory(tmp_path, robot_id="arm-01") as mem:
        apart = mem.learn("grasp the mug with grip force 12.5 N")["memory_id"]
        glued = mem.learn("grasp the jar with grip force 12.5N")["memory_id"]
        mem.learn("grasp the can with grip force 19.5 N at 0.12 m/s")
        mem.learn("grasp the box with grip force 12 N, 5 tries")
        assert apart != glued  # two memories, not a duplicate
        assert [m["id"] for m in mem.recall("12.5", n=10)] == [apart]
        assert {m["id"] for m in mem.recall("12.5N", n=10)} == {apart, glued}
        for query in ("12.5 N", "grip force 12.5 N"):  # then the memories holding "N" or "grip force"
            got = mem.recall(query, n=10)
            assert {m["id"] for m in got[:2]} == {apart, glued}, query
            assert got[1]["score"] > got[2]["score"], query


def test_a_version_finds_that_version_not_the_same_digits_in_another_order(tmp_path: Path) -> None:
    with RobotMemory(tmp_path, robot_id="arm-01") as mem:
        right = mem.learn("gripper firmware 1.2.10 fixes the slipping fingers")["memory_id"]
        mem.learn("gripper firmware 1.10.2 fixes the wrist drift")
        got = mem.recall("firmware 1.2.10", n=5)
        assert got[0]["id"] == right
        assert got[0]["score"] > got[1]["score"]
