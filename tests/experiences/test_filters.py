"""context_filter → SQL, run against a real SQLite table of JSON contexts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import MAX_CONDITIONS, MAX_IN, OPERATORS, json_path
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter

CONTEXTS: dict[int, dict[str, Any]] = {
    1: {"task": {"success": True, "name": "grasp"}, "params": {"force": 12.5, "mode": "soft"}, "tags": ["a", "b"]},
    2: {"task": {"success": False, "name": "grasp"}, "params": {"force": 15}, "spatial": {"position": [1, 2, 3]}},
    3: {"task": {"name": "place"}, "params": {"force": "high"}, "robot": {"type": "ur5e"}},
    4: {"task": {"success": 1}, "params": {"force": None}},
    5: {},
}


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context TEXT NOT NULL)")
    c.executemany("INSERT INTO m VALUES (?, ?)", [(k, json.dumps(v)) for k, v in CONTEXTS.items()])
    yield c
    c.close()


def ids(conn: sqlite3.Connection, spec: dict[str, Any]) -> set[int]:
    cond = compile_filter(spec, "m.context")
    return {r[0] for r in conn.execute(f"SELECT id FROM m WHERE {cond.sql}", cond.params)}  # noqa: S608 - test


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"task.success": True}, {1, 4}),  # true is the number 1, as Python's == (robotmem's rule)
        ({"task.success": False}, {2}),
        ({"task.success": {"$eq": True}}, {1, 4}),
        ({"task": {"success": True}}, {1, 4}),  # nested objects read as dot paths
        ({"task.success": 1}, {1, 4}),  # ... either way round
        ({"task.success": {"$ne": True}}, {2, 3, 5}),  # $ne also matches a missing path
        ({"params.force": {"$gte": 12.5}}, {1, 2}),
        ({"params.force": {"$gt": 12.5, "$lte": 15}}, {2}),
        ({"params.force": {"$lt": 100}}, {1, 2}),  # a string is never compared with a number
        ({"params.force": {"$gt": "a"}}, {3}),  # strings compare with strings
        ({"params.force": None}, {4}),
        ({"params.force": {"$exists": True}}, {1, 2, 3, 4}),
        ({"params.force": {"$exists": False}}, {5}),
        ({"task.name": {"$in": ["grasp", "pour"]}}, {1, 2}),
        ({"task.name": {"$nin": ["grasp"]}}, {3, 4, 5}),
        ({"task.name": {"$in": []}}, set()),
        ({"spatial.position.1": 2}, {2}),
        ({"spatial.position": [1, 2, 3]}, {2}),
        ({"tags": {"$eq": ["a", "b"]}}, {1}),
        ({"robot.type": "ur5e", "task.name": "place"}, {3}),
        ({"task.success": True, "params.mode": "hard"}, set()),
        ({}, {1, 2, 3, 4, 5}),
    ],
)
def test_each_operator_selects_exactly_the_matching_contexts(
    conn: sqlite3.Connection, spec: dict[str, Any], expected: set[int]
) -> None:
    assert ids(conn, spec) == expected


#: Outcome flags as training loops write them: gymnasium's ``info["is_success"]`` is a float,
#: ``int(ok)`` an integer; robotmem's LeRobot callback stores the flag as it is passed.
OUTCOMES: dict[int, Any] = {
    1: True,
    2: 1,
    3: 1.0,
    4: False,
    5: 0,
    6: 0.0,
    7: -0.0,
    8: "1",
    9: "true",
    10: None,
    11: 2,
    12: 0.5,
    13: [True],
    14: [1.0],
    15: {"ok": 1},
    16: "[1]",
}
_NO_OUTCOME = 17  # a memory without task.success


@pytest.fixture(scope="module")
def outcomes() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context TEXT NOT NULL)")
    rows = [(k, json.dumps({"task": {"success": v}})) for k, v in OUTCOMES.items()]
    c.executemany("INSERT INTO m VALUES (?, ?)", [*rows, (_NO_OUTCOME, json.dumps({"task": {"name": "push"}}))])
    yield c
    c.close()


TRUE_ONES = {1, 2, 3}
FALSE_ONES = {4, 5, 6, 7}
EVERY = {*OUTCOMES, _NO_OUTCOME}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"task.success": True}, TRUE_ONES),
        ({"task.success": 1}, TRUE_ONES),
        ({"task.success": 1.0}, TRUE_ONES),
        ({"task.success": {"$eq": True}}, TRUE_ONES),
        ({"task": {"success": True}}, TRUE_ONES),
        ({"task.success": False}, FALSE_ONES),
        ({"task.success": 0}, FALSE_ONES),
        ({"task.success": {"$eq": 0.0}}, FALSE_ONES),
        ({"task.success": {"$ne": True}}, EVERY - TRUE_ONES),
        ({"task.success": {"$ne": False}}, EVERY - FALSE_ONES),
        ({"task.success": {"$in": [True, "yes"]}}, TRUE_ONES),
        ({"task.success": {"$in": [False, None]}}, FALSE_ONES | {10}),
        ({"task.success": {"$nin": [True]}}, EVERY - TRUE_ONES),
        ({"task.success": {"$nin": [0, 1]}}, EVERY - TRUE_ONES - FALSE_ONES),
        # inside lists and objects, by the same rule
        ({"task.success": [True]}, {13, 14}),
        ({"task.success": [1]}, {13, 14}),
        ({"task.success": {"$in": [[1], {"ok": True}]}}, {13, 14, 15}),
        ({"task.success": {"$eq": {"ok": 1.0}}}, {15}),
        ({"task.success": {"$ne": [True]}}, EVERY - {13, 14}),
        # everything else stays exact: a text is no number, null is not false, 2 is not true
        ({"task.success": "1"}, {8}),
        ({"task.success": "true"}, {9}),
        ({"task.success": "[1]"}, {16}),
        ({"task.success": None}, {10}),
        ({"task.success": 2}, {11}),
        ({"task.success": 0.5}, {12}),
        # ... and true/false are no numbers to $lt $lte $gt $gte
        ({"task.success": {"$gt": 0}}, {2, 3, 11, 12}),
        ({"task.success": {"$lte": 0}}, {5, 6, 7}),
    ],
    ids=repr,
)
def test_true_and_false_equal_the_numbers_1_and_0_as_in_python(
    outcomes: sqlite3.Connection, spec: dict[str, Any], expected: set[int]
) -> None:
    """robotmem compared with Python's ``==``: a recall filtered on ``{"task.success": true}`` must
    find the 1.0 a gymnasium loop stored (it found nothing, and guided episodes fell back to the
    unguided policy)."""
    assert ids(outcomes, spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"task.success": {"$regex": "x"}},
        {"task.success": {"$eq": True, "$foo": 1}},
        {"$or": [{"a": 1}]},
        {"params.force": {"$lt": True}},
        {"params.force": {"$lt": [1]}},
        {"params.force": {"$in": "abc"}},
        {"params.force": {"$exists": "yes"}},
        {"a..b": 1},
        {"a.b c": 1},
        {"0.a": 1},
        {'a"; DROP TABLE m; --': 1},
        {".".join(["a"] * 9): 1},
    ],
)
def test_an_unknown_operator_or_a_malformed_path_is_refused_never_ignored(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        compile_filter(spec, "m.context")


def test_at_most_max_conditions_are_allowed(conn: sqlite3.Connection) -> None:
    at_limit = {f"params.k{i}": {"$ne": i} for i in range(MAX_CONDITIONS)}
    assert ids(conn, at_limit) == set(CONTEXTS)
    # operators on one path count one each, like paths
    assert ids(conn, {"params.force": {"$gte": 12.5}} | dict(list(at_limit.items())[1:])) == {1, 2}
    with pytest.raises(InvalidInput):
        compile_filter(at_limit | {"params.one_more": 1}, "m.context")
    with pytest.raises(InvalidInput):
        compile_filter(at_limit | {"params.k0": {"$ne": 0, "$exists": True}}, "m.context")


@pytest.mark.parametrize("op", ["$in", "$nin"])
def test_an_in_list_holds_at_most_max_in_values(conn: sqlite3.Connection, op: str) -> None:
    at_limit = ["grasp", *(f"v{i}" for i in range(MAX_IN - 1))]
    assert len(at_limit) == MAX_IN
    assert ids(conn, {"task.name": {op: at_limit}}) == ({1, 2} if op == "$in" else {3, 4, 5})
    with pytest.raises(InvalidInput):
        compile_filter({"task.name": {op: [*at_limit, "one more"]}}, "m.context")


@pytest.mark.parametrize(
    "spec",
    [
        {"params.force": {"$ne": float("nan")}},
        {"params.force": float("nan")},
        {"params.force": {"$gt": float("inf")}},
        {"params.force": {"$lte": float("-inf")}},
        {"params.force": {"$in": [1, float("inf")]}},
        {"params.force": {"$nin": [float("nan")]}},
    ],
    ids=repr,
)
def test_a_non_finite_number_is_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        compile_filter(spec, "m.context")


def test_paths_and_values_are_bound_parameters_never_sql_text() -> None:
    cond = compile_filter({"task.name": "x' OR 1=1 --", "params.force": {"$in": [1, "y"]}}, "m.context")
    assert "x'" not in cond.sql
    assert "OR 1=1" not in cond.sql
    assert '$."task"."name"' in cond.params


def test_json_path_quotes_keys_and_indexes_lists() -> None:
    assert json_path("spatial.position.0") == '$."spatial"."position"[0]'
    assert json_path("task.my-key") == '$."task"."my-key"'


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False), st.text()
)
keys = st.text(alphabet="abcxyz_-0123456789.$ ", min_size=0, max_size=12)
specs = st.dictionaries(
    keys,
    st.one_of(scalars, st.dictionaries(st.sampled_from([*OPERATORS, "$bad"]), st.one_of(scalars, st.lists(scalars)))),
    max_size=4,
)


@settings(deadline=None)
@given(spec=specs)
def test_any_filter_either_compiles_to_sql_that_runs_or_is_refused(spec: dict[str, Any]) -> None:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context TEXT NOT NULL)")
    c.executemany("INSERT INTO m VALUES (?, ?)", [(k, json.dumps(v)) for k, v in CONTEXTS.items()])
    try:
        cond = compile_filter(spec, "m.context")
    except InvalidInput:
        return
    c.execute(f"SELECT id FROM m WHERE {cond.sql}", cond.params).fetchall()  # noqa: S608 - test
