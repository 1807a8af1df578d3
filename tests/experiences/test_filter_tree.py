"""context_filter parses to a backend-neutral tree (`filters.Filter`); the SQLite adapter compiles
it. Every rule is checked when the filter is parsed, so no backend can accept what another refuses."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import EVERYTHING, MAX_NODES, parse_filter
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter, condition
from tests.experiences.toy_memories import matches


def test_a_filter_parses_to_its_tests_in_order() -> None:
    spec = {"task": {"success": True}, "params.force": {"$gte": 10, "$lt": 15}, "tags": ["a", "b"]}
    tree = parse_filter(spec)
    assert [(t.path, t.op, t.operand) for t in tree.tests] == [
        (("task", "success"), "$eq", True),
        (("params", "force"), "$gte", 10),
        (("params", "force"), "$lt", 15),
        (("tags",), "$eq", ["a", "b"]),
    ]
    compiled, direct = condition(tree, "m.context"), compile_filter(spec, "m.context")
    assert (compiled.sql, compiled.params) == (direct.sql, direct.params)


def test_no_filter_is_the_tree_that_passes_everything() -> None:
    assert parse_filter(None) is EVERYTHING
    assert parse_filter({}) is EVERYTHING
    assert condition(EVERYTHING, "m.context").sql == "1"


@pytest.mark.parametrize(
    "spec",
    [
        {"x": {"$in": "a"}},
        {"x": {"$nin": [{1, 2}]}},
        {"x": {"$gt": True}},
        {"x": {"$exists": 1}},
        {"x": float("nan")},
        {"x": {"$in": [float("inf")]}},
        {"x": "a\x00"},
        {"x": {'bad"key': 1}},
        {"x": [0] * MAX_NODES},
        {"x": {"$regex": "a"}},
        {"$and": []},
    ],
)
def test_every_rule_is_checked_when_the_filter_is_parsed(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        parse_filter(spec)


CONTEXTS: list[dict[str, Any]] = [
    {"task": {"success": True, "name": "grasp"}, "params": {"force": 12.5}, "tags": ["a", "b"]},
    {"task": {"success": False}, "params": {"force": 15}, "pose": [1, 2, 3]},
    {"task": {"success": 1.0}, "params": {"force": "high"}},
    {"task": {"success": None}, "params": {"force": None}, "pose": [1.0, 2.0, 3.0]},
    {"task": {"success": 0}},
    {},
]
SPECS: list[dict[str, Any]] = [
    {"task.success": True},
    {"task.success": False},
    {"task.success": None},
    {"task.success": {"$ne": None}},
    {"task.success": {"$in": [True, None]}},
    {"task.success": {"$nin": [1]}},
    {"params.force": {"$gte": 12, "$lt": 16}},
    {"params.force": {"$gt": "a"}},
    {"params.force": {"$exists": True}},
    {"pose": [1, 2, 3]},
    {"pose.0": 1},
    {"tags": ["a", "b"], "task": {"name": "grasp"}},
    {"task": {"success": {"$in": [0, "x"]}}},
]


@pytest.mark.parametrize("spec", SPECS)
def test_a_second_backend_evaluating_the_tree_agrees_with_the_sql(spec: dict[str, Any]) -> None:
    """The toy repository's Python evaluator of the tree and the SQLite compilation of it pick
    the same contexts: the tree carries the semantics, not the SQL."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context TEXT NOT NULL)")
    conn.executemany("INSERT INTO m VALUES (?, ?)", [(i, json.dumps(c)) for i, c in enumerate(CONTEXTS)])
    tree = parse_filter(spec)
    cond = condition(tree, "m.context")
    by_sql = {r[0] for r in conn.execute(f"SELECT id FROM m WHERE {cond.sql}", cond.params)}  # noqa: S608 - compiled, values bound
    conn.close()
    assert by_sql == {i for i, c in enumerate(CONTEXTS) if matches(tree, c)}
