"""Bounds every JSON argument meets before it is stored or compiled into a query.

Size is bounded where each argument is parsed; this adds what a size bound misses. **Depth**: a
64 KB context can nest 30,000 levels, which Python's ``json`` decodes (up to its recursion limit)
and SQLite stores, but which no JSON encoder on the way back out will write — the result that
holds it cannot be sent, and every recall reaching that memory would fail. **Finite numbers**:
NaN and Infinity are not JSON. **Plain values**: what a Python caller passes (tuples, numpy
numbers, non-string keys) is made plain JSON or refused, so what is stored is what comes back.
`finite`'s walk is iterative, and `check`'s stops at `MAX_DEPTH`: neither recurses past that.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pydantic_core

from robot_mcp_memory.errors import InvalidInput

#: How deeply objects and arrays may nest in an argument (a robot's context is a handful of levels).
MAX_DEPTH = 32


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """`json.loads` without NaN/Infinity, and with a document nested past the interpreter's limit
    refused like any other deep one (`InvalidInput`) rather than raising `RecursionError`."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError as exc:
        raise InvalidInput(f"JSON nested more than {MAX_DEPTH} levels deep is not accepted") from exc


def encode(value: Any) -> bytes:
    """`value` (plain JSON values) as compact UTF-8 JSON: what ``json.dumps(value,
    ensure_ascii=False, separators=(",", ":"))`` writes, but for exponents written without
    padding (``1e-7``, not ``1e-07``: the same number to every JSON reader), in a sixth of its
    time (pydantic's serializer; a learn encodes its context twice). A lone surrogate, which no
    UTF-8 holds, raises `ValueError`. NaN and Infinity are written as ``json.dumps`` writes them:
    `check` refuses them in anything a caller sends."""
    try:
        return pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError as exc:
        raise ValueError(str(exc)) from exc


def dumps(value: Any) -> str:
    """`encode` as text."""
    return encode(value).decode()


def check(value: Any, what: str) -> Any:
    """`value` as plain JSON values — when it nests at most `MAX_DEPTH` levels, holds only finite
    numbers and its objects' keys are strings — else `InvalidInput` naming `what`.

    What a Python caller hands over is made plain on the way: a tuple is a list (and nests like
    one), a mapping is a dict, an int or float subclass (``bool`` aside) its plain value, and a
    numpy scalar or array its Python value (``.tolist()``, at most `MAX_ARRAY` elements). A key
    that is not a string is refused, not turned into one: ``{1: …, "1": …}`` would lose a value.
    Anything else (bytes, a set, a datetime …) is refused. The walk stops at `MAX_DEPTH`, so it
    never recurses deeper than that however deeply the value nests."""
    return _plain(value, what, 0)


#: Integers from here on are no JSON number a client can read (a double overflows; JavaScript reads
#: Infinity), and over MCP such a number is refused on the way in (`stdio.number_problem`).
_HUGE = 10**308

#: The most elements a numpy array in an argument may have (every argument is far smaller once
#: encoded: data, the largest, is at most 256 KB, two bytes or more per element).
MAX_ARRAY = 131_072


def _plain(v: Any, what: str, depth: int) -> Any:
    # Plain JSON values first, by exact type (what every MCP argument and most Python ones hold):
    # this walk runs on every learn, so the common values must not pay the abstract-class checks
    # below.
    t = type(v)
    if t is str or v is None or t is bool:
        return v
    if t is int:
        if -_HUGE < v < _HUGE:
            return v
        raise InvalidInput(f"{what} holds an integer too large for a JSON number (no double holds it)")
    if t is float:
        if not math.isfinite(v):
            raise InvalidInput(f"{what} must contain only JSON values (no NaN or Infinity)")
        return v
    if t is dict and depth < MAX_DEPTH:
        out: dict[str, Any] = {}
        for k, x in v.items():
            if type(k) is not str:
                return _made_plain(v, what, depth)  # a key to refuse or to make plain
            out[k] = _plain(x, what, depth + 1)
        return out
    if t is list and depth < MAX_DEPTH:
        return [_plain(x, what, depth + 1) for x in v]
    return _made_plain(v, what, depth)


def _made_plain(v: Any, what: str, depth: int) -> Any:
    """`_plain` for what is not plain JSON already: subclasses, mappings, tuples, numpy values —
    and the refusals. (None, true/false and exact str, int and float never get here.)"""
    if isinstance(v, str):  # a subclass (a StrEnum …): its plain text
        return str.__str__(v)
    if isinstance(v, int | float):  # a subclass (an IntEnum …): its plain value, checked as one
        return _plain(int(v) if isinstance(v, int) else float(v), what, depth)
    if isinstance(v, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"{what} nests more than {MAX_DEPTH} levels deep; flatten it")
        if isinstance(v, Mapping):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise InvalidInput(
                        f"{what} has the key {k!r} ({type(k).__name__}); the keys of a JSON object are strings"
                    )
                out[k if type(k) is str else str.__str__(k)] = _plain(x, what, depth + 1)
            return out
        return [_plain(x, what, depth + 1) for x in v]
    if type(v).__module__ == "numpy" and hasattr(v, "tolist"):
        if getattr(v, "size", 1) > MAX_ARRAY:
            raise InvalidInput(f"{what} holds an array of more than {MAX_ARRAY:,} elements; store less or summarise it")
        return _plain(v.tolist(), what, depth)  # a scalar's Python value, an array's nested lists
    raise InvalidInput(
        f"{what} holds a {type(v).__name__}, which is not a JSON value "
        "(use text, numbers, true/false, None, lists and objects with string keys)"
    )


def finite(value: Any) -> bool:
    """Whether every number in `value` is finite (any depth: for whole messages, which `check`'s
    depth bound is not meant for)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


__all__ = ["MAX_ARRAY", "MAX_DEPTH", "check", "finite", "loads"]
