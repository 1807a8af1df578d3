"""Bounds every JSON argument meets before it is stored or compiled into a query.

Size is bounded where each argument is parsed; this adds what a size bound misses. **Depth**: a
64 KB context can nest 30,000 levels, which Python's ``json`` decodes (up to its recursion limit)
and SQLite stores, but which no JSON encoder on the way back out will write — the result that
holds it cannot be sent, and every recall reaching that memory would fail. **Finite numbers**:
NaN and Infinity are not JSON. The walk is iterative, so it never recurses itself.
"""

from __future__ import annotations

import json
import math
from typing import Any

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


def check(value: Any, what: str) -> Any:
    """`value` unchanged when it nests at most `MAX_DEPTH` levels and holds only finite numbers;
    else `InvalidInput` naming `what`."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidInput(f"{what} nests more than {MAX_DEPTH} levels deep; flatten it")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
        elif isinstance(v, float) and not math.isfinite(v):
            raise InvalidInput(f"{what} must contain only JSON values (no NaN or Infinity)")
    return value


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


__all__ = ["MAX_DEPTH", "check", "finite", "loads"]
