"""The token throttle's rules (`tenancy.throttle`), on every implementation of `tenancy.ports.Throttle`:
the window and the hold, a success never clearing failures, the trust that keeps the right token
in, and how addresses are counted."""

from __future__ import annotations

import asyncio

from tests.tenancy.conftest import MakeThrottle


async def test_the_throttle_forgets_old_failures_and_a_success_does_not_clear_them(make_throttle: MakeThrottle) -> None:
    now = [0.0]
    t = make_throttle(max_failures=2, window_s=10, clock=lambda: now[0])
    assert await t.attempt("a", None) == 0
    now[0] = 3
    assert await t.attempt("a", None) == 0
    assert not await t.allows("a")
    assert await t.retry_after("a") == 7  # the first failure leaves the window at 10
    assert await t.attempt("a", None) == 7  # held: refused, and not counted
    assert await t.allows("b")
    assert await t.retry_after("b") == 0
    now[0] = 10
    assert await t.allows("a")
    now[0] = 11
    assert await t.attempt("a", "robot:a1") == 0  # a success ...
    assert await t.attempt("a", None) == 0
    assert not await t.allows("a")  # ... left the failure before it counted


async def test_a_refused_attempt_is_not_counted_so_the_hold_ends_when_the_window_says(
    make_throttle: MakeThrottle,
) -> None:
    now = [0.0]
    t = make_throttle(max_failures=3, window_s=10, clock=lambda: now[0])
    for at in (0.0, 1.0, 2.5):
        now[0] = at
        assert await t.attempt("a", None) == 0
    for at, wait in ((2.5, 8), (5.0, 5), (9.5, 1)):  # ceil(10 - now), at least 1
        now[0] = at
        assert await t.attempt("a", None) == wait
    now[0] = 10.0  # the failure at 0 left; the refused ones never counted
    assert await t.retry_after("a") == 0
    assert await t.attempt("a", None) == 0
    assert await t.retry_after("a") == 1  # held again until 1 + 10


async def test_a_held_address_still_admits_a_token_trusted_there_and_nothing_else(make_throttle: MakeThrottle) -> None:
    now = [0.0]
    t = make_throttle(max_failures=2, window_s=10, trust_s=100, clock=lambda: now[0])
    assert await t.attempt("a", "admin") == 0  # the admin got in from a before the guessing
    assert await t.attempt("a", None) == await t.attempt("a", None) == 0
    now[0] = 4
    assert await t.attempt("a", "admin") == 0  # held, but trusted here
    assert await t.attempt("a", "robot:a1") == await t.attempt("a", None) == 6  # a right guess looks like a wrong one
    assert await t.attempt("b", "robot:a1") == 0  # another address is not held by a's guesses
    now[0] = 105  # trust ends trust_s after the last use (4)
    assert await t.attempt("a", None) == await t.attempt("a", None) == 0
    assert await t.attempt("a", "admin") == 10


async def test_an_ipv6_host_cannot_rotate_through_its_64_for_more_guesses(make_throttle: MakeThrottle) -> None:
    t = make_throttle(max_failures=2, window_s=10, clock=lambda: 0.0)
    assert await t.attempt("2001:db8:1:2::1", None) == 0
    assert await t.attempt("2001:db8:1:2:ffff:0:0:7", None) == 0
    assert not await t.allows("2001:db8:1:2::9")  # the same /64
    assert await t.allows("2001:db8:1:3::1")  # the next /64 is someone else
    assert await t.attempt("::ffff:192.0.2.1", None) == await t.attempt("192.0.2.1", None) == 0
    assert not await t.allows("192.0.2.1")  # an IPv4-mapped address is that IPv4 address
    assert await t.allows("192.0.2.2")


async def test_failures_at_once_each_count_once_and_none_past_the_hold(make_throttle: MakeThrottle) -> None:
    t = make_throttle(max_failures=5, window_s=60, clock=lambda: 7.0)
    waits = await asyncio.gather(*(t.attempt("10.1.1.1", None) for _ in range(12)))
    assert sorted(waits) == [0] * 5 + [60] * 7
    assert await t.retry_after("10.1.1.1") == 60
