"""SCRAM logins against a store: what a client that probes with bad messages or unknown names can learn."""

from __future__ import annotations

import secrets
import traceback

import pytest
from scramp import ScramClient

from core.errors import ApiException, ErrorCode, SaslAuthenticationException
from tests.storekit import ADMIN, upsert


def assert_refused_without_the_message(raised: pytest.ExceptionInfo, fragment: str) -> None:
    """SASL_AUTHENTICATION_FAILED, and no part of the offending message in repr, args or traceback."""
    exc = raised.value
    assert isinstance(exc, SaslAuthenticationException)
    assert exc.error.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    shown = [repr(exc), *map(repr, exc.args), "".join(traceback.format_exception(exc))]
    assert not any(fragment in text for text in shown)


def test_client_first_with_a_lone_surrogate_fails_authentication(open_store):
    """n=<name with a lone surrogate> is not UTF-8: refused like any malformed message, name not echoed."""
    server = open_store().scram_server("SCRAM-SHA-256")
    name = secrets.token_hex(8)  # made at run time: the traceback's source lines cannot hold it
    with pytest.raises(ApiException) as raised:
        server.first(f"n,,n={name}\ud800,r=abc")
    assert_refused_without_the_message(raised, name)


def test_client_final_with_a_lone_surrogate_fails_authentication(open_store):
    """A client-final with an extension value holding a lone surrogate is refused the same way."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", b"s3cret")], context=ADMIN)
    client = ScramClient(["SCRAM-SHA-256"], "alice", "s3cret")
    server = store.scram_server("SCRAM-SHA-256")
    client.set_server_first(server.first(client.get_client_first()))
    without_proof, _, proof = client.get_client_final().rpartition(",p=")
    value = secrets.token_hex(8)
    with pytest.raises(ApiException) as raised:
        server.final(f"{without_proof},x={value}\ud800,p={proof}")
    assert_refused_without_the_message(raised, value)
    assert not server.complete
