"""Every REST endpoint in-process, as the admin: what each answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.surfaces.web.api.processes import outcome_log
from tests.surfaces.web.conftest import ADMIN, Connect, doc


async def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    data: dict[str, Any] = response.json()
    return data


async def test_processes_can_be_saved_listed_searched_read_and_deleted(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        saved = await ok(await c.post("/api/processes", json={"markdown": doc("fetch-parcel", "Fetch the parcel")}))
        assert saved["action"] == "created"
        assert saved["id"] == "fetch-parcel"
        page = await ok(await c.get("/api/processes", params={"limit": 10}))
        assert page["total"] == 1
        assert [p["id"] for p in page["processes"]] == ["fetch-parcel"]
        found = await ok(await c.get("/api/search/processes", params={"q": "bring me the parcel"}))
        assert found["mode"] in ("keyword", "hybrid")
        assert found["mode_reason"]
        hit = found["processes"][0]
        assert hit["id"] == "fetch-parcel"
        assert hit["rank"] == 1
        # Either mode: calibrated relevance (0-1) × reliability.
        assert 0 < hit["relevance"] <= 1
        assert hit["score"] == pytest.approx(hit["relevance"] * hit["reliability"], rel=1e-3)
        assert "reliability" in hit["explanation"]
        one = await ok(await c.get("/api/processes/fetch-parcel"))
        assert one["markdown"].startswith("---\n")
        assert "<h2>Steps</h2>" in one["html"]
        gone = await ok(await c.delete("/api/processes/fetch-parcel"))
        assert gone == {"id": "fetch-parcel", "deleted": True}
        assert (await c.get("/api/processes/fetch-parcel")).status_code == 404


async def test_saving_again_edits_the_document_and_keeps_its_counters(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        await ok(await c.post("/api/processes", json={"markdown": doc("p-1", "First")}))
        await ok(await c.post("/api/processes/p-1/outcomes", json={"success": True, "note": "worked"}))
        edited = await ok(await c.post("/api/processes", json={"markdown": doc("p-1", "First, edited")}))
        assert edited["action"] == "updated"
        assert edited["title"] == "First, edited"
        assert edited["success_count"] == 1


async def test_outcome_history_is_the_parsed_outcome_log(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        await ok(await c.post("/api/processes", json={"markdown": doc("p-2", "Second")}))
        await ok(await c.post("/api/processes/p-2/outcomes", json={"success": True, "note": "fine"}))
        after = await ok(await c.post("/api/processes/p-2/outcomes", json={"success": False, "note": "door shut"}))
        assert [(o["success"], o["note"]) for o in after["outcomes"]] == [(True, "fine"), (False, "door shut")]
        history = await ok(await c.get("/api/processes/p-2/outcomes"))
        assert history["success_count"] == 1
        assert history["failure_count"] == 1
        assert history["reliability"] == pytest.approx(0.5)
        assert len(history["outcomes"]) == 2
        timeline = await ok(await c.get("/api/charts/outcomes", params={"days": 7}))
        assert sum(d["success"] + d["failure"] for d in timeline["days"]) == 2


def test_outcome_log_reads_only_the_outcome_section() -> None:
    body = "## Steps\n- 2026-01-01T00:00:00Z success: not a log line\n\n## Outcome log\n" + (
        "- 2026-06-12T14:00:00Z success: fine\n- 2026-06-13T14:00:00Z failure: door: shut\n\n## Later\n- x\n"
    )
    entries = outcome_log(body)
    assert [(e.when, e.success, e.note) for e in entries] == [
        ("2026-06-12T14:00:00Z", True, "fine"),
        ("2026-06-13T14:00:00Z", False, "door: shut"),
    ]


async def test_a_stored_script_is_escaped_in_the_rendered_html(secured: Connect) -> None:
    body = "## Steps\n1. <script>alert('x')</script> **bold** <img src=x onerror=alert(1)>\n"
    async with secured(ADMIN) as c:
        await ok(await c.post("/api/processes", json={"markdown": doc("xss", "XSS <b>title</b>", body=body)}))
        one = await ok(await c.get("/api/processes/xss"))
    assert "<script>" not in one["html"]
    assert "<img" not in one["html"]
    assert "&lt;script&gt;" in one["html"]
    assert "<strong>bold</strong>" in one["html"]
    assert one["title"] == "XSS <b>title</b>"  # JSON carries the raw text; the dashboard sets textContent


async def test_the_fleet_can_be_arranged(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        group = await ok(await c.put("/api/fleet/groups/line-a", json={"name": "Line A", "customer": "acme"}))
        assert group["created"] is True
        robot = await ok(await c.post("/api/fleet/robots", json={"robot_id": "r1", "name": "Robot one"}))
        assert robot["robot"]["group"] is None
        moved = await ok(await c.put("/api/fleet/robots/r1/group", json={"group": "line-a"}))
        assert moved["robot"]["group"] == "line-a"
        assert moved["previous_group"] is None
        switched = await ok(await c.put("/api/fleet/self-improve", json={"enabled": True, "group": "line-a"}))
        assert switched["group"]["self_improve"] is True
        glob = await ok(await c.put("/api/fleet/self-improve", json={"enabled": True, "group": ""}))
        assert glob["global_self_improve"] is True
        groups = await ok(await c.get("/api/fleet/groups"))
        assert groups["groups"][0]["robots"] == ["r1"]
        robots = await ok(await c.get("/api/fleet/robots", params={"group": "line-a"}))
        assert robots["total"] == 1
        assert robots["robots"][0]["self_improve"] is True
        overview = await ok(await c.get("/api/fleet"))
        assert (overview["robots"], overview["grouped"]) == (1, 1)
        removed = await ok(await c.delete("/api/fleet/groups/line-a"))
        assert removed["ungrouped"] == ["r1"]


async def test_lessons_can_be_browsed_by_scope(secured: Connect, secured_memory: Memory) -> None:
    from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL

    async with secured(ADMIN) as c:
        await ok(await c.post("/api/fleet/robots", json={"robot_id": "r1"}))
        await ok(await c.put("/api/fleet/self-improve", json={"enabled": True}))
    await secured_memory.lessons.record(ADMIN_PRINCIPAL, "r1", "grasp/mug", {"force": 0.3}, success=True)
    async with secured(ADMIN) as c:
        every = await ok(await c.get("/api/lessons"))
        assert every["total"] == 1
        lesson = every["lessons"][0]
        assert (lesson["scope"], lesson["key"], lesson["params"]) == ("solo:r1", "grasp/mug", {"force": 0.3})
        mine = await ok(await c.get("/api/lessons", params={"robot": "r1", "limit": 5}))
        assert mine["total"] == 1


async def test_stats_doctor_and_reindex_answer_an_operator(secured: Connect) -> None:
    async with secured(ADMIN) as c:
        await ok(await c.post("/api/processes", json={"markdown": doc("p-3", "Third")}))
        stats = await ok(await c.get("/api/stats"))
        assert stats["processes"] == 1
        assert stats["tables"]["processes"] == 1
        assert stats["embedder"]["mode"]
        doctor = await ok(await c.get("/api/doctor"))
        assert doctor["ok"] is True
        assert doctor["process_rows"] == doctor["process_index_entries"] == 1
        assert doctor["schema_version"] == doctor["schema_supported"]
        assert doctor["db_size_bytes"] > 0
        assert {c["check"] for c in doctor["checks"]} >= {"integrity", "schema", "process index"}
        assert (await ok(await c.post("/api/reindex", json={}))) == {"indexed": 1}


async def test_the_openapi_document_lists_every_endpoint(secured: Connect) -> None:
    async with secured() as c:  # public: no token needed
        spec = await ok(await c.get("/api/openapi.json"))
    assert spec["openapi"].startswith("3.")
    ops = {(m.upper(), p) for p, item in spec["paths"].items() for m in item}
    assert ("GET", "/api/processes/{id}") in ops
    assert ("PUT", "/api/fleet/self-improve") in ops
    assert ("POST", "/api/login") in ops
    for path, item in spec["paths"].items():
        for method, op in item.items():
            assert "500" in op["responses"], (method, path)
            assert op["operationId"]


async def test_the_dashboard_and_its_assets_are_public_and_locked_down(secured: Connect) -> None:
    async with secured() as c:
        for path in ("/", "/login", "/static/js/app.js", "/static/css/app.css"):
            r = await c.get(path)
            assert r.status_code == 200, path
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp
            assert "unsafe-inline" not in csp
            assert r.headers["x-content-type-options"] == "nosniff"


async def test_the_web_command_serves_rest_and_the_dashboard_without_mcp(secured_memory: Memory) -> None:
    from robot_mcp_memory.surfaces.web.standalone import web_app

    app = web_app(secured_memory)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:9104") as c:
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/api/session")).status_code == 401
        who = await ok(await c.get("/api/session", headers={"authorization": f"Bearer {ADMIN}"}))
        assert who["via"] == "admin"
        assert (await c.post("/mcp", headers={"authorization": f"Bearer {ADMIN}"}, json={})).status_code == 404


def test_the_cli_has_a_web_command() -> None:
    from robot_mcp_memory.surfaces.cli import _parser

    args = _parser().parse_args(["web", "--port", "9104", "--host", "0.0.0.0"])
    assert (args.command, args.port, args.host) == ("web", 9104, "0.0.0.0")


def test_every_endpoint_is_documented_in_docs_dashboard_md(secured_memory: Memory) -> None:
    from pathlib import Path

    from robot_mcp_memory.surfaces.web import build_web
    from robot_mcp_memory.tenancy.tokens import TokenAuth

    doc = (Path(__file__).resolve().parents[3] / "docs" / "dashboard.md").read_text(encoding="utf-8")
    web = build_web(secured_memory, TokenAuth(None, {}))
    missing = [
        f"{ep.method} {ep.path}"
        for ep in web.api.endpoints
        if f"{ep.template}`" not in doc and f"{ep.template}?" not in doc
    ]
    assert not missing, f"document these in docs/dashboard.md: {missing}"


async def test_creating_never_replaces_a_process_with_the_same_id(secured: Connect) -> None:
    """The dashboard's "New process" sends ``create``: a draft whose id (or title) matches an
    existing process is refused (409), not saved over it (found by review)."""
    async with secured(ADMIN) as c:
        first = await c.post("/api/processes", json={"markdown": doc("fetch-parcel", "Fetch parcel")})
        assert first.json()["action"] == "created"
        again = await c.post("/api/processes", json={"markdown": doc("fetch-parcel", "Fetch parcel"), "create": True})
        assert again.status_code == 409
        assert again.json()["error"] == "conflict"
        assert "exists already" in again.json()["detail"]
        other = await c.post("/api/processes", json={"markdown": doc("fetch-box", "Fetch box"), "create": True})
        assert other.json()["action"] == "created"


async def test_processes_can_be_listed_most_used_first(secured: Connect) -> None:
    """The Overview's "most used 15" read the 200 most recently updated and sorted those: an old,
    much-used process never showed (found by review)."""
    async with secured(ADMIN) as c:
        await c.post("/api/processes", json={"markdown": doc("old-popular", "Old popular")})
        for _ in range(3):
            await c.post("/api/processes/old-popular/outcomes", json={"success": True})
        for i in range(3):
            await c.post("/api/processes", json={"markdown": doc(f"newer-{i}", f"Newer {i}")})
        newest = (await c.get("/api/processes", params={"limit": 1})).json()["processes"]
        used = (await c.get("/api/processes", params={"limit": 1, "sort": "used"})).json()["processes"]
        assert [p["id"] for p in newest] != ["old-popular"]
        assert [p["id"] for p in used] == ["old-popular"]
        assert (await c.get("/api/processes", params={"sort": "popular"})).status_code == 400
