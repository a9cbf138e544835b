"""Delegation tokens over the wire with secmeta's client (no Python Kafka client has these RPCs).

Create (v3, with an owner), renew, expire and describe go through
CreateDelegationToken/RenewDelegationToken/ExpireDelegationToken/DescribeDelegationToken,
with Kafka's rules (KafkaApis.handleCreateTokenRequest and DelegationTokenManager:
CREATE_TOKENS on USER:<owner> to create for another owner, owner or renewer to renew or
expire).  A token then logs in as Kafka's ScramSaslClient does with ScramLoginModule's
``tokenauth=true``: user = token id, password = base64 HMAC, the extension inside
client-first-message-bare; the server sees the owner, token-authenticated, so that
connection may not ask for tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED).
"""

from __future__ import annotations

import base64
import dataclasses

import pytest

from secmeta.core import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StoreConfig,
)
from secmeta.core.errors import (
    ApiError,
    ClusterAuthorizationException,
    DelegationTokenAuthorizationException,
    DelegationTokenDisabledException,
    DelegationTokenExpiredException,
    DelegationTokenNotFoundException,
    DelegationTokenOwnerMismatchException,
    InvalidPrincipalTypeException,
    SaslAuthenticationException,
    UnsupportedByAuthenticationException,
)
from tests.clientkit import remote_admin
from tests.logkit import Clock
from tests.serverkit import ADMIN, ADMIN_PASSWORD, TOKEN_SECRET

SASL_SSL = "SASL_SSL://127.0.0.1:0"
USERS = {"admin": ADMIN_PASSWORD, "alice": "alice-pw", "bob": "bob-pw"}


def token_admin(server, token, listener="SASL_SSL", mechanism="SCRAM-SHA-256"):
    """A RemoteAdmin logged in with ``token`` (tokenauth=true, password = base64 HMAC)."""
    password = base64.b64encode(token.hmac).decode()
    return remote_admin(server, listener, token.token_id, password, mechanism, token=True)


def test_create_for_self_renew_expire_and_describe(serve):
    """alice creates a token for herself, renews and expires it; describe follows; the log names her connection."""
    server = serve(SASL_SSL, users=USERS)
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        token = alice.create_delegation_token(renewers=["User:bob"], max_lifetime_ms=3_600_000)
        assert (token.owner, token.requester, token.renewers) == ("User:alice", "User:alice", ("User:bob",))
        assert token.hmac and token.max_timestamp_ms == token.issue_timestamp_ms + 3_600_000
        assert token.expiry_timestamp_ms == token.max_timestamp_ms  # max lifetime < the 1-day expiry
        described = alice.describe_delegation_tokens()
        assert described == server.store.describe_delegation_tokens(context=ADMIN)
        assert [(t.token_id, t.owner, t.renewers, t.hmac) for t in described] == [
            (token.token_id, "User:alice", ("User:bob",), None)]  # secmeta withholds the HMAC by default
        assert alice.renew_delegation_token(token.hmac, 60_000) <= token.max_timestamp_ms
        expiry = alice.expire_delegation_token(token.hmac, 30_000)
        assert token.issue_timestamp_ms < expiry <= token.max_timestamp_ms
        alice.expire_delegation_token(token.hmac, -1)  # a negative period removes it now
        assert alice.describe_delegation_tokens() == []
        with pytest.raises(DelegationTokenNotFoundException):
            alice.renew_delegation_token(token.hmac)
    issued = [e for e in server.store.history() if e.event_type == "DelegationTokenIssued"]
    assert [(e.actor_principal, e.actor_host) for e in issued] == [("User:alice", "127.0.0.1")]


def test_create_for_another_owner_needs_create_tokens(serve):
    """Without CREATE_TOKENS on USER:User:bob, alice gets DELEGATION_TOKEN_AUTHORIZATION_FAILED; with it, bob owns the token."""
    server = serve(SASL_SSL, users=USERS)
    end = server.log_end()
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        with pytest.raises(DelegationTokenAuthorizationException):
            alice.create_delegation_token(owner="User:bob")
        assert server.log_end() == end
        with remote_admin(server, "SASL_SSL") as admin:
            grant = AclBinding.of(ResourceType.USER, "User:bob", PatternType.LITERAL, "User:alice", "*",
                                  AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)
            assert admin.create_acls([grant]) == [ApiError()]
        token = alice.create_delegation_token(owner="User:bob")
        assert (token.owner, token.requester) == ("User:bob", "User:alice")
        assert [t.token_id for t in alice.describe_delegation_tokens(["User:bob"])] == [token.token_id]
        # Only the owner or a renewer may renew (the requester alone does not count).
        with pytest.raises(DelegationTokenOwnerMismatchException):
            alice.renew_delegation_token(token.hmac)
    with remote_admin(server, "SASL_SSL", "bob") as bob:
        assert bob.renew_delegation_token(token.hmac) <= token.max_timestamp_ms


def test_renewers_must_be_users(serve):
    """A renewer that is not a User principal: INVALID_PRINCIPAL_TYPE."""
    server = serve(SASL_SSL, users=USERS)
    with remote_admin(server, "SASL_SSL", "alice") as alice, pytest.raises(InvalidPrincipalTypeException):
        alice.create_delegation_token(renewers=["Group:ops"])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_token_login_is_the_owner_and_token_authenticated(serve, mechanism):
    """A token logs in with tokenauth=true as its owner; that connection may not create or renew tokens."""
    server = serve(SASL_SSL, users=USERS)
    with remote_admin(server, "SASL_SSL") as admin:
        token = admin.create_delegation_token(owner="User:alice")
    with token_admin(server, token, mechanism=mechanism) as via_token:
        with pytest.raises(UnsupportedByAuthenticationException):
            via_token.create_delegation_token()
        with pytest.raises(UnsupportedByAuthenticationException):
            via_token.renew_delegation_token(token.hmac)
        end = server.log_end()
        # alice holds no CLUSTER ALTER: the server sees User:alice, not the admin who created the token.
        with pytest.raises(ClusterAuthorizationException, match="User:alice"):
            via_token.create_acls([AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:x", "*",
                                                 AclOperation.READ, AclPermissionType.ALLOW)])
        assert server.log_end() == end


def test_token_login_writes_as_the_owner(serve):
    """A token owned by admin (a super user) writes ACLs; the log's actor is the owner, from the connection's host."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", users=USERS)
    with remote_admin(server, "SASL_PLAINTEXT") as admin:
        token = admin.create_delegation_token()
    with token_admin(server, token, listener="SASL_PLAINTEXT") as via_token:
        binding = AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:x", "*",
                                AclOperation.READ, AclPermissionType.ALLOW)
        assert via_token.create_acls([binding]) == [ApiError()]
    last = list(server.store.history())[-1]
    assert (last.event_type, last.actor_principal, last.actor_host) == ("AclCreated", "User:admin", "127.0.0.1")


def test_token_login_fails_with_a_wrong_hmac_or_once_expired(serve):
    """A wrong HMAC fails like a wrong password; an expired (removed) token no longer logs in."""
    server = serve(SASL_SSL, users=USERS)
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        token = alice.create_delegation_token()
        forged = dataclasses.replace(token, hmac=b"\1" * 64)
        with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
            token_admin(server, forged)
        token_admin(server, token).close()
        alice.expire_delegation_token(token.hmac, -1)
    with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
        token_admin(server, token)


def test_expired_token_cannot_be_renewed(serve):
    """A token past its max lifetime answers DELEGATION_TOKEN_EXPIRED to renew (the store's clock moves)."""
    clock = Clock()
    server = serve(SASL_SSL, users=USERS, store_config=StoreConfig(token_secret=TOKEN_SECRET, clock=clock))
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        token = alice.create_delegation_token(max_lifetime_ms=60_000)
        clock.t += 59
        assert alice.renew_delegation_token(token.hmac) == token.max_timestamp_ms
        clock.t += 2
        with pytest.raises(DelegationTokenExpiredException):
            alice.renew_delegation_token(token.hmac)


def test_unauthenticated_connections_may_not_ask_for_tokens(shared_server):
    """PLAINTEXT (User:ANONYMOUS, unauthenticated): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    with remote_admin(shared_server, "PLAINTEXT") as anonymous:
        with pytest.raises(UnsupportedByAuthenticationException):
            anonymous.create_delegation_token()


def test_no_token_secret_disables_tokens(serve):
    """A store without a token secret answers DELEGATION_TOKEN_AUTH_DISABLED."""
    server = serve(SASL_SSL, users=USERS, store_config=StoreConfig())
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        with pytest.raises(DelegationTokenDisabledException):
            alice.create_delegation_token()
        with pytest.raises(DelegationTokenDisabledException):  # as Kafka's KafkaApis.handleDescribeTokensRequest
            alice.describe_delegation_tokens()


def test_describe_includes_the_hmac_when_the_store_is_configured_to(serve):
    """describe_tokens_include_hmac=True (Kafka's behaviour): describe over the wire carries the HMAC."""
    server = serve(SASL_SSL, users=USERS,
                   store_config=StoreConfig(token_secret=TOKEN_SECRET, describe_tokens_include_hmac=True))
    with remote_admin(server, "SASL_SSL", "alice") as alice:
        token = alice.create_delegation_token()
        assert [t.hmac for t in alice.describe_delegation_tokens()] == [token.hmac]
