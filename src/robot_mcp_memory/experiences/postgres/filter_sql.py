"""A parsed ``context_filter`` (`experiences.filters.Filter`) → a PostgreSQL condition over a
``jsonb`` column, every value bound; only fixed SQL text is interpolated. The rules are the ones
`experiences.filters` documents, as `experiences/sqlite/filter_sql.py` states them for SQLite:

- A path walks keys in objects only and indexes in arrays only (`_at`), as SQLite's ``$."k"``
  and ``[i]``.
- Equality is by value: numbers by value with true = 1 and false = 0 (integers compared as
  ``numeric``, exactly; a float operand as ``float8``, as SQLite compares a double); strings
  exactly, never a number; null only JSON null; lists by length and element, objects by key count
  and key, recursively.
- ``$lt $lte $gt $gte``: numbers with numbers, strings with strings byte-wise (``COLLATE "C"``,
  code point order as SQLite's BINARY); any other pairing is no match.
- ``$exists``: whether the path resolves (a stored null does).

Every test is never NULL (``coalesce(…, false)``), so ``NOT`` of one (``$ne``, ``$nin``) also
matches a memory lacking the path; a cast is only reached under a ``CASE`` branch that checked
the JSON type first, so no value makes a query fail.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import (
    MAX_IN,
    Budget,
    Filter,
    Path,
    bindable,
    check_key,
    is_boolean_or_number,
    is_scalar,
    show,
)


@dataclass
class Condition:
    """A PostgreSQL boolean expression and its parameters, in order."""

    sql: str = "TRUE"
    params: list[Any] = field(default_factory=list)


Term = tuple[str, list[Any]]


def condition(tree: Filter, column: str) -> Condition:
    """The SQL of a parsed filter over the jsonb in `column` (a fixed identifier of ours)."""
    if not tree.tests:
        return Condition()
    budget = Budget()
    clauses: list[str] = []
    params: list[Any] = []
    for t in tree.tests:
        sql, p = _clause(column, t.path, t.op, t.operand, budget)
        clauses.append(f"({sql})")
        params.extend(p)
    return Condition(" AND ".join(clauses), params)


def _at(column: str, path: Path) -> Term:
    """The jsonb value at `path`, NULL where it does not resolve. A key is ``-> text`` (NULL on
    anything but an object); an index is a strict, silent jsonpath subscript, NULL on anything but
    an array — ``-> integer`` would read a scalar as an array of one (``5 -> 0`` is 5)."""
    sql = column
    params: list[Any] = []
    for seg in path:
        if isinstance(seg, int):
            sql = f"jsonb_path_query_first({sql}, 'strict $[$i]', jsonb_build_object('i', %s::integer), true)"
        else:
            sql = f"({sql} -> %s::text)"
        params.append(seg)
    return sql, params


def _flag(test: Term) -> Term:
    return f"coalesce(({test[0]}), false)", test[1]


def _joined(op: str, terms: Sequence[Term]) -> Term:
    return f" {op} ".join(f"({t[0]})" for t in terms), [p for t in terms for p in t[1]]


_NUMBER = (
    "(CASE jsonb_typeof({x}) WHEN 'number' THEN ({x})::numeric "
    "WHEN 'boolean' THEN (CASE WHEN ({x})::boolean THEN 1 ELSE 0 END)::numeric END)"
)
_PLACE = re.compile(r"\{x\}|\{number\}|%s")


def _fill(template: str, x: Term, *values: Any) -> Term:
    """`template` with ``{x}`` the value at the path (`_at`), ``{number}`` the number it compares
    as (true 1, false 0, NULL when it is no number nor boolean) and each ``%s`` the next of
    `values`: the parameters in the order their placeholders stand."""
    template = template.replace("{number}", _NUMBER)
    params: list[Any] = []
    rest = iter(values)
    for m in _PLACE.finditer(template):
        params.extend(x[1] if m.group() == "{x}" else [next(rest)])
    return template.replace("{x}", x[0]), params


def _scalar_alternatives(column: str, path: Path, op: str, values: Sequence[Any]) -> list[Term]:
    """Tests "the value at `path` is one of the scalar `values`", one per kind present."""
    x = _at(column, path)
    numbers = [bindable(path, op, int(v) if isinstance(v, bool) else v) for v in values if is_boolean_or_number(v)]
    integers = [v for v in numbers if isinstance(v, int)]
    floats = [float(v) for v in numbers if not isinstance(v, int)]
    strings = [bindable(path, op, v) for v in values if isinstance(v, str)]
    out: list[Term] = []
    if integers:
        out.append(_fill("{number} = ANY(%s::numeric[])", x, integers))
    if floats:
        out.append(_fill("({number})::float8 = ANY(%s::float8[])", x, floats))
    if strings:
        out.append(
            _fill("(CASE WHEN jsonb_typeof({x}) = 'string' THEN ({x} #>> '{}') = ANY(%s::text[]) END)", x, strings)
        )
    if any(v is None for v in values):
        out.append(_fill("jsonb_typeof({x}) = 'null'", x))
    return out


def _eq_terms(column: str, path: Path, value: Any, budget: Budget, out: list[Term]) -> None:
    """Append to `out` the tests whose conjunction is "the JSON value at `path` equals `value`"."""
    budget.take(path)
    if is_scalar(value):
        out.extend(_scalar_alternatives(column, path, "$eq", [value]))
        return
    x = _at(column, path)
    if isinstance(value, list | tuple):
        for i, element in enumerate(value):
            _eq_terms(column, (*path, i), element, budget, out)
        length = "(CASE WHEN jsonb_typeof({x}) = 'array' THEN jsonb_array_length({x}) END) = %s"
        out.append(_fill(length, x, len(value)))
    elif isinstance(value, Mapping):
        for key, element in value.items():
            _eq_terms(
                column, (*path, check_key(key, f"the object compared at '{show(path)[:80]}'")), element, budget, out
            )
        count = "(CASE WHEN jsonb_typeof({x}) = 'object' THEN (SELECT count(*) FROM jsonb_object_keys({x})) END) = %s"
        out.append(_fill(count, x, len(value)))
    else:
        raise InvalidInput(f"context_filter value for '{show(path)}' must be a JSON value")


def _eq(column: str, path: Path, value: Any, budget: Budget) -> Term:
    terms: list[Term] = []
    _eq_terms(column, path, value, budget, terms)
    if len(terms) == 1:
        return _flag(terms[0])
    return _flag(_joined("AND", terms))


def _in(column: str, path: Path, op: str, values: Sequence[Any], budget: Budget) -> Term:
    for v in values:
        if not (is_scalar(v) or isinstance(v, list | tuple | Mapping)):
            raise InvalidInput(f"{op} on '{show(path)}' needs a list of JSON values")
    alternatives = _scalar_alternatives(column, path, op, [v for v in values if is_scalar(v)])
    for v in values:
        if not is_scalar(v):
            terms: list[Term] = []
            _eq_terms(column, path, v, budget, terms)
            alternatives.append(_joined("AND", terms))
    return _flag(_joined("OR", alternatives))


def _clause(column: str, path: Path, op: str, operand: Any, budget: Budget) -> Term:
    if op == "$eq":
        return _eq(column, path, operand, budget)
    if op == "$ne":
        sql, p = _eq(column, path, operand, budget)
        return f"NOT {sql}", p
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str):
            raise InvalidInput(f"{op} on '{show(path)}' needs a list of values")
        if len(operand) > MAX_IN:
            raise InvalidInput(f"{op} on '{show(path)}' accepts at most {MAX_IN} values")
        if not operand:
            return ("FALSE" if op == "$in" else "TRUE"), []
        sql, p = _in(column, path, op, operand, budget)
        return (sql if op == "$in" else f"NOT {sql}"), p
    x = _at(column, path)
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInput(f"$exists on '{show(path)}' needs true or false")
        return _fill(f"{{x}} IS {'NOT ' if operand else ''}NULL", x)
    symbol = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}[op]
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        raise InvalidInput(f"{op} on '{show(path)}' needs a number or a string")
    value = bindable(path, op, operand)
    if isinstance(value, str):
        test = "CASE WHEN jsonb_typeof({x}) = 'string' THEN ({x} #>> '{}') COLLATE \"C\" " + symbol + " %s END"
    elif isinstance(value, int):
        test = "CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x})::numeric " + symbol + " %s::numeric END"
    else:
        test = "CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x})::float8 " + symbol + " %s::float8 END"
    return _flag(_fill(test, x, value))


__all__ = ["Condition", "condition"]
