"""A held failed login is answered when its hold ends, never sooner (issue 22's review findings).

The failure delay is the only brake on a guesser (failures are slowed, never refused), so nothing may end a
hold early: a newer connection from the same address may not evict it (the guesser's own reconnect would
free it at once), and the 5 s login deadline does not cut it (the delay goes up to 10 s).  Held failures are
out of the before-login class and stay until answered.  A token login's PBKDF2 runs on a worker thread,
which hands its result back to the event loop instead of writing the connection's state itself.
"""

from __future__ import annotations

import threading

import pytest

from secmeta.core import RequestContext
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.sasl import Authenticator
from secmeta.core.wire.codec import build, request_class
from secmeta.core.wire.scram_client import token_login
from tests.core.server.test_server_login_limits import (
    SASL_AUTHENTICATION_FAILED,
    USERS,
    _start_exchange,
)
from tests.serverkit import RawClient, running_server

#: One second's hold, one before-login connection per address, three connections per address.
HOLD = ServerConfig(failed_authentication_delay_ms=1000, max_connections_per_ip=3,
                    max_connections_before_login_per_ip=1)


@pytest.fixture(scope="module")
def held_server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("held"), "SASL_PLAINTEXT://127.0.0.1:0", config=HOLD,
                        users=USERS) as running:
        yield running


def _fail(server, source: str) -> RawClient:
    """A wrong password for alice from ``source``, sent: the server now holds the failure."""
    raw, client = _start_exchange(server, "alice", source)
    raw.send(build(request_class(36, 2), auth_bytes=client.get_client_final().encode()))
    return raw


def _answered_as_failed(raw: RawClient) -> bool:
    """True if the held connection gets SASL_AUTHENTICATION_FAILED (not a close without an answer)."""
    raw.sock.settimeout(15)
    try:
        _, response = raw.receive(36, 2)
    except ConnectionError:
        return False
    return response.error_code == SASL_AUTHENTICATION_FAILED


def test_a_newer_connection_does_not_evict_a_held_failure(held_server):
    """Found in review: with one before-login connection per address, a guesser's reconnect evicted its own held
    failure, so it learnt "wrong" at once and the hold cost nothing. Now the held failure is answered after its
    hold, and the reconnect is served (it logs in)."""
    with _fail(held_server, "127.0.3.1") as held:
        with RawClient.connect(held_server, "SASL_PLAINTEXT", source="127.0.3.1") as again:
            assert again.api_versions().error_code == 0
            assert again.sasl_login("admin", USERS["admin"]).error_code == 0
        assert _answered_as_failed(held)


def test_an_address_whose_connections_are_held_gets_no_more(held_server):
    """Held failures count against max_connections_per_ip (3) and cannot be evicted: a fourth connection from an
    address holding three failures is refused (closed at once), and each held failure is still answered."""
    helds = [_fail(held_server, "127.0.3.2") for _ in range(3)]
    try:
        with RawClient.connect(held_server, "SASL_PLAINTEXT", source="127.0.3.2") as fourth:
            assert fourth.closed_by_server()
        assert all(_answered_as_failed(held) for held in helds)
    finally:
        for held in helds:
            held.close()


def test_the_login_deadline_does_not_cut_a_hold(serve):
    """Found in review: a hold longer than the login deadline (login_timeout_ms) was cut by it, unanswered. The
    deadline covers the phase up to the evaluated failure; the hold after it is bounded by the failure delay's
    own maximum (FailedAuthLimiter.MAX_DELAY_S), so the failure is answered after its whole hold."""
    config = ServerConfig(failed_authentication_delay_ms=1000, login_timeout_ms=300)
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", config=config, users=USERS)
    with _fail(server, "127.0.0.1") as held:
        assert _answered_as_failed(held)


def test_a_token_logins_worker_leaves_the_connection_state_to_the_event_loop(serve, monkeypatch):
    """Found in review: the worker thread deriving a token's credential wrote the connection's claimed_user and
    exchange state while the event loop read them. Every write to a connection's Authenticator during a real
    token login over TCP now happens on the event loop's thread, never on a worker thread."""
    writers: set[str] = set()
    original = Authenticator.__setattr__

    def recording(self, name, value):
        writers.add(threading.current_thread().name)
        original(self, name, value)

    server = serve("SASL_PLAINTEXT://127.0.0.1:0", users=USERS)
    token = server.store.create_delegation_token(context=RequestContext("User:alice", "127.0.0.1"))
    monkeypatch.setattr(Authenticator, "__setattr__", recording)
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256")).error_code == 0
        client = token_login("SCRAM-SHA-256", token.token_id, token.hmac)
        first = raw.request(build(request_class(36, 2), auth_bytes=client.first().encode()))
        assert first.error_code == 0
        final = raw.request(build(request_class(36, 2), auth_bytes=client.final(first.auth_bytes).encode()))
        assert final.error_code == 0
    assert writers == {"secmeta-serve-loop"}        # the event loop's thread (workers are secmeta-serve_N)
