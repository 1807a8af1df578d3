"""The PostgreSQL compilation of ``context_filter`` (`experiences.postgres.filter_sql`) against the
rules in Python (`tests/experiences/test_filters_by_value.py`'s brute-force evaluator): the same
hand-written cases and the same generated ones, over a real PostgreSQL table of jsonb contexts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import parse_filter
from robot_mcp_memory.experiences.postgres.filter_sql import condition
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from tests.experiences import test_filters_by_value as by_value

pytestmark = pytest.mark.postgres

CONTEXTS = [by_value.A, by_value.B, by_value.C, by_value.D, by_value.E]
#: The SQLite module's hand-written (filter, ids of CONTEXTS it passes) cases.
CASES: list[tuple[dict[str, Any], set[int]]] = list(
    by_value.test_lists_and_objects_compare_by_value_and_any_key_can_be_named.pytestmark[0].args[1]
)


def ids(store: PostgresStore, contexts: Sequence[object], spec: Mapping[str, Any]) -> set[int]:
    cond = condition(parse_filter(spec), "m.context_doc")

    def run(c: Connection) -> set[int]:
        c.execute("CREATE TEMP TABLE m (id INTEGER PRIMARY KEY, context_doc JSONB NOT NULL) ON COMMIT DROP")
        c.cursor().executemany(
            "INSERT INTO m VALUES (%s, %s::jsonb)",
            [(i, json.dumps(ctx, ensure_ascii=False)) for i, ctx in enumerate(contexts)],
        )
        return {int(r[0]) for r in c.execute(f"SELECT id FROM m WHERE {cond.sql}", cond.params)}  # noqa: S608 - test

    return store.write_blocking(run)


def test_the_hand_written_cases_pass_the_same_contexts(pg_store: PostgresStore) -> None:
    assert len(CASES) > 20
    for spec, expected in CASES:
        assert ids(pg_store, CONTEXTS, spec) == expected, spec


def test_the_documented_differences_from_mongodb_hold(pg_store: PostgresStore) -> None:
    rows = [{"x": None, "tags": ["red", "mug"]}, {"tags": ["red"]}, {}]
    assert ids(pg_store, rows, {"x": None}) == {0}  # a missing x is not null
    assert ids(pg_store, rows, {"x": {"$ne": None}}) == {1, 2}
    assert ids(pg_store, rows, {"x": {"$ne": None, "$exists": True}}) == set()
    assert ids(pg_store, rows, {"x": {"$nin": [None, 1]}}) == {1, 2}
    assert ids(pg_store, rows, {"tags": "red"}) == set()  # a list is compared whole, never searched
    assert ids(pg_store, rows, {"tags": ["red"]}) == {1}


def test_a_key_that_is_a_number_is_never_an_index_and_an_index_never_a_key(pg_store: PostgresStore) -> None:
    rows = [{"j": {"0": "key"}}, {"j": ["index"]}]
    assert ids(pg_store, rows, {"j": {"0": "key"}}) == {0}
    assert ids(pg_store, rows, {"j.0": "index"}) == {1}
    assert ids(pg_store, rows, {"j.0": {"$exists": True}}) == {1}
    scalars = [{"p": 5}, {"p": None}, {"p": "x"}, {"p": [5]}, {"p": [[None]]}]
    assert ids(pg_store, scalars, {"p.0": 5}) == {3}  # a scalar is no list of one
    assert ids(pg_store, scalars, {"p.0": None}) == set()
    assert ids(pg_store, scalars, {"p.0.0": None}) == {4}
    assert ids(pg_store, scalars, {"p.0": {"$exists": True}}) == {3, 4}


def test_values_that_would_break_a_cast_are_no_match_not_an_error(pg_store: PostgresStore) -> None:
    rows = [{"v": "12"}, {"v": True}, {"v": [1]}, {"v": {"a": 1}}, {"v": 12}, {"v": 1.5}, {"v": None}]
    assert ids(pg_store, rows, {"v": {"$gt": 10}}) == {4}
    assert ids(pg_store, rows, {"v": {"$lt": 2.0}}) == {5}
    assert ids(pg_store, rows, {"v": {"$gte": "1"}}) == {0}
    assert ids(pg_store, rows, {"v": 1}) == {1}
    assert ids(pg_store, rows, {"v": {"$in": [12, 1.5, "12"]}}) == {0, 4, 5}
    assert ids(pg_store, rows, {"v": [1.0]}) == {2}
    assert ids(pg_store, rows, {"v": {"$eq": {"a": True}}}) == {3}


def test_an_unanswerable_filter_is_refused_before_any_sql() -> None:
    with pytest.raises(InvalidInput):
        condition(parse_filter({"x": {"$gt": True}}), "m.context_doc")


@settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=by_value.cases())
def test_sql_agrees_with_the_rules_in_python(
    pg_store: PostgresStore, case: tuple[list[dict[str, Any]], dict[str, Any]]
) -> None:
    ctxs, spec = case
    note(repr(ctxs))
    assert ids(pg_store, ctxs, spec) == {i for i, ctx in enumerate(ctxs) if by_value.brute_force(ctx, spec)}, spec
