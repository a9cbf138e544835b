"""secmeta's wire client (secmeta.core.wire.client.RemoteAdmin) against a real ``secmeta serve``.

RemoteAdmin has SecurityStore's admin API, so a call over the wire must return what the
store returns and raise the same ApiException subclasses.  The connection follows Kafka's
SaslClientAuthenticator (ApiVersions, SaslHandshake v1, SaslAuthenticate with SCRAM) and
NodeApiVersions.latestUsableVersion; the SCRAM upsertion is salted by the client as
KafkaAdminClient.alterUserScramCredentials / getSaltedPassword do.
"""

from __future__ import annotations

import pytest

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    StoreConfig,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.core.errors import (
    ApiError,
    ClusterAuthorizationException,
    ErrorCode,
    InvalidRequestException,
    SaslAuthenticationException,
    UnsupportedSaslMechanismException,
    UnsupportedVersionException,
)
from secmeta.core.server.config import ServerConfig
from secmeta.core.wire import codec
from secmeta.core.wire.client import BrokerConnectionError, ClientConfig, RemoteAdmin
from secmeta.events.types import CLUSTER_NAME
from tests.clientkit import ANY_ACL, client_properties, remote_admin
from tests.serverkit import ADMIN, ADMIN_PASSWORD, CLIENT_DN, TOKEN_SECRET, add_user, make_ca

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
READ_ORDERS = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                            AclOperation.READ, AclPermissionType.ALLOW)
WRITE_PREFIX = AclBinding.of(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:bob", "10.0.0.0/8",
                             AclOperation.WRITE, AclPermissionType.DENY)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_scram_login_and_describe(shared_server, listener, mechanism):
    """admin logs in with SCRAM (server signature verified) and describes ACLs like the store does."""
    with remote_admin(shared_server, listener, "admin", mechanism=mechanism) as admin:
        assert admin.describe_acls(ANY_ACL) == shared_server.store.describe_acls(ANY_ACL, context=ADMIN)


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_anonymous_listeners_are_refused_like_the_store(shared_server, listener):
    """PLAINTEXT / SSL without a certificate is User:ANONYMOUS: DescribeAcls raises CLUSTER_AUTHORIZATION_FAILED."""
    with remote_admin(shared_server, listener) as admin, pytest.raises(ClusterAuthorizationException):
        admin.describe_acls(ANY_ACL)


#: The APIs and versions secmeta serves, as the README's table lists them (issue 11's list of keys).
ADVERTISED = {
    3: (0, 13), 17: (0, 1), 18: (0, 4), 29: (1, 3), 30: (1, 3), 31: (1, 3), 36: (0, 2), 38: (1, 3),
    39: (1, 2), 40: (1, 2), 41: (1, 3), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 60: (0, 2),
}


def test_negotiates_the_highest_common_version(shared_server):
    """The broker advertises the served table; each API goes at the highest version both sides
    speak (NodeApiVersions.latestUsableVersion)."""
    with remote_admin(shared_server, "SASL_SSL") as admin:
        conn = admin.connection
        assert conn.broker_versions == ADVERTISED
        negotiated = {key: conn.version_for(key) for key in (17, 18, 29, 30, 31, 36, 38, 39, 40, 41, 50, 51)}
        assert negotiated == {17: 1, 18: 4, 29: 3, 30: 3, 31: 3, 36: 2, 38: 3, 39: 2, 40: 2, 41: 3, 50: 0, 51: 0}


def test_no_common_version_fails_clearly(shared_server):
    """A broker that serves none of our versions of an API: UNSUPPORTED_VERSION naming both ranges."""
    with remote_admin(shared_server, "SASL_SSL") as admin:
        admin.connection.broker_versions[29] = (7, 9)
        with pytest.raises(UnsupportedVersionException, match=r"DescribeAcls v7-v9, this client speaks v1-v3"):
            admin.describe_acls(ANY_ACL)
        del admin.connection.broker_versions[41]
        with pytest.raises(UnsupportedVersionException, match="does not serve DescribeDelegationToken"):
            admin.describe_delegation_tokens()


def test_acls_round_trip_and_the_log_names_the_connection(serve):
    """create / describe / delete over SASL_SSL return what the store returns; the log records the login and peer."""
    server = serve("SASL_SSL://127.0.0.1:0")
    with remote_admin(server, "SASL_SSL") as admin:
        invalid = AclBinding.of(ResourceType.TOPIC, "", PatternType.LITERAL, "User:x", "*",
                                AclOperation.READ, AclPermissionType.ALLOW)
        errors = admin.create_acls([READ_ORDERS, WRITE_PREFIX, invalid])
        assert [e.code for e in errors] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
        assert set(admin.describe_acls(ANY_ACL)) == {READ_ORDERS, WRITE_PREFIX}
        match = AclBindingFilter.of(ResourceType.TOPIC, "orders-eu", PatternType.MATCH, None, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
        assert admin.describe_acls(match) == server.store.describe_acls(match, context=ADMIN) == [WRITE_PREFIX]
        results = admin.delete_acls([match, AclBindingFilter.of(ResourceType.UNKNOWN, None, PatternType.ANY, None,
                                                                None, AclOperation.ANY, AclPermissionType.ANY)])
        assert results[0].acls == (WRITE_PREFIX,) and not results[0].error
        assert results[1].error.code == ErrorCode.INVALID_REQUEST
        assert admin.describe_acls(ANY_ACL) == [READ_ORDERS]
    entries = list(server.store.history())
    assert {(e.event_type, e.actor_principal, e.actor_host) for e in entries[-3:]} == {
        ("AclCreated", "User:admin", "127.0.0.1"), ("AclDeleted", "User:admin", "127.0.0.1")}


def test_a_request_over_the_acl_change_limit_raises_like_the_store(serve):
    """max_acl_changes_per_request refuses the whole request: the store raises InvalidRequestException and
    the server repeats it on every item (CreateAclsRequest/DeleteAclsRequest.getErrorResponse); the client
    raises it, as Kafka's AclControlManager does for too many deletions (testDeleteExceedsMaxRecords).
    Items that are each invalid stay per-item errors, even when their messages are the same."""
    config = StoreConfig(token_secret=TOKEN_SECRET, max_acl_changes_per_request=2)
    server = serve("SASL_SSL://127.0.0.1:0", store_config=config)
    three = [AclBinding.of(ResourceType.TOPIC, f"t{i}", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW) for i in range(3)]
    unnamed = [AclBinding.of(ResourceType.GROUP, "", PatternType.LITERAL, "User:alice", "*", op,
                             AclPermissionType.ALLOW) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
    end = server.log_end()
    with remote_admin(server, "SASL_SSL") as admin:
        with pytest.raises(InvalidRequestException) as over_wire:
            admin.create_acls(three)
        with pytest.raises(InvalidRequestException) as local:
            server.store.create_acls(three, context=ADMIN)
        assert over_wire.value.error == local.value.error
        assert over_wire.value.error.message == "The request creates 3 ACLs; the limit is 2 per request"
        assert server.log_end() == end
        errors = admin.create_acls(unnamed)
        assert errors == server.store.create_acls(unnamed, context=ADMIN)
        assert [e.code for e in errors] == [ErrorCode.INVALID_REQUEST] * 2 and errors[0] == errors[1]

        assert admin.create_acls(three[:2]) == [ApiError(ErrorCode.NONE)] * 2
        assert admin.create_acls(three[2:]) == [ApiError(ErrorCode.NONE)]
        with pytest.raises(InvalidRequestException, match="The filters match 3 ACLs; at most 2 may be deleted"):
            admin.delete_acls([ANY_ACL])
        assert set(admin.describe_acls(ANY_ACL)) == set(three)


def test_refused_writes_raise_and_write_nothing(serve):
    """A user without CLUSTER ALTER: create/delete/alter raise ClusterAuthorizationException, as the store does."""
    server = serve("SASL_SSL://127.0.0.1:0", users={"admin": ADMIN_PASSWORD, "alice": "alice-pw"})
    end = server.log_end()
    with remote_admin(server, "SASL_SSL", "alice") as admin:
        with pytest.raises(ClusterAuthorizationException):
            admin.create_acls([READ_ORDERS])
        with pytest.raises(ClusterAuthorizationException):
            admin.delete_acls([ANY_ACL])
        with pytest.raises(ClusterAuthorizationException):
            admin.alter_user_scram_credentials([UserScramCredentialDeletion("admin", SHA256)])
        with pytest.raises(ClusterAuthorizationException):
            admin.describe_user_scram_credentials()
    assert server.log_end() == end


def test_scram_alterations_salted_by_the_client_log_in_at_once(serve):
    """A password upserted through the client (salted client-side, -1 iterations -> 4096) logs in on the next connection."""
    server = serve("SASL_SSL://127.0.0.1:0")
    with remote_admin(server, "SASL_SSL") as admin:
        results = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA512, -1), b"bob-pw"),
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 8192), b"carol-pw"),
            UserScramCredentialDeletion("nobody", SHA256),
        ])
        assert {u: e.code for u, e in results.items()} == {
            "bob": ErrorCode.NONE, "carol": ErrorCode.NONE, "nobody": ErrorCode.RESOURCE_NOT_FOUND}
        described = admin.describe_user_scram_credentials(["bob", "carol", "nobody"])
        assert described == server.store.describe_user_scram_credentials(["bob", "carol", "nobody"], context=ADMIN)
        assert described["bob"].scram_credential_infos == (ScramCredentialInfo(SHA512, 4096),)
        assert described["nobody"].code == ErrorCode.RESOURCE_NOT_FOUND
    with remote_admin(server, "SASL_SSL", "bob", "bob-pw", mechanism="SCRAM-SHA-512") as bob:
        assert bob.describe_delegation_tokens() == []
    with remote_admin(server, "SASL_SSL") as admin:
        assert not admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", SHA512)])["bob"]
    with pytest.raises(SaslAuthenticationException):
        remote_admin(server, "SASL_SSL", "bob", "bob-pw", mechanism="SCRAM-SHA-512")


def test_wrong_password_and_unknown_user_fail_alike(shared_server):
    """SASL_AUTHENTICATION_FAILED with the server's message, naming the broker; unknown user = wrong password."""
    errors = []
    for user in ("admin", "nobody"):
        with pytest.raises(SaslAuthenticationException) as info:
            remote_admin(shared_server, "SASL_SSL", user, "not-the-password", mechanism="SCRAM-SHA-512")
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0]
    assert shared_server.bootstrap("SASL_SSL") in errors[0]
    assert "not-the-password" not in errors[0]


def test_a_mechanism_the_server_does_not_enable(serve):
    """SaslHandshake answers UNSUPPORTED_SASL_MECHANISM with the enabled list; the client says so."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", config=ServerConfig(sasl_mechanisms=(SHA256,)))
    with pytest.raises(UnsupportedSaslMechanismException, match="SCRAM-SHA-512.*enabled: SCRAM-SHA-256"):
        remote_admin(server, "SASL_PLAINTEXT", mechanism="SCRAM-SHA-512")


def test_tls_with_an_untrusted_ca_fails_naming_the_broker(shared_server, tmp_path):
    """A broker certificate from another CA: the TLS handshake fails, naming the broker and the reason."""
    other = make_ca(tmp_path / "other-ca")
    props = client_properties(shared_server, "SSL", ssl_ca_location=str(other.ca_cert))
    with pytest.raises(BrokerConnectionError, match=f"TLS handshake with broker {shared_server.bootstrap('SSL')} "
                                                    "failed: certificate verify failed"):
        RemoteAdmin(ClientConfig.from_properties(props))


def test_tls_hostname_is_checked(serve):
    """The certificate must name the host dialled (its SAN is 127.0.0.1/localhost); an empty
    ssl.endpoint.identification.algorithm turns the check off, as in Kafka's SslFactory."""
    try:
        server = serve("SSL://127.0.0.2:0")
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound on this machine")
    props = client_properties(server, "SSL")
    with pytest.raises(BrokerConnectionError, match="IP address mismatch|Hostname mismatch"):
        RemoteAdmin(ClientConfig.from_properties(props))
    props["ssl.endpoint.identification.algorithm"] = ""
    RemoteAdmin(ClientConfig.from_properties(props)).close()


def test_client_certificate_is_the_principal(serve):
    """ssl.certificate.location / ssl.key.location present the client certificate: its subject DN is the principal."""
    server = serve("SSL://127.0.0.1:0", client_auth="required")
    principal = f"User:{CLIENT_DN}"
    server.store.create_acls([AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, "*",
                                            AclOperation.ALTER, AclPermissionType.ALLOW)], context=ADMIN)
    props = client_properties(server, "SSL", ssl_certificate_location=str(server.ca.client_cert),
                              ssl_key_location=str(server.ca.client_key))
    with RemoteAdmin(ClientConfig.from_properties(props)) as admin:
        assert admin.create_acls([READ_ORDERS]) == [ApiError()]
    last = list(server.store.history())[-1]
    assert (last.event_type, last.actor_principal) == ("AclCreated", principal)


def test_without_the_required_client_certificate_tls_fails(serve):
    """ssl.client.auth=required and no client certificate: the connection fails, naming the broker."""
    server = serve("SSL://127.0.0.1:0", client_auth="required")
    with pytest.raises(BrokerConnectionError, match=server.bootstrap("SSL")):
        with remote_admin(server, "SSL") as admin:
            admin.describe_acls(ANY_ACL)


def test_added_user_logs_in(serve):
    """A user added through the store logs in through the client with either mechanism."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0")
    add_user(server.store, "dave", "dave-pw")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        with remote_admin(server, "SASL_PLAINTEXT", "dave", "dave-pw", mechanism=mechanism) as admin:
            with pytest.raises(ClusterAuthorizationException):
                admin.describe_acls(ANY_ACL)


def test_api_versions_falls_back_to_the_brokers_version(serve, monkeypatch):
    """A broker serving only ApiVersions v0-v2 answers our v4 with UNSUPPORTED_VERSION in a v0 body;
    the client retries at v2, as ApiVersionsResponse.parse and NetworkClient do."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0")
    monkeypatch.setattr(codec.ApiKey.API_VERSIONS, "versions", (0, 2))
    with remote_admin(server, "SASL_PLAINTEXT") as admin:
        assert admin.connection.broker_versions[18] == (0, 2)
        assert admin.describe_acls(ANY_ACL) == []
