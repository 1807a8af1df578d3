"""The brake on guessing tokens: failed attempts per client address, for every way a token is
presented (``POST /api/login`` and ``Authorization: Bearer`` on any endpoint). `AuthThrottle` keeps
the counts in this process (the embedded default, no I/O); `tenancy.postgres.throttle` keeps them in
the database several replicas share, by the same arithmetic (`held_for`, `kept_after_failure`).

The client address is the one the ASGI scope carries: the peer's, or — only when the peer is one of
``MEMORY_TRUSTED_PROXIES`` — the one its ``X-Forwarded-For`` names (uvicorn rewrites the scope).

Rules (the invariants the tests pin):

- after `max_failures` failed attempts within `window_s`, an address is *held*: its attempts are
  answered 429 with ``Retry-After`` until enough failures have left the window. While it is held,
  nothing it sends counts or changes the answer, so every refused attempt looks alike;
- a success never clears an address's failures: logging in with one's own robot token does not
  buy a guesser ten more guesses at the admin token;
- **the right token is never locked out.** A token that succeeded from an address before that
  address was held stays *trusted* there (`trust_s`, refreshed on each use): while the address is
  held, that token from that address still gets in. A correct token that has not succeeded from
  the address gets the same 429 as a wrong one, so a held guesser learns nothing from a right
  guess. Addresses are independent: guesses from one never hold another;
- an IPv6 address counts as its /64 (one host's usual allocation, which it may rotate through
  freely); an IPv4 address, or anything that is not an address, counts as itself.

The residual exposure is written down in docs/tenancy.md: a guesser sharing an address with a
client that is trusted there can still tell that client's token from a wrong one while held.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

MAX_FAILURES = 10
WINDOW_S = 300.0
#: How long a token stays trusted at an address after it last got in from there.
TRUST_S = 24 * 60 * 60.0
#: Addresses (and address-token pairs) remembered; the oldest are forgotten first.
MAX_CLIENTS = 10_000


def recent_failures(times: Iterable[float], now: float, window_s: float) -> list[float]:
    """The failures among `times` still inside the window at `now`, oldest first."""
    return sorted(t for t in times if now - t < window_s)


def held_for(recent: Sequence[float], now: float, max_failures: int, window_s: float) -> int:
    """Whole seconds an address with these `recent` failures (oldest first) is held at `now`:
    0 below `max_failures`, else until the oldest of its last `max_failures` leaves the window
    (at least 1, so a held answer never says "retry in 0 seconds")."""
    if len(recent) < max_failures:
        return 0
    frees = recent[len(recent) - max_failures] + window_s
    return max(1, math.ceil(frees - now))


def kept_after_failure(recent: Sequence[float], now: float, max_failures: int) -> list[float]:
    """The failures remembered once one more at `now` is counted: the latest `max_failures`."""
    return sorted([*recent, now])[-max_failures:]


class AuthThrottle:
    """Thread-safe; implements `tenancy.ports.Throttle`. `attempt` is the whole protocol;
    `allows`/`retry_after` only read. Its coroutines never suspend: the work is a few dict
    operations under a lock, done where it is awaited."""

    def __init__(
        self,
        *,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        trust_s: float = TRUST_S,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.trust_s = trust_s
        self.max_clients = max_clients
        self.clock = clock
        #: Per address, its latest failures (at most `max_failures`, oldest first).
        self._failures: OrderedDict[str, list[float]] = OrderedDict()
        #: (address, who) -> when the trust ends.
        self._trusted: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    async def attempt(self, client: str, who: str | None) -> int:
        """One presented token from `client`: `who` names the principal it resolved to, or None
        for a wrong token. Returns the seconds the attempt must wait (answer 429), or 0: it goes
        on — a success when `who` is set (the pair is trusted from now on), else a failure that
        was counted (answer 401)."""
        client = counted_as(client)
        with self._lock:
            now = self.clock()
            wait = self._wait(client, now)
            if wait and not (who is not None and self._trusted_now((client, who), now)):
                return wait
            if who is None:
                self._failures[client] = kept_after_failure(self._recent(client, now), now, self.max_failures)
                self._failures.move_to_end(client)
                while len(self._failures) > self.max_clients:
                    self._failures.popitem(last=False)
            else:
                self._trusted[(client, who)] = now + self.trust_s
                self._trusted.move_to_end((client, who))
                while len(self._trusted) > self.max_clients:
                    self._trusted.popitem(last=False)
            return 0

    async def allows(self, client: str) -> bool:
        """Whether `client` is not held (any token may try)."""
        return await self.retry_after(client) == 0

    async def retry_after(self, client: str) -> int:
        """Whole seconds until `client` is no longer held (0 when it is not)."""
        with self._lock:
            return self._wait(counted_as(client), self.clock())

    def _recent(self, client: str, now: float) -> list[float]:
        kept = recent_failures(self._failures.get(client, ()), now, self.window_s)
        if kept:
            self._failures[client] = kept
        else:
            self._failures.pop(client, None)
        return kept

    def _wait(self, client: str, now: float) -> int:
        return held_for(self._recent(client, now), now, self.max_failures, self.window_s)

    def _trusted_now(self, pair: tuple[str, str], now: float) -> bool:
        until = self._trusted.get(pair)
        if until is None:
            return False
        if until <= now:
            del self._trusted[pair]
            return False
        return True


def counted_as(client: str) -> str:
    """The key `client`'s attempts count under: its /64 for an IPv6 address, else itself."""
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return client
