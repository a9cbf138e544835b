"""secmeta.core.wire.convert: secmeta values survive a trip through kio entities and wire bytes."""

from __future__ import annotations

import io

from kio.serial import entity_reader, entity_writer

from secmeta.core.errors import ApiError, ErrorCode
from secmeta.core.times import ms_to_datetime
from secmeta.core.types import (
    DelegationToken,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from secmeta.core.wire import convert
from secmeta.core.wire.codec import build, request_class, response_class
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

BINDINGS = [
    AclBinding.of(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*",
                  AclOperation.READ, AclPermissionType.ALLOW),
    AclBinding.of(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:bob", "10.0.0.0/8",
                  AclOperation.WRITE, AclPermissionType.DENY),
    AclBinding.of(ResourceType.USER, "User:carol", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW),
]


def _trip(cls, entity):
    """Write ``entity`` with kio and read it back."""
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    back, _ = entity_reader(cls)(buf.getvalue(), 0)
    return back


def test_acl_creations_round_trip_every_version():
    """CreateAcls v1-3 carry all seven binding fields, CREATE_TOKENS and USER included."""
    for version in (1, 2, 3):
        cls = request_class(30, version)
        req = _trip(cls, build(cls, creations=[convert.acl_creation_fields(b) for b in BINDINGS]))
        assert [convert.binding_from(c) for c in req.creations] == BINDINGS


def test_filters_round_trip_with_nulls():
    """A filter's None name, principal and host travel as null, for describe and delete."""
    filters = [AclBindingFilter.any(),
               AclBindingFilter.of(ResourceType.TOPIC, "orders-eu", PatternType.MATCH, "User:alice",
                                   None, AclOperation.READ, AclPermissionType.ALLOW)]
    for f in filters:
        cls = request_class(29, 3)
        assert convert.filter_from(_trip(cls, build(cls, **convert.filter_fields(f)))) == f
    cls = request_class(31, 2)
    req = _trip(cls, build(cls, filters=[convert.filter_fields(f) for f in filters]))
    assert [convert.filter_from(f) for f in req.filters] == filters


def test_unknown_enum_codes_read_as_unknown():
    """Codes beyond Kafka's enums read as UNKNOWN (Kafka's fromCode), never raise."""
    cls = request_class(29, 2)
    req = build(cls, resource_type_filter=99, resource_name_filter=None, pattern_type_filter=-3,
                principal_filter=None, host_filter=None, operation=77, permission_type=9)
    f = convert.filter_from(_trip(cls, req))
    assert (f.pattern.resource_type, f.pattern.pattern_type, f.entry.operation, f.entry.permission_type) == (
        ResourceType.UNKNOWN, PatternType.UNKNOWN, AclOperation.UNKNOWN, AclPermissionType.UNKNOWN)


def test_describe_resources_group_by_pattern():
    """DescribeAcls groups bindings by resource pattern; flattening gives them back."""
    groups = convert.resources_fields(BINDINGS)
    assert [len(g["acls"]) for g in groups] == [2, 1]
    cls = response_class(29, 3)
    resp = _trip(cls, build(cls, throttle_time=0, error_code=0, error_message=None, resources=groups))
    assert convert.bindings_from_resources(resp.resources) == BINDINGS


def test_scram_alterations_from_the_wire_keep_salt_and_salted_password():
    """A wire upsertion becomes an upsertion with salt and salted password, deletions first."""
    alterations = [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password=b"pw"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512),
    ]
    cls = request_class(51, 0)
    req = _trip(cls, build(cls, **convert.alter_request_fields(alterations)))
    deletion, upsertion = convert.alterations_from_request(req)
    assert deletion == alterations[1]
    assert upsertion.user == "alice" and upsertion.scram_credential_info.iterations == 8192
    assert upsertion.password is None and len(upsertion.salt) == 32 and len(upsertion.salted_password) == 32
    assert "pw" not in repr(upsertion) and repr(upsertion.salt) not in repr(upsertion)


def test_unsaltable_upsertion_goes_out_empty():
    """An unknown mechanism or empty password cannot be salted: empty bytes, for the server to refuse."""
    fields = convert.alter_request_fields([
        UserScramCredentialUpsertion("a", ScramCredentialInfo(ScramMechanism.UNKNOWN, 4096), password=b"pw"),
        UserScramCredentialUpsertion("b", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password=b""),
        UserScramCredentialUpsertion("c", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10**12), password=b"x"),
    ])
    assert [u["salted_password"] for u in fields["upsertions"]] == [b"", b"", b""]
    assert fields["upsertions"][2]["iterations"] == 2**31 - 1


def test_scram_results_round_trip():
    """Alter and describe results keep users, codes, messages and (mechanism, iterations)."""
    alter = {"alice": ApiError(), "bob": ApiError(ErrorCode.RESOURCE_NOT_FOUND, "no such credential")}
    cls = response_class(51, 0)
    resp = _trip(cls, build(cls, throttle_time=0, results=convert.alter_result_fields(alter)))
    assert convert.alter_results_from(resp.results) == alter
    described = {
        "alice": UserScramCredentialsDescription("alice", (
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192))),
        "zed": ApiError(ErrorCode.RESOURCE_NOT_FOUND, "User 'zed' has no SCRAM credentials"),
    }
    cls = response_class(50, 0)
    resp = _trip(cls, build(cls, throttle_time=0, error_code=0, error_message=None,
                            results=convert.describe_result_fields(described)))
    assert convert.describe_results_from(resp.results) == described
    cls = request_class(50, 0)
    assert convert.users_from_request(_trip(cls, build(cls, **convert.describe_users_fields(None)))) is None
    assert convert.users_from_request(_trip(cls, build(cls, **convert.describe_users_fields([])))) is None
    assert convert.users_from_request(_trip(cls, build(cls, **convert.describe_users_fields(["a", "b"])))) == ["a", "b"]


def test_errors_round_trip_and_unknown_codes_keep_their_name():
    """ApiError <-> (code, message); a code secmeta lacks keeps Kafka's name in the message."""
    err = ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not allowed")
    fields = convert.error_fields(err)
    assert convert.error_from(fields["error_code"], fields["error_message"]) == err
    assert convert.error_fields(ApiError()) == {"error_code": 0, "error_message": None}
    other = convert.error_from(39, "bad")
    assert other.code == ErrorCode.UNKNOWN_SERVER_ERROR and "INVALID_REPLICA_ASSIGNMENT (39)" in other.message


TOKEN = DelegationToken("tok-1", "User:alice", "User:admin", ("User:bob", "User:carol:x"),
                        1_700_000_000_123, 1_700_086_400_123, 1_700_604_800_123, b"\x01" * 64)


def test_create_token_request_and_response_round_trip():
    """Owner (v3), renewers and lifetime in; owner, requester, ms timestamps and HMAC out."""
    cls = request_class(38, 3)
    fields = convert.create_token_request_fields("User:alice", TOKEN.renewers, 3_600_000)
    args = convert.create_token_args(_trip(cls, build(cls, **fields)))
    assert args == {"owner": "User:alice", "renewers": TOKEN.renewers, "max_lifetime_ms": 3_600_000}
    cls1 = request_class(38, 1)
    assert convert.create_token_args(_trip(cls1, build(cls1, **fields)))["owner"] is None
    default = convert.create_token_args(_trip(cls, build(cls, **convert.create_token_request_fields())))
    assert default == {"owner": None, "renewers": (), "max_lifetime_ms": -1}
    for version in (1, 3):
        cls = response_class(38, version)
        resp = _trip(cls, build(cls, throttle_time=0, **convert.create_token_response_fields(TOKEN)))
        token = convert.token_from_create_response(resp, TOKEN.renewers)
        expected = TOKEN if version == 3 else DelegationToken(**{**_as_dict(TOKEN), "requester": TOKEN.owner})
        assert token == expected and token.hmac == TOKEN.hmac


def test_create_token_error_is_readable_by_kio():
    """A refused create keeps owner and requester and uses timestamps kio can read back."""
    cls = response_class(38, 3)
    error = ApiError(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "no")
    resp = _trip(cls, build(cls, throttle_time=0, **convert.create_token_error_fields(error, "User:bob", "User:alice")))
    assert int(resp.error_code) == 65 and resp.principal_name == "bob" and resp.token_requester_principal_name == "alice"


def test_described_token_round_trip():
    """DescribedDelegationToken keeps every field; an omitted HMAC reads back as None."""
    for version in (1, 3):
        cls = response_class(41, version)
        hidden = DelegationToken(**{**_as_dict(TOKEN), "hmac": None})
        resp = _trip(cls, build(cls, error_code=0, throttle_time=0,
                                tokens=[convert.described_token_fields(t) for t in (TOKEN, hidden)]))
        got = [convert.token_from_described(t) for t in resp.tokens]
        if version == 3:
            assert got == [TOKEN, hidden] and got[0].hmac == TOKEN.hmac and got[1].hmac is None
        else:
            assert [t.requester for t in got] == [TOKEN.owner, TOKEN.owner]
    cls = request_class(41, 3)
    for owners in (None, [], ["User:alice"]):
        assert convert.owners_from_request(_trip(cls, build(cls, **convert.owners_fields(owners)))) == owners


def test_timestamps_are_exact_milliseconds():
    """ms -> kio datetime -> ms is exact (no float rounding)."""
    for ms in (0, 1, 1_700_000_000_123, 253_402_300_799_999):
        assert convert.ms_from(ms_to_datetime(ms)) == ms


def _as_dict(token: DelegationToken) -> dict:
    return {name: getattr(token, name) for name in DelegationToken.__dataclass_fields__}
