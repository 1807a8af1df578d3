"""`stdio.encoded`: a response written from its plain result is the very text mcp's own encoder
writes, whatever the result holds; everything else is written by that encoder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import types

from robot_mcp_memory.surfaces.mcp.stdio import encoded

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
_IDS = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=12)
#: Models a result could hold (the SDK dumps them first; a caller building a response by hand
#: might not): their unset fields are None, which the model encoder leaves out.
_MODELS = st.builds(types.TextContent, type=st.just("text"), text=st.text(max_size=8)) | st.builds(
    types.ErrorData, code=st.integers(-32768, 0), message=st.text(max_size=8)
)


def _theirs(message: types.JSONRPCMessage) -> str | type[Exception]:
    try:
        return message.model_dump_json(by_alias=True, exclude_none=True)
    except Exception as exc:
        return type(exc)


def _ours(message: types.JSONRPCMessage) -> str | type[Exception]:
    try:
        return encoded(message)
    except Exception as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(rid=_IDS, result=st.dictionaries(st.text(max_size=8), _JSON | _MODELS, max_size=5))
def test_a_response_is_written_as_mcp_writes_it(rid: int | str, result: dict[str, Any]) -> None:
    message = types.JSONRPCMessage(types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result))
    assert _ours(message) == _theirs(message)


def test_a_tool_result_is_written_as_mcp_writes_it() -> None:
    """What the session hands the transport for a tool call: a result dumped in JSON mode."""
    structured = {"result": {"memories": [{"id": 1, "score": None, "distance": 0.5, "tags": ["grasp", "ü"]}]}}
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text='{"memories": []}')], structuredContent=structured
    )
    dumped = types.ServerResult(result).model_dump(by_alias=True, mode="json", exclude_none=True)
    message = types.JSONRPCMessage(types.JSONRPCResponse(jsonrpc="2.0", id=7, result=dumped))
    assert encoded(message) == _theirs(message)
    assert '"score":null' in encoded(message)  # a null inside a result stays: only the envelope drops them


@pytest.mark.parametrize(
    "message",
    [
        types.JSONRPCResponse.model_validate({"jsonrpc": "2.0", "id": 3, "result": {}, "extra": None, "more": 1}),
        types.JSONRPCRequest(jsonrpc="2.0", id=4, method="tools/call", params={"name": "recall", "x": None}),
        types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=None),
        types.JSONRPCError(jsonrpc="2.0", id=5, error=types.ErrorData(code=-32602, message="bad", data=None)),
    ],
)
def test_every_other_message_is_written_by_mcps_encoder(message: Any) -> None:
    wrapped = types.JSONRPCMessage(message)
    assert encoded(wrapped) == _theirs(wrapped)
