from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.metrics import BUCKETS, Metrics
from robot_mcp_memory.surfaces.mcp.server import MemoryMCP, build_server, http_app
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


#: One sample line of the Prometheus text format: name, optional labels (values escaped as the
#: format says: only \\, \" and \n), a value.
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(rf"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{{{_LABEL}(?:,{_LABEL})*\}})? \S+$")


def parse_exposition(body: bytes) -> list[str]:
    """The sample lines of a scrape, after checking it is UTF-8 and every line is well formed."""
    text = body.decode("utf-8")  # strict: a lone surrogate cannot have been encoded
    samples = []
    for line in text.split("\n"):  # the format ends lines with \n only
        if line.startswith("#") or not line:
            continue
        assert _SAMPLE.match(line), line
        samples.append(line)
    return samples


async def admin_client(tmp_path: Path) -> tuple[Memory, MemoryMCP, httpx.AsyncClient]:
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_TOKEN": "adminadmin"})
    memory = Memory.open(settings)
    server = build_server(memory)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=http_app(memory, server)),
        base_url="http://127.0.0.1",
        headers={"Authorization": "Bearer adminadmin"},
    )
    return memory, server, http


#: Distinct invented names: labels come only from registered tools (no cardinality cap to pass),
#: so any number of names past one shows that they collapse.
INVENTED = 40


async def test_invented_tool_names_count_as_one_unknown_label(tmp_path: Path) -> None:
    memory, server, http = await admin_client(tmp_path)
    try:
        async with create_connected_server_and_client_session(server.lowlevel) as session:
            for n in range(INVENTED):
                result = await session.call_tool(f"invented_{n}", {})
                assert result.isError
            await session.call_tool("list_processes", {})
        async with http:
            r = await http.get("/metrics")
        assert r.status_code == 200
        samples = parse_exposition(r.content)
        tools = {m.group(1) for s in samples if (m := re.search(r'tool="([^"]*)"', s))}
        assert tools == {"unknown", "list_processes"}
        calls = [s for s in samples if s.startswith("memory_tool_calls_total{")]
        assert len(calls) == 2  # (unknown, protocol_error) and (list_processes, ok)
        assert server.metrics.value("memory_tool_calls_total", tool="unknown", outcome="protocol_error") == INVENTED
    finally:
        memory.close()


async def test_a_tool_name_with_a_lone_surrogate_leaves_metrics_answering(tmp_path: Path) -> None:
    memory, server, http = await admin_client(tmp_path)
    try:
        async with create_connected_server_and_client_session(server.lowlevel) as session:
            assert (await session.call_tool("find\ud800", {})).isError
        async with http:
            r = await http.get("/metrics")
            again = await http.get("/metrics")
        assert r.status_code == again.status_code == 200
        assert any('tool="unknown"' in s for s in parse_exposition(r.content))
    finally:
        memory.close()


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("a\ud800b", 'x{l="a\ufffdb"} 1'),
        ("\udfff", 'x{l="\ufffd"} 1'),
        ('back\\slash "quoted"\nline', 'x{l="back\\\\slash \\"quoted\\"\\nline"} 1'),
        ("\x00\r\t\u2028é", 'x{l="\x00\r\t\u2028é"} 1'),
    ],
)
def test_label_values_are_escaped_so_the_scrape_always_encodes(value: str, written: str) -> None:
    m = Metrics()
    m.inc("x", "odd labels", l=value)
    text = m.render()
    assert written in text.split("\n")
    text.encode("utf-8")  # never raises


#: Any text a Python `str` may hold, lone surrogates too (`st.text` never draws those).
ANY_TEXT = st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))).map("".join)


@settings(max_examples=200, derandomize=True)
@given(ANY_TEXT)
def test_any_label_value_renders_a_parseable_scrape(value: str) -> None:
    m = Metrics()
    m.inc("x_total", "any text", tool=value)
    m.observe("x_seconds", "any text", 0.01, tool=value)
    samples = parse_exposition(m.render().encode("utf-8"))
    assert len(samples) == 1 + len(BUCKETS) + 1 + 2
