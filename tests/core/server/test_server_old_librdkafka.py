"""Old librdkafka clients log in over TCP as Kafka 3.9 lets them (issue 22).

librdkafka before 2.6.1 (Debian 12's kcat ships 2.0.2) repeats the client nonce in client-final:
src/rdkafka_sasl_scram.c, rd_kafka_sasl_scram_build_client_final_message, formats the
client-final-message-without-proof as ``"c=%s,r=%.*s%.*s"`` with the client nonce and then the
server-first nonce (which already starts with the client nonce), and signs the AuthMessage built
from that (librdkafka issue 4895; fixed in 2.6.1).  Every SCRAM login of such a client failed with
"invalid credentials".  Kafka up to 3.8.0 did not check the client-final nonce; 3.8.1-3.9.x
(clients/src/main/java/org/apache/kafka/common/security/scram/internals/ScramSaslServer.java,
evaluateResponse in RECEIVE_CLIENT_FINAL_MESSAGE) check only that it ends with the server-first nonce,
so they accept it; Kafka 4 requires it equal.  secmeta accepts exactly the doubled form by default and
refuses it with ``secmeta.scram.accept.doubled.client.nonce=false``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pytest

from secmeta.core.wire.codec import build, request_class
from tests.serverkit import ADMIN, ADMIN_PASSWORD, RawClient, running_server

SETTING = "secmeta.scram.accept.doubled.client.nonce"
SASL_AUTHENTICATION_FAILED = 58


class Librdkafka202Scram:
    """The client side of a SCRAM exchange as librdkafka 2.0.2 writes it (src/rdkafka_sasl_scram.c)."""

    def __init__(self, mechanism: str, user: str, password: str):
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password = user, password.encode()
        # rd_kafka_sasl_scram_generate_nonce: 32 characters, each rd_jitter(0x2d, 0x7e)
        self.cnonce = "".join(chr(random.randint(0x2D, 0x7E)) for _ in range(32))
        self.auth_message = b""
        self.server_key = b""

    def client_first(self) -> bytes:
        # rd_kafka_sasl_safe_string escapes ',' and '=' in the user name
        name = self.user.replace("=", "=3D").replace(",", "=2C")
        self.bare = f"n={name},r={self.cnonce}"
        return f"n,,{self.bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        self.server_key = hmac.digest(salted, b"Server Key", self.hash)
        # the bug: "c=%s,r=%.*s%.*s" with state->cnonce, then the server nonce (already cnonce + snonce)
        without_proof = f"c=biws,r={self.cnonce}{attrs['r']}"
        self.auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(self.hash, client_key).digest(), self.auth_message, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.digest(self.server_key, self.auth_message, self.hash)
        return server_final.decode() == f"v={base64.b64encode(expected).decode()}"


def login(server, mechanism: str) -> tuple[int, bool]:
    """librdkafka 2.0.2's login as admin over SASL_PLAINTEXT: ApiVersions, SaslHandshake v1, two SaslAuthenticate
    v1.  (the last error code, whether the server's signature verified)."""
    client = Librdkafka202Scram(mechanism, "admin", ADMIN_PASSWORD)
    with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
        assert raw.api_versions().error_code == 0
        assert raw.request(build(request_class(17, 1), mechanism=mechanism)).error_code == 0
        first = raw.request(build(request_class(36, 1), auth_bytes=client.client_first()))
        assert first.error_code == 0
        final = raw.request(build(request_class(36, 1), auth_bytes=client.client_final(first.auth_bytes)))
        return final.error_code, final.error_code == 0 and client.verify(final.auth_bytes)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("old-librdkafka"), "SASL_PLAINTEXT://127.0.0.1:0") as srv:
        yield srv


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_2_0_logs_in_by_default(server, mechanism):
    """Reproduces issue 22: kcat on librdkafka 2.0.2 failed every login; its exact client-final now logs in and the
    server's signature (over the AuthMessage with the doubled nonce) verifies on the client's side."""
    assert login(server, mechanism) == (0, True)


def test_the_setting_refuses_the_doubled_nonce_as_kafka_4_does(server):
    """With secmeta.scram.accept.doubled.client.nonce=false (a logged setting) both mechanisms fail with Kafka's
    invalid-credentials answer; a current client still logs in; deleting the setting accepts it again."""
    server.store.alter_settings({SETTING: "false"}, context=ADMIN)
    try:
        assert [login(server, m)[0] for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")] == [SASL_AUTHENTICATION_FAILED] * 2
        with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
            assert raw.sasl_login("admin", ADMIN_PASSWORD, "SCRAM-SHA-512").error_code == 0
        assert [e.event_type for e in server.store.history()][-1] == "SecuritySettingAltered"
    finally:
        server.store.alter_settings({}, delete=[SETTING], context=ADMIN)
    assert login(server, "SCRAM-SHA-256") == (0, True)
