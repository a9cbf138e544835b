"""Shared set-up for tests that talk to ``secmeta serve``: a test CA, a running server, a raw client.

    ca = make_ca(tmp_path / "tls")                        # tests.testca: CA, server cert (SAN 127.0.0.1), client cert
    with running_server(tmp_path, "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0") as srv:
        srv.bootstrap("SASL_SSL")                         # "127.0.0.1:PORT"
        AdminClient(srv.confluent_config("SASL_SSL", "admin", ADMIN_PASSWORD))
        with RawClient.connect(srv, "PLAINTEXT") as raw:  # kio frames over a plain socket
            raw.request(build(request_class(18, 3), client_software_name="t", client_software_version="1"))

The server runs in a background thread (``ServerThread``) over a fresh store with a keyring
in the tmp dir; ``users`` (default: admin, a super user, with ADMIN_PASSWORD) get SCRAM-SHA-256
and -512 credentials at 4096 iterations before the server starts.
"""

from __future__ import annotations

import dataclasses
import gc
import socket
import ssl
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scramp import ScramClient

from secmeta.core import (
    RequestContext,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    StoreConfig,
    UserScramCredentialUpsertion,
)
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.listeners import ClientAuth
from secmeta.core.server.server import ServerThread
from secmeta.core.wire.codec import build, decode_response, encode_request, request_class
from tests.logkit import make_keyring
from tests.testca import CLIENT_DN, TestCA, make_ca

__all__ = [
    "ADMIN",
    "ADMIN_PASSWORD",
    "CLIENT_DN",
    "TOKEN_SECRET",
    "RawClient",
    "RunningServer",
    "ServerClosed",
    "TestCA",
    "add_user",
    "make_ca",
    "running_server",
]

ADMIN = RequestContext("User:admin", "127.0.0.1")       # a super user (StoreConfig's default)
ADMIN_PASSWORD = "admin-secret"
TOKEN_SECRET = b"serverkit-token-secret, 32 bytes or more"
MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)


# -- a store and a running server ---------------------------------------------------

def add_user(store: SecurityStore, name: str, password: str, mechanisms=None, iterations: int = 4096) -> None:
    """Give ``name`` SCRAM credentials for ``password`` through the store's API (as User:admin),
    for ``mechanisms`` (default: every mechanism the store enables)."""
    if mechanisms is None:
        mechanisms = [m for m in MECHANISMS if m in store.config.enabled_mechanisms]
    for mechanism in mechanisms:  # Kafka takes one alteration per user per request
        results = store.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(name, ScramCredentialInfo(mechanism, iterations), password.encode())],
            context=ADMIN)
        errors = {user: err for user, err in results.items() if err}
        assert not errors, errors


@dataclass
class RunningServer:
    """A server in a background thread over a fresh store: what tests need to reach it."""

    store: SecurityStore
    thread: ServerThread
    ca: TestCA | None
    directory: Path
    passwords: dict[str, str] = field(default_factory=dict, repr=False)

    def _password(self, user: str | None) -> str:
        """The password running_server gave ``user`` (admin: ADMIN_PASSWORD even if added later)."""
        user = user or "admin"
        return self.passwords.get(user, ADMIN_PASSWORD if user == "admin" else "")

    @property
    def addresses(self) -> dict[str, tuple[str, int]]:
        """Listener name -> bound (host, port)."""
        return self.thread.addresses

    @property
    def cluster_id(self) -> str:
        return self.store.log.store.store_id

    @property
    def node_id(self) -> int:
        return self.thread.server.config.node_id

    def bootstrap(self, listener: str) -> str:
        return self.thread.bootstrap(listener)

    def log_end(self) -> int:
        """The store's log end offset: unchanged means nothing was written."""
        return self.store.log.end_offset

    def confluent_config(self, listener: str, user: str | None = None, password: str | None = None,
                         mechanism: str = "SCRAM-SHA-256", **extra: Any) -> dict[str, Any]:
        """librdkafka settings for ``listener`` (fails fast: short socket and request timeouts)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap(listener),
            "security.protocol": listener,
            "socket.timeout.ms": 5000,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
        }
        if "SSL" in listener:
            assert self.ca is not None, "this server has no TLS"
            config["ssl.ca.location"] = str(self.ca.ca_cert)
        if listener.startswith("SASL"):
            config.update({"sasl.mechanism": mechanism, "sasl.username": user or "admin",
                           "sasl.password": password if password is not None else self._password(user)})
        config.update(extra)
        return config

    def kafka_python_config(self, listener: str, user: str | None = None, password: str | None = None,
                            mechanism: str = "SCRAM-SHA-256", **extra: Any) -> dict[str, Any]:
        """kafka-python KafkaAdminClient keyword arguments for ``listener``."""
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener,
                                  "request_timeout_ms": 10000}
        if "SSL" in listener:
            assert self.ca is not None, "this server has no TLS"
            config["ssl_cafile"] = str(self.ca.ca_cert)
        if listener.startswith("SASL"):
            config.update({"sasl_mechanism": mechanism, "sasl_plain_username": user or "admin",
                           "sasl_plain_password": password if password is not None else self._password(user)})
        config.update(extra)
        return config


@contextmanager
def running_server(directory: Path, listeners: str = "PLAINTEXT://127.0.0.1:0", *,
                   config: ServerConfig | None = None, store_config: StoreConfig | None = None,
                   users: Mapping[str, str] | None = None,
                   client_auth: ClientAuth | str = ClientAuth.NONE,
                   processes: int | None = None, cluster: Any = None) -> Iterator[RunningServer]:
    """A server on ``listeners`` (port 0 = ephemeral) over a fresh store in ``directory``.

    ``processes``: serve from that many serving processes, this one the writer (``serve --processes``).

    TLS listeners get a test CA (made in ``directory/tls``) unless ``config.ssl`` is given.
    ``users`` maps names to passwords (default {"admin": ADMIN_PASSWORD}).
    ``cluster``: a Controllership (replicated mode's roles); None is the one-node default.
    The store is closed when the block ends.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    users = {"admin": ADMIN_PASSWORD} if users is None else dict(users)
    config = config or ServerConfig()
    ca = None
    if "SSL" in listeners:
        ca = make_ca(directory / "tls")
        if config.ssl is None:
            config = _replace(config, ssl=ca.server_ssl(client_auth))
    store_config = store_config or StoreConfig(token_secret=TOKEN_SECRET)
    store = SecurityStore.open(directory / "store", store_config, keyring=make_keyring(directory))
    try:
        for name, password in users.items():
            add_user(store, name, password)
        with ServerThread(store, listeners, config, processes=processes, cluster=cluster) as thread:
            try:
                yield RunningServer(store, thread, ca, directory, dict(users))
            finally:
                _drop_unreachable_clients()
    finally:
        store.close()


def _drop_unreachable_clients() -> None:
    """Free, while the server still answers, the clients a test left unreachable but alive in a reference
    cycle (a failed Future's or pytest.raises' traceback holds the test's frame, and the frame its
    AdminClient).  Else such a librdkafka client lives on, reconnecting to the stopped server's port every
    second, until a collection that may never come: the next store open's ``gc.freeze()`` (gc_pause)
    makes it permanent."""
    gc.collect()


def _replace(config: ServerConfig, **changes: Any) -> ServerConfig:
    return dataclasses.replace(config, **changes)


# -- a raw protocol client ------------------------------------------------------------

class ServerClosed(ConnectionError):
    """The server closed the connection after ``got`` of the ``wanted`` bytes being read."""

    def __init__(self, got: int, wanted: int):
        super().__init__(f"the server closed the connection ({got} of {wanted} bytes read)")
        self.got = got


class RawClient:
    """One socket speaking kio-encoded frames: send requests, read responses, see the server close."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._correlation = 0
        host, port = sock.getsockname()[:2]
        self.local_address = f"{host}:{port}"   # as the server's log lines name this peer

    @classmethod
    def connect(cls, server: RunningServer | tuple[str, int], listener: str = "PLAINTEXT", *,
                timeout: float = 5.0, with_cert: bool = False, source: str | None = None) -> RawClient:
        """``source``: the local address to connect from (e.g. 127.0.0.7: any of 127/8 is this host)."""
        host, port = server.addresses[listener] if isinstance(server, RunningServer) else server
        sock = socket.create_connection((host, port), timeout=timeout,
                                        source_address=None if source is None else (source, 0))
        if isinstance(server, RunningServer) and "SSL" in listener:
            assert server.ca is not None
            sock = server.ca.client_context(with_cert=with_cert).wrap_socket(sock, server_hostname=host)
        return cls(sock)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send(self, request: Any, *, correlation_id: int | None = None, client_id: str | None = "serverkit") -> int:
        """Send a kio request entity; returns its correlation id."""
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
        self.sock.sendall(encode_request(correlation_id, client_id, request))
        return correlation_id

    def read_frame(self) -> bytes:
        """One size-prefixed frame's payload; ServerClosed (a ConnectionError) if the server closed."""
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def next_frame(self) -> bytes | None:
        """The next frame's payload, or None if the server closed (or reset) the connection before it
        began; closing inside a frame raises ServerClosed."""
        try:
            prefix = self._read_exactly(4)
        except ServerClosed as exc:
            if exc.got:
                raise
            return None
        except ConnectionResetError:
            return None
        return self._read_exactly(struct.unpack(">i", prefix)[0])

    def _read_exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ServerClosed(got, n)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def receive(self, api_key: int, api_version: int) -> tuple[int, Any]:
        """(correlation id, kio response) of the next frame, decoded as ``api_key`` v``api_version``."""
        return decode_response(api_key, api_version, self.read_frame())

    def request(self, request: Any) -> Any:
        """Send ``request`` and return its decoded response (correlation id checked)."""
        correlation_id = self.send(request)
        got, response = self.receive(request.__api_key__, request.__version__)
        assert got == correlation_id, (got, correlation_id)
        return response

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True if the server closes the connection within ``timeout`` (any unread data is discarded)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except TimeoutError:
            return False
        except OSError:
            return True

    def api_versions(self, version: int = 3) -> Any:
        cls = request_class(18, version)
        return self.request(build(cls, client_software_name="serverkit", client_software_version="1.0"))

    def sasl_login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> Any:
        """SaslHandshake v1 + two SaslAuthenticate v2 (scramp's client); the last SaslAuthenticate response."""
        handshake = self.request(build(request_class(17, 1), mechanism=mechanism))
        if handshake.error_code != 0:
            return handshake
        client = ScramClient([mechanism], user, password)
        first = self.request(build(request_class(36, 2), auth_bytes=client.get_client_first().encode()))
        if first.error_code != 0:
            return first
        client.set_server_first(first.auth_bytes.decode())
        final = self.request(build(request_class(36, 2), auth_bytes=client.get_client_final().encode()))
        if final.error_code == 0:
            client.set_server_final(final.auth_bytes.decode())
        return final
