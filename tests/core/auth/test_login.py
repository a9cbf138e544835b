"""The SCRAM login backend a store wires (secmeta.core.auth.login.ScramLogin): what a login sees of the live image."""

from __future__ import annotations

import base64

from scramp import ScramClient

from secmeta.core import ApiException, ErrorCode, ScramMechanism
from tests.storekit import ADMIN, upsert


def _login(store, user: str, password: str, *, token: bool = False, mechanism: str = "SCRAM-SHA-256"):
    """Run a whole SCRAM exchange against the store; the server side on success, else the ApiException."""
    client = ScramClient([mechanism], user, password)
    first = client.get_client_first() + (",tokenauth=true" if token else "")
    client.client_first_bare = first[3:]
    server = store.scram_server(mechanism)
    client.set_server_first(server.first(first))
    try:
        client.set_server_final(server.final(client.get_client_final()))
    except ApiException as exc:
        return exc
    return server


def _token_password(token) -> str:
    return base64.b64encode(token.hmac).decode()


def test_a_token_logs_in_until_it_expires(open_store, clock):
    """A token's HMAC is its password while it lives; once its expiry passes it fails as an unknown name."""
    store = open_store(token_expiry_time_ms=60_000)
    token = store.create_delegation_token(context=ADMIN)
    assert _login(store, token.token_id, _token_password(token), token=True).principal == "User:admin"
    clock.t += 61
    refused = _login(store, token.token_id, _token_password(token), token=True)
    assert isinstance(refused, ApiException) and refused.error.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_credential_altered_after_the_exchange_began_is_the_one_checked_at_its_end(open_store):
    """The lookups read the store's live image: a password changed between two logins takes effect at once."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", b"old")], context=ADMIN)
    assert _login(store, "alice", "old").principal == "User:alice"
    store.alter_user_scram_credentials([upsert("alice", b"new")], context=ADMIN)
    assert isinstance(_login(store, "alice", "old"), ApiException)
    assert _login(store, "alice", "new").principal == "User:alice"


def test_an_unknown_user_is_announced_the_configured_iterations(open_store):
    """server-first for an unknown name carries the store's default iterations for the mechanism, as a known
    user's would, so the count does not tell the names apart."""
    store = open_store(default_iterations={ScramMechanism.SCRAM_SHA_256: 8192, ScramMechanism.SCRAM_SHA_512: 4096})
    server = store.scram_server(ScramMechanism.SCRAM_SHA_256)
    assert server.first("n,,n=nobody,r=abc").endswith(",i=8192")
