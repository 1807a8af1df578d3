from __future__ import annotations

import httpx

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.metrics import Metrics
from robot_mcp_memory.server import MemoryMCP, build_server, http_app
from tests.conftest import MAILROOM, Client


def test_counters_and_histograms_render_in_prometheus_text() -> None:
    m = Metrics()
    m.inc("calls_total", "calls", tool="find", outcome="ok")
    m.inc("calls_total", "calls", tool="find", outcome="ok")
    m.observe("latency_seconds", "latency", 0.003, tool='we"ird')
    m.gauge("depth", "queue depth", lambda: [((), 7.0)])
    text = m.render()
    assert '# TYPE calls_total counter\ncalls_total{outcome="ok",tool="find"} 2' in text
    assert 'latency_seconds_bucket{tool="we\\"ird",le="0.0025"} 0' in text
    assert 'latency_seconds_bucket{tool="we\\"ird",le="0.005"} 1' in text
    assert 'latency_seconds_bucket{tool="we\\"ird",le="+Inf"} 1' in text
    assert "depth 7" in text


async def test_every_tool_call_is_counted_with_its_outcome(client: Client, server: MemoryMCP) -> None:
    await client.call("save_process", markdown=MAILROOM)
    await client.call("get_process", id="nope")
    await client.call("find_processes", query="x", k=999)
    m = server.metrics
    assert m.value("memory_tool_calls_total", tool="save_process", outcome="ok") == 1
    assert m.value("memory_tool_calls_total", tool="get_process", outcome="not_found") == 1
    assert m.value("memory_tool_calls_total", tool="find_processes", outcome="invalid") == 1


async def test_metrics_endpoint_needs_the_admin_token(tmp_path: object) -> None:
    settings = Settings.from_env(
        {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_TOKEN": "adminadmin", "MEMORY_ROBOT_TOKENS": "rap-1:tokA1234"}
    )
    memory = Memory.open(settings)
    try:
        app = http_app(memory, build_server(memory))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            assert (await http.get("/metrics")).status_code == 401
            assert (await http.get("/metrics", headers={"Authorization": "Bearer tokA1234"})).status_code == 403
            ok = await http.get("/metrics", headers={"Authorization": "Bearer adminadmin"})
            assert ok.status_code == 200
            assert "memory_hot_queue_depth 0" in ok.text
            assert (await http.get("/healthz")).json()["status"] == "ok"
    finally:
        memory.close()
