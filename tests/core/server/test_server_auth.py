"""Who the server says is asking: the connection's principal, host and TLS flag reach the store.

SaslServerAuthenticator.principal(): a SCRAM login is User:<name>; a delegation-token login
(``tokenauth=true`` in client-first-message-bare) is the token's owner, marked token-authenticated,
which Kafka's DelegationTokenManager forbids from creating tokens.
"""

from __future__ import annotations

import base64

from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclOperation as CkAclOperation
from confluent_kafka.admin import AclPermissionType as CkAclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as CkPatternType
from confluent_kafka.admin import ResourceType as CkResourceType

from secmeta.core import RequestContext, StoreConfig
from secmeta.core.wire.codec import build, request_class
from secmeta.core.wire.scram_client import token_login
from secmeta.events.types import ScramMechanism
from tests.serverkit import ADMIN, TOKEN_SECRET, RawClient, add_user

DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64


def test_changes_made_over_the_wire_are_attributed_to_the_connection(serve):
    """An ACL created by librdkafka as User:admin over SASL_SSL is logged with actor User:admin from 127.0.0.1."""
    server = serve("SASL_SSL://127.0.0.1:0")
    admin = AdminClient(server.confluent_config("SASL_SSL", "admin", mechanism="SCRAM-SHA-512"))
    binding = CkAclBinding(CkResourceType.TOPIC, "orders", CkPatternType.LITERAL, "User:alice", "*",
                           CkAclOperation.READ, CkAclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=10).values():
        assert future.result(timeout=15) is None
    entry = list(server.store.history())[-1]
    assert (entry.event_type, entry.actor_principal, entry.actor_host) == ("AclCreated", "User:admin", "127.0.0.1")


def test_a_token_login_is_the_owner_and_cannot_create_tokens(serve):
    """A SCRAM login with a delegation token (tokenauth=true) acts as the owner, token-authenticated."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0")
    add_user(server.store, "alice", "alice-pw")
    alice = RequestContext("User:alice", "127.0.0.1")
    token = server.store.create_delegation_token(context=alice)
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-256")).error_code == 0
        client = token_login("SCRAM-SHA-256", token.token_id, token.hmac)
        first = raw.request(build(request_class(36, 2), auth_bytes=client.first().encode()))
        assert first.error_code == 0
        final = raw.request(build(request_class(36, 2), auth_bytes=client.final(first.auth_bytes).encode()))
        assert final.error_code == 0
        client.verify(final.auth_bytes)
        response = raw.request(build(request_class(38, 3), owner_principal_type=None, owner_principal_name=None,
                                     renewers=[], max_lifetime=-1))
    assert response.error_code == DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_a_token_with_a_wrong_hmac_fails_like_a_wrong_password(serve):
    """A bad token HMAC gets Kafka's one message for bad credentials."""
    server = serve("SASL_PLAINTEXT://127.0.0.1:0")
    token = server.store.create_delegation_token(context=ADMIN)
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-512")).error_code == 0
        client = token_login("SCRAM-SHA-512", token.token_id, b"\x00" * 64)
        first = raw.request(build(request_class(36, 2), auth_bytes=client.first().encode()))
        final = raw.request(build(request_class(36, 2), auth_bytes=client.final(first.auth_bytes).encode()))
        assert final.error_code == 58
        assert final.error_message.startswith("Authentication failed during authentication due to invalid credentials")
        assert raw.closed_by_server()


def _server_first(raw: RawClient, user: str) -> dict[str, str]:
    """The server-first message's attributes for ``user`` (SaslHandshake v1, then one SaslAuthenticate)."""
    assert raw.request(build(request_class(17, 1), mechanism="SCRAM-SHA-512")).error_code == 0
    reply = raw.request(build(request_class(36, 2), auth_bytes=f"n,,n={user},r=fixednonce".encode()))
    assert reply.error_code == 0
    return dict(attr.split("=", 1) for attr in reply.auth_bytes.decode().split(","))


def test_an_unknown_user_gets_the_iterations_and_salt_length_of_real_ones(serve):
    """Unknown users' server-first messages announce the counts real users have (here admin's 4096 and
    dave's 8192 for SCRAM-SHA-512, where the store's default is 8192) and salts as long as theirs: the
    names cannot be told apart by the count (test_scram_stand_in checks the distribution)."""
    config = StoreConfig(token_secret=TOKEN_SECRET, default_iterations={ScramMechanism.SCRAM_SHA_256: 4096,
                                                                        ScramMechanism.SCRAM_SHA_512: 8192})
    server = serve("SASL_PLAINTEXT://127.0.0.1:0", store_config=config)
    add_user(server.store, "dave", "dave-pw", [ScramMechanism.SCRAM_SHA_512], iterations=8192)
    real = {entry.iterations for _user, entry in server.store.image.scram
            if entry.mechanism is ScramMechanism.SCRAM_SHA_512}
    assert real == {4096, 8192}
    answers = []
    for user in ("dave", *(f"nobody-{i}" for i in range(24))):
        with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
            answers.append(_server_first(raw, user))
    known, unknown = answers[0], answers[1:]
    assert known["i"] == "8192"
    assert {int(a["i"]) for a in unknown} == real  # 2 shapes over 24 names: both seen (1 - 2**-23)
    assert {len(base64.b64decode(a["s"])) for a in unknown} == {len(base64.b64decode(known["s"]))}
