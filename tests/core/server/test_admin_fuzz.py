"""Seeded fuzzing past the front door: the SCRAM parser behind a valid SaslHandshake, and the admin
handlers behind a super user's login (test_server_fuzz.py fuzzes whole frames before login, where
authorization alone would keep the log unchanged).

- SASL: after a valid SaslHandshake v1, SaslAuthenticate frames whose SCRAM message (client-first, or
  client-final after a real server-first) is mutated, or whose frame body is; every answer is a whole
  SaslAuthenticate response with the request's correlation id, else the server closes.
- Admin: User:admin (a super user) logged in on SASL_PLAINTEXT sends mutated Describe*, Create*, Delete*,
  Alter*, Renew* and Expire* frames: strange field values that still encode (enum codes outside the enums,
  edge integers, odd strings, empty or repeated lists), mutated body bytes, or both (header intact, size
  consistent).  A read-only request
  never changes the log; a write may (the mutation may still be a valid request), but afterwards the
  server still answers, and the store re-opened from its directory replays to the live image: nothing
  half-written or corrupt.

Each fuzzer runs in a child Python process (server thread and client loop together), so a server that
dies outright (a native abort in the decoder, say) fails the test with the child's exit status and
stderr instead of taking the test run down with it.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from scramp import ScramClient

from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.errors import ErrorCode
from secmeta.core.server.config import ServerConfig
from secmeta.core.wire.codec import build, decode_response, encode_request, request_class
from secmeta.events.keyring import Keyring
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.serverkit import ADMIN, ADMIN_PASSWORD, TOKEN_SECRET, RawClient, running_server

SEED = 20261124
SASL_CASES = 1500
ADMIN_CASES = 2000
CLIENT_ID = "fuzzer"
SASL_AUTHENTICATE = 36
#: No slowing of failed logins: the fuzzer fails thousands from one address on purpose.
NO_BACKOFF = ServerConfig(failed_authentication_delay_ms=0, failed_authentications_burst=10**6,
                          failed_authentications_per_second=1e6)


def _header_size(cls) -> int:
    """Size prefix + request header (key, version, correlation id, client id; a tag byte if flexible)."""
    return 4 + 2 + 2 + 4 + 2 + len(CLIENT_ID) + (1 if cls.__flexible__ else 0)


def _frame(correlation_id: int, request) -> bytes:
    return encode_request(correlation_id, CLIENT_ID, request)


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Bit flips, a truncation, an insertion, an overwritten run or random bytes."""
    out = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0 and out:
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and out:
        out = out[:rng.randrange(len(out))]
    elif kind == 2:
        i = rng.randrange(len(out) + 1)
        out[i:i] = rng.choice([rng.randbytes(rng.randint(1, 8)), b",", b"=", b"=2C", b",m=x", b"\x00", b"\xff\xfe"])
    elif kind == 3 and out:
        i = rng.randrange(len(out))
        out[i:i + rng.randint(1, 8)] = bytes([rng.choice([0, 0x2C, 0x3D, 0x7F, 0xFF])]) * rng.randint(1, 8)
    else:
        out = bytearray(rng.randbytes(rng.randint(0, 40)))
    return bytes(out)


def _mutate_body(rng: random.Random, frame: bytes, header: int) -> bytes:
    """The frame with its body mutated and its size prefix made consistent again."""
    data = frame[:header] + _mutate_bytes(rng, frame[header:])
    return struct.pack(">i", len(data) - 4) + data[4:]


def _read_response(raw: RawClient, api_key: int, version: int, correlation_id: int):
    """The decoded response, or None if the server closed; a wrong id or a partial frame fails."""
    payload = raw.next_frame()
    if payload is None:
        return None
    got, response = decode_response(api_key, version, payload)
    assert got == correlation_id, (got, correlation_id)
    return response


class _Errors(logging.Handler):
    """ERROR records of the server's logger (a handler that crashed logs one)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []
        logging.getLogger("secmeta.server").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


REPO = Path(__file__).resolve().parents[3]


class ServerProcessKilled(Exception):
    """The process hosting the server was killed by a signal (the server did not stay up)."""


def _in_child(function: str, directory: Path) -> None:
    """Run ``function(directory)`` of this module in a child Python; its failure (an assertion, or the
    process killed by a signal: ServerProcessKilled) is this test's, with the child's stderr."""
    code = f"import sys; from tests.core.server.test_admin_fuzz import {function}; {function}(sys.argv[1])"
    child = subprocess.run([sys.executable, "-c", code, str(directory)], cwd=REPO, capture_output=True,
                           text=True, timeout=180, env={**os.environ, "RUST_BACKTRACE": "0"})
    if child.returncode < 0:
        raise ServerProcessKilled(f"the server's process was killed by {signal.Signals(-child.returncode).name}:\n"
                                  f"{child.stderr[-4000:]}")
    if child.returncode != 0:
        raise AssertionError(f"the fuzzing process exited with {child.returncode}:\n{child.stderr[-4000:]}")


def huge_array(directory: str) -> None:
    """An unauthenticated DescribeUserScramCredentials v0 whose users array announces 2**32 - 2 items."""
    with running_server(Path(directory), "PLAINTEXT://127.0.0.1:0") as server:
        header = struct.pack(">hhih", 50, 0, 1, len(CLIENT_ID)) + CLIENT_ID.encode() + b"\0"
        payload = header + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])   # unsigned varint 2**32 - 1: length + 1
        with RawClient.connect(server) as raw, RawClient.connect(server) as bystander:
            raw.send_bytes(struct.pack(">i", len(payload)) + payload)
            assert raw.closed_by_server()
            assert bystander.api_versions().error_code == 0


def test_a_huge_compact_array_length_closes_only_that_connection(tmp_path):
    """A frame announcing more items than it has bytes is malformed: that connection closes, the server
    (and every other connection) stays up.  kio 0.6.5's native reader allocates an announced array
    length up front (2**32 - 2 items made Rust abort the process), so secmeta.core.wire.bounds checks every
    length against the bytes left first, as Kafka's generated readers do ("Tried to allocate a
    collection of size N, but there are only M bytes remaining", MessageUtil / the generated Data
    classes)."""
    _in_child("huge_array", tmp_path)


# -- SCRAM behind a valid SaslHandshake ------------------------------------------------------------

def _sasl_case(rng: random.Random, server) -> str:
    """One connection: a valid handshake, then one or two SaslAuthenticate frames, one of them mutated."""
    mechanism = rng.choice(["SCRAM-SHA-256", "SCRAM-SHA-512"])
    version = rng.randrange(3)
    auth_cls = request_class(SASL_AUTHENTICATE, version)
    with RawClient.connect(server, "SASL_PLAINTEXT", timeout=10) as raw:
        raw.send_bytes(_frame(1, build(request_class(17, 1), mechanism=mechanism)))
        handshake = _read_response(raw, 17, 1, 1)
        assert handshake is not None and int(handshake.error_code) == 0
        user = rng.choice(["admin", "nobody", "ad=3Dmin"])
        client = ScramClient([mechanism], user, ADMIN_PASSWORD)
        first = client.get_client_first()
        if rng.random() < 0.2:
            first += ",tokenauth=true"
        scenario = rng.choice(["first", "final", "frame"])
        if scenario == "first":
            message = _mutate_bytes(rng, first.encode())
        else:
            message = first.encode()
        frame = _frame(2, build(auth_cls, auth_bytes=message))
        if scenario == "frame":
            frame = _mutate_body(rng, frame, _header_size(auth_cls))
        raw.send_bytes(frame)
        answer = _read_response(raw, SASL_AUTHENTICATE, version, 2)
        if answer is None:
            return f"{scenario}: closed"
        code = ErrorCode(int(answer.error_code))
        if scenario != "final" or code != ErrorCode.NONE:
            return f"{scenario}: {code.name}"
        client.set_server_first(bytes(answer.auth_bytes).decode())
        final = _mutate_bytes(rng, client.get_client_final().encode())
        raw.send_bytes(_frame(3, build(auth_cls, auth_bytes=final)))
        answer = _read_response(raw, SASL_AUTHENTICATE, version, 3)
        return "final: closed" if answer is None else f"final: {ErrorCode(int(answer.error_code)).name}"


def fuzz_scram(directory: str) -> None:
    """1500 seeded SCRAM exchanges with a mutated message against a server in this process."""
    errors = _Errors()
    rng = random.Random(SEED)
    with running_server(Path(directory), "SASL_PLAINTEXT://127.0.0.1:0", config=NO_BACKOFF) as server:
        before = server.log_end()
        outcomes = Counter(_sasl_case(rng, server) for _ in range(SASL_CASES))
        assert server.log_end() == before
        assert not errors.messages, errors.messages[:5]
        # Every path was reached: mutated client-first and client-final messages and mutated frames
        # were refused with Kafka's SASL_AUTHENTICATION_FAILED (or the connection closed).
        for scenario in ("first", "final", "frame"):
            assert outcomes[f"{scenario}: SASL_AUTHENTICATION_FAILED"] > 0, outcomes
        assert set(outcomes) <= {f"{s}: {o}" for s in ("first", "final", "frame")
                                 for o in ("closed", "NONE", "SASL_AUTHENTICATION_FAILED")}, outcomes
        with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
            assert int(raw.sasl_login("admin", ADMIN_PASSWORD).error_code) == 0
            assert raw.api_versions().error_code == 0


@pytest.mark.slow  # a fuzzer
def test_mutated_scram_messages_fail_cleanly(tmp_path):
    """Each mutated SCRAM exchange is answered (a SaslAuthenticate response with the request's correlation
    id) or closed; nothing is written, no handler crashes, the server stays up and admin still logs in."""
    _in_child("fuzz_scram", tmp_path)


# -- admin requests by a super user -----------------------------------------------------------------

READ_ONLY = {29, 41, 50, 60}        # DescribeAcls, DescribeDelegationToken, DescribeUserScramCredentials, DescribeCluster
VERSIONS = {29: (1, 3), 30: (1, 3), 31: (1, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 50: (0, 0),
            51: (0, 0), 60: (0, 2)}
SEEDED_ACLS = [AclBinding.of(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
               for rtype, name, pattern, principal, op in [
                   (ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:eve", AclOperation.READ),
                   (ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:eve", AclOperation.WRITE),
                   (ResourceType.GROUP, "etl", PatternType.LITERAL, "User:bob", AclOperation.READ)]]


def _admin_values(token_hmac: bytes) -> dict[int, dict]:
    """Valid requests for each admin API; none touches admin's own credentials."""
    return {
        29: dict(resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=4, principal_filter=None,
                 host_filter=None, operation=1, permission_type=1),
        30: dict(creations=[dict(resource_type=2, resource_name="payments", resource_pattern_type=3,
                                 principal="User:eve", host="10.0.0.0/8", operation=3, permission_type=3),
                            dict(resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                                 principal="User:bob", host="*", operation=8, permission_type=2)]),
        31: dict(filters=[dict(resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3,
                               principal_filter="User:eve", host_filter=None, operation=3, permission_type=3)]),
        38: dict(owner_principal_type="User", owner_principal_name="eve",
                 renewers=[dict(principal_type="User", principal_name="bob")], max_lifetime=3_600_000),
        39: dict(hmac=token_hmac, renew_period=60_000),
        40: dict(hmac=token_hmac, expiry_time_period=120_000),
        41: dict(owners=[dict(principal_type="User", principal_name="admin")]),
        50: dict(users=[{"name": "eve"}, {"name": "nobody"}]),
        51: dict(deletions=[dict(name="eve", mechanism=2)],
                 upsertions=[dict(name="frank", mechanism=1, iterations=4096, salt=b"s" * 16,
                                  salted_password=b"p" * 32)]),
        60: dict(include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=False),
    }


_SMALL = ("resource_type", "pattern_type", "operation", "permission_type", "mechanism", "endpoint_type")
_STRINGS = ["", "*", "orders", "User:eve", "User:*", "eve", "admin", "User:", ":", "a" * 300, "ü-ß", "10.0.0.1/33",
            "10.0.0.0/8", "kafka-cluster", "User:admin"]


def _mutate_value(rng: random.Random, name: str, value):
    """A strange but encodable value for field ``name``: enum codes outside the enums, edge integers,
    odd strings, empty or duplicated lists (structure-aware: the frame still decodes)."""
    if isinstance(value, list):
        items = [_mutate_values(rng, item) if isinstance(item, dict) else item for item in value]
        return rng.choice([items, [], items + items, items[:1] * rng.randint(2, 5)])
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        if any(part in name for part in _SMALL):
            return rng.randint(-2, 15)
        if name == "iterations":
            return rng.choice([-1, 0, 1, 4095, 4096, 16384, 2**31 - 1])
        return rng.choice([-(2**63), -2, -1, 0, 1, 60_000, 2**62])
    if isinstance(value, bytes):
        return rng.choice([b"", b"x", rng.randbytes(rng.randint(1, 80)), value[:-1], value + b"\0"])
    return rng.choice(_STRINGS + ([None] if value is None or "filter" in name or "owner" in name else []))


def _mutate_values(rng: random.Random, values: dict) -> dict:
    """``values`` with about a third of its fields (at any depth) mutated."""
    return {name: _mutate_value(rng, name, value) if rng.random() < 0.35
            else (_mutate_values(rng, value) if isinstance(value, dict) else value)
            for name, value in values.items()}


def _admin_frame(rng: random.Random, correlation_id: int, cls, values: dict) -> bytes:
    """A request frame with mutated field values (when they still encode), its body bytes mutated too
    one time in three, or only its body bytes mutated."""
    if rng.random() < 0.6:
        try:
            frame = _frame(correlation_id, build(cls, **_mutate_values(rng, values)))
        except Exception:  # noqa: BLE001 - a value kio cannot encode: mutate bytes instead
            frame = None
        if frame is not None:
            return _mutate_body(rng, frame, _header_size(cls)) if rng.random() < 0.33 else frame
    return _mutate_body(rng, _frame(correlation_id, build(cls, **values)), _header_size(cls))


class _AdminConnection:
    """A SASL_PLAINTEXT connection logged in as admin, reopened whenever the server closes it."""

    def __init__(self, server):
        self.server = server
        self.raw: RawClient | None = None
        self.logins = 0

    def exchange(self, frame: bytes, api_key: int, version: int):
        if self.raw is None:
            self.raw = RawClient.connect(self.server, "SASL_PLAINTEXT", timeout=10)
            assert int(self.raw.sasl_login("admin", ADMIN_PASSWORD).error_code) == 0, "admin cannot log in"
            self.logins += 1
        correlation_id = struct.unpack_from(">i", frame, 8)[0]
        self.raw.send_bytes(frame)
        response = _read_response(self.raw, api_key, version, correlation_id)
        if response is None:
            self.close()
        return response

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None


def fuzz_admin(directory: str) -> None:
    """2000 seeded mutated admin frames from a logged-in super user against a server in this process."""
    directory = Path(directory)
    errors = _Errors()
    config = StoreConfig(token_secret=TOKEN_SECRET, allow_plaintext_passwords=True)
    users = {"admin": ADMIN_PASSWORD, "eve": "eve-pw", "bob": "bob-pw"}
    with running_server(directory, "SASL_PLAINTEXT://127.0.0.1:0", config=NO_BACKOFF, store_config=config,
                        users=users) as server:
        assert not any(server.store.create_acls(SEEDED_ACLS, context=ADMIN))
        token = server.store.create_delegation_token(context=ADMIN)
        values = _admin_values(token.hmac)
        corpus = [(key, version, request_class(key, version))
                  for key, (low, high) in VERSIONS.items() for version in range(low, high + 1)]
        rng = random.Random(SEED)
        conn = _AdminConnection(server)
        outcomes: Counter[str] = Counter()
        try:
            for n in range(ADMIN_CASES):
                key, version, cls = rng.choice(corpus)
                frame = _admin_frame(rng, n, cls, values[key])
                before = server.log_end()
                response = conn.exchange(frame, key, version)
                after = server.log_end()
                if key in READ_ONLY:
                    assert after == before, (key, version, frame.hex())
                outcomes["closed" if response is None else ("wrote" if after > before else "answered")] += 1
        finally:
            conn.close()
        assert not errors.messages, errors.messages[:5]
        # The fuzzer reached every path: refused frames, answered ones, and writes by mutated requests.
        assert min(outcomes["closed"], outcomes["answered"], outcomes["wrote"]) > 0, outcomes
        with RawClient.connect(server, "SASL_PLAINTEXT") as raw:
            assert int(raw.sasl_login("admin", ADMIN_PASSWORD).error_code) == 0
            assert raw.api_versions().error_code == 0
        keyring = Keyring.from_file(directory / "keys.json")
        with SecurityStore.open(directory / "store", server.store.config, keyring=keyring,
                                read_only=True) as reopened:
            assert reopened.image == server.store.image
            assert reopened.image.next_offset == server.log_end()


@pytest.mark.slow  # a fuzzer
def test_mutated_admin_requests_by_a_super_user_leave_a_consistent_store(tmp_path):
    """Each mutated admin frame is answered (its API, its correlation id) or closed; read-only ones never
    change the log; afterwards the server answers and the store re-opened from disk replays to exactly the
    live image."""
    _in_child("fuzz_admin", tmp_path)
