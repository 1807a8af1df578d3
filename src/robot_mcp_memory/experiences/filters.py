"""``context_filter`` → a `Filter`: a small tree (a conjunction of `Test`s on context paths), checked
whole here and compiled by each storage backend (SQLite: `experiences.sqlite.filter_sql`, which binds
every value). Nothing here is SQL but the JSON path syntax `render` writes.

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
however long the list, never one per value. A list or object operand is a conjunction of
per-element tests, elements first and the length or key count last, so a row whose first element
differs costs one lookup; `MAX_NODES` bounds how many values all such tests compare.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


def check_key(key: Any, where: str) -> str:
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


def show(path: Path) -> str:
    return ".".join(str(s) for s in path)


@dataclass(frozen=True, eq=False)
class Test:
    """One leaf of a filter: the JSON value at `path` compared by `op` (one of `OPERATORS`) with
    `operand` (a JSON value, already checked by `parse_filter`)."""

    path: Path
    op: str
    operand: Any


@dataclass(frozen=True, eq=False)
class Filter:
    """A parsed ``context_filter``: every one of `tests` must pass (none: every memory passes).
    Compared by identity, so a backend may cache what it compiles from one."""

    tests: tuple[Test, ...] = ()


#: The filter that passes every memory.
EVERYTHING = Filter()


def parse_filter(spec: Mapping[str, Any] | None) -> Filter:
    """`spec` as a `Filter`, or `InvalidInput` naming what is wrong. Every rule a backend relies
    on (operands, limits, addressable keys, bindable values) is checked here, once."""
    if not spec:
        return EVERYTHING
    if not isinstance(spec, Mapping):
        raise InvalidInput('context_filter must be a JSON object such as {"task.success": true}')
    tests: list[Test] = []
    budget = Budget()
    for path, test in _flatten(spec):
        for op, operand in _operators(path, test):
            _check(path, op, operand, budget)
            tests.append(Test(path, op, operand))
    if len(tests) > MAX_CONDITIONS:
        raise InvalidInput(f"context_filter has {len(tests)} conditions; at most {MAX_CONDITIONS} are allowed")
    return Filter(tuple(tests))


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
                f"unknown context_filter key '{key[:40]}' under '{show(prefix) or 'the top level'}': keys "
                f"are paths; operators ({', '.join(OPERATORS)}) go inside a path's object"
            )
        path = (*prefix, check_key(key, f"'{show(prefix)}'")) if prefix else parse_path(key)
        if len(path) > MAX_DEPTH:
            raise InvalidInput(f"context_filter path '{show(path)[:80]}' is deeper than {MAX_DEPTH} levels")
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
                f"unknown operator '{str(op)[:40]}' on '{show(path)}': use one of {', '.join(OPERATORS)}"
            )
        ops.append((op, operand))
    return ops


class Budget:
    """How many more values the equality tests of one filter may compare (`MAX_NODES`)."""

    def __init__(self) -> None:
        self.left = MAX_NODES

    def take(self, path: Path) -> None:
        self.left -= 1
        if self.left < 0:
            raise InvalidInput(
                f"context_filter compares more than {MAX_NODES} values (each value of $eq/$ne and each list, object "
                f"and element compared, at any depth; the limit was passed at '{show(path)[:80]}'): compare fewer, "
                "or name single elements such as 'spatial.position.0'"
            )


_INT64 = 2**63


def bindable(path: Path, op: str, value: Any) -> Any:
    """`value` as SQLite can bind it: finite, and an integer beyond 64 bits as the real SQLite's
    JSON functions make of such a stored number. A text must not hold U+0000: SQLite's JSON
    functions read a stored text only up to it, so such a test could never be right."""
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInput(f"{op} on '{show(path)}' compares a text holding U+0000, which cannot be matched")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{op} on '{show(path)}' needs a finite number")
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return float(value)
    return value


def is_boolean_or_number(value: Any) -> bool:
    """What equality compares as a number: true is 1 and false is 0, as Python's ``==``."""
    return isinstance(value, bool | int | float)


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _check_value(path: Path, value: Any, budget: Budget) -> None:
    """What an equality test of `value` at `path` needs: each value it compares spends one of
    `budget` (which also bounds the recursion), keys addressable, scalars bindable."""
    budget.take(path)
    if is_scalar(value):
        bindable(path, "$eq", int(value) if isinstance(value, bool) else value)
    elif isinstance(value, list | tuple):
        for i, element in enumerate(value):
            _check_value((*path, i), element, budget)
    elif isinstance(value, Mapping):
        for key, element in value.items():
            _check_value((*path, check_key(key, f"the object compared at '{show(path)[:80]}'")), element, budget)
    else:
        raise InvalidInput(f"context_filter value for '{show(path)}' must be a JSON value")


def _check(path: Path, op: str, operand: Any, budget: Budget) -> None:
    if op in ("$eq", "$ne"):
        _check_value(path, operand, budget)
    elif op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str):
            raise InvalidInput(f"{op} on '{show(path)}' needs a list of values")
        if len(operand) > MAX_IN:
            raise InvalidInput(f"{op} on '{show(path)}' accepts at most {MAX_IN} values")
        for v in operand:
            if not (is_scalar(v) or isinstance(v, list | tuple | Mapping)):
                raise InvalidInput(f"{op} on '{show(path)}' needs a list of JSON values")
        for v in operand:
            if is_scalar(v) and v is not None:
                bindable(path, op, int(v) if isinstance(v, bool) else v)
        for v in operand:
            if not is_scalar(v):
                _check_value(path, v, budget)
    elif op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInput(f"$exists on '{show(path)}' needs true or false")
    else:  # $lt $lte $gt $gte: numbers with numbers, strings with strings
        if isinstance(operand, bool) or not isinstance(operand, int | float | str):
            raise InvalidInput(f"{op} on '{show(path)}' needs a number or a string")
        bindable(path, op, operand)


__all__ = [
    "EVERYTHING",
    "MAX_CONDITIONS",
    "MAX_NODES",
    "OPERATORS",
    "Filter",
    "Test",
    "json_path",
    "parse_filter",
    "parse_path",
]
