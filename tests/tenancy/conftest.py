"""Both implementations of each tenancy port: this process's (`SessionStore`, `AuthThrottle`) and
PostgreSQL's, on a schema of the test's own. A test taking `make_sessions` or `make_throttle` runs
once per implementation, with the same arguments (a `clock` included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.postgres.sessions import PostgresSessions
from robot_mcp_memory.tenancy.postgres.throttle import PostgresThrottle
from robot_mcp_memory.tenancy.sessions import SessionStore
from robot_mcp_memory.tenancy.throttle import AuthThrottle

BACKENDS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]

MakeSessions = Callable[..., Sessions]
MakeThrottle = Callable[..., Throttle]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def make_sessions(request: pytest.FixtureRequest, backend: str) -> MakeSessions:
    """`make_sessions(**options)` → a session store of this run's implementation."""
    if backend == "memory":
        return SessionStore
    store = request.getfixturevalue("pg_store")

    def make(**options: Any) -> Sessions:
        return PostgresSessions(store, **options)

    return make


@pytest.fixture
def make_throttle(request: pytest.FixtureRequest, backend: str) -> MakeThrottle:
    """`make_throttle(**options)` → a token throttle of this run's implementation."""
    if backend == "memory":
        return AuthThrottle
    store = request.getfixturevalue("pg_store")

    def make(**options: Any) -> Throttle:
        return PostgresThrottle(store, **options)

    return make
