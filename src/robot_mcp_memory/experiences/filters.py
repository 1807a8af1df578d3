"""``context_filter`` → an SQL condition over a JSON column, with every value bound.

A filter is a JSON object whose keys are dot paths into a memory's context and whose values are
either a plain value (equality) or an object of operators::

    {"task.success": true,
     "params.grip_force": {"$gte": 10, "$lt": 15},
     "robot.type": {"$in": ["ur5e", "franka"]},
     "spatial.position": {"$exists": true}}

Operators: ``$eq $ne $lt $lte $gt $gte $in $nin $exists``. Several operators on one path are
AND-ed, as are several paths. A nested object without operators is read as more dot paths
(``{"task": {"success": true}}`` is ``{"task.success": true}``). Semantics follow MongoDB:
``$ne`` / ``$nin`` also match a memory that lacks the path; comparisons match only values of the
same JSON type (a number is never "greater" than a string); ``true`` matches JSON ``true`` only,
never the number 1.

Anything else — an unknown operator, a malformed path, a wrong operand — raises `InvalidInput`
naming the problem: a filter that cannot be understood must never silently pass everything.
Paths are validated segment by segment *and* bound as parameters; only fixed SQL text is
interpolated. Each test compares the value first and checks its JSON type only for rows that pass
(``AND`` short-circuits), so most rows cost one lookup in the parsed context. The condition runs in
SQL before ranking, so filtered recall sees every match.
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
MAX_DEPTH = 8
MAX_IN = 100
_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}\Z|^[0-9]{1,6}\Z")


@dataclass
class Condition:
    """An SQL boolean expression and its parameters, in order."""

    sql: str = "1"
    params: list[Any] = field(default_factory=list)


def json_path(dotted: str, what: str = "context_filter path") -> str:
    """``a.b.0.c`` → the SQLite JSON path ``$."a"."b"[0]."c"``, or `InvalidInput` naming `what`."""
    if not isinstance(dotted, str) or not dotted:
        raise InvalidInput(f"a {what} must be a non-empty dot path such as 'params.force'")
    segments = dotted.split(".")
    if len(segments) > MAX_DEPTH:
        raise InvalidInput(f"{what} '{dotted[:80]}' is deeper than {MAX_DEPTH} levels")
    out = ["$"]
    for i, seg in enumerate(segments):
        if not _SEGMENT.match(seg):
            raise InvalidInput(
                f"{what} '{dotted[:80]}' has an invalid segment '{seg[:40]}': use letters, digits, "
                "'_' and '-' (a number indexes a list)"
            )
        if seg.isdigit():
            if i == 0:
                raise InvalidInput(f"{what} '{dotted[:80]}' must start with a key, not an index")
            out.append(f"[{int(seg)}]")
        else:
            out.append(f'."{seg}"')
    return "".join(out)


def compile_filter(spec: Mapping[str, Any] | None, column: str) -> Condition:
    """The condition for `spec` over the JSON text in `column` (a fixed identifier of ours)."""
    if not spec:
        return Condition()
    if not isinstance(spec, Mapping):
        raise InvalidInput('context_filter must be a JSON object such as {"task.success": true}')
    clauses: list[str] = []
    params: list[Any] = []
    for path, test in _flatten(spec, ""):
        jp = json_path(path)
        for op, operand in _operators(path, test):
            sql, p = _clause(column, jp, path, op, operand)
            clauses.append(sql)
            params.extend(p)
    if len(clauses) > MAX_CONDITIONS:
        raise InvalidInput(f"context_filter has {len(clauses)} conditions; at most {MAX_CONDITIONS} are allowed")
    return Condition(" AND ".join(f"({c})" for c in clauses) or "1", params)


def _is_operator_object(value: Any) -> bool:
    return isinstance(value, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in value)


def _flatten(spec: Mapping[str, Any], prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise InvalidInput("context_filter keys must be strings")
        if key.startswith("$"):
            raise InvalidInput(
                f"unknown context_filter key '{key[:40]}': top-level keys are dot paths; operators "
                f"({', '.join(OPERATORS)}) go inside a path's object"
            )
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping) and value and not _is_operator_object(value):
            out.extend(_flatten(value, path))
        else:
            out.append((path, value))
    return out


def _operators(path: str, test: Any) -> list[tuple[str, Any]]:
    if not _is_operator_object(test):
        return [("$eq", test)]
    ops = []
    for op, operand in test.items():
        if op not in OPERATORS:
            raise InvalidInput(f"unknown operator '{str(op)[:40]}' on '{path}': use one of {', '.join(OPERATORS)}")
        ops.append((op, operand))
    return ops


_INT64 = 2**63


def _scalar(path: str, op: str, value: Any) -> Any:
    """`value` as SQLite can bind it: finite, and an integer beyond 64 bits as the real SQLite's
    JSON functions make of such a stored number."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{op} on '{path}' needs a finite number")
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return float(value)
    return value


def _eq(column: str, jp: str, path: str, value: Any) -> tuple[str, list[Any]]:
    """A never-NULL equality test of the JSON value at `jp` against `value`."""
    if value is None:
        return f"coalesce(json_type({column}, ?) = 'null', 0)", [jp]
    if isinstance(value, bool):
        return f"coalesce(json_type({column}, ?) = ?, 0)", [jp, "true" if value else "false"]
    if isinstance(value, int | float):
        return (
            f"coalesce(json_extract({column}, ?) = ? AND json_type({column}, ?) IN ('integer', 'real'), 0)",
            [jp, _scalar(path, "$eq", value), jp],
        )
    if isinstance(value, str):
        return f"coalesce(json_extract({column}, ?) = ? AND json_type({column}, ?) = 'text', 0)", [jp, value, jp]
    if isinstance(value, list | dict):
        kind = "array" if isinstance(value, list) else "object"
        encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (
            f"coalesce(json_extract({column}, ?) = json(?) AND json_type({column}, ?) = '{kind}', 0)",
            [jp, encoded, jp],
        )
    raise InvalidInput(f"context_filter value for '{path}' must be a JSON value")


def _clause(column: str, jp: str, path: str, op: str, operand: Any) -> tuple[str, list[Any]]:
    if op == "$eq":
        return _eq(column, jp, path, operand)
    if op == "$ne":
        sql, p = _eq(column, jp, path, operand)
        return f"NOT {sql}", p
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str):
            raise InvalidInput(f"{op} on '{path}' needs a list of values")
        if len(operand) > MAX_IN:
            raise InvalidInput(f"{op} on '{path}' accepts at most {MAX_IN} values")
        if not operand:
            return ("0" if op == "$in" else "1"), []
        parts = [_eq(column, jp, path, v) for v in operand]
        sql = " OR ".join(s for s, _ in parts)
        params = [x for _, p in parts for x in p]
        return (f"({sql})" if op == "$in" else f"NOT ({sql})"), params
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInput(f"$exists on '{path}' needs true or false")
        return f"json_type({column}, ?) IS {'NOT ' if operand else ''}NULL", [jp]
    # $lt $lte $gt $gte: numbers with numbers, strings with strings
    symbol = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}[op]
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        raise InvalidInput(f"{op} on '{path}' needs a number or a string")
    types = "'text'" if isinstance(operand, str) else "'integer', 'real'"
    return (
        f"coalesce(json_extract({column}, ?) {symbol} ? AND json_type({column}, ?) IN ({types}), 0)",
        [jp, _scalar(path, op, operand), jp],
    )


__all__ = ["MAX_CONDITIONS", "OPERATORS", "Condition", "compile_filter", "json_path"]
