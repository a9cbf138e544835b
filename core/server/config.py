"""Settings of ``secmeta serve``, named after the Kafka broker settings they mirror."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from secmeta.core.errors import InvalidValueError
from secmeta.core.server.listeners import SslConfig
from secmeta.events.types import ScramMechanism

__all__ = ["MAX_DEFAULT_PROCESSES", "MIB", "ServerConfig", "default_processes"]

#: ``serve --processes``' default: the CPUs this process may run on, at most this many.
MAX_DEFAULT_PROCESSES = 8


def default_processes() -> int:
    """The CPUs this process may run on (its affinity), at most MAX_DEFAULT_PROCESSES."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_PROCESSES))

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How the server runs; every limit has Kafka's default where Kafka has one."""

    node_id: int = 1                                     # broker.id / node.id: broker and controller
    advertised: dict[str, tuple[str, int]] = field(default_factory=dict)  # listener name -> (host, port)
    ssl: SslConfig | None = None
    sasl_mechanisms: tuple[ScramMechanism, ...] | None = None  # None: every mechanism the store enables
    socket_request_max_bytes: int = 100 * MIB            # socket.request.max.bytes
    sasl_server_max_receive_size: int = 512 * 1024       # sasl.server.max.receive.size: any frame before login
    connections_max_idle_ms: int = 600_000               # connections.max.idle.ms
    login_timeout_ms: int = 5_000                        # the whole phase before login (TLS, SASL, first request)
    max_connections: int = 1000                          # max.connections (Kafka: unlimited), both classes
    max_connections_per_ip: int = 100                    # max.connections.per.ip (Kafka: unlimited; no address exempt)
    max_connections_before_login: int | None = None      # the share of max.connections kept for logins (1/4)
    max_connections_before_login_per_ip: int | None = None  # per address (1/2 of per ip); the oldest is evicted
    failed_authentication_delay_ms: int = 100            # connection.failed.authentication.delay.ms
    failed_authentications_burst: int = 10               # per user name and per peer IP, before failures are slowed to ...
    failed_authentications_per_second: float = 1.0       # ... this steady rate (librdkafka retries ~20/s)
    failed_authentications_max_pending: int = 100        # failures held at once; beyond, closed unanswered after the delay
    frame_read_timeout_ms: int = 30_000                  # a frame started must arrive whole within this
    tls_handshake_timeout_ms: int = 10_000
    shutdown_drain_ms: int = 30_000                      # how long SIGTERM waits for in-flight requests
    workers: int = 8                                     # threads running handlers (blocking store calls)
    write_workers: int = 8                               # threads running writes alone: a write stalled on its
                                                         # commit (a Kafka stall) never holds a read's or login's
    write_queue_max: int = 64                            # writes waiting for or on a write worker; one more is
                                                         # held back until one is answered (write_bound.py)
    write_timeout_ms: int = 30_000                       # a write not started on a worker this long after it came
                                                         # (its request's own timeout_ms if it has one) is answered
                                                         # REQUEST_TIMED_OUT, never run (Kafka's request.timeout.ms)
    process_apply_timeout_ms: int = 10_000               # serve --processes: how long a write waits for every
                                                         # serving process to apply it (a stuck one is restarted)

    def __post_init__(self):
        if self.max_connections_before_login is None:
            object.__setattr__(self, "max_connections_before_login", max(1, self.max_connections // 4))
        if self.max_connections_before_login_per_ip is None:
            object.__setattr__(self, "max_connections_before_login_per_ip", max(1, self.max_connections_per_ip // 2))
        if not 0 <= self.node_id <= 2**31 - 1:
            raise InvalidValueError(f"node id must be within 0..2147483647, not {self.node_id}")
        for name in ("socket_request_max_bytes", "sasl_server_max_receive_size", "connections_max_idle_ms",
                     "login_timeout_ms", "max_connections", "max_connections_per_ip", "max_connections_before_login",
                     "max_connections_before_login_per_ip", "frame_read_timeout_ms", "tls_handshake_timeout_ms",
                     "workers", "write_workers", "write_queue_max", "write_timeout_ms", "failed_authentications_burst", "failed_authentications_max_pending",
                     "process_apply_timeout_ms"):
            if getattr(self, name) <= 0:
                raise InvalidValueError(f"{name} must be positive, not {getattr(self, name)}")
        assert self.max_connections_before_login is not None and self.max_connections_before_login_per_ip is not None
        if self.max_connections_before_login >= self.max_connections:
            raise InvalidValueError(f"max_connections_before_login ({self.max_connections_before_login}) must be "
                                    f"below max_connections ({self.max_connections}): the rest is for logged-in "
                                    "connections")
        if self.max_connections_before_login_per_ip > self.max_connections_per_ip:
            raise InvalidValueError(f"max_connections_before_login_per_ip ({self.max_connections_before_login_per_ip})"
                                    f" must not exceed max_connections_per_ip ({self.max_connections_per_ip})")
        if self.failed_authentication_delay_ms < 0 or self.shutdown_drain_ms < 0:
            raise InvalidValueError("delays must not be negative")
        if self.failed_authentications_per_second <= 0:
            raise InvalidValueError("failed_authentications_per_second must be positive")
        if self.sasl_mechanisms is not None:
            if not self.sasl_mechanisms:
                raise InvalidValueError("at least one SASL mechanism must be enabled")
            object.__setattr__(self, "sasl_mechanisms", tuple(ScramMechanism(m) for m in self.sasl_mechanisms))

    @property
    def before_login_limits(self) -> tuple[int, int]:
        """(max_connections_before_login, max_connections_before_login_per_ip), their defaults resolved."""
        overall, per_ip = self.max_connections_before_login, self.max_connections_before_login_per_ip
        assert overall is not None and per_ip is not None   # resolved in __post_init__
        return overall, per_ip
