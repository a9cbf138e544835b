"""The server at the frame level (tests/serverkit.RawClient): API versions, cluster metadata, the SASL state machine.

Kafka behaviour pinned here comes from clients/.../requests/ApiVersionsRequest.java
(getErrorResponse: UNSUPPORTED_VERSION with a v0 body listing ApiVersions' own range,
KIP-511), security/authenticator/SaslServerAuthenticator.java (only ApiVersions and
SaslHandshake before the handshake, only SaslAuthenticate after it, one message for bad
credentials, legacy v0 raw tokens) and server/KafkaApis (SaslHandshake after authentication
is ILLEGAL_SASL_STATE; DescribeCluster and Metadata describe brokers and the controller).
"""

from __future__ import annotations

import logging
import struct

import pytest
from scramp import ScramClient

from secmeta.core import RequestContext, StoreConfig
from secmeta.core.errors import InvalidValueError
from secmeta.core.server.auth_failures import FailedAuthLimiter
from secmeta.core.server.cluster_apis import AUTHORIZED_OPERATIONS_OMITTED
from secmeta.core.server.config import ServerConfig
from secmeta.core.server.server import Server
from secmeta.core.wire.codec import build, request_class
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.serverkit import ADMIN_PASSWORD, TOKEN_SECRET, RawClient

UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 3, 34, 33
UNSUPPORTED_VERSION, SASL_AUTHENTICATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 35, 58, 29


def _api_versions_frame(version: int, correlation_id: int) -> bytes:
    """An ApiVersions request at a version no kio class describes (header v2, empty body)."""
    client_id = b"probe"
    payload = struct.pack(">hhih", 18, version, correlation_id, len(client_id)) + client_id + b"\x00" + b"\x00"
    return struct.pack(">i", len(payload)) + payload


#: What secmeta serves (issue 11): API key -> (min, max) version, as ApiVersions must list it.
SERVED = {3: (0, 13), 17: (0, 1), 18: (0, 4), 29: (1, 3), 30: (1, 3), 31: (1, 3), 36: (0, 2), 38: (1, 3),
          39: (1, 2), 40: (1, 2), 41: (1, 3), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 60: (0, 2)}


def test_api_versions_lists_every_served_api(shared_server):
    """ApiVersions v3 lists exactly the served keys with their version ranges, throttle time 0."""
    with RawClient.connect(shared_server) as raw:
        response = raw.api_versions(3)
    assert response.error_code == 0
    assert {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys} == SERVED
    assert response.throttle_time.total_seconds() == 0


def test_every_listed_api_has_a_handler():
    """An API advertised without a handler would close the connection of a client that trusts ApiVersions."""
    from secmeta.core.server.apis import AUTH_KEYS, HANDLERS

    assert set(HANDLERS) | AUTH_KEYS == set(SERVED)


def test_unsupported_api_versions_version_falls_back_to_v0(shared_server):
    """An ApiVersions version we do not serve gets UNSUPPORTED_VERSION in a v0 body naming ApiVersions' range,
    and the connection stays open for the client's retry (ApiVersionsRequest.getErrorResponse)."""
    with RawClient.connect(shared_server) as raw:
        raw.send_bytes(_api_versions_frame(9, 77))
        correlation_id, response = raw.receive(18, 0)
        assert correlation_id == 77
        assert response.error_code == UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]
        assert raw.api_versions(0).error_code == 0


def test_api_versions_rejects_an_invalid_client_software_name(shared_server):
    """ApiVersionsRequest.isValid: a software name outside [a-zA-Z0-9.-] is INVALID_REQUEST."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(18, 3), client_software_name="bad name!",
                                     client_software_version="1"))
    assert response.error_code == 42


def _allow_anonymous(server, topic: str, operation: AclOperation) -> None:
    """An ACL (written by the super user) letting User:ANONYMOUS, a PLAINTEXT client, ``operation`` ``topic``."""
    binding = AclBinding.of(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:ANONYMOUS", "*", operation,
                            AclPermissionType.ALLOW)
    assert not any(server.store.create_acls([binding], context=RequestContext("User:admin", "127.0.0.1")))


def test_metadata_describes_this_broker_and_unknown_topics(serve):
    """Metadata v10: this node as broker and controller, the store's id as cluster id, a requested topic the
    caller may DESCRIBE unknown (one it may not is TOPIC_AUTHORIZATION_FAILED: the test below)."""
    server = serve()
    host, port = server.addresses["PLAINTEXT"]
    _allow_anonymous(server, "orders", AclOperation.DESCRIBE)
    request = build(request_class(3, 10), topics=[{"name": "orders", "topic_id": None}],
                    include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    with RawClient.connect(server) as raw:   # PLAINTEXT: User:ANONYMOUS
        response = raw.request(request)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, host, port)]
    assert response.controller_id == 1 and response.cluster_id == server.cluster_id
    assert [(t.name, t.error_code) for t in response.topics] == [("orders", UNKNOWN_TOPIC_OR_PARTITION)]
    assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED


def test_metadata_fills_each_described_topics_authorized_operations_when_asked(serve):
    """Review finding 3. Metadata v8+ with include_topic_authorized_operations: a named topic the caller may describe
    carries the caller's operations on it (KIP-430 bitfield); a topic it may not describe is TOPIC_AUTHORIZATION_FAILED
    and keeps "not requested" (-2147483648), as Kafka's KafkaApis.handleTopicMetadataRequest
    (core/src/main/scala/kafka/server/KafkaApis.scala) sets them on the looked-up topics only; without the flag every
    topic keeps "not requested" (Kafka's DescribeAuthorizedOperationsTest.testTopicAuthorizedOperations:
    core/src/test/scala/integration/kafka/api/DescribeAuthorizedOperationsTest.scala)."""
    server = serve()
    _allow_anonymous(server, "orders", AclOperation.DESCRIBE)
    _allow_anonymous(server, "orders", AclOperation.READ)
    prefixed = AclBinding.of(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:ANONYMOUS", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
    assert not any(server.store.create_acls([prefixed], context=RequestContext("User:admin", "127.0.0.1")))
    expected = (1 << 3) | (1 << 4) | (1 << 8)    # READ (3), WRITE (4), DESCRIBE (8): Kafka's AclOperation codes
    for version in (8, 10, 12):
        topics = [{"name": "orders", "topic_id": None}, {"name": "payroll", "topic_id": None}]
        for asked in (True, False):
            fields = {"include_cluster_authorized_operations": False} if version <= 10 else {}
            request = build(request_class(3, version), topics=topics, include_topic_authorized_operations=asked,
                            **fields)
            with RawClient.connect(server) as raw:   # PLAINTEXT: User:ANONYMOUS
                response = raw.request(request)
            assert [(t.name, t.error_code, t.topic_authorized_operations) for t in response.topics] == [
                ("orders", UNKNOWN_TOPIC_OR_PARTITION, expected if asked else AUTHORIZED_OPERATIONS_OMITTED),
                ("payroll", TOPIC_AUTHORIZATION_FAILED, AUTHORIZED_OPERATIONS_OMITTED)], (version, asked)


@pytest.mark.parametrize("endpoint_type", [0, 3, 127])
def test_describe_cluster_refuses_an_unknown_endpoint_type(shared_server, endpoint_type):
    """AuthHelper.computeDescribeClusterResponse: EndpointType.UNKNOWN is UNSUPPORTED_ENDPOINT_TYPE (v1+)."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(60, 1), include_cluster_authorized_operations=False,
                                     endpoint_type=endpoint_type))
    assert (response.error_code, response.error_message) == (115, f"Unsupported endpoint type {endpoint_type}")
    assert response.brokers == ()


def test_describe_cluster_for_the_controller_endpoint(shared_server):
    """This node is the controller too: endpoint type 2 (CONTROLLER) is answered and echoed."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(60, 1), include_cluster_authorized_operations=False,
                                     endpoint_type=2))
    assert (response.error_code, response.endpoint_type, response.controller_id) == (0, 2, 1)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_without_authorized_operations(shared_server, version):
    """DescribeCluster v0-v2 not asking for operations answers Kafka's 'omitted' value -2147483648."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(60, version), include_cluster_authorized_operations=False,
                                     include_fenced_brokers=False))
    assert response.error_code == 0 and response.cluster_id == shared_server.cluster_id
    assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert [b.broker_id for b in response.brokers] == [1]


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(shared_server):
    """KafkaApis answers SaslHandshake on an authenticated connection with ILLEGAL_SASL_STATE and keeps it open."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256"))
        assert response.error_code == ILLEGAL_SASL_STATE
        assert raw.api_versions().error_code == 0


def test_sasl_login_then_requests_are_served(shared_server):
    """SaslHandshake v1 + SaslAuthenticate v2 with the right password, then Metadata is served."""
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        assert raw.api_versions().error_code == 0
        final = raw.sasl_login("admin", ADMIN_PASSWORD, "SCRAM-SHA-512")
        assert final.error_code == 0 and final.auth_bytes.startswith(b"v=")
        response = raw.request(build(request_class(60, 2), include_cluster_authorized_operations=True,
                                     include_fenced_brokers=False))
    assert response.cluster_authorized_operations not in (0, AUTHORIZED_OPERATIONS_OMITTED)


def test_legacy_handshake_v0_takes_raw_scram_tokens(shared_server):
    """After SaslHandshake v0 the SCRAM messages travel as raw size-prefixed tokens (Kafka's legacy framing)."""
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        assert raw.request(build(request_class(17, 0), mechanism="SCRAM-SHA-256")).error_code == 0
        client = ScramClient(["SCRAM-SHA-256"], "admin", ADMIN_PASSWORD)
        for message in (client.get_client_first, None):
            if message is None:
                token = client.get_client_final().encode()
            else:
                token = message().encode()
            raw.send_bytes(struct.pack(">i", len(token)) + token)
            reply = raw.read_frame().decode()
            if message is not None:
                client.set_server_first(reply)
        client.set_server_final(reply)  # raises if the server's signature is wrong
        assert raw.api_versions().error_code == 0


def _one_close_line(caplog, raw: RawClient, fragment: str) -> str:
    lines = [r.getMessage() for r in caplog.records
             if r.name == "secmeta.server" and r.levelno >= logging.INFO and raw.local_address in r.getMessage()]
    assert len(lines) == 1, lines
    assert fragment in lines[0], lines[0]
    return lines[0]


def test_a_request_before_sasl_authentication_closes_the_connection(shared_server, caplog):
    """On a SASL listener, Metadata before authentication closes the connection; nothing is written."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    before = shared_server.log_end()
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        raw.send(build(request_class(3, 12), topics=None, include_topic_authorized_operations=False))
        assert raw.closed_by_server()
    _one_close_line(caplog, raw, "ILLEGAL_SASL_STATE")
    assert shared_server.log_end() == before


def test_other_requests_during_the_sasl_exchange_get_their_error_response_then_close(shared_server, caplog):
    """After the handshake only SaslAuthenticate is accepted: another request is answered with its own error
    response carrying ILLEGAL_SASL_STATE and Kafka's text, then the connection closes
    (SaslServerAuthenticator.handleSaslToken: buildResponseOnAuthenticateFailure(getErrorResponse(e)))."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    before = shared_server.log_end()
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256")).error_code == 0
        response = raw.request(build(request_class(29, 3), resource_type_filter=1, resource_name_filter=None,
                                     pattern_type_filter=1, principal_filter=None, host_filter=None,
                                     operation=1, permission_type=1))
        assert (response.error_code, response.error_message, response.resources) == (
            ILLEGAL_SASL_STATE, "Unexpected Kafka request of type DESCRIBE_ACLS during SASL authentication.", ())
        assert raw.closed_by_server()
    _one_close_line(caplog, raw, "during SASL authentication")
    assert shared_server.log_end() == before


def test_a_second_api_versions_before_the_handshake_closes(shared_server, caplog):
    """SaslServerAuthenticator.handleApiVersionsRequest takes one ApiVersions (state HANDSHAKE_OR_VERSIONS_REQUEST);
    an answered one moves on to HANDSHAKE_REQUEST, where another ApiVersions closes the connection.
    An unsupported version is answered without moving on, so the client may retry."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        raw.send_bytes(_api_versions_frame(9, 5))
        assert raw.receive(18, 0)[1].error_code == UNSUPPORTED_VERSION
        assert raw.api_versions(3).error_code == 0
        raw.send(build(request_class(18, 3), client_software_name="x", client_software_version="1"))
        assert raw.closed_by_server()
    _one_close_line(caplog, raw, "a second ApiVersions")


def test_sasl_authenticate_on_a_plaintext_listener_is_an_illegal_state(shared_server):
    """KafkaApis.handleSaslAuthenticateRequest answers any SaslAuthenticate that reaches it (the connection is
    authenticated) with ILLEGAL_SASL_STATE and its one text; the connection stays open."""
    with RawClient.connect(shared_server) as raw:
        response = raw.request(build(request_class(36, 2), auth_bytes=b"n,,n=admin,r=abc"))
        assert (response.error_code, response.error_message) == (
            ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
        assert raw.api_versions().error_code == 0


def test_unsupported_mechanism_lists_the_enabled_ones(shared_server, caplog):
    """SaslHandshake for PLAIN answers UNSUPPORTED_SASL_MECHANISM with the enabled mechanisms, then closes."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        response = raw.request(build(request_class(17, 1), mechanism="PLAIN"))
        assert response.error_code == UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.closed_by_server()
    _one_close_line(caplog, raw, "UNSUPPORTED_SASL_MECHANISM")


@pytest.mark.parametrize("user", ["admin", "nobody"])
def test_bad_credentials_answer_kafkas_message(shared_server, caplog, user):
    """A wrong password and an unknown user get the same SASL_AUTHENTICATION_FAILED message, then the close."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    with RawClient.connect(shared_server, "SASL_PLAINTEXT") as raw:
        final = raw.sasl_login(user, "wrong-password", "SCRAM-SHA-256")
        assert final.error_code == SASL_AUTHENTICATION_FAILED
        assert final.error_message == ("Authentication failed during authentication due to invalid credentials "
                                       "with SASL mechanism SCRAM-SHA-256")
        assert raw.closed_by_server()
    line = _one_close_line(caplog, raw, "authentication failed")
    assert "wrong-password" not in line and user not in line.split(": ", 1)[1]


def test_sasl_mechanisms_default_to_those_the_store_enables(serve):
    """A store enabling only SCRAM-SHA-512 offers only it; asking the server to offer SCRAM-SHA-256 is refused at start."""
    config = StoreConfig(token_secret=TOKEN_SECRET, enabled_mechanisms={ScramMechanism.SCRAM_SHA_512})
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", store_config=config)
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        response = raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256"))
    assert (response.error_code, list(response.mechanisms)) == (UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])
    with pytest.raises(InvalidValueError, match="SCRAM-SHA-256 not enabled in the store"):
        Server(server.store, "SASL_PLAINTEXT://127.0.0.1:0",
               ServerConfig(sasl_mechanisms=(ScramMechanism.SCRAM_SHA_256,)))


def test_failed_authentications_are_slowed_per_peer_address():
    """The first failures from an address wait the base delay; a burst beyond the bucket waits 1/rate per failure."""
    now = [100.0]
    limiter = FailedAuthLimiter(0.1, burst=3, rate=2.0, max_pending=10, clock=lambda: now[0])
    assert [limiter.failed("10.0.0.1", None) for _ in range(3)] == [0.1, 0.1, 0.1]
    assert [limiter.failed("10.0.0.1", None) for _ in range(2)] == [0.5, 1.0]
    assert limiter.failed("10.0.0.2", None) == 0.1          # other addresses are not affected
    now[0] += 60
    assert limiter.failed("10.0.0.1", None) == 0.1          # the bucket refills


def test_failed_authentications_are_slowed_per_claimed_user_across_addresses():
    """Guessing one user's password from a new address each time is slowed once that user's burst is spent;
    another user from the same addresses is not."""
    now = [100.0]
    limiter = FailedAuthLimiter(0.1, burst=3, rate=2.0, max_pending=10, clock=lambda: now[0])
    assert [limiter.failed(f"10.0.0.{i}", "alice") for i in range(5)] == [0.1, 0.1, 0.1, 0.5, 1.0]
    assert limiter.failed("10.0.1.1", "bob") == 0.1


def test_held_failures_are_bounded():
    """Past max_pending held failures, hold() says no (the connection is closed at once) until one is released."""
    limiter = FailedAuthLimiter(0.1, burst=3, rate=2.0, max_pending=2)
    assert limiter.hold() and limiter.hold() and not limiter.hold()
    limiter.release()
    assert limiter.hold()


def test_the_limiters_state_is_bounded():
    """A spray of distinct names and addresses keeps at most max_tracked buckets of each; the deepest deficit stays."""
    now = [0.0]
    limiter = FailedAuthLimiter(0.0, burst=2, rate=0.01, max_pending=10, max_tracked=50, clock=lambda: now[0])
    for _ in range(5):
        limiter.failed("10.9.9.9", "victim")
    deficit = limiter.failed("10.9.9.9", "victim")
    for i in range(500):
        limiter.failed(f"10.0.{i // 250}.{i % 250}", f"user-{i}")
    assert limiter.tracked <= 100
    assert limiter.failed("10.9.9.9", "victim") >= deficit


def test_pipelined_requests_are_answered_in_order(shared_server):
    """Several requests sent before any answer is read come back one by one, in request order."""
    with RawClient.connect(shared_server) as raw:
        sent = [(raw.send(build(request_class(60, 2), include_cluster_authorized_operations=False,
                                include_fenced_brokers=False)), 60, 2),
                (raw.send(build(request_class(18, 3), client_software_name="t", client_software_version="1")), 18, 3),
                (raw.send(build(request_class(3, 12), topics=None, include_topic_authorized_operations=False)), 3, 12)]
        for correlation_id, key, version in sent:
            got, response = raw.receive(key, version)
            assert got == correlation_id and getattr(response, "error_code", 0) == 0


TOPIC_AUTHORIZATION_FAILED = 29


@pytest.mark.parametrize("version", [1, 10])
def test_metadata_names_topic_authorization_failed_for_a_topic_the_caller_may_not_describe(serve, version):
    """Kafka's core/src/main/scala/kafka/server/KafkaApis.scala, handleTopicMetadataRequest: the named topics are
    split by DESCRIBE (authHelper.filterByAuthorized); a topic the caller may not DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED without being looked up ("do not disclose the existence of topics unauthorized for
    Describe, so we've not even checked if they exist or not"); only a topic the caller may describe is looked up,
    and unknown (UNKNOWN_TOPIC_OR_PARTITION). The answer must follow the ACLs."""
    server = serve()
    topics = [{"name": n, "topic_id": None} if version >= 10 else {"name": n} for n in ("orders", "payments")]
    extra = ({"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
             if version >= 10 else {})
    request = build(request_class(3, version), topics=topics, **({"allow_auto_topic_creation": False}
                                                                  if version >= 4 else {}), **extra)
    _allow_anonymous(server, "orders", AclOperation.READ)   # READ implies DESCRIBE
    with RawClient.connect(server) as raw:   # PLAINTEXT: User:ANONYMOUS
        response = raw.request(request)
    assert {t.name: int(t.error_code) for t in response.topics} == {
        "orders": UNKNOWN_TOPIC_OR_PARTITION, "payments": TOPIC_AUTHORIZATION_FAILED}
