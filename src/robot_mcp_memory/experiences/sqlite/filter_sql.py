"""A parsed ``context_filter`` (`experiences.filters.Filter`) → an SQL condition over a JSON
column, with every value bound; only fixed SQL text is interpolated. The rules it states are the
ones `experiences.filters` documents (equality by value, true == 1, null ≠ missing); the operands
were checked when the filter was parsed.
"""

from __future__ import annotations

import json
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
    parse_filter,
    render,
    show,
)


@dataclass
class Condition:
    """An SQL boolean expression and its parameters, in order."""

    sql: str = "1"
    params: list[Any] = field(default_factory=list)


def compile_filter(spec: Mapping[str, Any] | None, column: str) -> Condition:
    """The condition for the context filter `spec` over the JSON text in `column` (a fixed
    identifier of ours): `parse_filter`, then `condition`."""
    return condition(parse_filter(spec), column)


def condition(tree: Filter, column: str) -> Condition:
    """The SQL of a parsed filter over the JSON text in `column` (a fixed identifier of ours)."""
    if not tree.tests:
        return Condition()
    budget = Budget()
    clauses: list[str] = []
    params: list[Any] = []
    for t in tree.tests:
        sql, p = _clause(column, t.path, t.op, t.operand, budget)
        clauses.append(sql)
        params.extend(p)
    return Condition(" AND ".join(f"({c})" for c in clauses), params)


Term = tuple[str, list[Any]]


def _eq_terms(column: str, path: Path, value: Any, budget: Budget, out: list[Term]) -> None:
    """Append to `out` the tests whose conjunction is "the JSON value at `path` equals `value`".

    Each term is 1 (passes), 0 or NULL (fails: NULL only where something is missing), so the
    conjunction needs one `_flag` around it and none inside. Every value (a list, an object, each
    element) spends one of `budget`, which also bounds the recursion."""
    budget.take(path)
    jp = render(path)
    if is_scalar(value):
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
            _eq_terms(
                column, (*path, check_key(key, f"the object compared at '{show(path)[:80]}'")), element, budget, out
            )
        count = f"(SELECT count(*) FROM json_each({column}, ?)) = ?"  # noqa: S608 - our column name; values bound
        if value:
            out.append((count, [jp, len(value)]))
        else:  # json_each of a scalar yields one row, of an array its elements
            out.append((f"json_type({column}, ?) = 'object' AND {count}", [jp, jp, 0]))
    else:
        raise InvalidInput(f"context_filter value for '{show(path)}' must be a JSON value")


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


def _eq(column: str, path: Path, value: Any, budget: Budget) -> Term:
    """A never-NULL equality test of the JSON value at `path` against `value`.

    A list or an object is compared element by element (`_eq_terms`), one lookup each, so a row
    holding the same long trajectory would cost one lookup per number. After the first
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


def _scalar_alternatives(column: str, path: Path, op: str, values: Sequence[Any]) -> list[Term]:
    """Tests "the value at `path` is one of the scalar `values`", one per JSON type present: one
    ``IN`` for the numbers (true and false among them, as 1 and 0) and one for the strings (SQLite
    looks the value up once and searches the list as an index, instead of one lookup per list
    entry), one ``json_type`` test for null. Same rules as `_eq_terms`: 1 equals 1.0 and true."""
    jp = render(path)
    # true/false are bound as 1/0: Python's == (robotmem's rule), and what json_extract makes of a
    # stored true/false, so one IN finds 1, 1.0 and true alike.
    numbers = [bindable(path, op, int(v) if isinstance(v, bool) else v) for v in values if is_boolean_or_number(v)]
    strings = [bindable(path, op, v) for v in values if isinstance(v, str)]
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


def _in(column: str, path: Path, op: str, values: Sequence[Any], budget: Budget) -> Term:
    """A never-NULL test "the value at `path` equals one of `values`": the scalars as
    `_scalar_alternatives`, each list or object as its `_eq_terms`.

    When every list or object among `values` is a list starting with a scalar (a list of
    positions), their first elements are tested first, together, the same way: a row whose
    value starts with none of them costs one lookup, not one per list."""
    for v in values:
        if not (is_scalar(v) or isinstance(v, list | tuple | Mapping)):
            raise InvalidInput(f"{op} on '{show(path)}' needs a list of JSON values")
    structured = [v for v in values if not is_scalar(v)]
    alternatives = _scalar_alternatives(column, path, op, [v for v in values if is_scalar(v)])
    each: list[Term] = []
    for v in structured:
        terms: list[Term] = []
        _eq_terms(column, path, v, budget, terms)
        each.append(_balanced("AND", terms))
    if each:
        firsts = [v[0] for v in structured if isinstance(v, list | tuple) and v and is_scalar(v[0])]
        if len(firsts) == len(structured) and len(structured) > 1:
            head = _balanced("OR", _scalar_alternatives(column, (*path, 0), op, firsts))
            rest = _balanced("OR", each)
            alternatives.append((f"({head[0]}) AND ({rest[0]})", head[1] + rest[1]))
        else:
            alternatives.extend(each)
    sql, params = _balanced("OR", alternatives)
    return _flag(sql), params


def _clause(column: str, path: Path, op: str, operand: Any, budget: Budget) -> Term:
    jp = render(path)
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
            return ("0" if op == "$in" else "1"), []
        sql, p = _in(column, path, op, operand, budget)
        return (sql if op == "$in" else f"NOT {sql}"), p
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInput(f"$exists on '{show(path)}' needs true or false")
        return f"json_type({column}, ?) IS {'NOT ' if operand else ''}NULL", [jp]
    # $lt $lte $gt $gte: numbers with numbers, strings with strings
    symbol = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}[op]
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        raise InvalidInput(f"{op} on '{show(path)}' needs a number or a string")
    types = "'text'" if isinstance(operand, str) else "'integer', 'real'"
    return (
        _flag(f"json_extract({column}, ?) {symbol} ? AND json_type({column}, ?) IN ({types})"),
        [jp, bindable(path, op, operand), jp],
    )


__all__ = ["Condition", "compile_filter", "condition"]
