"""A replicated writer whose Kafka stalls (Tansu stopped with SIGSTOP) while writes wait on their commit: what the
server's other clients see (review finding 2). The writes wait in a pool of their own, so a token login (PBKDF2, off
the event loop) and a DescribeAcls that scans every ACL still answer while they wait, and a write whose requester
lacks the right is refused at once instead of queueing for the store's lock behind them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from secmeta.consumers.kafka.replication.node import ReplicatedNode
from secmeta.consumers.kafka.replication.settings import ReplicationSettings
from secmeta.core.errors import ErrorCode
from secmeta.core.store.commit_gate import NotWriterGate
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


def test_a_stalled_kafka_commit_holds_no_login_read_or_unauthorized_write(stoppable_broker, tmp_path):
    broker, bootstrap = stoppable_broker
    with running_server(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0") as srv:
        store = srv.store
        store.set_commit_gate(NotWriterGate())
        settings = ReplicationSettings(bootstrap, replication_factor=1, min_insync_replicas=1,
                                       timeout_s=COMMIT_TIMEOUT_S)
        with ReplicatedNode(store, settings) as node:
            node.become_writer()
            token = store.create_delegation_token(context=ADMIN)    # committed through Kafka while it answers
            writers = []
            for _ in range(STALLED_WRITES):
                raw = RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S + 30)
                assert raw.sasl_login("admin", ADMIN_PASSWORD).error_code == 0
                writers.append(raw)
            end = store.log.end_offset
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                for i, raw in enumerate(writers):
                    raw.send(_create_acls_request(f"stalled-{i}"))
                time.sleep(1.0)             # every write is in the server, waiting on its commit
                assert store.log.end_offset == end

                started = time.monotonic()
                with RawClient.connect(srv, "SASL_PLAINTEXT", timeout=COMMIT_TIMEOUT_S) as raw:
                    assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256")).error_code == 0
                    client = token_login("SCRAM-SHA-256", token.token_id, token.hmac)
                    first = raw.request(build(request_class(36, 2), auth_bytes=client.first().encode()))
                    final = raw.request(build(request_class(36, 2), auth_bytes=client.final(first.auth_bytes).encode()))
                    assert final.error_code == 0
                    logged_in = time.monotonic() - started
                    # a filter without a name may scan every ACL: answered off the event loop
                    described = raw.request(build(request_class(29, 3), **convert.filter_fields(AclBindingFilter())))
                    assert described.error_code == 0
                    read = time.monotonic() - started
                with RawClient.connect(srv, "PLAINTEXT", timeout=COMMIT_TIMEOUT_S) as anonymous:
                    refused = anonymous.request(_create_acls_request("not-allowed")).results[0]
                    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    unauthorized = time.monotonic() - started
                assert store.log.end_offset == end     # the stall went on meanwhile
                assert (logged_in, read, unauthorized) < (PROMPT_S, PROMPT_S, PROMPT_S), \
                    f"answered after {logged_in:.1f} s, {read:.1f} s and {unauthorized:.1f} s of a stalled commit"
            finally:
                os.kill(broker.pid, signal.SIGCONT)
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
