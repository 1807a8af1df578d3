"""The in-memory implementations of the tenancy ports answer where they are awaited: their
coroutines finish on the first step, so the middleware's ``await`` on them never yields the loop
(and costs no thread hop)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from robot_mcp_memory.tenancy.principal import ADMIN
from robot_mcp_memory.tenancy.sessions import SessionStore
from robot_mcp_memory.tenancy.throttle import AuthThrottle

T = TypeVar("T")


def at_once(coro: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result if it finishes without suspending; otherwise the test fails."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    pytest.fail("the coroutine suspended")


def test_the_in_memory_session_store_never_suspends() -> None:
    store = SessionStore()
    sid, made = at_once(store.create(ADMIN))
    assert at_once(store.lookup(sid)) == made
    assert at_once(store.count()) == 1
    assert at_once(store.end(sid)) is True


def test_the_in_memory_throttle_never_suspends() -> None:
    throttle = AuthThrottle(max_failures=1)
    assert at_once(throttle.attempt("10.0.0.1", "admin")) == 0
    assert at_once(throttle.attempt("10.0.0.1", None)) == 0
    assert at_once(throttle.retry_after("10.0.0.1")) > 0
    assert at_once(throttle.allows("10.0.0.1")) is False
    assert at_once(throttle.attempt("10.0.0.1", "admin")) == 0  # trusted while held


def test_a_coroutine_that_suspends_is_caught() -> None:
    import asyncio

    async def sleeps() -> int:
        await asyncio.sleep(0)
        return 1

    with pytest.raises(pytest.fail.Exception):
        at_once(sleeps())
