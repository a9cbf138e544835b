"""Seeded fuzzing: thousands of mutated valid frames; the server answers or closes, stays up, writes nothing.

Every case opens a connection (PLAINTEXT as User:ANONYMOUS, or SASL_PLAINTEXT before
authentication), sends one mutated frame, half-closes and reads until the server closes.
A reply must be whole frames carrying the request's correlation id.
"""

from __future__ import annotations

import logging
import random
import socket
import struct

import pytest

from secmeta.core.wire.codec import ApiKey, build, encode_request, request_class
from tests.serverkit import RawClient

SEED = 20261124
CASES = 5000

_VALUES = {
    3: dict(topics=[{"name": "orders", "topic_id": None}], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True, include_topic_authorized_operations=True),
    17: dict(mechanism="SCRAM-SHA-256"),
    18: dict(client_software_name="fuzz", client_software_version="1.0"),
    29: dict(resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3, principal_filter=None,
             host_filter=None, operation=1, permission_type=1),
    30: dict(creations=[dict(resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:eve",
                             host="*", operation=3, permission_type=3)]),
    31: dict(filters=[dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                           principal_filter=None, host_filter=None, operation=1, permission_type=1)]),
    36: dict(auth_bytes=b"n,,n=admin,r=fuzznonce"),
    38: dict(owner_principal_type=None, owner_principal_name=None,
             renewers=[dict(principal_type="User", principal_name="bob")], max_lifetime=-1),
    39: dict(hmac=b"\x01" * 64, renew_period=-1),
    40: dict(hmac=b"\x01" * 64, expiry_time_period=-1),
    41: dict(owners=None),
    48: dict(components=[dict(entity_type="user", match_type=0, match="alice")], strict=False),
    49: dict(entries=[dict(entity=[dict(entity_type="user", entity_name="alice")],
                           ops=[dict(key="producer_byte_rate", value=1024.0, remove=False)])], validate_only=False),
    50: dict(users=[{"name": "admin"}]),
    51: dict(deletions=[dict(name="admin", mechanism=1)],
             upsertions=[dict(name="eve", mechanism=2, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 64)]),
    60: dict(include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=False),
}


def _corpus() -> list[bytes]:
    frames = []
    for key in sorted(ApiKey):
        low, high = key.versions
        for version in range(low, high + 1):
            frames.append(encode_request(7, "fuzzer", build(request_class(key, version), **_VALUES[key])))
    return frames


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(6)
    if kind == 0:                                   # bit flips in the payload (header included)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:                                 # truncated payload, size kept consistent
        data = data[:rng.randrange(4, len(data))]
        data[:4] = struct.pack(">i", len(data) - 4)
    elif kind == 2:                                 # a size that lies (longer, shorter, negative, huge)
        data[:4] = struct.pack(">i", rng.choice([len(data) - 4 + rng.randint(1, 64), rng.randint(0, len(data) - 4),
                                                  -rng.randint(1, 2**31 - 1), rng.randint(2**27, 2**31 - 1)]))
    elif kind == 3:                                 # random bytes inserted or appended, size consistent
        i = rng.randrange(4, len(data) + 1)
        data[i:i] = rng.randbytes(rng.randint(1, 16))
        data[:4] = struct.pack(">i", len(data) - 4)
    elif kind == 4:                                 # a run of bytes overwritten with 0x00 or 0xff
        i = rng.randrange(4, len(data))
        data[i:i + rng.randint(1, 8)] = bytes([rng.choice([0, 255])]) * rng.randint(1, 8)
        data[:4] = struct.pack(">i", len(data) - 4)
    else:                                           # a valid header with a random body
        data = data[:4 + 10] + rng.randbytes(rng.randint(0, 40))
        data[:4] = struct.pack(">i", len(data) - 4)
    return bytes(data)


def _exchange(address: tuple[str, int], frame: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        try:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return b""  # the server already closed
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def _check_reply(frame: bytes, reply: bytes) -> None:
    """Whole response frames, each with the correlation id the (mutated) request carried."""
    sent = struct.unpack_from(">i", frame, 8)[0] if len(frame) >= 12 else None
    at = 0
    while at < len(reply):
        size = struct.unpack_from(">i", reply, at)[0]
        assert at + 4 + size <= len(reply), "a partial response frame"
        assert struct.unpack_from(">i", reply, at + 4)[0] == sent, "an unexpected correlation id"
        at += 4 + size


@pytest.mark.slow  # a fuzzer: 5000 mutations
def test_mutated_frames_are_answered_or_refused_and_change_nothing(shared_server, caplog):
    """5000 seeded mutations over every served API and version; afterwards the server answers and the log is unchanged."""
    caplog.set_level(logging.INFO, logger="secmeta.server")
    rng = random.Random(SEED)
    corpus = _corpus()
    before = shared_server.log_end()
    listeners = [shared_server.addresses["PLAINTEXT"], shared_server.addresses["SASL_PLAINTEXT"]]
    for _ in range(CASES):
        frame = _mutate(rng, rng.choice(corpus))
        _check_reply(frame, _exchange(rng.choice(listeners), frame))
    assert shared_server.log_end() == before
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]  # no handler crashed
    assert shared_server.thread.server.connection_count <= 2  # everything else was closed
    with RawClient.connect(shared_server) as raw:
        assert raw.api_versions().error_code == 0
