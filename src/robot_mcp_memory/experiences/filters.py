"""``context_filter`` → an SQL condition over a JSON column, with every value bound.

A filter is a JSON object whose keys are dot paths into a memory's context and whose values are
either a plain value (equality) or an object of operators::

    {"task.success": true,
     "params.grip_force": {"$gte": 10, "$lt": 15},
     "robot.type": {"$in": ["ur5e", "franka"]},
     "spatial.position": {"$exists": true}}

Operators: ``$eq $ne $lt $lte $gt $gte $in $nin $exists``. Several operators on one path are
AND-ed, as are several paths.

**Paths.** A dot path's keys are letters (any script: ``température``, ``位置``), digits, ``_`` and
``-``; a segment that is a number alone indexes a list (``spatial.position.0``). A nested object
without operators reads as more path segments, each of its keys taken literally as one key —
never split on dots, never an index — so any other key is reachable by nesting:
``{"joints": {"0": 0.5}}`` (the key ``"0"``), ``{"task": {"gripper state": "open"}}``. Only keys
holding a double quote, a backslash or a control character cannot be addressed (SQLite's JSON
paths have no escapes for them), and are refused.

**Semantics** are MongoDB's operators with these exact rules — which differ from MongoDB where
noted, on purpose (see below):

- Equality is by value, as Python's ``==``: numbers by value (``1`` equals ``1.0``), and
  ``true``/``false`` are the numbers 1/0 (``true`` equals ``1`` and ``1.0``, ``false`` equals ``0``
  and ``0.0``, either way round); strings exactly (case-sensitive), never a number (``"1"`` is not
  ``1``, ``"true"`` is not ``true``); ``null`` only JSON ``null`` (never ``false`` or ``0``).
  Why true is 1: robotmem compared with ``==``, and training loops record an outcome as gymnasium's
  ``info["is_success"]`` (a float) or ``int(ok)`` — robotmem's LeRobot callback stores the flag
  as it is passed — so ``{"task.success": true}`` must find ``1.0``; dedup and the classifier
  read 1/0 as outcomes too.
- Lists and objects compare whole, by value: a list equals a list of the same length whose
  elements are equal in order; an object equals an object with the same keys (in any order) whose
  values are equal — recursively, with the rules above (``[1, 2]`` equals ``[1.0, 2.0]``).
- ``{"x": null}`` matches a stored ``null`` only, **not** a missing ``x`` (MongoDB matches both);
  ask for a missing path with ``{"x": {"$exists": false}}``.
- ``$ne`` and ``$nin`` match every memory the positive test does not — including one that lacks
  the path, so ``{"x": {"$ne": null}}`` also matches a missing ``x`` (MongoDB does not); add
  ``"$exists": true`` to require it.
- A list is never searched for an element: ``{"tags": "red"}`` does not match ``["red", "mug"]``
  (MongoDB does); compare the whole list or name an index (``tags.0``).
- ``$lt $lte $gt $gte`` compare numbers with numbers and strings with strings (by code point);
  any other pairing is no match — ``true``/``false`` are no numbers there (an order on outcomes
  would be a guess; an operand ``true`` is refused).

Why not MongoDB's rules for those three: they are not small. Element matching applies to every
operator and to paths that run through lists (``items.name``) and needs a ``json_each`` scan per
row; null-matches-missing turns ``$ne``/``$nin`` around. A part of them would be neither MongoDB
nor simple. The rules above are what the SQL states directly, and
``tests/experiences/test_filters_by_value.py`` checks the SQL against them, written in Python.

Anything else — an unknown operator, a malformed path, a wrong operand — raises `InvalidInput`
naming the problem: a filter that cannot be understood must never silently pass everything.
Paths are validated segment by segment *and* bound as parameters; only fixed SQL text is
interpolated. The condition runs in SQL before ranking, so filtered recall sees every match.

**Cost per row.** Each test is ``CASE WHEN … THEN 1 ELSE 0 END`` (`_flag`): never NULL, and
SQLite evaluates a ``WHEN`` as jumps, so ``AND``/``OR`` stop at the first term that decides.
A scalar equality is one lookup (``json_extract``), plus a ``json_type`` check only where the
value alone is ambiguous (a text that looks like JSON) and only in rows that passed. An
``$in``/``$nin`` list of scalars is one ``IN (…)`` per JSON type present: one lookup per row
however long the list (it was one per value — 25 lists of 100 numbers took ~9.6 s
a recall at 12,000 memories, now ~0.11 s). A list or object operand is a conjunction of
per-element tests, elements first and the length or key count last, so a row whose first element
differs costs one lookup; `MAX_NODES` bounds how many values all such tests compare.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_memory.errors import InvalidInput

OPERATORS = ("$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$exists")
MAX_CONDITIONS = 32
#: The most segments a path may have (dot segments and nested keys together).
MAX_DEPTH = 8
MAX_IN = 100
#: The most characters in one key.
MAX_KEY = 64
#: The most values one filter's equality tests (``$eq``, ``$ne``, the lists and objects of ``$in``/``$nin``)
#: may compare, each list, object and element counted at any depth: each is one more test per row. The
#: scalars of an ``$in``/``$nin`` list are one test together and count nothing.
MAX_NODES = 256

#: One dot-path segment that is a key: word characters of any script, ``_`` and ``-``.
_KEY_SEGMENT = re.compile(r"[\w\-]+")
#: One dot-path segment that is a list index.
_INDEX_SEGMENT = re.compile(r"[0-9]+")
#: The most digits of a list index.
MAX_INDEX_DIGITS = 6
#: What a key (nested form, object operand) may not hold: SQLite's JSON path cannot address it.
_UNADDRESSABLE = re.compile(r'["\\\x00-\x1f]')

#: A path segment: an object key (`str`) or a list index (`int`).
Segment = str | int
Path = tuple[Segment, ...]


@dataclass
class Condition:
    """An SQL boolean expression and its parameters, in order."""

    sql: str = "1"
    params: list[Any] = field(default_factory=list)


def parse_path(dotted: str, what: str = "context_filter path") -> Path:
    """``a.b.0.c`` → ``("a", "b", 0, "c")``, or `InvalidInput` naming `what`."""
    if not isinstance(dotted, str) or not dotted:
        raise InvalidInput(f"a {what} must be a non-empty dot path such as 'params.force'")
    segments = dotted.split(".")
    if len(segments) > MAX_DEPTH:
        raise InvalidInput(f"{what} '{dotted[:80]}' is deeper than {MAX_DEPTH} levels")
    out: list[Segment] = []
    for i, seg in enumerate(segments):
        if _INDEX_SEGMENT.fullmatch(seg):
            if i == 0:
                raise InvalidInput(f"{what} '{dotted[:80]}' must start with a key, not an index")
            if len(seg) > MAX_INDEX_DIGITS:
                raise InvalidInput(f"{what} '{dotted[:80]}' has a list index longer than {MAX_INDEX_DIGITS} digits")
            out.append(int(seg))
        elif len(seg) <= MAX_KEY and _KEY_SEGMENT.fullmatch(seg):
            out.append(seg)
        else:
            hint = (
                "; for a key with other characters (a space, a dot) or a key that is a number, nest objects: "
                '{"task": {"gripper state": "open"}}'
                if what == "context_filter path"
                else ""
            )
            raise InvalidInput(
                f"{what} '{dotted[:80]}' has an invalid segment '{seg[:40]}': a dot path's keys are letters "
                f"(any script), digits, '_' and '-', at most {MAX_KEY} characters, and a number alone "
                f"indexes a list{hint}"
            )
    return tuple(out)


def render(path: Path) -> str:
    """``("a", "b", 0)`` → the SQLite JSON path ``$."a"."b"[0]`` (keys checked addressable)."""
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else f'."{s}"' for s in path)


def json_path(dotted: str, what: str = "context_filter path") -> str:
    """``a.b.0.c`` → the SQLite JSON path ``$."a"."b"[0]."c"``, or `InvalidInput` naming `what`."""
    return render(parse_path(dotted, what))


def _key(key: Any, where: str) -> str:
    """`key` as one literal path segment, or `InvalidInput`."""
    if not isinstance(key, str):
        raise InvalidInput("context_filter keys must be strings")
    if not key or len(key) > MAX_KEY:
        raise InvalidInput(f"a key in {where} must have 1 to {MAX_KEY} characters")
    if _UNADDRESSABLE.search(key):
        raise InvalidInput(
            f"the key {key[:40]!r} in {where} holds a double quote, a backslash or a control character: "
            "such a key cannot be filtered on"
        )
    return key


def _show(path: Path) -> str:
    return ".".join(str(s) for s in path)


def compile_filter(spec: Mapping[str, Any] | None, column: str) -> Condition:
    """The condition for `spec` over the JSON text in `column` (a fixed identifier of ours)."""
    if not spec:
        return Condition()
    if not isinstance(spec, Mapping):
        raise InvalidInput('context_filter must be a JSON object such as {"task.success": true}')
    clauses: list[str] = []
    params: list[Any] = []
    budget = _Budget()
    for path, test in _flatten(spec):
        for op, operand in _operators(path, test):
            sql, p = _clause(column, path, op, operand, budget)
            clauses.append(sql)
            params.extend(p)
    if len(clauses) > MAX_CONDITIONS:
        raise InvalidInput(f"context_filter has {len(clauses)} conditions; at most {MAX_CONDITIONS} are allowed")
    return Condition(" AND ".join(f"({c})" for c in clauses) or "1", params)


def _is_operator_object(value: Any) -> bool:
    return isinstance(value, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in value)


def _flatten(spec: Mapping[str, Any], prefix: Path = ()) -> list[tuple[Path, Any]]:
    """(path, test) pairs: a top-level key is a dot path, a nested object's keys are one segment each.
    Recursion stops at `MAX_DEPTH` segments."""
    out: list[tuple[Path, Any]] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise InvalidInput("context_filter keys must be strings")
        if key.startswith("$"):
            raise InvalidInput(
                f"unknown context_filter key '{key[:40]}' under '{_show(prefix) or 'the top level'}': keys "
                f"are paths; operators ({', '.join(OPERATORS)}) go inside a path's object"
            )
        path = (*prefix, _key(key, f"'{_show(prefix)}'")) if prefix else parse_path(key)
        if len(path) > MAX_DEPTH:
            raise InvalidInput(f"context_filter path '{_show(path)[:80]}' is deeper than {MAX_DEPTH} levels")
        if isinstance(value, Mapping) and value and not _is_operator_object(value):
            out.extend(_flatten(value, path))
        else:
            out.append((path, value))
    return out


def _operators(path: Path, test: Any) -> list[tuple[str, Any]]:
    if not _is_operator_object(test):
        return [("$eq", test)]
    ops = []
    for op, operand in test.items():
        if op not in OPERATORS:
            raise InvalidInput(
                f"unknown operator '{str(op)[:40]}' on '{_show(path)}': use one of {', '.join(OPERATORS)}"
            )
        ops.append((op, operand))
    return ops


class _Budget:
    """How many more values the equality tests of one filter may compare (`MAX_NODES`)."""

    def __init__(self) -> None:
        self.left = MAX_NODES

    def take(self, path: Path) -> None:
        self.left -= 1
        if self.left < 0:
            raise InvalidInput(
                f"context_filter compares more than {MAX_NODES} values (each value of $eq/$ne and each list, object "
                f"and element compared, at any depth; the limit was passed at '{_show(path)[:80]}'): compare fewer, "
                "or name single elements such as 'spatial.position.0'"
            )


_INT64 = 2**63


def _scalar(path: Path, op: str, value: Any) -> Any:
    """`value` as SQLite can bind it: finite, and an integer beyond 64 bits as the real SQLite's
    JSON functions make of such a stored number. A text must not hold U+0000: SQLite's JSON
    functions read a stored text only up to it, so such a test could never be right."""
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInput(f"{op} on '{_show(path)}' compares a text holding U+0000, which cannot be matched")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{op} on '{_show(path)}' needs a finite number")
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return float(value)
    return value


def _is_boolean_or_number(value: Any) -> bool:
    """What equality compares as a number: true is 1 and false is 0, as Python's ``==``."""
    return isinstance(value, bool | int | float)


Term = tuple[str, list[Any]]


def _eq_terms(column: str, path: Path, value: Any, budget: _Budget, out: list[Term]) -> None:
    """Append to `out` the tests whose conjunction is "the JSON value at `path` equals `value`".

    Each term is 1 (passes), 0 or NULL (fails: NULL only where something is missing), so the
    conjunction needs one `_flag` around it and none inside. Every value (a list, an object, each
    element) spends one of `budget`, which also bounds the recursion."""
    budget.take(path)
    jp = render(path)
    if _is_scalar(value):
        out.extend(_scalar_alternatives(column, path, "$eq", [value]))
    elif isinstance(value, list | tuple):
        # The elements first: `[i]` resolves in arrays only, so they rule out other values and
        # most arrays in one lookup; the length last, against longer arrays.
        for i, element in enumerate(value):
            _eq_terms(column, (*path, i), element, budget, out)
        if value:
            out.append((f"json_array_length({column}, ?) = ?", [jp, len(value)]))
        else:  # every non-array's json_array_length is 0 too
            out.append((f"json_type({column}, ?) = 'array' AND json_array_length({column}, ?) = 0", [jp, jp]))
    elif isinstance(value, Mapping):
        # The keys first (a key resolves in objects only), the key count last, against extra keys.
        for key, element in value.items():
            _eq_terms(column, (*path, _key(key, f"the object compared at '{_show(path)[:80]}'")), element, budget, out)
        count = f"(SELECT count(*) FROM json_each({column}, ?)) = ?"  # noqa: S608 - our column name; values bound
        if value:
            out.append((count, [jp, len(value)]))
        else:  # json_each of a scalar yields one row, of an array its elements
            out.append((f"json_type({column}, ?) = 'object' AND {count}", [jp, jp, 0]))
    else:
        raise InvalidInput(f"context_filter value for '{_show(path)}' must be a JSON value")


def _flag(test: str) -> str:
    """`test` as 1 or 0, never NULL (a missing path makes the JSON functions NULL, and ``NOT NULL``
    would drop the row from ``$ne``/``$nin``). ``CASE WHEN`` rather than ``coalesce``: SQLite
    evaluates a function's argument whole, but a ``WHEN`` condition as jumps, so ``AND``/``OR``
    stop at the first term that decides — most rows cost one lookup, not one per term."""
    return f"CASE WHEN {test} THEN 1 ELSE 0 END"


def _balanced(op: str, terms: Sequence[Term]) -> Term:
    """`terms` joined by `op` as a balanced tree: a flat chain of n terms is n levels deep, and
    SQLite refuses an expression deeper than 1,000."""
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    left, right = _balanced(op, terms[:mid]), _balanced(op, terms[mid:])
    return f"({left[0]}) {op} ({right[0]})", left[1] + right[1]


def _eq(column: str, path: Path, value: Any, budget: _Budget) -> Term:
    """A never-NULL equality test of the JSON value at `path` against `value`.

    A list or an object is compared element by element (`_eq_terms`), one lookup each, so a row
    holding the same 200-number trajectory cost 200 (1 s at 12,000 memories). After the first
    element rules most rows out, the same *text* decides at once: learn writes contexts with
    ``json.dumps`` as this writes the value, and equal JSON text is an equal value; only a row
    written otherwise (1 for 1.0, keys in another order) is compared element by element."""
    terms: list[Term] = []
    _eq_terms(column, path, value, budget, terms)
    if isinstance(value, list | tuple | Mapping) and value and len(terms) > 2:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        first, rest = terms[0], _balanced("AND", terms[1:])
        same_text = f"json_extract({column}, ?) = json(?)"
        sql = f"({first[0]}) AND ({same_text} OR ({rest[0]}))"
        return _flag(sql), [*first[1], render(path), text, *rest[1]]
    sql, params = _balanced("AND", terms)
    return _flag(sql), params


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _scalar_alternatives(column: str, path: Path, op: str, values: Sequence[Any]) -> list[Term]:
    """Tests "the value at `path` is one of the scalar `values`", one per JSON type present: one
    ``IN`` for the numbers (true and false among them, as 1 and 0) and one for the strings (SQLite
    looks the value up once and searches the list as an index, instead of one lookup per list
    entry), one ``json_type`` test for null. Same rules as `_eq_terms`: 1 equals 1.0 and true."""
    jp = render(path)
    # true/false are bound as 1/0: Python's == (robotmem's rule), and what json_extract makes of a
    # stored true/false, so one IN finds 1, 1.0 and true alike.
    numbers = [_scalar(path, op, int(v) if isinstance(v, bool) else v) for v in values if _is_boolean_or_number(v)]
    strings = [_scalar(path, op, v) for v in values if isinstance(v, str)]
    out: list[Term] = []
    # json_extract gives a number for a JSON number, 1 or 0 for true or false, the text for a
    # string (never equal to a number: SQLite orders every number before every text) and the JSON
    # text for a list or object: the value test alone is exact unless a text that looks like JSON
    # ("[1,2]") is sought; only then the JSON type is checked too, and only in rows whose value
    # passed.
    if numbers:
        marks = ", ".join("?" * len(numbers))
        out.append((f"json_extract({column}, ?) IN ({marks})", [jp, *numbers]))
    if strings:
        marks = ", ".join("?" * len(strings))
        typed = any(v.startswith(("[", "{")) for v in strings)
        sql = f"json_extract({column}, ?) IN ({marks})"
        out.append(
            (f"{sql} AND json_type({column}, ?) = 'text'", [jp, *strings, jp]) if typed else (sql, [jp, *strings])
        )
    if any(v is None for v in values):
        out.append((f"json_type({column}, ?) = 'null'", [jp]))
    return out


def _in(column: str, path: Path, op: str, values: Sequence[Any], budget: _Budget) -> Term:
    """A never-NULL test "the value at `path` equals one of `values`": the scalars as
    `_scalar_alternatives`, each list or object as its `_eq_terms`.

    When every list or object among `values` is a list starting with a scalar (a list of
    positions), their first elements are tested first, together, the same way: a row whose
    value starts with none of them costs one lookup, not one per list."""
    for v in values:
        if not (_is_scalar(v) or isinstance(v, list | tuple | Mapping)):
            raise InvalidInput(f"{op} on '{_show(path)}' needs a list of JSON values")
    structured = [v for v in values if not _is_scalar(v)]
    alternatives = _scalar_alternatives(column, path, op, [v for v in values if _is_scalar(v)])
    each: list[Term] = []
    for v in structured:
        terms: list[Term] = []
        _eq_terms(column, path, v, budget, terms)
        each.append(_balanced("AND", terms))
    if each:
        firsts = [v[0] for v in structured if isinstance(v, list | tuple) and v and _is_scalar(v[0])]
        if len(firsts) == len(structured) and len(structured) > 1:
            head = _balanced("OR", _scalar_alternatives(column, (*path, 0), op, firsts))
            rest = _balanced("OR", each)
            alternatives.append((f"({head[0]}) AND ({rest[0]})", head[1] + rest[1]))
        else:
            alternatives.extend(each)
    sql, params = _balanced("OR", alternatives)
    return _flag(sql), params


def _clause(column: str, path: Path, op: str, operand: Any, budget: _Budget) -> Term:
    jp = render(path)
    if op == "$eq":
        return _eq(column, path, operand, budget)
    if op == "$ne":
        sql, p = _eq(column, path, operand, budget)
        return f"NOT {sql}", p
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str):
            raise InvalidInput(f"{op} on '{_show(path)}' needs a list of values")
        if len(operand) > MAX_IN:
            raise InvalidInput(f"{op} on '{_show(path)}' accepts at most {MAX_IN} values")
        if not operand:
            return ("0" if op == "$in" else "1"), []
        sql, p = _in(column, path, op, operand, budget)
        return (sql if op == "$in" else f"NOT {sql}"), p
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInput(f"$exists on '{_show(path)}' needs true or false")
        return f"json_type({column}, ?) IS {'NOT ' if operand else ''}NULL", [jp]
    # $lt $lte $gt $gte: numbers with numbers, strings with strings
    symbol = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}[op]
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        raise InvalidInput(f"{op} on '{_show(path)}' needs a number or a string")
    types = "'text'" if isinstance(operand, str) else "'integer', 'real'"
    return (
        _flag(f"json_extract({column}, ?) {symbol} ? AND json_type({column}, ?) IN ({types})"),
        [jp, _scalar(path, op, operand), jp],
    )


__all__ = ["MAX_CONDITIONS", "MAX_NODES", "OPERATORS", "Condition", "compile_filter", "json_path", "parse_path"]
