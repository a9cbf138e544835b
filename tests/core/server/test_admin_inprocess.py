"""The admin handlers in process: request bytes -> decode -> handler over a real store -> response bytes.

Request-level failures follow Kafka's getErrorResponse of each request class
(clients/src/main/java/org/apache/kafka/common/requests/CreateAclsRequest.java,
DeleteAclsRequest.java, DescribeAclsRequest.java, DescribeUserScramCredentialsRequest.java,
AlterUserScramCredentialsRequest.java) as ControllerApis.handleCreateAcls / handleDeleteAcls /
handleAlterUserScramCredentials and AclApis.handleDescribeAcls raise them.
"""

from __future__ import annotations

import pytest

from secmeta.core.errors import ErrorCode
from secmeta.core.server.admin_apis import ADMIN_HANDLERS
from secmeta.core.server.call import BrokerInfo, Call
from secmeta.core.types import RequestContext, ScramCredentialInfo, UserScramCredentialUpsertion
from secmeta.core.wire import convert
from secmeta.core.wire.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_class,
)
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from tests.serverkit import ADMIN  # User:admin from 127.0.0.1, as the server's own clients

ALICE = RequestContext("User:alice", "127.0.0.1", tls=True)
BROKER = BrokerInfo(node_id=1, cluster_id="c", host="127.0.0.1", port=9092)
READ = AclBinding.of(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
GROUP = AclBinding.of(ResourceType.GROUP, "g", PatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


def call(store, context, api_key, version, **fields):
    """Encode a request, decode it as the server does, run its handler, encode and decode the response."""
    frame = encode_request(7, "test", build(request_class(api_key, version), **fields))
    request = decode_request(frame[4:])
    response = ADMIN_HANDLERS[api_key](Call(store, context, request, BROKER))
    correlation_id, decoded = decode_response(api_key, version, encode_response(7, response)[4:])
    assert correlation_id == 7 and int(decoded.throttle_time.total_seconds()) == 0
    return decoded


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acls_create_describe_delete(store, version):
    """CreateAcls, DescribeAcls and DeleteAcls answer what the store did, at every served version."""
    bad = AclBinding.of(ResourceType.CLUSTER, "other", PatternType.LITERAL, "User:alice", "*",
                        AclOperation.ALTER, AclPermissionType.ALLOW)
    created = call(store, ADMIN, 30, version, creations=[convert.acl_creation_fields(b) for b in (READ, GROUP, bad)])
    codes = [int(r.error_code) for r in created.results]
    assert codes == [0, 0, ErrorCode.INVALID_REQUEST]
    assert "CLUSTER" in created.results[2].error_message
    described = call(store, ADMIN, 29, version, **convert.filter_fields(AclBindingFilter.any()))
    assert int(described.error_code) == 0
    assert set(convert.bindings_from_resources(described.resources)) == {READ, GROUP}
    match = AclBindingFilter.of(ResourceType.TOPIC, "orders-eu", PatternType.MATCH)
    deleted = call(store, ADMIN, 31, version, filters=[convert.filter_fields(match)])
    (result,) = deleted.filter_results
    assert int(result.error_code) == 0 and [convert.binding_from(m) for m in result.matching_acls] == [READ]
    assert store.describe_acls(AclBindingFilter.any(), context=ADMIN) == [GROUP]


def test_a_bidirectional_override_in_an_acl_is_invalid_request_with_the_message(store):
    """CreateAcls with 'invoice\u202efdp.exe' (accepted before issue 22): that creation answers INVALID_REQUEST
    naming the field and the code point, the other is created."""
    spoofed = AclBinding.of(ResourceType.TOPIC, "invoice\u202efdp.exe", PatternType.LITERAL, "User:alice", "*",
                            AclOperation.READ, AclPermissionType.ALLOW)
    created = call(store, ADMIN, 30, 3, creations=[convert.acl_creation_fields(b) for b in (spoofed, READ)])
    assert [(int(r.error_code), r.error_message) for r in created.results] == [
        (ErrorCode.INVALID_REQUEST, "resource name contains U+202E (RIGHT-TO-LEFT OVERRIDE), a bidirectional control"),
        (0, None)]
    assert store.describe_acls(AclBindingFilter.any(), context=ADMIN) == [READ]


def test_cluster_authorization_failures_are_placed_as_kafka_places_them(store):
    """Create/Delete: on every item; Describe: top-level with no resources (getErrorResponse)."""
    created = call(store, ALICE, 30, 3, creations=[convert.acl_creation_fields(b) for b in (READ, GROUP)])
    assert [int(r.error_code) for r in created.results] == [31, 31]
    assert created.results[0].error_message == "Principal User:alice is not authorized to ALTER on the cluster"
    deleted = call(store, ALICE, 31, 3, filters=[convert.filter_fields(AclBindingFilter.any())] * 2)
    assert [int(r.error_code) for r in deleted.filter_results] == [31, 31]
    described = call(store, ALICE, 29, 3, **convert.filter_fields(AclBindingFilter.any()))
    assert int(described.error_code) == 31 and described.resources == ()
    assert "DESCRIBE" in described.error_message


def test_describe_acls_unknown_filter_is_invalid_request(store):
    """An UNKNOWN code in the filter is the store's INVALID_REQUEST, at the top level."""
    fields = {**convert.filter_fields(AclBindingFilter.any()), "operation": 99}
    described = call(store, ADMIN, 29, 2, **fields)
    assert int(described.error_code) == ErrorCode.INVALID_REQUEST


def test_scram_alter_with_salted_password_then_describe(store):
    """A salted password from the wire becomes a credential that logs in; errors per user."""
    good = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"secret")
    few = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")
    fields = convert.alter_request_fields([good, few])
    fields["deletions"] = [{"name": "carol", "mechanism": 1}, {"name": "dan", "mechanism": 0}]
    altered = call(store, ADMIN, 51, 0, **fields)
    results = convert.alter_results_from(altered.results)
    assert {u: e.code for u, e in results.items()} == {
        "carol": ErrorCode.RESOURCE_NOT_FOUND, "dan": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "alice": ErrorCode.NONE, "bob": ErrorCode.UNACCEPTABLE_CREDENTIAL}
    assert results["bob"].message.startswith("Too few iterations")
    described = call(store, ADMIN, 50, 0, **convert.describe_users_fields(["alice", "zed"]))
    got = convert.describe_results_from(described.results)
    assert got["alice"].scram_credential_infos == (ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),)
    assert got["zed"].code == ErrorCode.RESOURCE_NOT_FOUND
    assert _scram_login(store, "alice", "secret")


def test_scram_cluster_authorization_failures(store):
    """Describe: top-level and per named user; Alter: one result per distinct user, sorted."""
    described = call(store, ALICE, 50, 0, **convert.describe_users_fields(["x"]))
    assert int(described.error_code) == 31 and [int(r.error_code) for r in described.results] == [31]
    fields = convert.alter_request_fields([
        UserScramCredentialUpsertion("zed", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])
    fields["deletions"] = [{"name": "amy", "mechanism": 1}, {"name": "zed", "mechanism": 2}]
    altered = call(store, ALICE, 51, 0, **fields)
    assert [(r.user, int(r.error_code)) for r in altered.results] == [("amy", 31), ("zed", 31)]


def test_tokens_create_renew_expire_describe(store):
    """Create for self and for another owner, renew, describe (no HMAC by default), expire."""
    made = call(store, ADMIN, 38, 3, **convert.create_token_request_fields(None, ["User:bob"], 3_600_000))
    assert int(made.error_code) == 0 and made.principal_name == "admin" and len(made.hmac) == 64
    token = convert.token_from_create_response(made, ["User:bob"])
    assert token.max_timestamp_ms - token.issue_timestamp_ms == 3_600_000
    renewed = call(store, ADMIN, 39, 2, hmac=token.hmac, renew_period=60_000)
    assert int(renewed.error_code) == 0
    assert convert.ms_from(renewed.expiry_timestamp) == token.issue_timestamp_ms + 60_000
    described = call(store, ADMIN, 41, 3, **convert.owners_fields(None))
    (seen,) = [convert.token_from_described(t) for t in described.tokens]
    assert seen.token_id == token.token_id and seen.renewers == ("User:bob",) and seen.hmac is None
    expired = call(store, ADMIN, 40, 2, hmac=token.hmac, expiry_time_period=-1)
    assert int(expired.error_code) == 0
    assert call(store, ADMIN, 41, 3, **convert.owners_fields(None)).tokens == ()


def test_token_errors_map_to_kafka_codes(store):
    """NOT_FOUND, OWNER_MISMATCH, AUTHORIZATION_FAILED and REQUEST_NOT_ALLOWED come back as codes."""
    missing = call(store, ADMIN, 39, 2, hmac=b"nope", renew_period=-1)
    assert int(missing.error_code) == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    other = call(store, ALICE, 38, 3, **convert.create_token_request_fields("User:bob"))
    assert int(other.error_code) == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (other.principal_name, other.token_requester_principal_name) == ("bob", "alice")
    made = call(store, ADMIN, 38, 3, **convert.create_token_request_fields())
    mismatch = call(store, ALICE, 40, 1, hmac=made.hmac, expiry_time_period=1000)
    assert int(mismatch.error_code) == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    as_token = RequestContext("User:admin", "127.0.0.1", tls=True, token_authenticated=True)
    refused = call(store, as_token, 38, 2, **convert.create_token_request_fields())
    assert int(refused.error_code) == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert int(call(store, as_token, 41, 2, owners=None).error_code) == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    bad_renewer = call(store, ADMIN, 38, 3, **convert.create_token_request_fields(None, ["Group:x"]))
    assert int(bad_renewer.error_code) == ErrorCode.INVALID_PRINCIPAL_TYPE


@pytest.mark.parametrize("owner_type, owner_name, code", [
    (None, None, ErrorCode.NONE),                  # no owner (as v1-2 send): the requester's token
    ("User", "", ErrorCode.INVALID_REQUEST),       # was the requester's token, silently (issue 22)
    ("", "", ErrorCode.INVALID_REQUEST),
    ("User", "bob", ErrorCode.NONE),
])
def test_create_token_with_an_empty_owner_is_invalid_request(store, owner_type, owner_name, code):
    """CreateDelegationToken v3: a null owner is the requester; an empty owner name is INVALID_REQUEST (the
    response has no message field) and no token is issued."""
    made = call(store, ADMIN, 38, 3, owner_principal_type=owner_type, owner_principal_name=owner_name,
                renewers=[], max_lifetime=-1)
    assert int(made.error_code) == code
    if code:
        assert store.describe_delegation_tokens(context=ADMIN) == []
    else:
        assert made.principal_name == (owner_name or "admin")


def test_an_unexpected_failure_answers_unknown_server_error(store, caplog):
    """A bug behind a handler answers UNKNOWN_SERVER_ERROR on every item; the log names the
    exception's type, not its message (which could carry anything)."""

    class Broken:
        def create_acls(self, *a, **k):
            raise RuntimeError("secret-looking detail")

    with caplog.at_level("INFO", logger="secmeta.server"):
        created = call(Broken(), ADMIN, 30, 3, creations=[convert.acl_creation_fields(READ)] * 2)
    assert [(int(r.error_code), r.error_message) for r in created.results] == [(-1, "Unexpected server error")] * 2
    assert "RuntimeError" in caplog.text and "secret-looking" not in caplog.text


def _scram_login(store, user: str, password: str) -> bool:
    import scramp

    client = scramp.ScramClient(["SCRAM-SHA-512"], user, password)
    server = store.scram_server(ScramMechanism.SCRAM_SHA_512)
    client.set_server_first(server.first(client.get_client_first()))
    try:
        client.set_server_final(server.final(client.get_client_final()))
    except Exception:
        return False
    return True
