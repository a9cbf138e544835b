"""confluent-kafka's AdminClient (librdkafka) administers ACLs and SCRAM credentials on ``secmeta serve``.

What Kafka does and these tests hold the server to:
- AclApis.handleCreateAcls / handleDeleteAcls (core/src/main/scala/kafka/server/AclApis.scala) check
  CLUSTER ALTER first (AuthHelper.authorizeClusterOperation); the exception becomes
  CreateAclsRequest.getErrorResponse / DeleteAclsRequest.getErrorResponse: the error on every item.
- AclApis.handleDescribeAcls checks CLUSTER DESCRIBE; DescribeAclsRequest.getErrorResponse puts the
  error at the top level with no resources (librdkafka ignores that code: checked with a raw request).
- KafkaApis.handleDescribeUserScramCredentialsRequest and DescribeUserScramCredentialsRequest.getErrorResponse
  (top level and per user); ControllerApis.handleAlterUserScramCredentials and
  AlterUserScramCredentialsRequest.getErrorResponse (one result per user);
  ScramControlManager.alterCredentials for the per-user codes (RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, ...).
- Kafka's AclAuthorizerTest / StandardAuthorizerTest filter semantics (ANY, MATCH, LITERAL, PREFIXED) are the
  store's; here the wire answer must equal the store's own answer for each filter.
- AclControlManager.deleteAcls / deleteAclsForFilter (metadata/src/main/java/org/apache/kafka/controller): each
  filter lists every binding it matches in the ACLs as they stood before the request (records are only replayed
  afterwards), so a binding two filters match is listed under both; the removal records are a set, so it is
  removed once (AclControlManagerTest.testDeleteDedupe: two filters, one record, two results).

The ACL and SCRAM tests run on each way in: PLAINTEXT as User:ANONYMOUS (granted CLUSTER ALTER and DESCRIBE
by ACL, plaintext passwords allowed: KIP-506's TLS rule is tested on its own), and SASL_SSL logged in as admin
with SCRAM-SHA-256 and with SCRAM-SHA-512.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import admin as ck

from secmeta.core import ScramCredentialInfo, StoreConfig
from secmeta.core.errors import ErrorCode
from secmeta.core.wire import convert
from secmeta.core.wire.codec import build, request_class
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.adminkit import TIMEOUT, ck_binding, ck_filter, code_of, from_ck, result_codes
from tests.serverkit import ADMIN, TOKEN_SECRET, RawClient, add_user

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

BINDINGS = [
    AclBinding.of(T, "orders-eu", LIT, "User:alice", "*", AclOperation.READ, ALLOW),
    AclBinding.of(T, "orders-", PRE, "User:alice", "*", AclOperation.WRITE, ALLOW),
    AclBinding.of(T, "*", LIT, "User:bob", "10.0.0.1", AclOperation.DESCRIBE, DENY),
    AclBinding.of(T, "payments", LIT, "User:bob", "*", AclOperation.READ, ALLOW),
    AclBinding.of(G, "orders-", PRE, "User:alice", "*", AclOperation.READ, ALLOW),
    AclBinding.of(C, CLUSTER_NAME, LIT, "User:ops", "*", AclOperation.ALTER, ALLOW),
    AclBinding.of(X, "tx-1", LIT, "User:*", "*", AclOperation.WRITE, DENY),
]

FILTERS = {
    "any": AclBindingFilter.any(),
    "match": AclBindingFilter.of(T, "orders-eu", PatternType.MATCH),
    "match-other-name": AclBindingFilter.of(T, "payments", PatternType.MATCH),
    "literal": AclBindingFilter.of(T, "orders-eu", LIT),
    "literal-wildcard": AclBindingFilter.of(T, "*", LIT),
    "prefixed": AclBindingFilter.of(ResourceType.ANY, "orders-", PRE),
    "pattern-any-name": AclBindingFilter.of(T, "orders-", PatternType.ANY),
    "principal": AclBindingFilter.of(principal="User:bob"),
    "host": AclBindingFilter.of(host="10.0.0.1"),
    "operation": AclBindingFilter.of(operation=AclOperation.READ),
    "permission": AclBindingFilter.of(permission_type=DENY),
    "cluster": AclBindingFilter.of(C),
    "none": AclBindingFilter.of(G, "nothing", LIT),
}


USERS = {"admin": "admin-secret", "bob": "bob-secret"}
ANONYMOUS_GRANTS = frozenset(AclBinding.of(C, CLUSTER_NAME, LIT, "User:ANONYMOUS", "*", op, ALLOW)
                             for op in (AclOperation.ALTER, AclOperation.DESCRIBE))


@pytest.fixture
def server(serve):
    return serve(LISTENERS, users=USERS)


@dataclass(frozen=True)
class Wire:
    server: object
    admin: ck.AdminClient
    grants: frozenset[AclBinding]     # the ACLs the fixture created to let this principal administer


@pytest.fixture(params=[("PLAINTEXT", None), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")],
                ids=["PLAINTEXT", "SASL_SSL-SCRAM-SHA-256", "SASL_SSL-SCRAM-SHA-512"])
def wire(serve, request):
    """An AdminClient with the cluster rights on one way in (see the module docstring)."""
    listener, mechanism = request.param
    plaintext = listener == "PLAINTEXT"
    server = serve(LISTENERS, users=USERS,
                   store_config=StoreConfig(token_secret=TOKEN_SECRET, allow_plaintext_passwords=plaintext))
    grants = ANONYMOUS_GRANTS if plaintext else frozenset()
    assert not any(server.store.create_acls(list(grants), context=ADMIN))
    admin = ck.AdminClient(server.confluent_config(listener, "admin", mechanism=mechanism or "SCRAM-SHA-256"))
    return Wire(server, admin, grants)


def _admin(server, user="admin"):
    return ck.AdminClient(server.confluent_config("SASL_SSL", user, mechanism="SCRAM-SHA-512"))


def _describe(admin, f: AclBindingFilter) -> set[AclBinding]:
    return {from_ck(b) for b in admin.describe_acls(ck_filter(f), request_timeout=10).result(timeout=TIMEOUT)}


def test_create_describe_delete_acls_with_every_filter_kind(wire):
    """Each filter kind describes over the wire exactly what the store answers, then deletes it;
    a binding two filters match is listed under both (AclControlManager.deleteAclsForFilter)."""
    server, admin = wire.server, wire.admin
    assert result_codes(admin.create_acls([ck_binding(b) for b in BINDINGS], request_timeout=10)) == [ErrorCode.NONE] * len(BINDINGS)
    assert set(server.store.describe_acls(AclBindingFilter.any(), context=ADMIN)) == set(BINDINGS) | wire.grants
    for name, f in FILTERS.items():
        expected = set(server.store.describe_acls(f, context=ADMIN))
        assert _describe(admin, f) == expected, name
    assert _describe(admin, FILTERS["match"]) == {BINDINGS[0], BINDINGS[1], BINDINGS[2]}
    assert _describe(admin, FILTERS["none"]) == set()

    deletes = [FILTERS["match"], FILTERS["principal"], FILTERS["none"]]
    futures = admin.delete_acls([ck_filter(f) for f in deletes], request_timeout=10)
    removed = [{from_ck(b) for b in futures[ck_filter(f)].result(timeout=TIMEOUT)} for f in deletes]
    # BINDINGS[2] (User:bob on TOPIC "*") matches both the MATCH filter and the principal filter.
    assert removed == [{BINDINGS[0], BINDINGS[1], BINDINGS[2]}, {BINDINGS[2], BINDINGS[3]}, set()]
    left = (set(BINDINGS) | wire.grants) - removed[0] - removed[1]
    assert set(server.store.describe_acls(AclBindingFilter.any(), context=ADMIN)) == left
    assert _describe(admin, AclBindingFilter.any()) == left


def test_creating_an_existing_acl_succeeds_and_bad_ones_are_invalid_request(wire):
    """A duplicate is a successful no-op; a wrong CLUSTER name or a principal without a type is INVALID_REQUEST."""
    server, admin = wire.server, wire.admin
    bad_cluster = AclBinding.of(C, "other", LIT, "User:alice", "*", AclOperation.ALTER, ALLOW)
    bad_principal = AclBinding.of(T, "t", LIT, "alice", "*", AclOperation.READ, ALLOW)
    assert result_codes(admin.create_acls([ck_binding(BINDINGS[0])], request_timeout=10)) == [ErrorCode.NONE]
    bindings = [BINDINGS[0], bad_cluster, bad_principal]
    futures = admin.create_acls([ck_binding(b) for b in bindings], request_timeout=10)
    assert result_codes(futures) == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    with pytest.raises(KafkaException) as raised:
        futures[ck_binding(bad_cluster)].result(timeout=TIMEOUT)
    assert "kafka-cluster" in raised.value.args[0].str()
    assert set(server.store.describe_acls(AclBindingFilter.any(), context=ADMIN)) == {BINDINGS[0]} | wire.grants


def test_scram_upsert_describe_delete(wire):
    """Upsertions with a password, describe (all and by name) and deletion, as the store sees them."""
    server, admin = wire.server, wire.admin
    alterations = [
        ck.UserScramCredentialUpsertion("carol", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_512, 8192), b"pw-1"),
        ck.UserScramCredentialUpsertion("dan", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 4096), b"pw-2"),
    ]
    assert result_codes(admin.alter_user_scram_credentials(alterations, request_timeout=10)) == [ErrorCode.NONE] * 2
    described = admin.describe_user_scram_credentials(["carol", "dan"], request_timeout=10)
    got = {user: [(i.mechanism.value, i.iterations) for i in f.result(timeout=TIMEOUT).scram_credential_infos]
           for user, f in described.items()}
    assert got == {"carol": [(2, 8192)], "dan": [(1, 4096)]}
    everyone = admin.describe_user_scram_credentials(request_timeout=10).result(timeout=TIMEOUT)
    assert set(everyone) == {"admin", "bob", "carol", "dan"}
    deletion = [ck.UserScramCredentialDeletion("carol", ck.ScramMechanism.SCRAM_SHA_512)]
    assert result_codes(admin.alter_user_scram_credentials(deletion, request_timeout=10)) == [ErrorCode.NONE]
    after = admin.describe_user_scram_credentials(["carol"], request_timeout=10)
    assert code_of(after["carol"]) == ErrorCode.RESOURCE_NOT_FOUND
    assert set(server.store.describe_user_scram_credentials(context=ADMIN)) == {"admin", "bob", "dan"}


def test_scram_errors_surface_as_kafka_error_codes(wire):
    """RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, DUPLICATE_RESOURCE per user, with the store's messages."""
    server, admin = wire.server, wire.admin
    futures = admin.alter_user_scram_credentials([
        ck.UserScramCredentialDeletion("nobody", ck.ScramMechanism.SCRAM_SHA_256),
        ck.UserScramCredentialUpsertion("few", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 100), b"pw"),
        ck.UserScramCredentialUpsertion("many", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 20000), b"pw"),
        ck.UserScramCredentialUpsertion("twice", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 4096), b"pw"),
        ck.UserScramCredentialUpsertion("twice", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_512, 4096), b"pw"),
    ], request_timeout=10)
    assert {user: code_of(f) for user, f in futures.items()} == {
        "nobody": ErrorCode.RESOURCE_NOT_FOUND, "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL, "twice": ErrorCode.DUPLICATE_RESOURCE}
    with pytest.raises(KafkaException) as raised:
        futures["few"].result(timeout=TIMEOUT)
    assert raised.value.args[0].str().startswith("Too few iterations")
    assert set(server.store.describe_user_scram_credentials(context=ADMIN)) == {"admin", "bob"}


def test_a_disabled_mechanism_is_unsupported_sasl_mechanism(serve):
    """A store with SCRAM-SHA-512 disabled refuses its upsertion with UNSUPPORTED_SASL_MECHANISM
    (librdkafka refuses the UNKNOWN mechanism itself, before sending)."""
    config = StoreConfig(token_secret=TOKEN_SECRET, enabled_mechanisms={ScramMechanism.SCRAM_SHA_256})
    server = serve(LISTENERS, store_config=config, users={})
    add_user(server.store, "admin", "admin-secret", mechanisms=(ScramMechanism.SCRAM_SHA_256,))
    admin = ck.AdminClient(server.confluent_config("SASL_SSL", "admin", mechanism="SCRAM-SHA-256"))
    futures = admin.alter_user_scram_credentials([ck.UserScramCredentialUpsertion(
        "bob", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_512, 4096), b"pw")], request_timeout=10)
    with pytest.raises(KafkaException) as raised:
        futures["bob"].result(timeout=TIMEOUT)
    error = raised.value.args[0]
    assert (error.code(), error.str()) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "SCRAM mechanism SCRAM-SHA-512 is not enabled")


def test_without_cluster_alter_every_change_is_cluster_authorization_failed(server):
    """User:bob (no ACLs): CreateAcls and DeleteAcls fail per item, AlterUserScramCredentials per user,
    DescribeUserScramCredentials at the top (seen raw: confluent-kafka 2.16 crashes the process,
    munmap_chunk(): invalid pointer, when that response carries an error); nothing is written."""
    bob = _admin(server, "bob")
    end = server.log_end()
    created = bob.create_acls([ck_binding(b) for b in BINDINGS[:2]], request_timeout=10)
    assert result_codes(created) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    with pytest.raises(KafkaException) as raised:
        next(iter(created.values())).result(timeout=TIMEOUT)
    assert raised.value.args[0].str() == "Principal User:bob is not authorized to ALTER on the cluster"
    deleted = bob.delete_acls([ck_filter(AclBindingFilter.any())], request_timeout=10)
    assert result_codes(deleted) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    altered = bob.alter_user_scram_credentials(
        [ck.UserScramCredentialUpsertion("bob", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 4096), b"x")],
        request_timeout=10)
    assert result_codes(altered) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    with RawClient.connect(server, "SASL_SSL") as raw:
        assert int(raw.sasl_login("bob", "bob-secret").error_code) == 0
        described = raw.request(build(request_class(50, 0), **convert.describe_users_fields(["bob"])))
    assert int(described.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert described.error_message == "Principal User:bob is not authorized to DESCRIBE on the cluster"
    assert [(r.user, int(r.error_code)) for r in described.results] == [("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    assert server.log_end() == end


def test_describe_acls_authorization_error_is_sent_though_librdkafka_shows_an_empty_list(server):
    """librdkafka drops DescribeAcls' top-level error; a raw DescribeAcls v2 shows the server sent it."""
    server.store.create_acls(BINDINGS[:1], context=ADMIN)
    assert _describe(_admin(server, "bob"), AclBindingFilter.any()) == set()
    with RawClient.connect(server, "SASL_SSL") as raw:
        assert int(raw.sasl_login("bob", "bob-secret").error_code) == 0
        response = raw.request(build(request_class(29, 2), **convert.filter_fields(AclBindingFilter.any())))
    assert int(response.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response.error_message == "Principal User:bob is not authorized to DESCRIBE on the cluster"
    assert response.resources == ()


def test_describe_without_alter_still_cannot_change(server):
    """CLUSTER DESCRIBE lets bob describe ACLs and credentials, but creating an ACL still needs ALTER."""
    server.store.create_acls([AclBinding.of(C, CLUSTER_NAME, LIT, "User:bob", "*", AclOperation.DESCRIBE, ALLOW)],
                             context=ADMIN)
    bob = _admin(server, "bob")
    assert len(_describe(bob, AclBindingFilter.any())) == 1
    assert "admin" in bob.describe_user_scram_credentials(request_timeout=10).result(timeout=TIMEOUT)
    created = bob.create_acls([ck_binding(BINDINGS[0])], request_timeout=10)
    assert result_codes(created) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def _logs_in(server, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    """A new librdkafka client's first request (describe_cluster) succeeds as ``user``;
    False as soon as librdkafka reports the authentication failure."""
    failures: list = []
    config = server.confluent_config("SASL_SSL", user, password, mechanism=mechanism,
                                     error_cb=lambda err: failures.append(err))
    client = ck.AdminClient(config)
    future = client.describe_cluster(request_timeout=10)
    deadline = time.monotonic() + TIMEOUT
    while not future.done() and not failures and time.monotonic() < deadline:
        client.poll(0.05)
    if failures:
        assert failures[0].code() == KafkaError._AUTHENTICATION, failures[0]
        assert "SASL_AUTHENTICATION_FAILED" in failures[0].str() or "Authentication failed" in failures[0].str()
        return False
    future.result(timeout=1)
    return True


@pytest.mark.parametrize("mechanism, other", [(ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512),
                                              (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)],
                         ids=["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_set_through_admin_client_logs_in_at_once_and_a_deleted_one_fails(server, mechanism, other):
    """A login with a password just set by AdminClient succeeds on the next connection; after AdminClient
    deletes that credential the next connection fails (read-your-writes, which Kafka lacks)."""
    admin = _admin(server)
    name, other_name = mechanism.mechanism_name, other.mechanism_name
    upsert = ck.UserScramCredentialUpsertion("erin", ck.ScramCredentialInfo(ck.ScramMechanism(int(mechanism)), 8192),
                                             b"erin-pw")
    assert result_codes(admin.alter_user_scram_credentials([upsert], request_timeout=10)) == [ErrorCode.NONE]
    assert _logs_in(server, "erin", "erin-pw", name)
    assert not _logs_in(server, "erin", "wrong-pw", name)
    assert not _logs_in(server, "erin", "erin-pw", other_name)   # no credential for the other mechanism
    deletion = ck.UserScramCredentialDeletion("erin", ck.ScramMechanism(int(mechanism)))
    assert result_codes(admin.alter_user_scram_credentials([deletion], request_timeout=10)) == [ErrorCode.NONE]
    assert not _logs_in(server, "erin", "erin-pw", name)
    add_user(server.store, "erin", "again", mechanisms=(other,))
    assert not _logs_in(server, "erin", "again", name)          # only the other mechanism now
    assert _logs_in(server, "erin", "again", other_name)


def test_a_password_over_plaintext_is_refused_unless_the_store_allows_it(serve):
    """KIP-506 as the store enforces it: by default an upsertion arriving on a non-TLS connection is
    UNACCEPTABLE_CREDENTIAL (a salted password is as secret as the password); a deletion still works."""
    server = serve(LISTENERS, users=USERS)
    server.store.create_acls(list(ANONYMOUS_GRANTS), context=ADMIN)
    admin = ck.AdminClient(server.confluent_config("PLAINTEXT"))
    end = server.log_end()
    futures = admin.alter_user_scram_credentials([
        ck.UserScramCredentialUpsertion("carol", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 4096), b"pw"),
        ck.UserScramCredentialDeletion("bob", ck.ScramMechanism.SCRAM_SHA_512),
    ], request_timeout=10)
    assert {user: code_of(f) for user, f in futures.items()} == {
        "carol": ErrorCode.UNACCEPTABLE_CREDENTIAL, "bob": ErrorCode.NONE}
    with pytest.raises(KafkaException) as raised:
        futures["carol"].result(timeout=TIMEOUT)
    assert raised.value.args[0].str().startswith("Passwords and salted passwords may only be sent over TLS")
    assert server.log_end() == end + 1
    assert set(server.store.describe_user_scram_credentials(["bob"], context=ADMIN)["bob"].scram_credential_infos) == {
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)}
