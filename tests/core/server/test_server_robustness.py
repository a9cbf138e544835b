"""Bad input closes only the connection that sent it, with one log line naming the peer and the reason.

As Kafka's SocketServer/Selector do: a frame larger than socket.request.max.bytes, garbage,
a truncated frame, an unknown API key or version, a failed TLS handshake, a client stalled
mid-frame, an idle connection (connections.max.idle.ms) and a connection over max.connections
each end that connection; other connections keep working and nothing is written to the store.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from contextlib import contextmanager

import pytest

from secmeta.core.server.config import ServerConfig
from secmeta.core.wire.codec import build, encode_request, request_class
from tests.serverkit import RawClient
from tests.waiting import wait_for


def _log_lines(caplog, peer: str) -> list[str]:
    """The server's lines naming ``peer`` (waiting for the first: after a failed TLS handshake the
    socket is closed by asyncio before the server's coroutine logs why)."""
    deadline = time.monotonic() + 5
    while True:
        lines = [r.getMessage() for r in caplog.records
                 if r.name == "secmeta.server" and r.levelno >= logging.INFO and peer in r.getMessage()]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)


@contextmanager
def _only_this_connection_closes(server, caplog, fragment: str, listener: str = "PLAINTEXT"):
    """Yields a fresh RawClient to misbehave on; checks it is closed with one line naming it and ``fragment``,
    that a bystander connection still gets answers and that the store's log did not move."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    before = server.log_end()
    with RawClient.connect(server, "PLAINTEXT") as bystander:
        assert bystander.api_versions().error_code == 0
        with RawClient.connect(server, listener) as raw:
            yield raw
            assert raw.closed_by_server()
        lines = _log_lines(caplog, raw.local_address)
        assert len(lines) == 1, lines
        assert fragment in lines[0], lines[0]
        assert bystander.api_versions().error_code == 0
    assert server.log_end() == before


def _metadata_frame(version: int = 12) -> bytes:
    return encode_request(1, "robust", build(request_class(3, version), topics=None,
                                              include_topic_authorized_operations=False,
                                              include_cluster_authorized_operations=False))


def test_garbage_that_is_not_kafka(shared_server, caplog):
    """An HTTP request: its first four bytes read as a size beyond what a connection may send before login."""
    with _only_this_connection_closes(shared_server, caplog,
                                      "larger than sasl.server.max.receive.size (before login)") as raw:
        raw.send_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


def test_garbage_inside_a_well_sized_frame(shared_server, caplog):
    """A frame whose body is not a request of the key it names is malformed."""
    header = struct.pack(">hhih", 3, 12, 1, 2) + b"ab"
    payload = header + b"\xff" * 9
    with _only_this_connection_closes(shared_server, caplog, "malformed Metadata v12") as raw:
        raw.send_bytes(struct.pack(">i", len(payload)) + payload)


def test_negative_frame_size(shared_server, caplog):
    with _only_this_connection_closes(shared_server, caplog, "invalid frame size -5") as raw:
        raw.send_bytes(struct.pack(">i", -5))


def test_truncated_frame(shared_server, caplog):
    """The client closes after part of a frame."""
    frame = _metadata_frame()
    with _only_this_connection_closes(shared_server, caplog, "truncated frame") as raw:
        raw.send_bytes(frame[:-3])
        raw.sock.shutdown(socket.SHUT_WR)


def test_trailing_bytes_after_a_request_are_ignored(shared_server):
    """Kafka's RequestContext.parseRequest does not check for unread bytes (librdkafka 2.16 sends an extra
    tag byte after AlterUserScramCredentials v0), so neither do we: the request is answered."""
    frame = _metadata_frame()
    payload = frame[4:] + b"\x00\x00"
    with RawClient.connect(shared_server) as raw:
        raw.send_bytes(struct.pack(">i", len(payload)) + payload)
        correlation_id, response = raw.receive(3, 12)
        assert correlation_id == 1 and response.cluster_id == shared_server.cluster_id


def test_oversize_frame(serve, caplog):
    """socket.request.max.bytes is configurable; a larger frame is refused before it is read."""
    server = serve(config=ServerConfig(socket_request_max_bytes=1024))
    with _only_this_connection_closes(server, caplog, "frame of 2048 bytes is larger than socket.request.max.bytes (1024)") as raw:
        raw.send_bytes(struct.pack(">i", 2048) + b"\x00" * 100)


def test_unknown_api_key(shared_server, caplog):
    """Produce (key 0) is not served: Kafka closes on an API it does not know."""
    payload = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" * 8
    with _only_this_connection_closes(shared_server, caplog, "unsupported request: api key 0 v9") as raw:
        raw.send_bytes(struct.pack(">i", len(payload)) + payload)


def test_unsupported_version_of_a_served_api(shared_server, caplog):
    payload = struct.pack(">hhih", 3, 99, 1, -1) + b"\x00" * 8
    with _only_this_connection_closes(shared_server, caplog, "unsupported request: Metadata v99") as raw:
        raw.send_bytes(struct.pack(">i", len(payload)) + payload)


def test_plain_client_on_a_tls_listener(shared_server, caplog):
    """A plaintext Kafka request sent to the SSL listener fails the TLS handshake."""
    with _only_this_connection_closes(shared_server, caplog, "TLS handshake failed", listener="SSL_RAW") as raw:
        raw.send_bytes(_metadata_frame())


def test_client_stalled_mid_frame(serve, caplog):
    """A frame that stops arriving is given up after frame_read_timeout_ms."""
    server = serve(config=ServerConfig(frame_read_timeout_ms=300))
    frame = _metadata_frame()
    with _only_this_connection_closes(server, caplog, "stalled") as raw:
        raw.send_bytes(frame[:10])


def test_idle_connection_is_closed(serve, caplog):
    """connections.max.idle.ms: a connection that sends nothing is closed."""
    server = serve(config=ServerConfig(connections_max_idle_ms=300))
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(server) as raw:
        assert raw.closed_by_server()
    lines = _log_lines(caplog, raw.local_address)
    assert len(lines) == 1 and "idle for 300 ms (connections.max.idle.ms)" in lines[0], lines


def test_connections_beyond_the_cap_are_refused(serve, caplog):
    """max.connections: logged-in connections may take all but the share kept for logins; a login past that is
    closed, one more before-login connection evicts the oldest waiting one, and the others keep working."""
    server = serve(config=ServerConfig(max_connections=3, max_connections_before_login=1))
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(server) as a:
        assert a.api_versions().error_code == 0     # logged in (PLAINTEXT: its first request) before b arrives
        b = stack_b = RawClient.connect(server)
        assert b.api_versions().error_code == 0
        with RawClient.connect(server) as c, RawClient.connect(server) as d:
            assert c.closed_by_server()      # evicted by d: the before-login share is one
            d.send(build(request_class(18, 3), client_software_name="x", client_software_version="1"))
            assert d.closed_by_server()      # logged in (its first request) with no room left
        (evicted,) = _log_lines(caplog, c.local_address)
        assert "evicted before login: a newer connection (max.connections=3" in evicted
        (full,) = _log_lines(caplog, d.local_address)
        assert "too many established connections (max.connections=3" in full
        assert a.api_versions().error_code == 0 and b.api_versions().error_code == 0
        stack_b.close()


@pytest.fixture(autouse=True)
def _raw_ssl_listener(monkeypatch):
    """'SSL_RAW' connects a plain socket to the SSL listener (RawClient would otherwise speak TLS)."""
    original = RawClient.connect.__func__

    def connect(cls, server, listener="PLAINTEXT", **kw):
        if listener == "SSL_RAW":
            return original(cls, server.addresses["SSL"], **kw)
        return original(cls, server, listener, **kw)

    monkeypatch.setattr(RawClient, "connect", classmethod(connect))


def test_a_large_frame_before_login_is_refused_before_its_body(shared_server, caplog):
    """Before SASL authentication a frame may not exceed sasl.server.max.receive.size (512 KiB, Kafka's
    DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE): announcing 1 MiB closes the connection without waiting for the body."""
    with _only_this_connection_closes(shared_server, caplog, "larger than sasl.server.max.receive.size",
                                      listener="SASL_PLAINTEXT") as raw:
        raw.send_bytes(struct.pack(">i", 1024 * 1024) + struct.pack(">hhi", 30, 3, 1))


def test_a_request_refused_before_login_is_not_decoded(shared_server, caplog):
    """A CreateAcls before login is refused from its header: its malformed body is never read."""
    payload = struct.pack(">hhih", 30, 3, 1, -1) + b"\x00" + b"\xff" * 1000
    with _only_this_connection_closes(shared_server, caplog, "ILLEGAL_SASL_STATE: unexpected CREATE_ACLS request "
                                      "before SASL authentication", listener="SASL_PLAINTEXT") as raw:
        raw.send_bytes(struct.pack(">i", len(payload)) + payload)


def test_a_connection_not_logged_in_in_time_is_closed(serve, caplog):
    """login_timeout_ms bounds the whole phase before login: a SASL client that answered ApiVersions and then
    trickles a frame byte by byte is still closed when the deadline passes (each byte does not extend it)."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", config=ServerConfig(login_timeout_ms=600))
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.api_versions().error_code == 0
        raw.send_bytes(struct.pack(">i", 100))
        closed = False
        for _ in range(40):                   # one byte every 50 ms: far more often than any per-frame timeout
            try:
                raw.send_bytes(b"\x00")
            except OSError:
                closed = True
                break
            time.sleep(0.05)
        assert closed or raw.closed_by_server()
    lines = _log_lines(caplog, raw.local_address)
    assert len(lines) == 1 and "not logged in within 600 ms (login timeout)" in lines[0], lines


def test_connections_from_one_address_beyond_its_cap_are_refused(serve, caplog):
    """max.connections.per.ip (127.0.0.1 is not exempt): with the address's places taken by logged-in connections
    the one over it is closed, the others work."""
    server = serve(config=ServerConfig(max_connections_per_ip=2))
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(server) as a:
        assert a.api_versions().error_code == 0     # logged in before b arrives (one may wait per address)
        b = RawClient.connect(server)
        assert b.api_versions().error_code == 0
        with RawClient.connect(server) as c:
            assert c.closed_by_server()
        lines = _log_lines(caplog, c.local_address)
        assert len(lines) == 1 and "too many connections from 127.0.0.1 (max.connections.per.ip=2)" in lines[0]
        assert a.api_versions().error_code == 0 and b.api_versions().error_code == 0
        b.close()
    wait_for(lambda: not len(server.thread.server.admission), 5,   # once the server has seen the closes (not before)
             "the server frees the closed connections' places")
    with RawClient.connect(server) as d:   # closed connections free their places
        assert d.api_versions().error_code == 0
