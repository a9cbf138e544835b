"""Real, unmodified clients against ``secmeta serve``: describe_cluster and SCRAM logins.

librdkafka (confluent-kafka) asks for describe_cluster with Metadata v10 and
include_cluster_authorized_operations; kafka-python sends DescribeCluster v2 (KIP-430).
Both must see this one-node cluster: node 1 is broker and controller, the cluster id is the
store's id, and the authorized operations are the principal's operations on the cluster, or none
without DESCRIBE on it (KafkaApis.handleTopicMetadataRequest, AuthHelper.computeDescribeClusterResponse).
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from secmeta.core import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from secmeta.core.wire.codec import build, request_class
from secmeta.events.types import CLUSTER_NAME
from tests.serverkit import ADMIN, CLIENT_DN, RawClient, add_user

TIMEOUT = 15

#: A super user's operations on the cluster: every operation Kafka's AclEntry.supportedOperations(CLUSTER) lists.
EVERY_CLUSTER_OPERATION = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
                           "ALTER", "DESCRIBE"}


def _describe(config: dict):
    admin = AdminClient(config)
    return admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=TIMEOUT)


def _check_cluster(result, server, listener: str) -> None:
    host, port = server.addresses[listener]
    assert result.cluster_id == server.cluster_id
    assert result.controller.id == server.node_id
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(server.node_id, host, port)]


def test_describe_cluster_over_plaintext_is_anonymous(shared_server):
    """PLAINTEXT: the cluster is described; User:ANONYMOUS holds no cluster operations."""
    result = _describe(shared_server.confluent_config("PLAINTEXT"))
    _check_cluster(result, shared_server, "PLAINTEXT")
    assert not result.authorized_operations


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_describe_cluster_over_sasl_as_super_user(shared_server, listener, mechanism):
    """SASL with SCRAM as User:admin (a super user): every cluster operation librdkafka can name."""
    result = _describe(shared_server.confluent_config(listener, "admin", mechanism=mechanism))
    _check_cluster(result, shared_server, listener)
    assert {op.name for op in result.authorized_operations} == EVERY_CLUSTER_OPERATION


def test_describe_cluster_over_ssl_without_a_certificate(shared_server):
    """SSL without a client certificate is User:ANONYMOUS."""
    result = _describe(shared_server.confluent_config("SSL"))
    _check_cluster(result, shared_server, "SSL")
    assert not result.authorized_operations


def test_ssl_client_certificate_subject_is_the_principal(serve):
    """SSL with a client certificate is User:<subject DN as Kafka prints it>; its ACLs decide the operations."""
    server = serve("SSL://127.0.0.1:0", client_auth="required")
    principal = f"User:{CLIENT_DN}"
    errors = server.store.create_acls([AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL,
                                                     principal, "*", AclOperation.DESCRIBE,
                                                     AclPermissionType.ALLOW)], context=ADMIN)
    assert not any(errors)
    result = _describe(server.confluent_config("SSL", **{"ssl.certificate.location": str(server.ca.client_cert),
                                                         "ssl.key.location": str(server.ca.client_key)}))
    _check_cluster(result, server, "SSL")
    assert {op.name for op in result.authorized_operations} == {"DESCRIBE"}


def test_kafka_python_describe_cluster_over_sasl_ssl(shared_server):
    """kafka-python's KafkaAdminClient uses DescribeCluster v2 and shows every KIP-430 bit (also CREATE_TOKENS...)."""
    admin = KafkaAdminClient(**shared_server.kafka_python_config("SASL_SSL", "admin", mechanism="SCRAM-SHA-512"))
    try:
        result = admin.describe_cluster()
    finally:
        admin.close()
    host, port = shared_server.addresses["SASL_SSL"]
    assert result["cluster_id"] == shared_server.cluster_id
    assert result["controller_id"] == shared_server.node_id
    assert [(b["broker_id"], b["host"], b["port"]) for b in result["brokers"]] == [(shared_server.node_id, host, port)]
    assert {getattr(op, "name", str(op)) for op in result["authorized_operations"]} == EVERY_CLUSTER_OPERATION


def test_without_describe_on_the_cluster_no_operation_is_shown(serve):
    """ALTER_CONFIGS (which implies DESCRIBE_CONFIGS, not DESCRIBE) on the cluster: Kafka answers 0 for the
    cluster's authorized operations, through Metadata v10 (librdkafka) and DescribeCluster (KafkaApis)."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0")
    add_user(server.store, "carol", "carol-pw")
    errors = server.store.create_acls([AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL,
                                                     "User:carol", "*", AclOperation.ALTER_CONFIGS,
                                                     AclPermissionType.ALLOW)], context=ADMIN)
    assert not any(errors)
    result = _describe(server.confluent_config("SASL_PLAINTEXT", "carol", "carol-pw"))
    assert not result.authorized_operations
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.sasl_login("carol", "carol-pw").error_code == 0
        response = raw.request(build(request_class(60, 2), include_cluster_authorized_operations=True,
                                     include_fenced_brokers=False))
    assert (response.error_code, response.cluster_authorized_operations) == (0, 0)


def _login_errors(config: dict) -> list[KafkaError]:
    errors: list[KafkaError] = []
    config = {**config, "error_cb": errors.append}
    admin = AdminClient(config)
    with pytest.raises(KafkaException):
        admin.describe_cluster(request_timeout=3).result(timeout=TIMEOUT)
    admin.poll(1)  # error_cb is served from poll()
    return errors


def test_a_user_created_through_the_store_logs_in_with_scram_sha_512(serve):
    """A password set with alter_user_scram_credentials logs in at once (SASL_SSL, SCRAM-SHA-512)."""
    server = serve("SASL_SSL://127.0.0.1:0")
    add_user(server.store, "alice", "alice-pw")
    result = _describe(server.confluent_config("SASL_SSL", "alice", "alice-pw", mechanism="SCRAM-SHA-512"))
    _check_cluster(result, server, "SASL_SSL")
    assert not result.authorized_operations  # alice holds no ACLs


def _auth_failure(errors: list[KafkaError]) -> str:
    failures = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert failures, errors
    # librdkafka appends "(after N ms in state AUTH_REQ)": the only part allowed to differ.
    return re.sub(r"\(after \d+ms in state [A-Z_]+\)", "(after ...)", failures[0].str())


def test_wrong_password_and_unknown_user_fail_alike(shared_server):
    """SaslServerAuthenticator's one message for bad credentials: an unknown user looks like a wrong password."""
    wrong = _auth_failure(_login_errors(shared_server.confluent_config("SASL_SSL", "admin", "not-the-password",
                                                                       mechanism="SCRAM-SHA-512")))
    unknown = _auth_failure(_login_errors(shared_server.confluent_config("SASL_SSL", "nobody", "not-the-password",
                                                                         mechanism="SCRAM-SHA-512")))
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512") in wrong
    assert wrong == unknown
