"""context_filter parses to a backend-neutral tree (`filters.Filter`); the SQLite adapter compiles
it. Every rule is checked when the filter is parsed, so no backend can accept what another refuses."""

from __future__ import annotations

from typing import Any

import pytest

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import EVERYTHING, MAX_NODES, parse_filter
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter, condition


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
