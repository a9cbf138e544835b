"""The client side of SCRAM (secmeta.core.wire.scram_client) against RFC 7677's vector and secmeta's ScramServer.

Follows Kafka's ScramSaslClient / ScramMessages / ScramFormatter: GS2 header ``n,,``,
saslname escaping, ``tokenauth=true`` appended to client-first-message-bare for a token
login, the server nonce must extend the client's, at least 4096 iterations, and the
server signature is verified before the exchange counts as complete.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
import scramp

from secmeta.core.auth.scram import ScramServer, TokenIdentity, credential_from_password
from secmeta.core.errors import IllegalSaslStateException, SaslAuthenticationException
from secmeta.core.wire.scram_client import ScramClient, sasl_name, token_login
from secmeta.events.types import ScramMechanism

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
FAKE_SALT_KEY = b"fake-salt-key-for-client-tests"

# RFC 7677 section 3 (reference/kafka-semantics.md).
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

TOKEN_ID = "tok-1"
TOKEN_HMAC = hashlib.sha512(b"token hmac for client tests").digest()


def server_for(mechanism=SHA256, users=None, tokens=None) -> ScramServer:
    kwargs = {"token_lookup": tokens.get} if tokens is not None else {}
    return ScramServer(mechanism, (users or {}).get, fake_salt_key=FAKE_SALT_KEY, **kwargs)


def exchange(server: ScramServer, client: ScramClient) -> None:
    client.verify(server.final(client.final(server.first(client.first()))))


def test_rfc7677_vector_gives_the_proof_and_accepts_the_signature():
    """With RFC 7677's nonce, salt and password the client sends its proof and verifies its signature."""
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert client.complete


def test_rfc7677_vector_wrong_server_signature_fails():
    """A server that does not know the password cannot forge the server signature (mutual auth)."""
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.first()
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationException, match="Invalid server signature"):
        client.verify("v=" + base64.b64encode(b"\0" * 32).decode())
    assert not client.complete


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_logs_in_to_secmeta_scram_server(mechanism):
    """A password credential stored by secmeta authenticates the client, both mechanisms."""
    users = {"alice": credential_from_password(mechanism, b"alice-secret", 8192)}
    server = server_for(mechanism, users)
    client = ScramClient(mechanism, "alice", "alice-secret")
    exchange(server, client)
    assert client.complete and server.principal == "User:alice" and not server.token_authenticated


def test_wrong_password_is_refused_by_the_server():
    """The server refuses a wrong password at client-final with its SASL failure."""
    users = {"alice": credential_from_password(SHA256, b"alice-secret", 4096)}
    server, client = server_for(SHA256, users), ScramClient(SHA256, "alice", "nope")
    server_first = server.first(client.first())
    with pytest.raises(SaslAuthenticationException, match="credentials are not valid"):
        server.final(client.final(server_first))


def test_user_names_are_escaped_as_saslname():
    """'=' and ',' in a user name travel as '=3D' and '=2C' (ScramFormatter.saslName)."""
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    users = {"a=b,c": credential_from_password(SHA512, b"pw", 4096)}
    server, client = server_for(SHA512, users), ScramClient(SHA512, "a=b,c", "pw")
    exchange(server, client)
    assert server.principal == "User:a=b,c"


def test_token_login_sends_tokenauth_in_client_first_bare():
    """A token login is n,,n=TOKENID,r=NONCE,tokenauth=true (ScramExtensions in the bare message)."""
    client = token_login(SHA256, TOKEN_ID, TOKEN_HMAC, nonce="abc")
    assert client.first() == f"n,,n={TOKEN_ID},r=abc,tokenauth=true"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_token_login_is_seen_as_the_owner(mechanism):
    """user = token id, password = base64 HMAC: the server sees the owner, token-authenticated."""
    tokens = {TOKEN_ID: TokenIdentity("User:owner", TOKEN_HMAC)}
    server = server_for(mechanism, tokens=tokens)
    client = token_login(mechanism, TOKEN_ID, base64.b64encode(TOKEN_HMAC).decode())
    exchange(server, client)
    assert server.principal == "User:owner" and server.token_authenticated


def test_token_login_with_a_wrong_hmac_fails():
    """The wrong HMAC fails like a wrong password."""
    tokens = {TOKEN_ID: TokenIdentity("User:owner", TOKEN_HMAC)}
    server, client = server_for(tokens=tokens), token_login(SHA256, TOKEN_ID, b"\1" * 64)
    server_first = server.first(client.first())
    with pytest.raises(SaslAuthenticationException):
        server.final(client.final(server_first))


def test_scramp_server_accepts_the_client():
    """An independent RFC 5802 server (scramp) accepts the client and its signature verifies."""
    mechanism = scramp.ScramMechanism("SCRAM-SHA-256")
    auth_info = mechanism.make_auth_info("pw", iteration_count=4096)
    server = mechanism.make_server(lambda _user: auth_info)
    client = ScramClient(SHA256, "bob", "pw")
    server.set_client_first(client.first())
    server.set_client_final(client.final(server.get_server_first()))
    client.verify(server.get_server_final())
    assert client.complete


@pytest.mark.parametrize("server_first, message", [
    ("r=someoneelse123,s=c2FsdA==,i=4096", "does not start with client nonce"),
    ("r=abc,s=c2FsdA==,i=4096", "does not start with client nonce"),
    ("r=abcdef,s=c2FsdA==,i=4095", "less than the minimum 4096"),
    ("r=abcdef,s=!!!,i=4096", "not valid base64"),
    ("r=abcdef,s=c2FsdA==,i=x", "invalid iterations"),
    ("m=ext,r=abcdef,s=c2FsdA==,i=4096", "mandatory extensions"),
    ("s=c2FsdA==,r=abcdef,i=4096", "Invalid SCRAM server first message"),
])
def test_bad_server_first_is_refused(server_first, message):
    """The client refuses a server-first Kafka's ScramSaslClient would refuse, and fails the exchange."""
    client = ScramClient(SHA256, "alice", "pw", nonce="abc")
    client.first()
    with pytest.raises(SaslAuthenticationException, match=message):
        client.final(server_first)
    with pytest.raises(IllegalSaslStateException):
        client.verify("v=AAAA")


def test_server_error_in_server_final_fails():
    """An e= server-final is a failure carrying the server's error value."""
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.first()
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationException, match="invalid-proof"):
        client.verify("e=invalid-proof")


def test_steps_out_of_order_are_illegal():
    """client-final before client-first is an illegal SASL state."""
    client = ScramClient(SHA256, "alice", "pw")
    with pytest.raises(IllegalSaslStateException):
        client.final(RFC_SERVER_FIRST)


def test_repr_shows_no_secret():
    """Neither the password nor the HMAC shows in repr."""
    client = ScramClient(SHA256, "alice", "very-secret-pw")
    token = token_login(SHA256, TOKEN_ID, TOKEN_HMAC)
    assert "very-secret-pw" not in repr(client)
    assert base64.b64encode(TOKEN_HMAC).decode() not in repr(token)
