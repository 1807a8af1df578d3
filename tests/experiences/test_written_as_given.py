"""What a write stores is what the caller gave (found by review): perception data decoded once and
reported as stored, and any JSON value as data over MCP as in Python."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.model import MAX_DATA_BYTES, parse_data
from tests.conftest import Client


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[RobotMemory]:
    with RobotMemory(tmp_path / "data", robot_id="r1") as m:
        yield m


# ---------------------------------------------------------------------------- data decoded once
@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ('"reading ok"', "reading ok"),  # a JSON string is its text (it was refused)
        ('"12"', "12"),  # text stays text (it became the number 12)
        ('"null"', "null"),  # the text "null" is data (it was stored as no data)
        ('"{\\"f\\": 1}"', '{"f": 1}'),  # a JSON string holding JSON is that text, not an object
        ("12", 12),
        ("true", True),
        ('{"force": [1.5, 2]}', {"force": [1.5, 2]}),
        ("[1, 2]", [1, 2]),
        ("grasp ok, slight slip", "grasp ok, slight slip"),  # not JSON: kept as text, as documented
        ("NaN values on channel 3", "NaN values on channel 3"),  # text, though it starts like NaN
        (12, 12),
        (12.5, 12.5),
        (False, False),
        ({"f": "12"}, {"f": "12"}),
    ],
)
def test_data_is_decoded_once_and_stored_as_given(mem: RobotMemory, given: Any, stored: Any) -> None:
    r = mem.save_perception("tactile reading", "tactile", data=given)
    assert r["has_data"] is True
    got = mem.get(r["memory_id"])
    assert got["data"] == stored
    assert type(got["data"]) is type(stored)


@pytest.mark.parametrize("given", [None, "null", " null "])
def test_data_that_decodes_to_null_is_no_data_and_says_so(mem: RobotMemory, given: Any) -> None:
    r = mem.save_perception("camera frame, nothing seen", data=given)
    assert r["has_data"] is False
    assert mem.get(r["memory_id"])["data"] is None
    assert mem.recall("camera")[0]["has_data"] is False


@pytest.mark.parametrize("given", ['{"f": NaN}', "[1, Infinity]", "NaN", "-Infinity", {"f": math.nan}, math.inf])
def test_nan_and_infinity_in_data_are_refused_like_in_context(mem: RobotMemory, given: Any) -> None:
    """'{"f": NaN}' was stored as a plain string while context refused it."""
    with pytest.raises(InvalidInput, match="NaN"):
        mem.save_perception("force reading", "tactile", data=given)
    with pytest.raises(InvalidInput):
        mem.learn("force reading", context='{"f": NaN}')
    assert mem.recall("", n=10) == []


def test_a_decoded_string_is_bounded_and_checked_as_text() -> None:
    assert parse_data(json.dumps("x" * 1000)) == "x" * 1000
    with pytest.raises(InvalidInput, match="larger than"):
        parse_data(json.dumps("x" * (MAX_DATA_BYTES + 1)))
    with pytest.raises(InvalidInput, match="lone surrogate"):
        parse_data('"\\ud800"')


async def test_data_over_mcp_is_decoded_once_and_has_data_follows_what_was_stored(client: Client) -> None:
    cases: list[tuple[Any, Any]] = [
        ('"hello"', "hello"),  # was refused
        ('"12"', "12"),
        ('"null"', "null"),  # was has_data true with nothing stored
        ("null", None),  # was has_data true
        ("12", 12),
        ("plain caption", "plain caption"),
        ('{"bbox": [1, 2]}', {"bbox": [1, 2]}),
        ({"bbox": [1, 2]}, {"bbox": [1, 2]}),
    ]
    for given, stored in cases:
        r = await client.call("save_perception", description=f"seen {given!r}", data=given)
        assert "error" not in r, (given, r)
        assert r["has_data"] is (stored is not None), (given, r)
        found = (await client.call("recall", query="", n=1, include_data=True))["memories"][0]
        assert found["id"] == r["memory_id"]
        assert (found["data"], found["has_data"]) == (stored, stored is not None), given
    refused = await client.call("save_perception", description="force", data='{"f": NaN}')
    assert refused["error"] == "invalid"
    assert "NaN" in refused["detail"]


# ---------------------------------------------------------------------------- any JSON value over MCP
async def test_scalar_data_is_taken_over_mcp_as_by_the_python_api(client: Client) -> None:
    """data=12 or data=true was refused over MCP (the tool typed it object, array or string)."""
    for value in (12, 12.5, True, False, 0, -3):
        r = await client.call("save_perception", description=f"gauge reads {value}", data=value)
        assert r.get("has_data") is True, (value, r)
        found = (await client.call("recall", query="", n=1, include_data=True))["memories"][0]
        assert found["data"] == value
        assert type(found["data"]) is type(value)


async def test_the_data_schema_offers_every_json_type(client: Client) -> None:
    tools = {t.name: t for t in (await client.session.list_tools()).tools}
    data = tools["save_perception"].inputSchema["properties"]["data"]
    types = {branch["type"] for branch in data["anyOf"]}
    assert types == {"object", "array", "string", "integer", "number", "boolean", "null"}
    assert data["default"] is None
    meta = tools["save_perception"].inputSchema["properties"]["metadata"]
    assert {branch["type"] for branch in meta["anyOf"]} == {"object", "string", "null"}  # unchanged
