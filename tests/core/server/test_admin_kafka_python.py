"""kafka-python's KafkaAdminClient administers ACLs and SCRAM credentials on ``secmeta serve`` over SASL_SSL.

kafka-python sends CreateAcls/DescribeAcls/DeleteAcls v3, so it can express the DELEGATION_TOKEN and USER
resource types and the CREATE_TOKENS / DESCRIBE_TOKENS operations that librdkafka cannot.  What Kafka does:
AclApis.handleCreateAcls / handleDescribeAcls / handleDeleteAcls (core/src/main/scala/kafka/server/AclApis.scala)
and the requests' getErrorResponse for request-level failures; ScramControlManager.alterCredentials and
KafkaApis.handleDescribeUserScramCredentialsRequest for SCRAM (kafka-python raises on DescribeAcls' and
DescribeUserScramCredentials' top-level errors, e.g. ClusterAuthorizationFailedError).
"""

from __future__ import annotations

import pytest
from kafka import errors as kerrors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from secmeta.core.errors import ErrorCode
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
)
from secmeta.events.types import ResourceType as RT
from secmeta.events.types import ScramMechanism as SM
from tests.serverkit import ADMIN, RawClient

LISTENERS = "SASL_SSL://127.0.0.1:0"


@pytest.fixture
def server(serve):
    return serve(LISTENERS, users={"admin": "admin-secret", "bob": "bob-secret"})


@pytest.fixture
def admin_factory(server):
    clients = []

    def make(user="admin", mechanism="SCRAM-SHA-512"):
        client = KafkaAdminClient(**server.kafka_python_config("SASL_SSL", user, mechanism=mechanism))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def _acl(b: AclBinding) -> ACL:
    return ACL(b.principal, b.host, ACLOperation(int(b.operation)), ACLPermissionType(int(b.permission_type)),
               ResourcePattern(ResourceType(int(b.restype)), b.name, ACLResourcePatternType(int(b.resource_pattern_type))))


def _filter(f: AclBindingFilter) -> ACLFilter:
    return ACLFilter(f.entry.principal, f.entry.host, ACLOperation(int(f.entry.operation)),
                     ACLPermissionType(int(f.entry.permission_type)),
                     ResourcePatternFilter(ResourceType(int(f.pattern.resource_type)), f.pattern.name,
                                           ACLResourcePatternType(int(f.pattern.pattern_type))))


def _ours(acl: ACL) -> AclBinding:
    p = acl.resource_pattern
    return AclBinding.of(RT(int(p.resource_type)), p.resource_name, PatternType(int(p.pattern_type)), acl.principal,
                         acl.host, AclOperation(int(acl.operation)), AclPermissionType(int(acl.permission_type)))


TOKEN_ACLS = [
    AclBinding.of(RT.USER, "User:carol", PatternType.LITERAL, "User:alice", "*", AclOperation.CREATE_TOKENS,
                  AclPermissionType.ALLOW),
    AclBinding.of(RT.USER, "User:", PatternType.PREFIXED, "User:ops", "*", AclOperation.DESCRIBE_TOKENS,
                  AclPermissionType.ALLOW),
    AclBinding.of(RT.DELEGATION_TOKEN, "token-1", PatternType.LITERAL, "User:bob", "*", AclOperation.DESCRIBE,
                  AclPermissionType.ALLOW),
    AclBinding.of(RT.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                  AclPermissionType.ALLOW),
]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_user_and_delegation_token_acls_round_trip(server, admin_factory, mechanism):
    """USER and DELEGATION_TOKEN resources with CREATE_TOKENS / DESCRIBE_TOKENS: create, describe, delete."""
    admin = admin_factory(mechanism=mechanism)
    created = admin.create_acls([_acl(b) for b in TOKEN_ACLS])
    assert created["failed"] == [] and len(created["succeeded"]) == len(TOKEN_ACLS)
    assert set(server.store.describe_acls(AclBindingFilter.any(), context=ADMIN)) == set(TOKEN_ACLS)

    users, error = admin.describe_acls(_filter(AclBindingFilter.of(RT.USER)))
    assert error is kerrors.NoError and {_ours(a) for a in users} == set(TOKEN_ACLS[:2])
    matched, _ = admin.describe_acls(_filter(AclBindingFilter.of(RT.USER, "User:carol", PatternType.MATCH)))
    assert {_ours(a) for a in matched} == set(TOKEN_ACLS[:2])
    tokens, _ = admin.describe_acls(_filter(AclBindingFilter.of(operation=AclOperation.DESCRIBE)))
    assert {_ours(a) for a in tokens} == {TOKEN_ACLS[2]}

    [(_, removed, error)] = admin.delete_acls([_filter(AclBindingFilter.of(RT.DELEGATION_TOKEN))])
    assert error is kerrors.NoError and [_ours(a) for a in removed] == [TOKEN_ACLS[2]]
    [(_, removed, _)] = admin.delete_acls([_filter(AclBindingFilter.of(RT.USER, None, PatternType.ANY))])
    assert {_ours(a) for a in removed} == set(TOKEN_ACLS[:2])
    assert server.store.describe_acls(AclBindingFilter.any(), context=ADMIN) == [TOKEN_ACLS[3]]


def test_invalid_acls_fail_per_item(server, admin_factory):
    """A principal without a colon is INVALID_REQUEST for that item only; the valid one beside it is created."""
    admin = admin_factory()
    bad = AclBinding.of(RT.TOPIC, "t", PatternType.LITERAL, "alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    result = admin.create_acls([_acl(TOKEN_ACLS[0]), _acl(bad)])
    assert len(result["succeeded"]) == 1 and result["failed"] == [kerrors.InvalidRequestError]


def test_scram_alter_and_describe(server, admin_factory):
    """Upsert (kafka-python salts the password), describe, delete, and per-user errors."""
    admin = admin_factory()
    results = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256, "carol-pw", iterations=8192),
        UserScramCredentialUpsertion("dan", ScramMechanism.SCRAM_SHA_512, "dan-pw", iterations=100),
        UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512),
    ])
    assert results["carol"] is None
    assert results["dan"].startswith("Too few iterations")
    assert "does not exist" in results["erin"]
    described = admin.describe_user_scram_credentials(["carol", "dan"])
    assert described["carol"] == {"error": None, "credential_infos": [
        {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 8192}]}
    assert described["dan"]["error"] == "Attempt to describe a user credential that does not exist: dan"
    assert set(admin.describe_user_scram_credentials()) == {"admin", "bob", "carol"}
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]) == {"carol": None}
    ours = server.store.describe_user_scram_credentials(["carol"], context=ADMIN)
    assert ours["carol"].code == ErrorCode.RESOURCE_NOT_FOUND


def test_a_credential_set_by_kafka_python_logs_in(server, admin_factory):
    """The salted password kafka-python sends becomes a credential that SCRAM-SHA-512 accepts at once."""
    admin = admin_factory()
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("frank", ScramMechanism.SCRAM_SHA_512, "frank-pw", iterations=4096)]) == {"frank": None}
    with RawClient.connect(server, "SASL_SSL") as raw:
        assert int(raw.sasl_login("frank", "frank-pw", "SCRAM-SHA-512").error_code) == 0
    assert server.store.describe_user_scram_credentials(["frank"], context=ADMIN)["frank"].scram_credential_infos[0].mechanism == SM.SCRAM_SHA_512


def test_without_cluster_permissions_kafka_python_sees_cluster_authorization_failed(server, admin_factory):
    """User:bob: describes raise ClusterAuthorizationFailedError (top-level); changes fail per item."""
    bob = admin_factory("bob")
    with pytest.raises(kerrors.ClusterAuthorizationFailedError):
        bob.describe_acls(_filter(AclBindingFilter.any()))
    with pytest.raises(kerrors.ClusterAuthorizationFailedError):
        bob.describe_user_scram_credentials()
    assert bob.create_acls([_acl(TOKEN_ACLS[0])])["failed"] == [kerrors.ClusterAuthorizationFailedError]
    [(_, _, error)] = bob.delete_acls([_filter(AclBindingFilter.any())])
    assert error is kerrors.ClusterAuthorizationFailedError
    results = bob.alter_user_scram_credentials([UserScramCredentialDeletion("admin", ScramMechanism.SCRAM_SHA_256)])
    assert results == {"admin": "Principal User:bob is not authorized to ALTER on the cluster"}
