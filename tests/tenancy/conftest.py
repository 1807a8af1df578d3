"""Every implementation of each tenancy port. A test taking `make_sessions` or `make_throttle` runs
once per implementation, with the same arguments (a `clock` included)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from robot_mcp_memory.tenancy.ports import Sessions, Throttle
from robot_mcp_memory.tenancy.sessions import SessionStore
from robot_mcp_memory.tenancy.throttle import AuthThrottle

BACKENDS = ["memory"]

MakeSessions = Callable[..., Sessions]
MakeThrottle = Callable[..., Throttle]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def make_sessions(request: pytest.FixtureRequest, backend: str) -> MakeSessions:
    """`make_sessions(**options)` → a session store of this run's implementation."""
    assert backend == "memory"
    return SessionStore


@pytest.fixture
def make_throttle(request: pytest.FixtureRequest, backend: str) -> MakeThrottle:
    """`make_throttle(**options)` → a token throttle of this run's implementation."""
    assert backend == "memory"
    return AuthThrottle
