"""An ExpireDelegationToken response whose expiry timestamp is negative, as a KRaft broker answers a negative period.

Kafka's DelegationTokenControlManager.expireDelegationToken (metadata/src/main/java/org/apache/kafka/controller/
DelegationTokenControlManager.java) answers an expiry period < 0 with ``setExpiryTimestampMs(expiryTimePeriodMs)``:
the token is removed and the answer's ExpiryTimestampMs (int64 in ExpireDelegationTokenResponse.json) is, e.g., -1.
The client must read that answer rather than fail after the broker removed the token.  The frames below are spelled
out from the message's documented layout (response header, then ErrorCode int16, ExpiryTimestampMs int64,
ThrottleTimeMs int32; v2 flexible: tagged fields after the header and the body).
"""

import struct

import pytest

from secmeta.core.wire.codec import decode_response
from secmeta.core.wire.convert import ms_from

EXPIRE = 40


@pytest.mark.parametrize("expiry_ms", [-1, -86_400_000, 0, 1_795_805_455_000])
def test_an_expire_answer_with_any_int64_expiry_is_read_as_it_was_sent(expiry_ms):
    flexible = struct.pack(">i", 7) + b"\0" + struct.pack(">hqi", 0, expiry_ms, 25) + b"\0"
    plain = struct.pack(">ihqi", 7, 0, expiry_ms, 25)
    for version, frame in ((2, flexible), (1, plain)):
        correlation_id, response = decode_response(EXPIRE, version, frame)
        assert correlation_id == 7
        assert int(response.error_code) == 0
        assert ms_from(response.expiry_timestamp) == expiry_ms, version  # what RemoteAdmin returns
