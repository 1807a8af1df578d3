"""Schema-driven fuzzing: schemathesis generates requests from /api/openapi.json (in-process) and
every answer must be documented, well-formed and never a 500 — positive and negative data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err, Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.web.standalone import web_app
from tests.surfaces.web.conftest import settings_for

#: Examples per operation and mode: enough to walk every parameter, bounded to well under a minute.
EXAMPLES = 25
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.parametrize("tokens", [False, True], ids=["open", "admin-token"])
def test_fuzzing_the_openapi_document_finds_no_server_error(tmp_path: Path, tokens: bool) -> None:
    memory = Memory.open(settings_for(tmp_path, tokens=tokens))
    try:
        app = web_app(memory)
        headers = {"Authorization": "Bearer admin-token-1234"} if tokens else None
        schema = schemathesis.openapi.from_asgi("/api/openapi.json", app)
        results = list(schema.get_all_operations())
        operations = [r.ok() for r in results if isinstance(r, Ok)]
        assert len(operations) == len(results), [r.err() for r in results if isinstance(r, Err)]
        assert len(operations) >= 20
        for op in operations:
            strategies = [op.as_strategy(generation_mode=mode) for mode in GenerationMode]

            @given(case=st.one_of(strategies))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def run(case: schemathesis.Case[Any]) -> None:
                response = case.call(headers=headers)
                case.validate_response(response, checks=CHECKS, headers=headers)

            run()
    finally:
        memory.close()
