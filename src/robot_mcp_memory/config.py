"""Settings: the only reader of the environment.

`Settings.from_env(environ)` builds one frozen object; tests pass a plain dict. Every bad value is
collected, and a `ConfigError` names each offending variable (never its value when it may be a
secret).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from robot_mcp_memory.errors import ConfigError
from robot_mcp_memory.tenancy.tokens import parse_robot_tokens

Transport = Literal["stdio", "sse"]

#: Every environment variable this server reads, with its meaning. A test checks the README
#: documents each one.
ENV_VARS: dict[str, str] = {
    "MCP_TRANSPORT": "stdio (default) or sse — sse serves SSE, Streamable HTTP and the dashboard on one port",
    "MCP_HOST": "interface to bind for sse (default 127.0.0.1; 0.0.0.0 for a fleet)",
    "MCP_PORT": "port for sse (default 9103)",
    "MEMORY_DATA_DIR": "directory holding index.db (and lessons.db) (default data/)",
    "MEMORY_DATABASE_URL": "PostgreSQL to keep everything in instead of MEMORY_DATA_DIR's SQLite files, "
    "'postgresql://user:password@host:5432/db' (secret: never logged; default unset: embedded SQLite)",
    "MEMORY_DATABASE_POOL_SIZE": "most connections this process holds to MEMORY_DATABASE_URL (default 8)",
    "MCP_STATELESS_HTTP": "true or false: Streamable HTTP without server-side sessions, answered as JSON, so any "
    "replica can answer any request (default true with MEMORY_DATABASE_URL, else false)",
    "MEMORY_WORKERS": "server processes sharing MCP_PORT on this host (default 1); more than 1 needs "
    "MEMORY_DATABASE_URL, MCP_TRANSPORT=sse and MCP_STATELESS_HTTP, and then serves Streamable HTTP, REST and the "
    "dashboard but not SSE (an SSE session lives in one process)",
    "ROBOT_ID": "provenance written into saved documents over stdio (default unknown)",
    "MEMORY_TOKEN": "admin (unscoped) bearer token for the HTTP transports",
    "MEMORY_ROBOT_TOKENS": "per-robot tokens, 'rap-1:tokA,rap-2:tokB'",
    "MEMORY_ALLOWED_HOSTS": "extra Host header values accepted by DNS-rebinding protection, comma-separated",
    "MEMORY_TRUSTED_PROXIES": "addresses or networks of reverse proxies whose X-Forwarded-For names the client, "
    "comma-separated (default: none — the peer's own address is the client's)",
    "MEMORY_LOG_LEVEL": "debug, info (default), warning or error",
    "MEMORY_HOT_QUEUE_MAX": "bound of the hot-record write queue; beyond it writes are dropped and counted "
    "(default 10000)",
    "MEMORY_LOOP_LAG_WARN_MS": "event-loop lag, in milliseconds, from which the HTTP server logs 'loop.stalled' and "
    "counts a stall in /metrics (default 250)",
    "MEMORY_LESSON_MIN_SUCCESSES": "successes a lesson needs before it answers at a place other than where it was "
    "learned (default 3)",
    "MEMORY_LESSON_MIN_RELIABILITY": "Laplace reliability (s+1)/(s+f+2) a lesson needs before it answers at "
    "another place, 0-1 (default 0.75)",
    "MEMORY_EMBEDDER": "embedding backend for semantic search: use (default; offline, weights in the package), "
    "fastembed, ollama, openai, hashing (test/fallback) or none (keyword-only)",
    "MEMORY_EMBED_URL": "base URL of the ollama (default http://127.0.0.1:11434) or OpenAI-compatible "
    "(default https://api.openai.com) embedding server",
    "MEMORY_EMBED_MODEL": "model name for fastembed/ollama/openai (defaults: sentence-transformers/all-MiniLM-L6-v2, "
    "all-minilm, text-embedding-3-small)",
    "MEMORY_EMBED_API_KEY": "bearer key for MEMORY_EMBEDDER=openai (secret: never logged)",
    "MEMORY_EMBED_TIMEOUT": "seconds to wait for an HTTP embedding server before searching keyword-only (default 10)",
    "MEMORY_FUSION_K": "reciprocal-rank-fusion constant k (default 60)",
    "MEMORY_FUSION_WEIGHTS": "weights of the keyword and vector lists in fusion (default 'keyword:1,vector:1', "
    "chosen by the evaluation in docs/search.md); also find_processes' unless MEMORY_PROCESS_FUSION_WEIGHTS is set",
    "MEMORY_PROCESS_FUSION_WEIGHTS": "find_processes' keyword and vector weights (default MEMORY_FUSION_WEIGHTS "
    "when that is set, else 'keyword:1,vector:1.5', chosen by the evaluation in docs/search.md)",
}

_ROBOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_LOG_LEVELS = ("debug", "info", "warning", "error")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
#: What MEMORY_DATABASE_URL may start with: libpq's two URI schemes.
_POSTGRES_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
EmbedderName = Literal["use", "fastembed", "ollama", "openai", "hashing", "none"]
EMBEDDERS: tuple[EmbedderName, ...] = ("use", "fastembed", "ollama", "openai", "hashing", "none")
#: (keyword, vector) fusion weights of experience recall, and of find_processes when
#: MEMORY_FUSION_WEIGHTS is set; chosen by bench/eval_recall.py (docs/search.md).
DEFAULT_FUSION_WEIGHTS = (1.0, 1.0)
#: find_processes' (keyword, vector) weights when neither weight setting is set; chosen by
#: bench/eval_search.py (docs/search.md).
DEFAULT_PROCESS_FUSION_WEIGHTS = (1.0, 1.5)
#: One MEMORY_ALLOWED_HOSTS entry: a DNS name or IPv4 address, or a bracketed IPv6 address, with
#: an optional ``:port`` or ``:*``.
_ALLOWED_HOST = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})|\[[0-9A-Fa-f:.]+\])(?::(?:[0-9]{1,5}|\*))?\Z")


@dataclass(frozen=True)
class Settings:
    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = 9103
    data_dir: Path = Path("data")
    robot_id: str = "unknown"
    admin_token: str | None = field(default=None, repr=False)
    robot_tokens: dict[str, str] = field(default_factory=dict, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    #: Peers whose forwarded headers uvicorn believes (addresses or networks, as written).
    trusted_proxies: tuple[str, ...] = ()
    log_level: str = "info"
    hot_queue_max: int = 10_000
    loop_lag_warn_ms: int = 250
    lesson_min_successes: int = 3
    lesson_min_reliability: float = 0.75
    embedder: EmbedderName = "use"
    embed_url: str | None = None
    embed_model: str | None = None
    embed_api_key: str | None = field(default=None, repr=False)
    embed_timeout: float = 10.0
    fusion_k: int = 60
    fusion_weights: tuple[float, float] = DEFAULT_FUSION_WEIGHTS
    process_fusion_weights: tuple[float, float] = DEFAULT_PROCESS_FUSION_WEIGHTS
    #: A ``postgresql://`` URL: every store lives in that database (None: SQLite under `data_dir`).
    database_url: str | None = field(default=None, repr=False)
    database_pool_size: int = 8
    #: Streamable HTTP keeps no session between requests and answers JSON (replicas behind a balancer).
    stateless_http: bool = False
    #: Server processes sharing the port (`surfaces.workers`); above 1 only on PostgreSQL with
    #: stateless Streamable HTTP, where no state a request needs lives in one process.
    workers: int = 1

    @property
    def postgres(self) -> bool:
        return self.database_url is not None

    @property
    def auth_enabled(self) -> bool:
        return self.admin_token is not None or bool(self.robot_tokens)

    @property
    def index_path(self) -> Path:
        return self.data_dir / "index.db"

    @property
    def lessons_path(self) -> Path:
        return self.data_dir / "lessons.db"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        problems: list[str] = []

        def get(name: str) -> str | None:
            value = env.get(name)
            if value is None:
                return None
            value = value.strip()
            return value or None

        transport_raw = (get("MCP_TRANSPORT") or "stdio").lower()
        transport: Transport = "stdio"
        if transport_raw in ("sse", "http", "streamable-http"):
            transport = "sse"
        elif transport_raw != "stdio":
            problems.append(f"MCP_TRANSPORT must be 'stdio' or 'sse', got {transport_raw!r}")

        port = _int(get("MCP_PORT"), "MCP_PORT", 9103, 1, 65535, problems)
        hot_max = _int(get("MEMORY_HOT_QUEUE_MAX"), "MEMORY_HOT_QUEUE_MAX", 10_000, 1, 10_000_000, problems)
        lag_warn = _int(get("MEMORY_LOOP_LAG_WARN_MS"), "MEMORY_LOOP_LAG_WARN_MS", 250, 1, 600_000, problems)

        min_successes = _int(
            get("MEMORY_LESSON_MIN_SUCCESSES"), "MEMORY_LESSON_MIN_SUCCESSES", 3, 0, 1_000_000, problems
        )
        min_reliability = _float(
            get("MEMORY_LESSON_MIN_RELIABILITY"), "MEMORY_LESSON_MIN_RELIABILITY", 0.75, 0.0, 1.0, problems
        )

        robot_id = get("ROBOT_ID") or "unknown"
        if not _ROBOT_ID.match(robot_id):
            # The robot-id grammar of tokens, the fleet registry and import-robotmem's --robot: a
            # ROBOT_ID with ':' was accepted here and then refused by each of them.
            problems.append(
                "ROBOT_ID must be 1-64 characters of letters, digits, '_', '.' or '-', starting with a letter or digit"
            )

        log_level = (get("MEMORY_LOG_LEVEL") or "info").lower()
        if log_level not in _LOG_LEVELS:
            problems.append(f"MEMORY_LOG_LEVEL must be one of {', '.join(_LOG_LEVELS)}")

        admin = get("MEMORY_TOKEN")
        if admin is not None and len(admin) < 8:
            problems.append("MEMORY_TOKEN is too short: use at least 8 characters (16+ random bytes advised)")

        robot_tokens: dict[str, str] = {}
        try:
            robot_tokens = parse_robot_tokens(get("MEMORY_ROBOT_TOKENS"), admin)
        except ValueError as exc:
            problems.extend(exc.args[0])

        hosts = tuple(h.strip() for h in (get("MEMORY_ALLOWED_HOSTS") or "").split(",") if h.strip())
        wrong = [h for h in hosts if not _ALLOWED_HOST.match(h)]
        if wrong:
            problems.append(
                "MEMORY_ALLOWED_HOSTS takes host names as a Host header carries them (name, name:port or "
                f"name:* — no scheme, no path), comma-separated; not {', '.join(repr(h) for h in wrong[:3])}"
            )

        proxies = tuple(p.strip() for p in (get("MEMORY_TRUSTED_PROXIES") or "").split(",") if p.strip())
        not_networks = [p for p in proxies if not _network(p)]
        if not_networks:
            problems.append(
                "MEMORY_TRUSTED_PROXIES takes IP addresses or networks (10.0.0.5, 10.0.0.0/8, ::1), "
                f"comma-separated; not {', '.join(repr(p) for p in not_networks[:3])}"
            )

        search = _search_settings(get, problems)
        database_url = get("MEMORY_DATABASE_URL")
        if database_url is not None and not _POSTGRES_URL.match(database_url):
            # The value is not echoed: a URL carries the password.
            problems.append(
                "MEMORY_DATABASE_URL must be a PostgreSQL URL starting with postgresql:// or postgres:// "
                "(unset it to keep the embedded SQLite store under MEMORY_DATA_DIR)"
            )
        pool_size = _int(get("MEMORY_DATABASE_POOL_SIZE"), "MEMORY_DATABASE_POOL_SIZE", 8, 1, 1000, problems)
        stateless = _bool(get("MCP_STATELESS_HTTP"), "MCP_STATELESS_HTTP", database_url is not None, problems)
        workers = _int(get("MEMORY_WORKERS"), "MEMORY_WORKERS", 1, 1, 64, problems)
        if workers > 1:
            problems.extend(_workers_problems(transport, database_url is not None, stateless))

        if problems:
            raise ConfigError(problems)
        return cls(
            transport=transport,
            host=get("MCP_HOST") or "127.0.0.1",
            port=port,
            data_dir=Path(get("MEMORY_DATA_DIR") or "data"),
            robot_id=robot_id,
            admin_token=admin,
            robot_tokens=robot_tokens,
            allowed_hosts=hosts,
            trusted_proxies=proxies,
            log_level=log_level,
            hot_queue_max=hot_max,
            loop_lag_warn_ms=lag_warn,
            lesson_min_successes=min_successes,
            lesson_min_reliability=min_reliability,
            database_url=database_url,
            database_pool_size=pool_size,
            stateless_http=stateless,
            workers=workers,
            **search,
        )


def _workers_problems(transport: Transport, postgres: bool, stateless: bool) -> list[str]:
    """Why MEMORY_WORKERS above 1 is refused: several processes are safe only where every request
    can be answered by any of them (the state it needs is in the database)."""
    problems: list[str] = []
    if not postgres:
        problems.append(
            "MEMORY_WORKERS above 1 needs MEMORY_DATABASE_URL: on SQLite one writer thread of one "
            "process owns the files (use MEMORY_WORKERS=1)"
        )
    if transport != "sse":
        problems.append("MEMORY_WORKERS above 1 needs MCP_TRANSPORT=sse: stdio has one client on one process")
    if not stateless:
        problems.append(
            "MEMORY_WORKERS above 1 needs MCP_STATELESS_HTTP=true: a Streamable HTTP session lives in the "
            "process that opened it"
        )
    return problems


def _network(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _bool(raw: str | None, name: str, default: bool, problems: list[str]) -> bool:
    if raw is None:
        return default
    value = raw.lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    problems.append(f"{name} must be true or false, got {raw!r}")
    return default


def _int(raw: str | None, name: str, default: int, lo: int, hi: int, problems: list[str]) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        problems.append(f"{name} must be an integer, got {raw!r}")
        return default
    if not lo <= value <= hi:
        problems.append(f"{name} must be between {lo} and {hi}, got {value}")
        return default
    return value


def _float(raw: str | None, name: str, default: float, lo: float, hi: float, problems: list[str]) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        problems.append(f"{name} must be a number, got {raw!r}")
        return default
    if not lo <= value <= hi:  # also false for nan
        problems.append(f"{name} must be between {lo} and {hi}, got {raw}")
        return default
    return value


def _search_settings(get: Callable[[str], str | None], problems: list[str]) -> dict[str, Any]:
    """MEMORY_EMBEDDER and friends, validated; keys are `Settings` field names."""
    out: dict[str, Any] = {}
    name = (get("MEMORY_EMBEDDER") or "use").lower()
    if name not in EMBEDDERS:
        problems.append(f"MEMORY_EMBEDDER must be one of {', '.join(EMBEDDERS)}, got {name!r}")
        name = "use"
    out["embedder"] = name
    url = get("MEMORY_EMBED_URL")
    if url is not None and not re.match(r"^https?://[^/\s]+", url):
        problems.append("MEMORY_EMBED_URL must be an http:// or https:// URL")
    out["embed_url"] = url
    out["embed_model"] = get("MEMORY_EMBED_MODEL")
    key = get("MEMORY_EMBED_API_KEY")
    if name == "openai" and key is None and url is None:
        problems.append("MEMORY_EMBED_API_KEY is required for MEMORY_EMBEDDER=openai with the default URL")
    out["embed_api_key"] = key
    out["embed_timeout"] = _float(get("MEMORY_EMBED_TIMEOUT"), "MEMORY_EMBED_TIMEOUT", 10.0, 0.1, 600.0, problems)
    out["fusion_k"] = _int(get("MEMORY_FUSION_K"), "MEMORY_FUSION_K", 60, 1, 10_000, problems)
    shared = get("MEMORY_FUSION_WEIGHTS")
    out["fusion_weights"] = _weights(shared, "MEMORY_FUSION_WEIGHTS", DEFAULT_FUSION_WEIGHTS, problems)
    processes = get("MEMORY_PROCESS_FUSION_WEIGHTS")
    if processes is not None:
        out["process_fusion_weights"] = _weights(
            processes, "MEMORY_PROCESS_FUSION_WEIGHTS", DEFAULT_PROCESS_FUSION_WEIGHTS, problems
        )
    elif shared is not None:  # set before there was a processes' own: it keeps governing both
        out["process_fusion_weights"] = out["fusion_weights"]
    return out


def _weights(raw: str | None, name: str, default: tuple[float, float], problems: list[str]) -> tuple[float, float]:
    """`keyword:<w>,vector:<w>` (either part may be left out: its default stays), each weight
    from 0 to 100 and not both 0."""
    weights = dict(zip(("keyword", "vector"), default, strict=True))
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        label, _, value = part.partition(":")
        label = label.strip().lower()
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if label not in weights or not 0.0 <= weight <= 100.0:
            problems.append(f"{name} must look like 'keyword:1,vector:1' with weights from 0 to 100")
            break
        weights[label] = weight
    if not any(weights.values()):  # both 0: fusion would rank nothing, and every search came back empty
        problems.append(f"{name} needs a weight above 0 for keyword or vector")
    return weights["keyword"], weights["vector"]


def server_store(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The server's ``MEMORY_DATA_DIR`` and ``ROBOT_ID`` as the environment sets them (None where
    unset or blank), for a library caller that names neither (`api.RobotMemory()`): it opens the
    store the robot's server keeps, as robotmem's ``RobotMemory()`` does. Checked where used."""
    env = os.environ if environ is None else environ
    return (env.get("MEMORY_DATA_DIR") or "").strip() or None, (env.get("ROBOT_ID") or "").strip() or None


def server_database_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The server's ``MEMORY_DATABASE_URL`` (None where unset or blank), for a library caller that
    names no store (`api.RobotMemory()`): it opens the PostgreSQL database the fleet's servers use.
    Checked by `Settings.from_env` where used."""
    env = os.environ if environ is None else environ
    return (env.get("MEMORY_DATABASE_URL") or "").strip() or None
