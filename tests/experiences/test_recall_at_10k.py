"""The headline: filtered recall at 10,000 memories finds a single success hidden among 200 failures.

robotmem filtered the top n×2 text hits after ranking, so 17 % of its filtered recalls came back
empty though matches existed. Here every filter runs in SQL before ranking: 0 false-empty results.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.experience_corpus import corpus

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.experiences.service import JsonArg, run_sync
from robot_mcp_memory.tenancy.principal import STDIO

TOTAL = 10_000
FAILURES = 200


def failure(i: int) -> tuple[str, JsonArg]:
    text = f"grasp the titanium widget by the rim: the widget slipped, grasp the widget harder than {10 + i} N"
    return text, {"params": {"grip_force": 10 + i, "trial": i}, "task": {"name": "widget_trial", "success": False}}


NEEDLE: tuple[str, JsonArg] = (
    "after many other attempts on the bench this one time the part labelled W held in the fingers of the "
    "gripper all the way to the bin: the widget, grasped",
    {"params": {"grip_force": 7.5, "trial": 999}, "task": {"name": "widget_trial", "success": True, "source": "sim"}},
)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RobotMemory, int]]:
    data = tmp_path_factory.mktemp("recall10k")
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(Path(data)), "MEMORY_EMBEDDER": "none"}))
    svc = memory.experiences.blocking()
    items: list[tuple[str, JsonArg]] = [(it.insight, it.context) for it in corpus(TOTAL - FAILURES - 1)]
    items[4000:4000] = [failure(i) for i in range(FAILURES)]
    items.insert(7000, NEEDLE)
    needle = None
    for start in range(0, len(items), 2000):
        for (text, _), out in zip(
            items[start : start + 2000], run_sync(svc.learn_many(STDIO, items[start : start + 2000])), strict=True
        ):
            assert out.status == "created"
            if text == NEEDLE[0]:
                needle = out.memory_id
    assert needle is not None
    try:
        yield RobotMemory.attach(memory), needle
    finally:
        memory.close()


QUERIES = (
    "grasp the widget",
    "widget",
    "titanium widget rim",
    "how do I grasp a widget without it slipping",
    "grip force for the titanium widget",
    "widget slipped",
    "grasp",
    "",
)
FILTERS: tuple[dict[str, Any], ...] = (
    {"task.name": "widget_trial", "task.success": True},
    {"task": {"name": "widget_trial", "success": True}},
    {"task.name": {"$in": ["widget_trial", "other"]}, "task.success": {"$eq": True}},
    {"task.name": "widget_trial", "task.success": {"$ne": False}},
    {"task.name": "widget_trial", "params.trial": {"$gt": 500}},
    {"task.name": "widget_trial", "params.grip_force": {"$lt": 10}},
    {"task.name": "widget_trial", "task.source": {"$exists": True}},
    {"task.name": "widget_trial", "task.success": {"$nin": [False]}},
)


def test_the_corpus_is_ten_thousand_memories(mem: tuple[RobotMemory, int]) -> None:
    rm, _ = mem
    assert len(rm.recall("", n=100, context_filter={"task.name": "widget_trial"})) == 100
    assert len(rm.recall("grasp", n=100)) == 100


def test_a_single_success_among_200_failures_is_found_by_every_filtered_query(mem: tuple[RobotMemory, int]) -> None:
    rm, needle = mem
    cases = [(q, f) for q in QUERIES for f in FILTERS[: 3 if q else len(FILTERS)]]
    cases += [(q, f) for q in QUERIES[:2] for f in FILTERS[3:]]
    assert len(cases) >= 20
    false_empty = [(q, f) for q, f in cases if [m["id"] for m in rm.recall(q, n=5, context_filter=f)] != [needle]]
    assert false_empty == []


def test_a_post_filter_over_the_top_text_hits_would_have_missed_it(mem: tuple[RobotMemory, int]) -> None:
    """The scenario has teeth: unfiltered, the success is nowhere near the top of any text query."""
    rm, needle = mem
    for q in QUERIES[:-1]:
        assert needle not in [m["id"] for m in rm.recall(q, n=20)]
