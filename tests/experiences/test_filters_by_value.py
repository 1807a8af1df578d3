"""context_filter compares lists and objects by value, addresses any key, and costs one lookup per
row for an ``$in``/``$nin`` list — checked against a brute-force Python evaluator of the documented
rules (`filters` module docstring) over a real SQLite table."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import MAX_NODES, json_path
from robot_mcp_memory.experiences.sqlite.filter_sql import compile_filter

# --- the rules, in Python -------------------------------------------------------------------------

_MISSING = object()


def _resolve(ctx: Any, path: list[str | int]) -> Any:
    cur = ctx
    for seg in path:
        if isinstance(seg, int):
            if not isinstance(cur, list) or seg >= len(cur):
                return _MISSING
            cur = cur[seg]
        else:
            if not isinstance(cur, dict) or seg not in cur:
                return _MISSING
            cur = cur[seg]
    return cur


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _equal(stored: Any, wanted: Any) -> bool:
    """The documented equality: Python's ``==`` on numbers and true/false (true is 1, false is 0),
    exact on everything else; lists in order, objects in any key order."""
    if wanted is None:
        return stored is None
    if isinstance(wanted, int | float):  # bool is an int
        return isinstance(stored, int | float) and stored == wanted
    if isinstance(wanted, str):
        return isinstance(stored, str) and stored == wanted
    if isinstance(wanted, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(wanted)
            and all(_equal(s, w) for s, w in zip(stored, wanted, strict=True))
        )
    assert isinstance(wanted, dict)
    return (
        isinstance(stored, dict)
        and stored.keys() == wanted.keys()
        and all(_equal(stored[k], wanted[k]) for k in wanted)
    )


def _paths(spec: Mapping[str, Any]) -> list[tuple[list[str | int], Any]]:
    """A top-level key is a dot path (a number alone indexes a list); nested keys are literal."""

    def walk(prefix: list[str | int], level: Mapping[str, Any]) -> Iterator[tuple[list[str | int], Any]]:
        for key, value in level.items():
            path: list[str | int] = [*prefix, key] if prefix else [int(s) if s.isdigit() else s for s in key.split(".")]
            if isinstance(value, dict) and value and not any(k.startswith("$") for k in value):
                yield from walk(path, value)
            else:
                yield path, value

    return list(walk([], spec))


def _test(stored: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return stored is not _MISSING and _equal(stored, operand)
    if op == "$ne":
        return not _test(stored, "$eq", operand)
    if op == "$in":
        return any(_test(stored, "$eq", v) for v in operand)
    if op == "$nin":
        return not _test(stored, "$in", operand)
    if op == "$exists":
        return (stored is not _MISSING) is bool(operand)
    both_numbers = _number(stored) and _number(operand)
    both_texts = isinstance(stored, str) and isinstance(operand, str)
    if not (both_numbers or both_texts):
        return False
    order = {"$lt": stored < operand, "$lte": stored <= operand, "$gt": stored > operand, "$gte": stored >= operand}
    return bool(order[op])


def brute_force(ctx: dict[str, Any], spec: Mapping[str, Any]) -> bool:
    for path, test in _paths(spec):
        stored = _resolve(ctx, path)
        ops = test.items() if isinstance(test, dict) and any(k.startswith("$") for k in test) else [("$eq", test)]
        if not all(_test(stored, op, operand) for op, operand in ops):
            return False
    return True


# --- SQLite ---------------------------------------------------------------------------------------


def table(contexts: list[dict[str, Any]]) -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, context TEXT NOT NULL)")
    c.executemany(
        "INSERT INTO m VALUES (?, ?)",
        [(i, json.dumps(ctx, ensure_ascii=False, separators=(",", ":"))) for i, ctx in enumerate(contexts)],
    )
    return c


def ids(conn: sqlite3.Connection, spec: Mapping[str, Any]) -> set[int]:
    cond = compile_filter(spec, "m.context")
    return {r[0] for r in conn.execute(f"SELECT id FROM m WHERE {cond.sql}", cond.params)}  # noqa: S608 - test


A = {"spatial": {"position": [1, 2, 3]}, "params": {"cfg": {"a": 1, "b": 2}, "flags": [True, None, "x"]}}
B = {"spatial": {"position": [1.0, 2.0, 3.5]}, "params": {"cfg": {"b": 2.0, "a": 1.0, "c": 3}, "flags": [1, None, "x"]}}
C = {"spatial": {"position": [1, 2, 3, 4]}, "params": {"cfg": [["a", 1], ["b", 2]]}}
D = {"spatial": {"position": "[1,2,3]"}, "params": {"cfg": {}}, "joints": {"0": 0.5, "1": 0.7}}
E = {
    "spatial": {"position": []},
    "température": 21.5,
    "位置": {"x y": "left", "3d": [0, 0]},
    "params": {"cfg": {"a": [1]}},
}


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    c = table([A, B, C, D, E])
    yield c
    c.close()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # lists: by value, in order, of the same length
        ({"spatial.position": [1.0, 2.0, 3.0]}, {0}),
        ({"spatial.position": [1, 2, 3.5]}, {1}),
        ({"spatial.position": [1, 2, 3]}, {0}),
        ({"spatial.position": [3, 2, 1]}, set()),
        ({"spatial.position": [1, 2]}, set()),
        ({"spatial.position": []}, {4}),
        ({"spatial.position": {"$in": [[1.0, 2.0, 3.0]]}}, {0}),
        ({"spatial.position": {"$in": [[1.0, 2.0, 3.0], [1, 2, 3.5], "[1,2,3]"]}}, {0, 1, 3}),
        ({"spatial.position": {"$ne": [1.0, 2.0, 3.0]}}, {1, 2, 3, 4}),
        ({"spatial.position": {"$nin": [[1.0, 2.0, 3.0], []]}}, {1, 2, 3}),
        ({"spatial.position": "[1,2,3]"}, {3}),  # a text that looks like a list is still a text
        ({"params.flags": [True, None, "x"]}, {0, 1}),  # true is 1, as Python's ==
        ({"params.flags": [1, None, "x"]}, {0, 1}),
        ({"params.flags": [1.0, False, "x"]}, set()),  # null is not false
        # objects: by value, in any key order, with the same keys
        ({"params.cfg": {"$eq": {"b": 2, "a": 1}}}, {0}),
        ({"params.cfg": {"$eq": {"a": 1.0, "b": 2.0}}}, {0}),
        ({"params.cfg": {"$eq": {"a": 1}}}, set()),  # a key fewer
        ({"params.cfg": {"$eq": {}}}, {3}),
        ({"params.cfg": {"$in": [{"c": 3, "b": 2, "a": 1}, {"a": [1.0]}]}}, {1, 4}),
        ({"params.cfg": {"$ne": {"a": 1, "b": 2}}}, {1, 2, 3, 4}),
        ({"params.cfg": [["a", 1.0], ["b", 2]]}, {2}),
        # the nested form reads more paths, each key literal: {"a": 1.0, "b": 2} is cfg.a and cfg.b
        ({"params.cfg": {"a": 1.0, "b": 2}}, {0, 1}),
        ({"joints": {"0": 0.5}}, {3}),
        ({"joints": {"1": {"$gt": 0.6}}}, {3}),
        ({"位置": {"x y": "left"}}, {4}),
        ({"位置": {"3d": [0.0, 0.0]}}, {4}),
        ({"température": {"$gte": 20}}, {4}),
        ({"位置.3d": [0, 0]}, {4}),
        ({"位置.3d.1": 0}, {4}),
    ],
    ids=repr,
)
def test_lists_and_objects_compare_by_value_and_any_key_can_be_named(
    conn: sqlite3.Connection, spec: dict[str, Any], expected: set[int]
) -> None:
    assert ids(conn, spec) == expected
    assert {i for i, ctx in enumerate([A, B, C, D, E]) if brute_force(ctx, spec)} == expected


def test_the_documented_differences_from_mongodb_hold() -> None:
    c = table([{"x": None, "tags": ["red", "mug"]}, {"tags": ["red"]}, {}])
    assert ids(c, {"x": None}) == {0}  # a missing x is not null
    assert ids(c, {"x": {"$ne": None}}) == {1, 2}  # ... so $ne null matches it
    assert ids(c, {"x": {"$ne": None, "$exists": True}}) == set()
    assert ids(c, {"x": {"$nin": [None, 1]}}) == {1, 2}
    assert ids(c, {"tags": "red"}) == set()  # a list is compared whole, never searched
    assert ids(c, {"tags": ["red"]}) == {1}
    assert ids(c, {"tags.0": "red"}) == {0, 1}


def test_recall_finds_the_memories_whose_lists_and_objects_equal_the_filters(tmp_path: Path) -> None:
    with RobotMemory(tmp_path) as mem:
        cfg = {"a": 1, "b": 2}
        a = mem.learn("memory a about mugs", context={"spatial": {"position": [1, 2, 3]}, "params": {"cfg": cfg}})
        b = mem.learn("memory b about cups", context={"spatial": {"position": [1.0, 2.0, 3.5]}})
        name = {a["memory_id"]: "a", b["memory_id"]: "b"}

        def recall(spec: dict[str, Any]) -> list[str]:
            return sorted(name[m["id"]] for m in mem.recall("", n=10, min_confidence=0, context_filter=spec))

        assert recall({"spatial.position": [1.0, 2.0, 3.0]}) == ["a"]
        assert recall({"spatial.position": [1, 2, 3.5]}) == ["b"]
        assert recall({"spatial.position": {"$in": [[1.0, 2.0, 3.0]]}}) == ["a"]
        assert recall({"spatial.position": {"$ne": [1.0, 2.0, 3.0]}}) == ["b"]
        assert recall({"params.cfg": {"a": 1.0, "b": 2}}) == ["a"]
        assert recall({"params.cfg": {"$eq": {"b": 2, "a": 1}}}) == ["a"]


def test_a_success_filter_finds_the_outcomes_a_training_loop_wrote_as_numbers(tmp_path: Path) -> None:
    """robotmem's LeRobot callback stores the success flag it is passed — gymnasium's float
    ``info["is_success"]`` or ``int(ok)`` — and recalls tips with ``{"task.success": True}``, which
    robotmem compares with ``==``. Here that recall came back empty, silently."""
    with RobotMemory(tmp_path) as mem:
        flags = {"one": 1.0, "two": 0.0, "three": 1, "four": 0, "five": True, "six": "1"}
        for word, flag in flags.items():
            mem.learn(f"episode {word} push trial logged", context={"task": {"success": flag}})

        def recall(spec: dict[str, Any]) -> list[str]:
            hits = mem.recall("push trial", n=10, min_confidence=0, context_filter=spec)
            return sorted(m["content"].split()[1] for m in hits)

        assert recall({"task.success": True}) == ["five", "one", "three"]
        assert recall({"task.success": False}) == ["four", "two"]
        assert recall({"task.success": {"$in": [1]}}) == ["five", "one", "three"]
        assert recall({"task.success": {"$nin": [True, False]}}) == ["six"]


@pytest.mark.parametrize(
    "spec",
    [
        {"a": {'say "hi"': 1}},  # a key SQLite's JSON path cannot address
        {"a": {"back\\slash": 1}},
        {"a": {"line\nbreak": 1}},
        {"a": {"": 1}},
        {"a": {"k" * 65: 1}},
        {"a": {"$eq": {'q"': 1}}},
        {"a": "nul\x00"},  # SQLite reads a stored text only up to U+0000
        {"a": {"$in": ["x", ["nul\x00"]]}},
        {"a": {"$gt": "\x00"}},
        {"a.b c": 1},  # a dot path's keys are word characters; nest objects for others
        {"a.x\u0301": 1},  # a combining accent is no word character
        {"a.1234567": 1},  # a number is an index, of at most 6 digits
        {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}},  # 9 levels
    ],
    ids=repr,
)
def test_a_key_or_a_text_that_cannot_be_matched_is_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        compile_filter(spec, "m.context")


def test_a_dot_path_takes_any_script_and_a_leading_digit() -> None:
    assert json_path("température.位置") == '$."température"."位置"'
    assert json_path("pose.3d.0") == '$."pose"."3d"[0]'
    assert json_path("a.b-c_d") == '$."a"."b-c_d"'


def test_values_compared_inside_lists_and_objects_are_bounded() -> None:
    at_limit = {"x": [0] * (MAX_NODES - 1)}  # the list and its elements
    compile_filter(at_limit, "m.context")
    with pytest.raises(InvalidInput):
        compile_filter({"x": [0] * MAX_NODES}, "m.context")
    with pytest.raises(InvalidInput):
        compile_filter({"x": {"$in": [[i, i, i] for i in range(MAX_NODES // 4 + 1)]}}, "m.context")


def test_an_operand_at_the_limit_compiles_to_sql_that_sqlite_accepts() -> None:
    """SQLite refuses an expression more than 1,000 levels deep: however the values at the limit
    are shaped, the tests stay far shallower."""
    deep: Any = 1
    for _ in range((MAX_NODES - 1) // 2):  # each level: a list and its second element
        deep = [deep, 2]
    wide = [[i, float(i)] for i in range((MAX_NODES - 2) // 3)]
    c = table([{"x": deep, "y": wide}])
    assert ids(c, {"x": deep}) == {0}
    assert ids(c, {"x": {"$ne": deep}}) == set()
    assert ids(c, {"y": {"$in": [wide]}}) == {0}
    many = [[i, 0] for i in range(MAX_NODES // 3)]
    assert ids(c, {"y.0": {"$nin": many}}) == set()


# --- cost: how often a row's context is looked into -----------------------------------------------


class Lookups:
    """A table of `rows` whose JSON lookups are counted: SQLite's json_extract/json_type are stood
    in for (an application function overrides a built-in of the same name) by functions that count
    and ask the real ones on a second connection."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.count = 0
        self.conn = table(rows)
        self._real = sqlite3.connect(":memory:")
        for name in ("json_extract", "json_type"):
            self.conn.create_function(name, 2, self._counted(name))

    def _counted(self, name: str) -> Any:
        def call(doc: str, path: str) -> Any:
            self.count += 1
            return self._real.execute(f"SELECT {name}(?, ?)", (doc, path)).fetchone()[0]

        return call

    def ids(self, spec: Mapping[str, Any]) -> set[int]:
        self.count = 0
        return ids(self.conn, spec)

    def close(self) -> None:
        self.conn.close()
        self._real.close()


def test_an_in_list_looks_the_path_up_once_per_row_not_once_per_value() -> None:
    rows = [{"p": i} for i in range(50)]
    looked = Lookups(rows)
    try:
        none_stored = list(range(1000, 1100))  # 100 values
        assert looked.ids({"p": {"$in": none_stored}}) == set()
        assert looked.count <= len(rows)  # was one json_extract per value: 100 per row
        assert looked.ids({"p": {"$nin": none_stored}}) == set(range(50))
        assert looked.count <= len(rows)
    finally:
        looked.close()


def test_a_failing_test_stops_at_its_first_term() -> None:
    """A list compare whose first element differs, a number compare that fails: one lookup per row
    (``coalesce`` evaluated every term of its argument; ``CASE WHEN`` stops at the first false)."""
    rows = [{"pos": [i, 2, 3], "force": i} for i in range(50)]
    looked = Lookups(rows)
    try:
        assert looked.ids({"pos": [1000, 2, 3]}) == set()
        assert looked.count <= len(rows)
        assert looked.ids({"force": {"$gt": 1000}}) == set()
        assert looked.count <= len(rows)
    finally:
        looked.close()


# --- differential: SQL against the rules in Python ------------------------------------------------

numbers = st.one_of(
    st.sampled_from([0, 1, 2, -1, 0.0, 1.0, 2.0, -0.0, 2.5, 10**15]),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
)
#: No U+0000: SQLite's JSON functions read a stored text only up to it (a filter text holding it is refused).
texts = st.one_of(
    st.sampled_from(["", "a", "b", "A", "1", "true", "[1]", "[]", "{}", "é", "位置"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
keys = st.sampled_from(["a", "b", "0", "1", "x y", "é"])
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)
contexts = st.dictionaries(st.sampled_from(["p", "q", "位置"]), values, min_size=1, max_size=3)


def variant(value: Any, draw: Any) -> Any:
    """`value` as another client might write it: ints as floats and back, true/false as 1/0 and
    back (a gymnasium loop's ``1.0``), keys in another order."""
    if isinstance(value, bool):
        return draw(st.sampled_from([value, int(value), float(value)]))
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and value in (0, 1) and draw(st.booleans()):
        return bool(value)
    if isinstance(value, int):
        return float(value) if abs(value) < 2**53 and draw(st.booleans()) else value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 and draw(st.booleans()) else value
    if isinstance(value, list):
        return [variant(v, draw) for v in value]
    items = [(k, variant(v, draw)) for k, v in value.items()]
    return dict(reversed(items) if draw(st.booleans()) else items)


def paths_in(value: Any, prefix: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    yield prefix, value
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths_in(v, [*prefix, i])
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from paths_in(v, [*prefix, k])


def _dottable(seg: str | int) -> bool:
    return isinstance(seg, int) or (re.fullmatch(r"[\w\-]+", seg) is not None and not seg.isdigit())


def spelled(path: list[str | int], test: Any, nested: bool) -> dict[str, Any]:
    """`path` as a filter: a dot path up to its last index (at least its first key), then the
    remaining keys as nested objects — all of it a dot path unless `nested` or a key cannot be
    written in one; {} when the head cannot be."""
    last_index = max((i for i, s in enumerate(path) if isinstance(s, int)), default=0)
    cut = len(path) if not nested and all(_dottable(s) for s in path) else last_index + 1
    head, tail = path[:cut], path[cut:]
    if not all(_dottable(s) for s in head):
        return {}
    spec: Any = test
    for key in reversed(tail):
        spec = {key: spec}
    return {".".join(str(s) for s in head): spec}


@st.composite
def cases(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    ctxs = draw(st.lists(contexts, min_size=1, max_size=6))
    spec: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 3))):
        ctx = draw(st.sampled_from(ctxs))
        found = [(p, v) for p, v in paths_in(ctx, []) if p]
        if not found:
            continue
        path, stored = draw(st.sampled_from(found))
        if draw(st.booleans()) and len(path) > 1:  # sometimes a neighbouring, maybe missing, path
            path = [*path[:-1], draw(st.one_of(keys, st.integers(0, 3)))]
        same = variant(stored, draw)
        other = draw(values)
        op = draw(st.sampled_from(["$eq", "$eq", "$ne", "$in", "$nin", "$exists", "$lt", "$gte"]))
        test: Any
        if op == "$eq":
            test = draw(st.sampled_from([same, other]))
            if isinstance(test, dict) and test and not any(k.startswith("$") for k in test):
                test = {"$eq": test}  # a bare object would read as more paths
        elif op in ("$in", "$nin"):
            test = {op: draw(st.permutations([same, other, variant(other, draw)]))}
        elif op == "$exists":
            test = {op: draw(st.booleans())}
        elif op in ("$lt", "$gte"):
            bound = same if _number(same) or isinstance(same, str) else draw(st.one_of(numbers, texts))
            test = {op: bound}
        else:
            test = {op: draw(st.sampled_from([same, other]))}
        part = spelled(path, test, draw(st.booleans()))
        if part and not (set(part) & set(spec)):
            spec.update(part)
    return ctxs, spec


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_sql_agrees_with_the_rules_in_python(case: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    ctxs, spec = case
    c = table(ctxs)
    try:
        got = ids(c, spec)
    finally:
        c.close()
    assert got == {i for i, ctx in enumerate(ctxs) if brute_force(ctx, spec)}, spec


def test_a_long_list_written_as_the_filter_is_compared_in_two_lookups() -> None:
    """A row holding the very list the filter holds: its first element, then its text — not one
    lookup per element (a 200-number trajectory cost 200-odd per row). Written otherwise (1.0 for 1,
    keys reordered) it is still equal, element by element."""
    traj = [0.0] * 199 + [1.0]
    rows = [{"traj": traj} for _ in range(20)] + [{"traj": [1] * 200}]
    looked = Lookups(rows)
    try:
        assert looked.ids({"traj": traj}) == set(range(20))
        # the first element, then the text; the odd row stops at its first element
        assert looked.count <= 2 * 20 + 1
        assert looked.ids({"traj": [1.0] * 200}) == {20}  # stored as integers: equal by value
        obj = {"b": [1, 2], "a": {"y": 2.0, "x": 1}}
        reordered = Lookups([{"o": {"a": {"x": 1.0, "y": 2}, "b": [1.0, 2.0]}}])
        try:
            assert reordered.ids({"o": obj}) == {0}
        finally:
            reordered.close()
    finally:
        looked.close()
