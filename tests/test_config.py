from __future__ import annotations

from pathlib import Path

import pytest

from robot_mcp_memory.config import DEFAULT_FUSION_WEIGHTS, DEFAULT_PROCESS_FUSION_WEIGHTS, ENV_VARS, Settings
from robot_mcp_memory.errors import ConfigError

README = Path(__file__).resolve().parents[1] / "README.md"


def test_defaults_follow_the_spec() -> None:
    s = Settings.from_env({})
    assert (s.transport, s.port, s.data_dir, s.robot_id) == ("stdio", 9103, Path("data"), "unknown")
    assert s.index_path == Path("data/index.db")
    assert s.lessons_path == Path("data/lessons.db")
    assert not s.auth_enabled


def test_every_bad_setting_is_reported_at_once_naming_its_variable() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MCP_TRANSPORT": "carrier-pigeon", "MCP_PORT": "99999", "ROBOT_ID": "bad id!"})
    named = " ".join(info.value.problems)
    for var in ("MCP_TRANSPORT", "MCP_PORT", "ROBOT_ID"):
        assert var in named
    assert len(info.value.problems) == 3


def test_only_our_own_log_level_variable_counts() -> None:
    """A platform's generic ``LOG_LEVEL`` (``warn``, ``TRACE`` …) is not ours to read: it neither
    stops the server nor changes its logging."""
    assert Settings.from_env({"LOG_LEVEL": "warn"}).log_level == "info"
    assert Settings.from_env({"LOG_LEVEL": "error", "MEMORY_LOG_LEVEL": "debug"}).log_level == "debug"


def test_a_non_numeric_port_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MCP_PORT": "http"})
    assert info.value.problems[0].startswith("MCP_PORT")


def test_secret_values_never_appear_in_config_errors() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MEMORY_TOKEN": "adminsecret", "MEMORY_ROBOT_TOKENS": "rap-1:adminsecret,rap-2:x"})
    text = info.value.detail
    assert "adminsecret" not in text
    assert "MEMORY_ROBOT_TOKENS" in text


def test_settings_repr_hides_tokens() -> None:
    s = Settings.from_env({"MEMORY_TOKEN": "adminsecret", "MEMORY_ROBOT_TOKENS": "rap-1:robotsecret1"})
    assert "adminsecret" not in repr(s)
    assert "robotsecret1" not in repr(s)
    assert s.robot_tokens == {"rap-1": "robotsecret1"}


def test_sse_aliases_are_accepted() -> None:
    for value in ("sse", "SSE", "http", "streamable-http"):
        assert Settings.from_env({"MCP_TRANSPORT": value}).transport == "sse"


def test_every_environment_variable_is_documented_in_the_readme() -> None:
    text = README.read_text()
    missing = [name for name in ENV_VARS if f"`{name}`" not in text]
    assert not missing, f"document these in README.md: {missing}"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        # both weights 0: accepted, and then every search came back empty, labelled "hybrid"
        ({"MEMORY_FUSION_WEIGHTS": "keyword:0,vector:0"}, "MEMORY_FUSION_WEIGHTS"),
        ({"MEMORY_PROCESS_FUSION_WEIGHTS": "keyword:0,vector:0"}, "MEMORY_PROCESS_FUSION_WEIGHTS"),
        ({"MEMORY_PROCESS_FUSION_WEIGHTS": "keyword=1"}, "MEMORY_PROCESS_FUSION_WEIGHTS"),
        # a URL: accepted, and then every request to that name got 421
        ({"MEMORY_ALLOWED_HOSTS": "memory-host, https://memory.fleet.example/"}, "MEMORY_ALLOWED_HOSTS"),
        ({"MEMORY_ALLOWED_HOSTS": "memory host"}, "MEMORY_ALLOWED_HOSTS"),
        # ':' was accepted here, then refused by tokens, the fleet registry and import-robotmem
        ({"ROBOT_ID": "site:rap-1"}, "ROBOT_ID"),
        # a name: uvicorn compares the peer's address, so a proxy named by DNS would never be believed
        ({"MEMORY_TRUSTED_PROXIES": "10.0.0.5, proxy.example"}, "MEMORY_TRUSTED_PROXIES"),
        ({"MEMORY_TRUSTED_PROXIES": "10.0.0.0/33"}, "MEMORY_TRUSTED_PROXIES"),
        ({"MEMORY_LOOP_LAG_WARN_MS": "0"}, "MEMORY_LOOP_LAG_WARN_MS"),
    ],
)
def test_settings_the_server_could_not_use_stop_it_at_startup(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env)
    assert [p.split(" ")[0] for p in info.value.problems] == [variable]


def test_allowed_hosts_take_names_ports_wildcards_and_addresses() -> None:
    hosts = "memory-host,memory-host:9103,other:*,10.0.0.2,[::1]:9103,Name.Example"
    assert len(Settings.from_env({"MEMORY_ALLOWED_HOSTS": hosts}).allowed_hosts) == 6
    assert Settings.from_env({"MEMORY_FUSION_WEIGHTS": "keyword:0,vector:1"}).fusion_weights == (0.0, 1.0)


def test_find_processes_has_weights_of_its_own_unless_the_shared_setting_is_set() -> None:
    unset = Settings.from_env({})
    assert unset.fusion_weights == DEFAULT_FUSION_WEIGHTS == (1.0, 1.0)  # experience recall
    assert unset.process_fusion_weights == DEFAULT_PROCESS_FUSION_WEIGHTS != DEFAULT_FUSION_WEIGHTS
    # Set before the processes' own setting existed, MEMORY_FUSION_WEIGHTS still governs both.
    shared = Settings.from_env({"MEMORY_FUSION_WEIGHTS": "keyword:3,vector:1"})
    assert shared.fusion_weights == shared.process_fusion_weights == (3.0, 1.0)
    both = Settings.from_env({"MEMORY_FUSION_WEIGHTS": "keyword:3", "MEMORY_PROCESS_FUSION_WEIGHTS": "vector:4"})
    assert both.fusion_weights == (3.0, 1.0)
    assert both.process_fusion_weights == (DEFAULT_PROCESS_FUSION_WEIGHTS[0], 4.0)


def test_forwarded_headers_are_believed_only_from_the_trusted_proxies() -> None:
    from starlette.types import Receive, Scope, Send

    from robot_mcp_memory.surfaces.serve import uvicorn_config

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not called")

    default = uvicorn_config(app, Settings.from_env({}))
    assert default.proxy_headers is False  # uvicorn's own default believes 127.0.0.1
    proxied = uvicorn_config(app, Settings.from_env({"MEMORY_TRUSTED_PROXIES": "10.0.0.5, 10.1.0.0/16,::1"}))
    assert proxied.proxy_headers is True
    assert proxied.forwarded_allow_ips == ["10.0.0.5", "10.1.0.0/16", "::1"]


def test_without_a_database_url_the_store_is_the_embedded_sqlite_one() -> None:
    s = Settings.from_env({"MEMORY_DATA_DIR": "/srv/memory"})
    assert s.database_url is None
    assert not s.postgres
    assert not s.stateless_http
    assert s.index_path == Path("/srv/memory/index.db")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_a_postgresql_url_selects_postgresql_and_stateless_http(scheme: str) -> None:
    url = f"{scheme}://fleet:pw@db.lab:5432/memory"
    s = Settings.from_env({"MEMORY_DATABASE_URL": f"  {url} "})
    assert s.database_url == url
    assert s.postgres
    assert s.stateless_http  # replicas: any of them answers any request
    assert s.database_pool_size == 8


def test_stateless_http_is_a_setting_of_its_own() -> None:
    url = "postgresql://db.lab/memory"
    assert not Settings.from_env({"MEMORY_DATABASE_URL": url, "MCP_STATELESS_HTTP": "false"}).stateless_http
    assert Settings.from_env({"MCP_STATELESS_HTTP": "true"}).stateless_http
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MCP_STATELESS_HTTP": "sometimes"})
    assert info.value.problems[0].startswith("MCP_STATELESS_HTTP")


@pytest.mark.parametrize(
    "url",
    ["mysql://fleet:hunter2secret@db/memory", "sqlite:///hunter2secret.db", "db.lab:5432 password=hunter2secret"],
)
def test_a_database_url_that_is_not_postgresql_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MEMORY_DATABASE_URL": url})
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("MEMORY_DATABASE_URL")
    assert "hunter2secret" not in info.value.detail


def test_the_database_url_stays_out_of_the_settings_repr() -> None:
    s = Settings.from_env({"MEMORY_DATABASE_URL": "postgresql://fleet:hunter2secret@db/memory"})
    assert "hunter2secret" not in repr(s)


def test_the_pool_size_is_bounded() -> None:
    assert Settings.from_env({"MEMORY_DATABASE_POOL_SIZE": "20"}).database_pool_size == 20
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"MEMORY_DATABASE_POOL_SIZE": "0"})
    assert info.value.problems[0].startswith("MEMORY_DATABASE_POOL_SIZE")


PG = "postgresql://memory@127.0.0.1:5432/memory"


@pytest.mark.parametrize(
    ("env", "needs"),
    [
        ({"MCP_TRANSPORT": "sse"}, "MEMORY_DATABASE_URL"),  # SQLite: one writer thread owns the files
        ({"MEMORY_DATABASE_URL": PG}, "MCP_TRANSPORT=sse"),  # stdio
        ({"MEMORY_DATABASE_URL": PG, "MCP_TRANSPORT": "sse", "MCP_STATELESS_HTTP": "false"}, "MCP_STATELESS_HTTP"),
    ],
)
def test_several_workers_are_refused_where_a_request_needs_one_process(env: dict[str, str], needs: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({**env, "MEMORY_WORKERS": "2"})
    assert [p for p in info.value.problems if p.startswith("MEMORY_WORKERS") and needs in p]
    assert "memory@" not in " ".join(info.value.problems)  # the URL is not echoed
    assert Settings.from_env({**env, "MEMORY_WORKERS": "1"}).workers == 1  # one process: as before


def test_several_workers_serve_stateless_http_on_postgres() -> None:
    s = Settings.from_env({"MEMORY_DATABASE_URL": PG, "MCP_TRANSPORT": "sse", "MEMORY_WORKERS": "2"})
    assert (s.workers, s.stateless_http) == (2, True)
    assert Settings.from_env({}).workers == 1
    for bad in ("0", "lots", "65"):
        with pytest.raises(ConfigError) as info:
            Settings.from_env({"MEMORY_DATABASE_URL": PG, "MCP_TRANSPORT": "sse", "MEMORY_WORKERS": bad})
        assert info.value.problems[0].startswith("MEMORY_WORKERS")
