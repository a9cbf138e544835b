"""Which connections the server holds, in two classes: before login and established.

A connection is *before login* from its accept until it is established: on a SASL listener
until its SCRAM exchange succeeds, on PLAINTEXT and SSL until its TLS handshake is done and
its first whole request has arrived (so half-open connections that send a partial frame
stay in this class).  Before-login connections are a bounded class of their own:

- at most ``max_connections_before_login`` overall and ``max_connections_before_login_per_ip``
  per address; a new connection over either cap evicts the oldest before-login connection
  (per address: that address's oldest; overall: the oldest of the address holding the most,
  so a flood from some addresses evicts its own connections before a bystander's), never an
  established one, so a fresh login always gets in;
- established connections may use only ``max_connections - max_connections_before_login``
  (the before-login share is reserved for logins); a login past that is closed.
- ``max_connections_per_ip`` bounds every connection of one address: over it, the address's
  oldest before-login connection is evicted, or the new one refused if it has none.

A connection whose login failed is *held* until its failure is answered (the failure delay,
``secmeta.core.server.auth_failures``): it leaves the before-login class and is never evicted,
since closing it early would tell a guesser "wrong" at once and free its place for the next
guess, so the hold would cost nothing.  A held connection still counts against
``max_connections`` and ``max_connections_per_ip``: an address whose places are all held
failures (or established) gets no further connection until a hold ends, which is the brake on
guessing.  Held connections are bounded by those caps and each hold by
``FailedAuthLimiter.MAX_DELAY_S``.

The before-login phase has one deadline (``login_timeout_ms``), which the connection enforces;
it ends when the connection logs in or its failed login is evaluated (a hold is not cut by it).
This table only decides; the server closes whom it names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["Admission", "Admitted"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """The answer to a new connection: close ``evicted``, then let it in, or refuse it if ``refused`` (a reason)."""

    evicted: tuple[tuple[Hashable, str], ...] = ()     # (connection, why) to close now
    refused: str | None = None


class Admission:
    """The server's connections by address and class; used from the event loop only."""

    def __init__(self, *, max_connections: int, max_connections_per_ip: int,
                 max_before_login: int, max_before_login_per_ip: int):
        self._max, self._max_ip = max_connections, max_connections_per_ip
        self._max_pre, self._max_pre_ip = max_before_login, max_before_login_per_ip
        self._host: dict[Hashable, str] = {}
        self._per_ip: Counter[str] = Counter()
        self._pre: dict[str, dict[Hashable, None]] = {}     # address -> its before-login connections, oldest first
        self._pre_count = 0
        self._held: set[Hashable] = set()                    # failed logins held until answered

    def __len__(self) -> int:
        return len(self._host)

    @property
    def before_login(self) -> int:
        return self._pre_count

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def established(self) -> int:
        return len(self._host) - self._pre_count - len(self._held)

    def admit(self, connection: Hashable, host: str) -> Admitted:
        """Let ``connection`` from ``host`` in before login, naming whom to evict for it, or refuse it."""
        if self._per_ip[host] >= self._max_ip and not self._pre.get(host):
            return Admitted(refused=f"too many connections from {host} (max.connections.per.ip={self._max_ip})")
        if len(self._host) >= self._max and not self._pre_count:
            return Admitted(refused=f"too many connections (max.connections={self._max})")
        evicted: list[tuple[Hashable, str]] = []
        while self._per_ip[host] >= self._max_ip or len(self._pre.get(host, ())) >= self._max_pre_ip:
            if not self._pre.get(host):     # the rest are held failures or established: never evicted
                return Admitted(tuple(evicted), refused=f"too many connections from {host} "
                                f"(max.connections.per.ip={self._max_ip}), none of them evictable")
            evicted.append((self._evict(host), f"evicted before login: a newer connection from {host} "
                            f"(max.connections.per.ip={self._max_ip}, "
                            f"max.connections.before.login.per.ip={self._max_pre_ip})"))
        while len(self._host) >= self._max or self._pre_count >= self._max_pre:
            if not self._pre:
                return Admitted(tuple(evicted), refused=f"too many connections (max.connections={self._max}), "
                                "none of them evictable")
            evicted.append((self._evict(max(self._pre, key=lambda h: len(self._pre[h]))),
                            f"evicted before login: a newer connection (max.connections={self._max}, "
                            f"max.connections.before.login={self._max_pre})"))
        self._host[connection] = host
        self._per_ip[host] += 1
        self._pre.setdefault(host, {})[connection] = None
        self._pre_count += 1
        return Admitted(tuple(evicted))

    def establish(self, connection: Hashable) -> str | None:
        """Move a logged-in ``connection`` out of the before-login class; a reason if it must close instead."""
        host = self._host.get(connection)
        if host is None or not self._drop_pre(connection, host):
            return None
        if self.established > self._max - self._max_pre:
            return (f"too many established connections (max.connections={self._max} less the "
                    f"max.connections.before.login={self._max_pre} kept for logins)")
        return None

    def hold(self, connection: Hashable) -> None:
        """``connection``'s failed login is held until answered: out of the before-login class, never evicted."""
        host = self._host.get(connection)
        if host is not None and self._drop_pre(connection, host):
            self._held.add(connection)

    def forget(self, connection: Hashable) -> None:
        """``connection`` is closed (idempotent)."""
        host = self._host.pop(connection, None)
        if host is None:
            return
        self._drop_pre(connection, host)
        self._held.discard(connection)
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]

    def _evict(self, host: str) -> Hashable:
        victim = next(iter(self._pre[host]))
        self.forget(victim)
        return victim

    def _drop_pre(self, connection: Hashable, host: str) -> bool:
        waiting = self._pre.get(host)
        if waiting is None or connection not in waiting:
            return False
        del waiting[connection]
        if not waiting:
            del self._pre[host]
        self._pre_count -= 1
        return True
