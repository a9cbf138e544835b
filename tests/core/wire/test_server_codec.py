"""secmeta.core.wire.codec as the server uses it: what a decoded request shows, and how responses are built."""

from __future__ import annotations

import pytest

from secmeta.core.server.call import BrokerInfo, Call
from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import (
    build,
    decode_request,
    encode_request,
    request_class,
    response_class,
)

SALTED = bytes(range(64))
SALT = b"pepper-salt-0123"
AUTH = b"n,,n=alice,r=client-nonce-secret"


def _decoded(request) -> object:
    return decode_request(encode_request(3, "client", request)[4:])


@pytest.mark.parametrize("request_, secrets", [
    (build(request_class(51, 0), deletions=[], upsertions=[dict(name="alice", mechanism=2, iterations=8192,
                                                                 salt=SALT, salted_password=SALTED)]),
     [SALTED, SALT]),
    (build(request_class(36, 2), auth_bytes=AUTH), [AUTH]),
    (build(request_class(39, 2), hmac=SALTED, renew_period=1000), [SALTED]),
])
def test_a_decoded_request_never_shows_its_secrets(request_, secrets):
    """RequestFrame and Call reprs name the API and version, never the request's salted password, salt,
    token HMAC or SASL message (not as bytes, hex or list of ints)."""
    frame = _decoded(request_)
    call = Call(store=None, context=RequestContext(principal="User:admin", host="10.0.0.1"), frame=frame,
                broker=BrokerInfo(1, "cluster", "localhost", 9092))
    for text in (repr(frame), repr(call), str(frame)):
        assert f"api_key={frame.api_key}" in text
        for secret in secrets:
            assert repr(secret)[2:-1] not in text and secret.hex() not in text
            assert str(list(secret))[1:-1] not in text and str(tuple(secret))[1:-1] not in text


def test_build_drops_a_field_only_other_versions_have():
    """DescribeCluster v0 has no endpoint_type (v1 added it): the value is dropped, so handlers serve every version."""
    response = build(response_class(60, 0), throttle_time=0, error_code=0, error_message=None, endpoint_type=1,
                     cluster_id="c", controller_id=1, brokers=[])
    assert not hasattr(response, "endpoint_type")


def test_build_refuses_a_field_no_version_has():
    """A key no version of the entity has is a caller's typo: a TypeError naming it, not a silent drop."""
    with pytest.raises(TypeError, match="no version has the field.*'endpoint_typ'"):
        build(response_class(60, 1), throttle_time=0, error_code=0, error_message=None, endpoint_typ=1,
              cluster_id="c", controller_id=1, brokers=[])


@pytest.mark.parametrize("version", [0, 1])
def test_a_repeated_sasl_handshake_decodes_with_its_own_correlation_id(version):
    """Every login sends the same SaslHandshake bytes but its own correlation id: each decodes as itself."""
    request = build(request_class(17, version), mechanism="SCRAM-SHA-256")
    for correlation_id in (7, 8, 7):
        frame = decode_request(encode_request(correlation_id, "client", request)[4:])
        assert (frame.correlation_id, frame.request.mechanism) == (correlation_id, "SCRAM-SHA-256")


def test_no_sasl_authenticate_message_is_kept_after_its_decoding():
    """SCRAM messages are decoded afresh each time: none stays among the decodings kept for repeated requests."""
    from secmeta.core.wire import codec

    codec._decoded_without_correlation.cache_clear()
    for n in range(3):
        frame = decode_request(encode_request(n, "client", build(request_class(36, 2), auth_bytes=AUTH))[4:])
        assert bytes(frame.request.auth_bytes) == AUTH
    assert codec._decoded_without_correlation.cache_info().currsize == 0
