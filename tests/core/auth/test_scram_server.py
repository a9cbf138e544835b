"""The server side of a SCRAM exchange, driven by scramp and by hand-built messages."""

import base64
import hashlib
import hmac

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.auth.scram import (
    SALT_LENGTH,
    ScramServer,
    TokenIdentity,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from secmeta.core.errors import (
    IllegalSaslStateException,
    SaslAuthenticationException,
    UnsupportedSaslMechanismException,
)
from secmeta.events.types import ScramMechanism

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
FAKE_SALT_KEY = b"fake-salt-key-for-tests"

# RFC 7677 section 3 (see reference/kafka-semantics.md).
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE

TOKEN_ID = "token-1"
TOKEN_HMAC = hashlib.sha512(b"token hmac for tests").digest()
TOKEN_PASSWORD = base64.b64encode(TOKEN_HMAC).decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def make_server(mechanism=SHA256, users=None, tokens=None, **kwargs) -> ScramServer:
    users = {} if users is None else users
    if tokens is not None:
        kwargs["token_lookup"] = tokens.get
    kwargs.setdefault("fake_salt_key", FAKE_SALT_KEY)
    return ScramServer(mechanism, users.get, **kwargs)


def alice(mechanism=SHA256, password=b"alice-secret"):
    return {"alice": credential_from_password(mechanism, password, 4096)}


def run_exchange(server: ScramServer, client: scramp.ScramClient) -> None:
    """Drive a full exchange; scramp raises if the server signature is wrong."""
    client.set_server_first(server.first(client.get_client_first()))
    client.set_server_final(server.final(client.get_client_final()))


def client_for(mechanism, username, password, **kwargs) -> scramp.ScramClient:
    return scramp.ScramClient([mechanism.mechanism_name], username, password, **kwargs)


def token_first(client: scramp.ScramClient) -> str:
    """scramp has no extensions API: append tokenauth=true to its client-first."""
    first = client.get_client_first()
    client.client_first_bare += ",tokenauth=true"
    return first + ",tokenauth=true"


def run_token_exchange(server: ScramServer, client: scramp.ScramClient) -> None:
    client.set_server_first(server.first(token_first(client)))
    client.set_server_final(server.final(client.get_client_final()))


def reference_client_final(
    mechanism, password, bare, server_first, *, gs2_header="n,,", nonce=None
) -> str:
    """An RFC 5802 client-final built with hashlib only, valid for the given header and nonce."""
    name = mechanism.hash_name
    attrs = dict(attr.split("=", 1) for attr in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    without_proof = f"c={b64(gs2_header.encode())},r={nonce or attrs['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={b64(proof)}"


def salt_offered(server: ScramServer, username: str) -> str:
    server_first = server.first(f"n,,n={username},r=abc")
    return dict(attr.split("=", 1) for attr in server_first.split(","))["s"]


def failure_message(server: ScramServer, client: scramp.ScramClient) -> str:
    with pytest.raises(SaslAuthenticationException) as raised:
        run_exchange(server, client)
    return str(raised.value)


@pytest.fixture
def rfc_server() -> ScramServer:
    users = {"user": credential_from_password(SHA256, b"pencil", 4096, salt=RFC_SALT)}
    return make_server(users=users, nonce_factory=lambda: RFC_SERVER_NONCE)


# -- RFC 7677 ---------------------------------------------------------------


def test_rfc7677_server_first(rfc_server):
    """The server-first message for the RFC 7677 exchange is exactly the RFC's."""
    server_first = rfc_server.first(f"n,,n=user,r={RFC_CLIENT_NONCE}")
    assert server_first == f"r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"


def test_rfc7677_proof_is_accepted_with_the_rfc_server_signature(rfc_server):
    """The RFC's client proof is accepted and answered with the RFC's server signature."""
    rfc_server.first(f"n,,n=user,r={RFC_CLIENT_NONCE}")
    server_final = rfc_server.final(f"c=biws,r={RFC_NONCE},p={RFC_PROOF}")
    assert server_final == f"v={RFC_SERVER_SIGNATURE}"


# -- a real client ----------------------------------------------------------


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scramp_client_authenticates_with_password_credential(mechanism):
    """A scramp client completes the exchange against a credential made from the password."""
    server = make_server(mechanism, alice(mechanism))
    run_exchange(server, client_for(mechanism, "alice", "alice-secret"))
    assert server.principal == "User:alice"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scramp_client_authenticates_with_pre_salted_credential(mechanism):
    """A scramp client completes the exchange against a credential from a pre-salted password."""
    salt = b"pre-salted-salt!"
    salted = salted_password(mechanism, b"alice-secret", salt, 8192)
    users = {"alice": credential_from_salted_password(mechanism, salt, salted, 8192)}
    server = make_server(mechanism, users)
    run_exchange(server, client_for(mechanism, "alice", "alice-secret"))
    assert server.principal == "User:alice"


def test_password_login_is_not_token_authenticated():
    """A user who logs in with a password is not token-authenticated."""
    server = make_server(users=alice())
    run_exchange(server, client_for(SHA256, "alice", "alice-secret"))
    assert server.token_authenticated is False


def test_y_flag_client_authenticates():
    """A client sending the 'y' GS2 flag (binding supported, not used) authenticates."""
    server = make_server(users=alice())
    client = client_for(SHA256, "alice", "alice-secret", channel_binding=("tls-unique", b"x"))
    run_exchange(server, client)
    assert server.principal == "User:alice"


def test_escaped_username_is_looked_up_unescaped():
    """A user name with '=' and ',' reaches the lookup and the principal unescaped."""
    users = {"a=b,c": credential_from_password(SHA256, b"pw", 4096)}
    server = make_server(users=users)
    run_exchange(server, client_for(SHA256, "a=b,c", "pw"))
    assert server.principal == "User:a=b,c"


def test_authzid_equal_to_username_is_accepted():
    """An authorization id equal to the user name is accepted."""
    server = make_server(users=alice())
    header, bare = "n,a=alice,", "n=alice,r=cnonce"
    server_first = server.first(header + bare)
    server.final(
        reference_client_final(SHA256, b"alice-secret", bare, server_first, gs2_header=header)
    )
    assert server.principal == "User:alice"


# -- failures that must look alike -----------------------------------------


def test_wrong_password_fails():
    """A wrong password fails with SaslAuthenticationException."""
    server = make_server(users=alice())
    with pytest.raises(SaslAuthenticationException):
        run_exchange(server, client_for(SHA256, "alice", "wrong"))


def test_unknown_user_fails_like_a_wrong_password():
    """An unknown user gets exactly the error message a wrong password gets."""
    wrong_password = failure_message(make_server(users=alice()), client_for(SHA256, "alice", "x"))
    unknown_user = failure_message(make_server(users=alice()), client_for(SHA256, "bob", "x"))
    assert unknown_user == wrong_password


def test_failure_message_names_the_mechanism_but_not_the_password():
    """The invalid-credentials message names the mechanism and does not echo the password."""
    message = failure_message(make_server(users=alice()), client_for(SHA256, "alice", "hunter2"))
    assert "SCRAM-SHA-256" in message and "hunter2" not in message


def test_unknown_user_gets_the_same_salt_twice():
    """Two attempts for the same unknown user are offered the same salt."""
    assert salt_offered(make_server(), "bob") == salt_offered(make_server(), "bob")


def test_unknown_users_get_different_salts():
    """Two different unknown users are offered different salts."""
    assert salt_offered(make_server(), "bob") != salt_offered(make_server(), "carol")


def test_unknown_user_salt_depends_on_the_fake_salt_key():
    """The fake salt changes with the server's fake_salt_key."""
    other = make_server(fake_salt_key=b"another key")
    assert salt_offered(make_server(), "bob") != salt_offered(other, "bob")


def test_unknown_user_salt_differs_per_mechanism():
    """An unknown user is offered different salts for SHA-256 and SHA-512."""
    assert salt_offered(make_server(SHA256), "bob") != salt_offered(make_server(SHA512), "bob")


def test_unknown_user_salt_has_the_real_salt_length():
    """The fake salt is as long as a real random salt."""
    assert len(base64.b64decode(salt_offered(make_server(), "bob"))) == SALT_LENGTH


def test_unknown_user_is_offered_default_iterations():
    """An unknown user is offered 4096 iterations."""
    assert make_server().first("n,,n=bob,r=abc").endswith(",i=4096")


def test_credential_of_another_mechanism_counts_as_unknown():
    """A lookup answering with a SHA-512 credential does not authenticate a SHA-256 exchange."""
    server = make_server(SHA256, alice(SHA512))
    with pytest.raises(SaslAuthenticationException):
        run_exchange(server, client_for(SHA256, "alice", "alice-secret"))


# -- delegation tokens --------------------------------------------------------


def token_server(**kwargs) -> ScramServer:
    tokens = {TOKEN_ID: TokenIdentity(owner="User:alice", hmac=TOKEN_HMAC)}
    return make_server(tokens=tokens, **kwargs)


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_token_authenticates_as_its_owner(mechanism):
    """tokenauth=true with base64(hmac) as password authenticates as the token's owner."""
    server = token_server(mechanism=mechanism)
    run_token_exchange(server, client_for(mechanism, TOKEN_ID, TOKEN_PASSWORD))
    assert server.principal == "User:alice"


def test_token_login_is_token_authenticated():
    """A token login is flagged token_authenticated."""
    server = token_server()
    run_token_exchange(server, client_for(SHA256, TOKEN_ID, TOKEN_PASSWORD))
    assert server.token_authenticated is True


def test_token_is_offered_4096_iterations():
    """Token credentials are offered at 4096 iterations."""
    first = token_server().first(f"n,,n={TOKEN_ID},r=abc,tokenauth=true")
    assert first.endswith(",i=4096")


def test_token_with_wrong_password_fails():
    """A token id with a wrong password fails."""
    with pytest.raises(SaslAuthenticationException):
        run_token_exchange(token_server(), client_for(SHA256, TOKEN_ID, "wrong"))


def test_unknown_token_fails_like_a_wrong_password():
    """An unknown token id gets exactly the error message a wrong token password gets."""
    messages = []
    for token_id, password in ((TOKEN_ID, "wrong"), ("no-such-token", TOKEN_PASSWORD)):
        with pytest.raises(SaslAuthenticationException) as raised:
            run_token_exchange(token_server(), client_for(SHA256, token_id, password))
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


def test_known_and_unknown_tokens_both_get_stable_salts():
    """A real token and an unknown token are each offered the same salt on every attempt."""

    def salt(token_id):
        return token_server().first(f"n,,n={token_id},r=abc,tokenauth=true").split(",")[1]

    assert (salt(TOKEN_ID), salt("nope")) == (salt(TOKEN_ID), salt("nope"))


def test_token_without_tokenauth_is_not_a_token_login():
    """Without the tokenauth extension the token id is looked up as a user and fails."""
    with pytest.raises(SaslAuthenticationException):
        run_exchange(token_server(), client_for(SHA256, TOKEN_ID, TOKEN_PASSWORD))


def test_tokenauth_without_token_lookup_fails():
    """A token login against a server without token support fails at the first message."""
    with pytest.raises(SaslAuthenticationException):
        make_server().first(f"n,,n={TOKEN_ID},r=abc,tokenauth=true")


# -- tampering and malformed messages ------------------------------------------


def test_tampered_nonce_fails():
    """A client-final with another nonce fails even when its proof covers that nonce."""
    server = make_server(users=alice())
    bare = "n=alice,r=abc"
    server_first = server.first("n,,n=alice,r=abc")
    final = reference_client_final(SHA256, b"alice-secret", bare, server_first, nonce="abcX")
    with pytest.raises(SaslAuthenticationException, match="nonce"):
        server.final(final)


# -- librdkafka < 2.6.1's doubled client nonce (issue 22; ScramSaslServer.java in Kafka 3.8.1-3.9.x accepts a
# client-final nonce that ends with the server-first one, Kafka 4 only the server-first one) ----------------------

@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_the_doubled_client_nonce_is_accepted_by_default(mechanism):
    """r=<cnonce><cnonce><snonce> with a proof over that client-final logs in, and server-final signs it."""
    server = make_server(mechanism, alice(mechanism), nonce_factory=lambda: "srv")
    server_first = server.first("n,,n=alice,r=abc")
    final = reference_client_final(mechanism, b"alice-secret", "n=alice,r=abc", server_first, nonce="abcabcsrv")
    assert server.final(final).startswith("v=") and server.principal == "User:alice"


def test_the_doubled_client_nonce_is_refused_when_the_setting_says_so():
    """accept_doubled_client_nonce=False (Kafka 4): the same message fails on its nonce."""
    server = make_server(users=alice(), nonce_factory=lambda: "srv", accept_doubled_client_nonce=False)
    server_first = server.first("n,,n=alice,r=abc")
    final = reference_client_final(SHA256, b"alice-secret", "n=alice,r=abc", server_first, nonce="abcabcsrv")
    with pytest.raises(SaslAuthenticationException, match="nonce"):
        server.final(final)


@pytest.mark.parametrize("nonce", ["xabcsrv", "abcabcabcsrv", "abcabcsr", "abcsrvabc", "abcsrvsrv"])
def test_only_the_doubled_form_is_accepted(nonce):
    """Anything else that merely ends with (or contains) the server-first nonce fails, proof or not (Kafka 3.9's
    endsWith would take the first two)."""
    server = make_server(users=alice(), nonce_factory=lambda: "srv")
    server_first = server.first("n,,n=alice,r=abc")
    final = reference_client_final(SHA256, b"alice-secret", "n=alice,r=abc", server_first, nonce=nonce)
    with pytest.raises(SaslAuthenticationException, match="nonce"):
        server.final(final)


def test_the_doubled_nonce_must_be_what_the_proof_covers():
    """A proof computed over the plain nonce does not log in with the doubled one put in its place."""
    server = make_server(users=alice(), nonce_factory=lambda: "srv")
    server_first = server.first("n,,n=alice,r=abc")
    final = reference_client_final(SHA256, b"alice-secret", "n=alice,r=abc", server_first)
    with pytest.raises(SaslAuthenticationException, match="credentials are not valid"):
        server.final(final.replace("r=abcsrv", "r=abcabcsrv"))


def test_tampered_channel_binding_fails():
    """A client-final whose c= is not the GS2 header sent fails even with a matching proof."""
    server = make_server(users=alice())
    bare = "n=alice,r=abc"
    server_first = server.first("n,," + bare)
    final = reference_client_final(SHA256, b"alice-secret", bare, server_first, gs2_header="y,,")
    with pytest.raises(SaslAuthenticationException, match="channel binding"):
        server.final(final)


def test_authzid_different_from_username_is_rejected():
    """An authorization id other than the user name is rejected."""
    with pytest.raises(SaslAuthenticationException):
        make_server(users=alice()).first("n,a=admin,n=alice,r=abc")


@pytest.mark.parametrize(
    "client_first",
    [
        "p=tls-unique,,n=alice,r=abc",  # channel binding required
        "n,,n=al=3Xice,r=abc",  # bad escape
        "n,,n=alice=,r=abc",  # dangling '='
        "n,,n=,r=abc",  # empty user name
        "n,,m=ext,n=alice,r=abc",  # mandatory extension
        "n,,n=alice,r=abc,color=blue",  # unsupported extension
        "n,,n=alice",  # no nonce
        "x,,n=alice,r=abc",  # bad GS2 flag
        "n,,r=abc,n=alice",  # attributes out of order
    ],
)
def test_malformed_client_first_is_rejected(client_first):
    """A client-first message the server cannot accept fails with SaslAuthenticationException."""
    with pytest.raises(SaslAuthenticationException):
        make_server(users=alice()).first(client_first)


def test_malformed_proof_is_rejected():
    """A client-final whose proof is not base64 fails."""
    server = make_server(users=alice(), nonce_factory=lambda: "srv")
    server.first("n,,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationException, match="base64"):
        server.final("c=biws,r=abcsrv,p=!!!")


# -- state machine ----------------------------------------------------------------


def test_final_before_first_is_illegal():
    """Sending client-final first raises IllegalSaslStateException."""
    with pytest.raises(IllegalSaslStateException):
        make_server(users=alice()).final("c=biws,r=abc,p=AAAA")


def test_first_twice_is_illegal():
    """A second client-first raises IllegalSaslStateException."""
    server = make_server(users=alice())
    server.first("n,,n=alice,r=abc")
    with pytest.raises(IllegalSaslStateException):
        server.first("n,,n=alice,r=abc")


def test_exchange_is_over_after_a_failure():
    """After a failed final, another final raises IllegalSaslStateException."""
    server = make_server(users=alice())
    client = client_for(SHA256, "alice", "wrong")
    client.set_server_first(server.first(client.get_client_first()))
    final = client.get_client_final()
    with pytest.raises(SaslAuthenticationException):
        server.final(final)
    with pytest.raises(IllegalSaslStateException):
        server.final(final)


def test_exchange_is_over_after_an_out_of_order_call():
    """After an out-of-order call the exchange cannot be resumed."""
    server = make_server(users=alice())
    with pytest.raises(IllegalSaslStateException):
        server.final("c=biws,r=abc,p=AAAA")
    with pytest.raises(IllegalSaslStateException):
        server.first("n,,n=alice,r=abc")


def test_principal_before_completion_is_illegal():
    """Reading the principal before the exchange completes raises IllegalSaslStateException."""
    server = make_server(users=alice())
    server.first("n,,n=alice,r=abc")
    with pytest.raises(IllegalSaslStateException):
        _ = server.principal


def test_unknown_mechanism_is_unsupported():
    """A server for mechanism UNKNOWN cannot be created."""
    with pytest.raises(UnsupportedSaslMechanismException):
        make_server(ScramMechanism.UNKNOWN)


def test_server_accepts_a_mechanism_name():
    """The mechanism may be given by its SASL name."""
    assert make_server("SCRAM-SHA-512").mechanism is SHA512


# -- secrets stay out of reprs ------------------------------------------------------


def test_server_repr_has_no_secrets():
    """The server's repr mid-exchange contains no salt, key or fake-salt key."""
    credential = alice()["alice"]
    server = make_server(users={"alice": credential})
    server.first("n,,n=alice,r=abc")
    text = repr(server)
    secrets = (credential.salt, credential.stored_key, credential.server_key, FAKE_SALT_KEY)
    for secret in secrets:
        for form in (repr(secret), secret.hex(), b64(secret)):
            assert form not in text


def test_token_identity_repr_hides_the_hmac():
    """A TokenIdentity's repr shows the owner but not the HMAC."""
    text = repr(TokenIdentity(owner="User:alice", hmac=TOKEN_HMAC))
    assert "User:alice" in text and TOKEN_PASSWORD not in text and TOKEN_HMAC.hex() not in text


# -- the client nonce: RFC 5802's printable (%x21-2B / %x2D-7E), at least one character ----------------------------

_PRINTABLE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != ",")


@settings(max_examples=200)
@given(nonce=st.text(alphabet=_PRINTABLE, min_size=1, max_size=80))
def test_a_printable_client_nonce_is_taken(nonce):
    server = make_server(users=alice())
    assert server.first(f"n,,n=alice,r={nonce}").startswith(f"r={nonce}")


@settings(max_examples=200)
@given(before=st.text(alphabet=_PRINTABLE, max_size=20), after=st.text(alphabet=_PRINTABLE, max_size=20),
       bad=st.characters(blacklist_characters=_PRINTABLE + ",", blacklist_categories=("Cs",)))
def test_a_client_nonce_with_any_other_character_is_refused(before, after, bad):
    """A space, a control character, DEL or anything past ASCII, wherever it stands in the nonce."""
    server = make_server(users=alice())
    with pytest.raises(SaslAuthenticationException, match="client nonce"):
        server.first(f"n,,n=alice,r={before}{bad}{after}")


def test_an_empty_client_nonce_is_refused():
    with pytest.raises(SaslAuthenticationException, match="client nonce"):
        make_server(users=alice()).first("n,,n=alice,r=")
