"""Strict tool arguments, read from each tool's published input schema.

FastMCP validates arguments with pydantic in lax mode and ignores names it does not know:
``find_processes(colour="blue")`` ran as if the argument were not there, and
``record_outcome(success="yes")`` counted a success. `ArgumentRules` holds what the input
schema says — the argument names, and the JSON types of each argument whose schema names only
scalar types — and `problem` refuses a call that the schema does not describe:

- a name the schema does not list (the schema says ``additionalProperties: false``);
- a boolean argument given anything but ``true``/``false`` (``"yes"``, ``1``, ``"true"``);
- a number argument given a string (``"5"``) or a boolean; an integer argument given a number
  with a fraction (``2.5``) — a number whose fraction is zero (``5.0``) is an integer, as JSON
  Schema counts it — or one beyond SQLite's 64-bit integers.

Arguments whose schema admits strings, objects or arrays are left to pydantic and the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: SQLite stores integers in 64 bits: a larger one cannot name a row or be stored.
_INT_RANGE = (-(2**63), 2**63 - 1)
_SCALARS = frozenset({"boolean", "integer", "number", "null"})


def _types(schema: Any) -> frozenset[str]:
    """The JSON types a property schema admits (its ``type``, and those of its ``anyOf`` branches)."""
    if not isinstance(schema, dict):
        return frozenset()
    t = schema.get("type")
    own = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
    return frozenset(own.union(*(_types(s) for s in schema.get("anyOf", []))))


@dataclass(frozen=True)
class ArgumentRules:
    tool: str
    #: Every argument name, in the schema's order.
    names: tuple[str, ...]
    #: Per argument whose schema admits only booleans, numbers and null: those JSON types.
    scalars: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, tool: str, input_schema: Mapping[str, Any]) -> ArgumentRules:
        props = input_schema.get("properties", {})
        scalars = {name: t for name, s in props.items() if (t := _types(s)) and t <= _SCALARS}
        return cls(tool=tool, names=tuple(props), scalars=scalars)

    def problem(self, arguments: Mapping[str, Any]) -> str | None:
        """Why `arguments` do not fit the schema, written for the caller; None when they do."""
        unknown = [k for k in arguments if k not in self.names]
        if unknown:
            valid = ", ".join(self.names) if self.names else "none (call it without arguments)"
            listed = ", ".join(repr(k) for k in unknown[:5])
            return f"bad arguments for {self.tool}: unknown argument {listed}; its arguments are: {valid}"
        for name, value in arguments.items():
            types = self.scalars.get(name)
            if types is None or (value is None and "null" in types):
                continue
            wrong = _wrong_scalar(value, types)
            if wrong is not None:
                return f"bad arguments for {self.tool}: {name}: {wrong}"
        return None


def _wrong_scalar(value: Any, types: frozenset[str]) -> str | None:
    """Why `value` is not one of the JSON scalar `types`, or None when it is."""
    if isinstance(value, bool):
        if "boolean" in types:
            return None
        return "a number is needed, not true/false"
    if "boolean" in types and not types & {"integer", "number"}:
        return f"true or false is needed (a JSON boolean), not {_shown(value)}"
    if isinstance(value, int):
        return None if _INT_RANGE[0] <= value <= _INT_RANGE[1] else "out of range (64-bit integers)"
    if isinstance(value, float):
        if "number" in types:
            return None
        if not value.is_integer():
            return f"a whole number is needed, not {value!r}"
        return None if _INT_RANGE[0] <= value <= _INT_RANGE[1] else "out of range (64-bit integers)"
    what = "a whole number" if "number" not in types else "a number"
    return f"{what} is needed (a JSON number, not a string), not {_shown(value)}"


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
