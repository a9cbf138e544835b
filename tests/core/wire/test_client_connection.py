"""Connection failures name the broker and the reason (secmeta.core.wire.connection), without a server.

Kafka's NetworkClient reports a refused or timed-out connection per node and
``socket.connection.setup.timeout.ms`` / ``request.timeout.ms`` bound the wait; a TLS
handshake failure is an SslAuthenticationException there.  Here each is a
BrokerConnectionError whose message names HOST:PORT and the reason.
"""

from __future__ import annotations

import socket
import threading

import pytest

from secmeta.core.wire.client_config import ClientConfig
from secmeta.core.wire.connection import BrokerConnectionError, Connection
from tests.clientkit import refusing_port


def _config(port: int, **props) -> ClientConfig:
    return ClientConfig.from_properties({k.replace("_", "."): v for k, v in props.items()},
                                        bootstrap_servers=f"127.0.0.1:{port}")


def test_connection_refused_names_the_broker():
    """Nobody listening: 'cannot connect to broker HOST:PORT: connection refused'."""
    with refusing_port() as port, pytest.raises(BrokerConnectionError,
                                                match=f"broker 127.0.0.1:{port}: connection refused"):
        Connection.open(_config(port))


def test_every_bootstrap_server_is_tried():
    """With two dead bootstrap servers the error names both, each refused."""
    with refusing_port() as a, refusing_port() as b:
        config = ClientConfig.from_properties({}, bootstrap_servers=f"127.0.0.1:{a},127.0.0.1:{b}")
        with pytest.raises(BrokerConnectionError) as info:
            Connection.open(config)
    assert str(info.value) == (f"cannot connect to broker 127.0.0.1:{a}: connection refused; "
                               f"cannot connect to broker 127.0.0.1:{b}: connection refused")


@pytest.fixture
def silent_listener():
    """A listener that accepts and never answers (then closes when the test ends)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def test_a_broker_that_does_not_answer_times_out(silent_listener):
    """A broker that never answers ApiVersions fails after request.timeout.ms, naming the request."""
    config = _config(silent_listener, request_timeout_ms="200")
    with pytest.raises(BrokerConnectionError, match=r"did not answer ApiVersions v\d within 0.2 s"):
        Connection.open(config)


def test_tls_to_a_listener_that_does_not_speak_tls_fails(silent_listener):
    """A TLS handshake nobody answers fails as a TLS failure naming the broker."""
    config = _config(silent_listener, security_protocol="SSL", socket_connection_setup_timeout_ms="200")
    with pytest.raises(BrokerConnectionError, match=f"TLS handshake with broker 127.0.0.1:{silent_listener}"):
        Connection.open(config)


def test_a_broker_that_hangs_up_is_named():
    """A listener that closes at once: the broker closed the connection before answering."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def hang_up() -> None:
        conn, _ = server.accept()
        conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    try:
        with pytest.raises(BrokerConnectionError, match=f"broker 127.0.0.1:{port} (closed the connection|broke)"):
            Connection.open(_config(port))
    finally:
        thread.join()
        server.close()
