"""The OpenAPI 3.1 document, generated from the declared endpoints and their pydantic models —
so it cannot drift from what the handlers accept and answer (a schemathesis run checks that)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from robot_mcp_memory import __version__
from robot_mcp_memory.surfaces.web.models import ErrorBody
from robot_mcp_memory.surfaces.web.problems import DESCRIPTIONS
from robot_mcp_memory.surfaces.web.routing import Endpoint

REF = "#/components/schemas/{model}"


def _parameters(ep: Endpoint) -> list[dict[str, Any]]:
    schema = ep.args.model_json_schema(ref_template=REF)
    required = set(schema.get("required", ()))
    in_path = set(ep.path_params)
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        description = prop.pop("description", "")
        param: dict[str, Any] = {
            "name": name,
            "in": "path" if name in in_path else "query",
            "required": name in in_path or name in required,
            "schema": prop,
        }
        if description:
            param["description"] = description
        params.append(param)
    return params


def document(endpoints: list[Endpoint], *, auth_enabled: bool) -> dict[str, Any]:
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorBody, "serialization")]
    for ep in endpoints:
        models.append((ep.response, "serialization"))
        if ep.body is not None:
            models.append((ep.body, "validation"))
    refs, defs = models_json_schema(models, ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        responses: dict[str, Any] = {
            str(ep.status): {
                "description": ep.summary,
                "content": {"application/json": {"schema": refs[(ep.response, "serialization")]}},
            }
        }
        for code in ep.errors:
            responses[str(code)] = {
                "description": DESCRIPTIONS[code],
                "content": {"application/json": {"schema": refs[(ErrorBody, "serialization")]}},
            }
        op: dict[str, Any] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "description": ep.description,
            "tags": [ep.tag],
            "parameters": _parameters(ep),
            "responses": responses,
        }
        if ep.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(ep.body, "validation")]}},
            }
        if ep.public:
            op["security"] = []
        paths.setdefault(ep.template, {})[ep.method.lower()] = op
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "robot-mcp-memory REST API",
            "version": __version__,
            "description": "The dashboard's API: the same services and tenancy as the MCP tools. "
            "Authenticate with 'Authorization: Bearer <token>' (API clients) or the session cookie "
            "from POST /api/login (browsers; writes then need X-CSRF-Token). Errors are "
            '{"error": code, "detail": …}.',
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {"type": "apiKey", "in": "cookie", "name": "memory_session"},
            },
        },
    }
    if auth_enabled:
        doc["security"] = [{"bearer": []}, {"session": []}]
    return doc
