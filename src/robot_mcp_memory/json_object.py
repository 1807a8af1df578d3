"""JSON-object arguments (`params`, `meta`, …) that arrive as a dict **or** a JSON string.

LLM clients often send an object as a string; FastMCP pre-parses a well-formed one, and anything
else reaches us here. The result is always a plain ``dict`` that re-encodes as strict JSON (no
NaN/Infinity) within a size bound, or `InvalidInput` saying what to send instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.errors import InvalidInput


def parse_json_object(value: Mapping[str, Any] | str, what: str, max_bytes: int) -> dict[str, Any]:
    """`value` as a dict, or `InvalidInput` naming `what`."""
    if isinstance(value, str):
        try:
            value = jsonvalue.loads(value)
        except InvalidInput:
            raise
        except ValueError as exc:  # JSONDecodeError is a ValueError
            raise InvalidInput(
                f'{what} must be a JSON object such as {{"force": 0.3}}; the string given is not valid JSON'
            ) from exc
    if not isinstance(value, Mapping):
        raise InvalidInput(f'{what} must be a JSON object such as {{"force": 0.3}}, not a {type(value).__name__}')
    value = jsonvalue.check(value, what)
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} must contain only JSON values (no NaN or Infinity)") from exc
    if len(encoded.encode()) > max_bytes:
        raise InvalidInput(f"{what} is larger than {max_bytes} bytes once encoded; store less")
    result: dict[str, Any] = json.loads(encoded)
    return result
