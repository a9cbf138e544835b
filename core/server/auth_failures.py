"""How failed logins are slowed: per claimed user name and per peer address, never by refusing.

Every failed SASL exchange has been evaluated (its credentials were checked) before it is
counted here; nothing is ever answered as failed unevaluated, so valid credentials log in
whatever failed before them, from any address (Kafka only delays the failing connection,
connection.failed.authentication.delay.ms).  A failure is counted against the user name the
client claimed (so guessing one user's password from many addresses is slowed) and against
its address; each is a token bucket (``burst`` failures, refilled at ``rate`` a second), and
the failing connection is held ``max(base delay, the deeper deficit / rate)`` (at most
``MAX_DELAY_S``) before the failure is answered and the connection closed.  An exchange the
client abandons after server-first is counted the same way (it may have been a probe).

Held failures are bounded (``max_pending``): past the bound a failing connection holds no
slot and is closed unanswered after its delay (never sooner, which would tell a guesser "wrong"
at once); the server's connection caps bound those (``secmeta.core.server.admission``).  The buckets
are bounded too (``max_tracked`` keys each, 10,000 by default; the least-penalised are dropped first), and
user names are kept as a short keyed digest, never as text.  Used from the event loop only.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["FailedAuthLimiter", "Held"]


class Held(NamedTuple):
    """What ``fail`` decided for one failed login: hold it ``delay`` s; ``held``: a slot was taken
    (``release`` it after), else ``pending`` failures are already held and it is closed unanswered."""

    delay: float
    held: bool
    pending: int


class _Buckets:
    """Token buckets by key: a failure takes a token; a deficit means failures came too fast."""

    def __init__(self, burst: float, rate: float, floor: float, max_tracked: int):
        self._burst, self._rate, self._floor, self._max = burst, rate, floor, max_tracked
        self._buckets: dict[bytes | str, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._buckets)

    def _tokens(self, key: bytes | str, now: float) -> float:
        tokens, last = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - last) * self._rate)

    def take(self, key: bytes | str, now: float) -> float:
        """Count one failure of ``key``; the tokens left (negative: a deficit)."""
        tokens = max(self._tokens(key, now) - 1, self._floor)
        if key not in self._buckets and len(self._buckets) >= self._max:
            self._prune(now)
        self._buckets[key] = (tokens, now)
        return tokens

    def _prune(self, now: float) -> None:
        """Drop refilled buckets, then the least-penalised tenth, so the deepest deficits are kept."""
        by_tokens = sorted(self._buckets, key=lambda k: self._tokens(k, now), reverse=True)
        full = [k for k in by_tokens if self._tokens(k, now) >= self._burst]
        drop = full if len(full) > self._max // 10 else by_tokens[: max(1, self._max // 10)]
        for key in drop:
            del self._buckets[key]


class FailedAuthLimiter:
    """Counts failed logins per claimed user name and per address; says how long each is held."""

    MAX_DELAY_S = 10.0
    MAX_TRACKED = 10_000

    def __init__(self, base_delay_s: float, burst: int, rate: float, max_pending: int, *,
                 max_tracked: int = MAX_TRACKED, clock: Callable[[], float] = time.monotonic):
        self._base, self._rate, self._clock = base_delay_s, rate, clock
        floor = -self.MAX_DELAY_S * rate
        self._users = _Buckets(float(burst), rate, floor, max_tracked)
        self._hosts = _Buckets(float(burst), rate, floor, max_tracked)
        self._key = os.urandom(16)          # user names are kept as keyed digests only
        self._max_pending = max_pending
        self.pending = 0

    def __repr__(self) -> str:
        return (f"<FailedAuthLimiter users={len(self._users)} hosts={len(self._hosts)} "
                f"pending={self.pending}/{self._max_pending}>")

    @property
    def tracked(self) -> int:
        """How many user names and addresses have buckets (at most ``max_tracked`` of each)."""
        return len(self._users) + len(self._hosts)

    def failed(self, host: str, user: str | None) -> float:
        """Count one evaluated failure (or abandoned exchange) from ``host`` claiming ``user``
        (None: no name was claimed); the seconds to hold the failing connection."""
        now = self._clock()
        tokens = self._hosts.take(host, now)
        if user is not None:
            tokens = min(tokens, self._users.take(self._digest(user), now))
        return min(self.MAX_DELAY_S, max(self._base, -tokens / self._rate))

    async def fail(self, host: str, user: str | None) -> Held:
        """Count one evaluated failure (``failed``) and take a slot to hold it (``hold``), in one step: the
        connection's one question (a serving process of ``serve --processes`` asks the writer's limiter)."""
        delay = self.failed(host, user)
        return Held(delay, self.hold(), self.pending)

    def hold(self) -> bool:
        """Take a slot for one held failure (``release`` it after); False when ``max_pending`` are held."""
        if self.pending >= self._max_pending:
            return False
        self.pending += 1
        return True

    def release(self) -> None:
        self.pending -= 1

    def _digest(self, user: str) -> bytes:
        return hashlib.blake2b(user.encode("utf-8", "surrogatepass"), key=self._key, digest_size=16).digest()
