"""A replicated writer whose Kafka stalls (Tansu stopped with SIGSTOP) while writes wait on their commit: what the
server's other clients see (review finding 2). The writes wait in a pool of their own, so a token login (PBKDF2, off
the event loop) and a DescribeAcls that scans every ACL still answer while they wait, and a write whose requester
lacks the right is refused at once instead of queueing for the store's lock behind them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core.errors import ErrorCode
from secmeta.core.store.commit_gate import NotWriterGate
from secmeta.core.types import DelegationToken
from secmeta.core.wire import convert
from secmeta.core.wire.codec import build, decode_response, request_class
from secmeta.core.wire.scram_client import token_login
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.chaoskit import tansu_process
from tests.serverkit import ADMIN, ADMIN_PASSWORD, RawClient, running_server
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.server]

COMMIT_TIMEOUT_S = 20   # a stalled commit fails after this; every answer asserted below must come well before it
PROMPT_S = 5.0
STALLED_WRITES = 12     # more than the server's 8 workers


@pytest.fixture
def stoppable_broker(tmp_path):
    """A Tansu broker of this test's own, which the test stops (SIGSTOP) and resumes."""
    with tansu_process(tmp_path) as broker:
        yield broker


def _binding(name: str) -> AclBinding:
    return AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)


def _create_acls_request(name: str):
    return build(request_class(30, 3), creations=[convert.acl_creation_fields(_binding(name))])


@contextmanager
def _stalled_writes(broker, srv) -> Iterator[tuple[DelegationToken, int]]:
    """The server's store the writer of a log topic on ``broker``, with a token issued through it, then
    STALLED_WRITES writes in flight while the broker is stopped (SIGSTOP); yields the token and the log's end.
    Afterwards the broker resumes and every stalled write is read off."""
    store = srv.store
    store.set_commit_gate(NotWriterGate())
    settings = ReplicationSettings(broker[1], replication_factor=1, min_insync_replicas=1, timeout_s=COMMIT_TIMEOUT_S)
    with ReplicatedNode(store, settings) as node:
        node.become_writer()
        token = store.create_delegation_token(context=ADMIN)    # committed through Kafka while it answers
        writers = []
        for _ in range(STALLED_WRITES):
            raw = RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S + 30)
            assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
            writers.append(raw)
        end = store.log.end_offset
        os.kill(broker[0].pid, signal.SIGSTOP)
        try:
            for i, raw in enumerate(writers):
                raw.send(_create_acls_request(f"stalled-{i}"))
            time.sleep(1.0)             # every write is in the server, waiting on its commit
            assert store.log.end_offset == end
            yield token, end
            assert store.log.end_offset == end     # the stall went on meanwhile
        finally:
            os.kill(broker[0].pid, signal.SIGCONT)
            done = threading.Event()

            def drain() -> None:
                for raw in writers:
                    try:
                        decode_response(30, 3, raw.read_frame())
                    except OSError:
                        pass
                    raw.close()
                done.set()

            threading.Thread(target=drain, daemon=True).start()
            done.wait(COMMIT_TIMEOUT_S + 30)


def _token_session(srv, token: DelegationToken) -> RawClient:
    raw = RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S)
    assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256")).error_code == 0
    client = token_login("SCRAM-SHA-256", token.token_id, token.hmac)
    first = raw.request(build(request_class(36, 2), auth_bytes=client.first().encode()))
    assert raw.request(build(request_class(36, 2), auth_bytes=client.final(first.auth_bytes).encode())).error_code == 0
    return raw


def test_a_stalled_kafka_commit_holds_no_login_read_or_unauthorized_write(stoppable_broker, tmp_path):
    with running_server(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0") as srv, \
            _stalled_writes(stoppable_broker, srv) as (token, end):
        started = time.monotonic()
        with _token_session(srv, token) as raw:
            logged_in = time.monotonic() - started
            # a filter without a name may scan every ACL: answered off the event loop
            described = raw.request(build(request_class(29, 3), **convert.filter_fields(AclBindingFilter())))
            assert described.error_code == 0
            read = time.monotonic() - started
        with RawClient.connect(srv, "PLAINTEXT", timeout=COMMIT_TIMEOUT_S) as anonymous:
            refused = anonymous.request(_create_acls_request("not-allowed")).results[0]
            assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            unauthorized = time.monotonic() - started
        assert (logged_in, read, unauthorized) < (PROMPT_S, PROMPT_S, PROMPT_S), \
            f"answered after {logged_in:.1f} s, {read:.1f} s and {unauthorized:.1f} s of a stalled commit"


def test_a_token_request_its_connection_may_not_make_is_refused_at_once_during_a_stall(stoppable_broker, tmp_path):
    """Review finding 3: a token write a connection may not make at all (Kafka's allowTokenRequests, asked before
    anything else by KafkaApis/ControllerApis handleCreate/Renew/ExpireDelegationTokenRequest) is refused before it
    queues: a token-authenticated session's CreateDelegationToken and an anonymous PLAINTEXT connection's Renew and
    Expire are answered DELEGATION_TOKEN_REQUEST_NOT_ALLOWED at once while every write worker waits on a stalled
    commit, and nothing is written."""
    with running_server(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0") as srv, \
            _stalled_writes(stoppable_broker, srv) as (token, end):
        started = time.monotonic()
        with _token_session(srv, token) as raw:
            created = raw.request(build(request_class(38, 3), owner_principal_type=None,
                                              owner_principal_name=None, renewers=[], max_lifetime=-1))
        with RawClient.connect(srv, "PLAINTEXT", timeout=COMMIT_TIMEOUT_S) as anonymous:
            renewed = anonymous.request(build(request_class(39, 2), hmac=token.hmac, renew_period=-1))
            expired = anonymous.request(build(request_class(40, 2), hmac=token.hmac, expiry_time_period=-1))
        took = time.monotonic() - started
        assert [r.error_code for r in (created, renewed, expired)] == \
            [ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED] * 3
        assert took < PROMPT_S, f"answered after {took:.1f} s of a stalled commit"


def test_writes_past_the_write_bound_are_answered_timed_out_and_never_committed(stoppable_broker, tmp_path):
    """Review finding 2: queued writes are bounded. With one write worker stalled on its commit (Tansu stopped),
    a write that finds ``write_queue_max`` writes pending is held back and answered REQUEST_TIMED_OUT at its
    timeout while the stall goes on, and one that waited past ``write_timeout_ms`` for the worker is answered
    REQUEST_TIMED_OUT when the stall ends, without running.
    Kafka's controller does the same with a write it cannot start in time: ControllerApis gives each request a
    deadline (``requestTimeoutMsToDeadlineNs`` from its ``timeoutMs``, ControllerRequestContext.deadlineNs), and
    EventQueue.appendWithDeadline completes an event not run by its deadline with a TimeoutException (the
    client's REQUEST_TIMED_OUT). Neither is committed, after the stall either: the log holds the stalled write
    alone."""
    from secmeta.core.server.config import ServerConfig

    broker, bootstrap = stoppable_broker
    bounded = ServerConfig(write_workers=1, write_queue_max=3, write_timeout_ms=1500)
    with running_server(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0", config=bounded) as srv:
        store = srv.store
        store.set_commit_gate(NotWriterGate())
        settings = ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1,
                                       timeout_s=COMMIT_TIMEOUT_S)
        with ReplicatedNode(store, settings) as node:
            node.become_writer()
            clients = {}
            for name in ("stalled", "waits-too-long", "waits-too", "finds-it-full"):
                raw = clients[name] = RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S + 30)
                assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
            end = store.log.end_offset
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                clients["stalled"].send(_create_acls_request("stalled"))
                time.sleep(0.5)             # on the one worker, waiting on its commit
                clients["waits-too-long"].send(_create_acls_request("waits-too-long"))
                clients["waits-too"].send(_create_acls_request("waits-too"))
                bound = srv.thread.server.write_bound
                wait_for(lambda: bound.pending == 3, PROMPT_S, "the three writes to hold a slot")   # the next is held
                full = clients["finds-it-full"]
                full.send(_create_acls_request("finds-it-full"))
                full.sock.settimeout(PROMPT_S + 1.5)
                answer = decode_response(30, 3, full.read_frame())[1].results[0]   # while the broker is stopped
                assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
                assert "write_queue_max" in answer.error_message and "(1500 ms" in answer.error_message
                # the two queued writes came before it: they are past write_timeout_ms too
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            codes = {name: decode_response(30, 3, clients[name].read_frame())[1].results[0].error_code
                     for name in ("stalled", "waits-too-long", "waits-too")}
            assert codes == {"stalled": ErrorCode.NONE, "waits-too-long": ErrorCode.REQUEST_TIMED_OUT,
                             "waits-too": ErrorCode.REQUEST_TIMED_OUT}
            with RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S) as after:
                assert after.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
                after.request(_create_acls_request("after"))     # one more commit: nothing was left queued
            time.sleep(0.5)
            names = {b.pattern.name for b in store.describe_acls(AclBindingFilter(), context=ADMIN)}
            assert names & {"stalled", "waits-too-long", "waits-too", "finds-it-full", "after"} == {"stalled", "after"}
            assert store.log.end_offset == end + 2
            for raw in clients.values():
                raw.close()
