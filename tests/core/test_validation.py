"""Input refused at the door (secmeta.core.validation through the store's public API): each bad input is an error
naming its field, and a refused request writes nothing (the log's end offset does not move).

Issue 14 observed: NUL bytes and newlines in principals, names, hosts, users and owners accepted and written;
hosts that can never match stored; lone surrogates escaping as codec errors; None giving AttributeError;
1 MB names accepted. Issue 13: authorize() with names raised TypeError while who_could took them.
"""

from __future__ import annotations

import base64
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ApiException,
    ClientQuotaAlteration,
    ClientQuotaOp,
    ErrorCode,
    FieldError,
    InvalidPrincipalTypeException,
    InvalidRequestException,
    RequestContext,
    ResourceType,
    UserScramCredentialDeletion,
)
from secmeta.core.auth.scram import MIN_ITERATIONS
from secmeta.core.config import StoreConfig
from secmeta.core.control.result import ControlResult
from secmeta.core.errors import InvalidValueError, QueryError, SaslAuthenticationException
from secmeta.core.validation import (
    MAX_NAME_BYTES,
    acl_host,
    enum_or_unknown,
    enum_value,
    int64,
    nonempty_text,
    principal,
    principal_parts,
    principal_text,
    reraised_as,
    text,
)
from secmeta.core.wire.scram_client import ScramClient
from secmeta.events.avro_encoder import write_long
from secmeta.events.records import AclCreated
from secmeta.events.types import ScramMechanism
from tests.clikit import make_store, run
from tests.storekit import ADMIN, acl, upsert

# -- the classes of bad input ----------------------------------------------------------------

CONTROL = st.sampled_from(["\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\x9f"])
SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
# invisible format characters (Cf: bidirectional controls, zero-width, tags) and line separators (issue 22)
INVISIBLE = st.one_of(
    st.sampled_from(["\u202a", "\u202e", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200d",
                     "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029"]),
    st.characters(categories=["Cf"]))
WRONG_TYPE = st.sampled_from([None, 0, 1.5, True, b"User:bob", ["User:bob"], object()])
SAFE = st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=8)


def spoiled(prefix: str, *, stored: bool = True) -> st.SearchStrategy:
    """A string that starts out fine (``prefix`` + letters) and holds a control character or a lone surrogate
    (or, for a name to be ``stored``, an invisible format character), or is one byte too long, or is no string
    at all."""
    odd = st.one_of(CONTROL, SURROGATE, INVISIBLE) if stored else st.one_of(CONTROL, SURROGATE)
    poisoned = st.tuples(SAFE, odd, SAFE).map(lambda p: prefix + p[0] + p[1] + p[2])
    too_long = st.integers(0, 100).map(lambda n: prefix + "x" * (MAX_NAME_BYTES + 1 - len(prefix) + n))
    return st.one_of(poisoned, too_long, WRONG_TYPE)


BAD_HOST = st.one_of(
    spoiled("10.0.0."),
    st.sampled_from(["", "broker.example.com", "999.999.999.999", "not a host!!", "010.0.0.1", "10.0.0.1 ",
                     "fe80::1%eth0", "2001:DB8::1", "::ffff:10.0.0.1", "10.0.0.5/24", "10.0.0.0/33", "*.*"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5}){1,2}", fullmatch=True),
)
BAD_ENUM = st.one_of(WRONG_TYPE, st.sampled_from(["", "NOPE", "Reed"]))

# field label in the error -> (how to spoil a binding with a value, the bad values)
BINDING_FIELDS = {
    "resource name": (lambda b, v: _pattern(b, name=v), st.one_of(spoiled("orders-"), st.just(""))),
    "principal": (lambda b, v: _entry(b, principal=v), st.one_of(spoiled("User:"), st.sampled_from(["alice", "User:", ":x"]))),
    "host": (lambda b, v: _entry(b, host=v), BAD_HOST),
    "resource type": (lambda b, v: _pattern(b, resource_type=v), st.one_of(BAD_ENUM, st.just("ANY"))),
    "pattern type": (lambda b, v: _pattern(b, pattern_type=v), st.one_of(BAD_ENUM, st.just("MATCH"))),
    "operation": (lambda b, v: _entry(b, operation=v), st.one_of(BAD_ENUM, st.just("Any"))),
    "permission type": (lambda b, v: _entry(b, permission_type=v), st.one_of(BAD_ENUM, st.just("unknown"))),
}


def _pattern(binding: AclBinding, **change) -> AclBinding:
    return dataclasses.replace(binding, pattern=dataclasses.replace(binding.pattern, **change))


def _entry(binding: AclBinding, **change) -> AclBinding:
    return dataclasses.replace(binding, entry=dataclasses.replace(binding.entry, **change))


LENIENT = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


# -- the property: every class, nothing written, the field named --------------------------------


@LENIENT
@given(data=st.data(), field=st.sampled_from(sorted(BINDING_FIELDS)))
def test_a_bad_acl_field_is_invalid_request_naming_it_and_writes_nothing(store, data, field):
    """create_acls: INVALID_REQUEST whose message starts with the field; the log does not move."""
    spoil, values = BINDING_FIELDS[field]
    binding = spoil(acl("orders"), data.draw(values, label=field))
    end = store.log.end_offset
    (result,) = store.create_acls([binding], context=ADMIN)
    assert result.code == ErrorCode.INVALID_REQUEST and result.message.startswith(field), result.message
    assert store.log.end_offset == end


@LENIENT
@given(data=st.data(), field=st.sampled_from(["resource name", "principal", "host"]))
def test_a_bad_filter_text_is_invalid_request_naming_it_and_deletes_nothing(store, data, field):
    """delete_acls: a filter string with a control character, a surrogate or the wrong type fails alone."""
    if not store.image.acls:
        store.create_acls([acl("orders")], context=ADMIN)
    value = data.draw(spoiled("x", stored=False).filter(lambda v: v is not None), label=field)
    key = {"resource name": "name", "principal": "principal", "host": "host"}[field]
    end = store.log.end_offset
    (result,) = store.delete_acls([AclBindingFilter.of(**{key: value})], context=ADMIN)
    assert result.error.code == ErrorCode.INVALID_REQUEST and result.error.message.startswith(field)
    assert store.log.end_offset == end and len(store.image.acls) == 1


@LENIENT
@given(user=spoiled("alice").filter(lambda v: isinstance(v, str)))
def test_a_bad_scram_user_is_a_per_user_error_naming_it(store, user):
    """alter_user_scram_credentials: the user's result names 'user'; nothing is written."""
    end = store.log.end_offset
    result = store.alter_user_scram_credentials([upsert(user), upsert("bob")], context=ADMIN)
    assert result[user].code == ErrorCode.INVALID_REQUEST and result[user].message.startswith("user")
    assert result["bob"].code == ErrorCode.NONE  # the good user is applied, as Kafka's per-user results
    assert store.image.scram.get(user, ScramMechanism.SCRAM_SHA_256) is None
    assert store.log.end_offset == end + 1


@LENIENT
@given(owner=spoiled("User:").filter(lambda v: v is not None))
def test_a_bad_token_owner_is_refused_naming_it(store, owner):
    """create_delegation_token: an ApiException naming 'owner'; no token is issued."""
    end = store.log.end_offset
    with pytest.raises(ApiException) as info:
        store.create_delegation_token(context=ADMIN, owner=owner)
    assert "owner" in str(info.value) and store.log.end_offset == end


@LENIENT
@given(renewer=spoiled("User:"))
def test_a_bad_token_renewer_is_refused_naming_it(store, renewer):
    """create_delegation_token: an ApiException naming the renewer field; no token is issued."""
    end = store.log.end_offset
    with pytest.raises(ApiException) as info:
        store.create_delegation_token(context=ADMIN, renewers=[renewer])
    assert "enewer" in str(info.value) and store.log.end_offset == end


@LENIENT
@given(field=st.sampled_from(["principal", "host", "request_id"]), data=st.data())
def test_a_bad_request_context_is_refused_when_built_naming_the_field(field, data):
    """RequestContext(...) raises a ValueError or TypeError naming the field (never later, inside the codec)."""
    value = data.draw(spoiled("User:" if field == "principal" else "x").filter(lambda v: v is not None))
    with pytest.raises((ValueError, TypeError)) as info:
        RequestContext(**{field: value})
    assert f"context {field}" in str(info.value)


# -- one test per observed case --------------------------------------------------------------------


def test_a_newline_in_a_principal_cannot_fake_rows(store):
    """'User:bob\\nUser:admin' (a fake row in acls --list) is refused and nothing is written."""
    (result,) = store.create_acls([acl("t", principal="User:bob\nUser:admin")], context=ADMIN)
    assert result.code == ErrorCode.INVALID_REQUEST and "U+000A" in result.message
    assert len(store.image.acls) == 0


RLO = "U+202E (RIGHT-TO-LEFT OVERRIDE), a bidirectional control"


def _quota_error(store, entity: dict) -> str:
    alteration = ClientQuotaAlteration(entity, (ClientQuotaOp("producer_byte_rate", 1024.0),))
    (error,) = store.alter_client_quotas([alteration], context=ADMIN).values()
    return error.message


def _token_error(store, **args) -> str:
    with pytest.raises(InvalidRequestException) as info:
        store.create_delegation_token(context=ADMIN, **args)
    return info.value.error.message


@pytest.mark.parametrize("write, field", [
    (lambda s, n: s.create_acls([acl(n)], context=ADMIN)[0].message, "resource name"),
    (lambda s, n: s.create_acls([acl("t", principal=f"User:{n}")], context=ADMIN)[0].message, "principal"),
    (lambda s, n: s.alter_user_scram_credentials([upsert(n)], context=ADMIN)[n].message, "user"),
    (lambda s, n: _token_error(s, owner=f"User:{n}"), "owner"),
    (lambda s, n: _token_error(s, renewers=[f"User:{n}"]), "renewer"),
    (lambda s, n: _quota_error(s, {"user": n}), "user name"),
    (lambda s, n: _quota_error(s, {"client-id": n}), "client-id name"),
], ids=["resource", "principal", "scram user", "token owner", "token renewer", "quota user", "quota client"])
def test_a_bidirectional_override_in_a_name_is_refused_naming_field_and_code_point(store, write, field):
    """'invoice\u202efdp.exe' (shown as 'invoiceexe.pdf') was accepted for resources and users (issue 22): every
    name a write stores is refused, INVALID_REQUEST saying the field, the code point and what it is; nothing
    is written."""
    end = store.log.end_offset
    assert write(store, "invoice\u202efdp.exe") == f"{field} contains {RLO}"
    assert store.log.end_offset == end


@pytest.mark.parametrize("char, said", [
    ("\u200b", "U+200B (ZERO WIDTH SPACE), an invisible format character"),
    ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE), an invisible format character"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE), a bidirectional control"),
    ("\u061c", "U+061C (ARABIC LETTER MARK), a bidirectional control"),
    ("\u2028", "U+2028 (LINE SEPARATOR), a line separator"),
])
def test_invisible_characters_are_named_in_the_refusal(char, said):
    with pytest.raises(FieldError) as info:
        text(f"ad{char}min", "user")
    assert str(info.value) == f"user contains {said}"


def test_filters_and_questions_still_select_a_name_an_older_log_holds(store):
    """A name with U+202E logged before the rule (or replicated in) can still be described, asked about and
    deleted by its exact name: filters and questions select, they store nothing."""
    old = acl("invoice\u202efdp.exe")
    store._write(ADMIN, lambda image, now, ctx, _hmacs: ControlResult([AclCreated("old-acl", old)], None))
    exact = AclBindingFilter.of(ResourceType.TOPIC, old.name, principal=old.principal)
    assert store.describe_acls(exact, context=ADMIN) == [old]
    assert "User:alice" in [g.principal for g in store.who_could("READ", "TOPIC", old.name)]
    (deleted,) = store.delete_acls([exact], context=ADMIN)
    assert deleted.error.code == ErrorCode.NONE and deleted.acls == (old,)


def test_a_scram_user_with_nul_is_refused(store):
    """A user with a NUL (who could never log in) is refused."""
    assert store.alter_user_scram_credentials([upsert("eve\x00")], context=ADMIN)["eve\x00"].code == \
        ErrorCode.INVALID_REQUEST


def test_a_one_megabyte_name_is_refused_stating_the_limit(store):
    """A 1 MB resource name: INVALID_REQUEST stating the 1,024-byte limit."""
    (result,) = store.create_acls([acl("n" * 2**20)], context=ADMIN)
    assert result.message == f"resource name is {2**20} bytes long; the limit is {MAX_NAME_BYTES} bytes"


def test_a_lone_surrogate_is_a_per_item_error_not_a_codec_error(store):
    """A surrogate in a resource name fails that item only, before the codec sees it."""
    results = store.create_acls([acl("ok"), acl("bad\ud800")], context=ADMIN)
    assert results[0].code == ErrorCode.NONE and results[1].code == ErrorCode.INVALID_REQUEST
    assert "lone surrogate" in results[1].message and len(store.image.acls) == 1


def test_none_items_and_context_are_clear_errors(store):
    """None as a binding, a filter or an alteration, and context=None: errors naming them, never AttributeError."""
    assert store.create_acls([None], context=ADMIN)[0].message == "ACL binding must be an AclBinding, not NoneType"
    assert store.delete_acls([None], context=ADMIN)[0].error.message.startswith("ACL filter must be")
    with pytest.raises(InvalidRequestException, match="alteration 0 must be"):
        store.alter_user_scram_credentials([None], context=ADMIN)
    with pytest.raises(InvalidRequestException, match="user must be a string"):
        store.alter_user_scram_credentials([UserScramCredentialDeletion(None, ScramMechanism.SCRAM_SHA_256)],
                                           context=ADMIN)
    with pytest.raises(TypeError, match="context must be a RequestContext, not NoneType"):
        store.create_acls([acl()], context=None)
    with pytest.raises(InvalidRequestException, match="ACL filter must be"):
        store.describe_acls(None, context=ADMIN)


def test_authorize_takes_names_as_who_could_does(store):
    """authorize('User:a', '1.1.1.1', 'READ', 'TOPIC', 't') answers like the enum call (issue 13)."""
    store.create_acls([acl("t", principal="User:a")], context=ADMIN)
    assert store.authorize("User:a", "1.1.1.1", "READ", "TOPIC", "t")
    assert store.authorize("User:a", "1.1.1.1", "Read", "topic", "t") == \
        store.authorize("User:a", "1.1.1.1", AclOperation.READ, ResourceType.TOPIC, "t")
    assert store.explain("User:a", "1.1.1.1", "IdempotentWrite", "CLUSTER", "kafka-cluster").allowed is False
    assert store.authorized_operations("User:a", "1.1.1.1", "topic", "t") == \
        store.authorized_operations("User:a", "1.1.1.1", ResourceType.TOPIC, "t")


@pytest.mark.parametrize("args, field", [
    ((None, "1.1.1.1", "READ", "TOPIC", "t"), "principal"),
    (("User:a", 5, "READ", "TOPIC", "t"), "host"),
    (("User:a", "1.1.1.1", "REED", "TOPIC", "t"), "operation"),
    (("User:a", "1.1.1.1", "READ", object(), "t"), "resource type"),
    (("User:a", "1.1.1.1", "READ", "TOPIC", None), "resource name"),
])
def test_authorize_with_a_bad_argument_names_it(store, args, field):
    """A wrong type or an unknown name is FieldError naming the argument (not a TypeError from deep inside)."""
    with pytest.raises(FieldError) as info:
        store.authorize(*args)
    assert info.value.field == field


# -- the layer's own rules ---------------------------------------------------------------------


@pytest.mark.parametrize("host", ["*", "10.0.0.1", "2001:db8::1", "::1", "10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0"])
def test_canonical_hosts_pass(host):
    assert acl_host(host) == host


def test_a_non_canonical_host_is_told_its_canonical_spelling():
    with pytest.raises(FieldError, match="write '2001:db8::1'"):
        acl_host("2001:DB8:0::1")


def test_text_at_the_byte_limit_passes_and_one_more_byte_fails():
    text("é" * (MAX_NAME_BYTES // 2), "name")
    with pytest.raises(FieldError, match="1025 bytes long"):
        text("é" * (MAX_NAME_BYTES // 2) + "x", "name")


class _NotExactlyStr(str):
    """A string ``text``'s ASCII fast path does not take (it takes exact ``str`` values only): every check runs."""


def _outcome(value: str, **kwargs):
    """What ``text`` answers: the value it returns, or its refusal's message."""
    try:
        return str(text(value, "name", **kwargs))
    except FieldError as exc:
        return f"refused: {exc}"


@settings(max_examples=200)
@given(value=st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40) | st.text(max_size=40),
       pad=st.sampled_from([0, 1000, 1100]), selects=st.booleans())
def test_the_ascii_fast_path_answers_as_every_check_does(value, pad, selects):
    """Review 26, 3.5: ``text`` answers an exact ``str`` (the usual name: printable ASCII in one pass) as it answers
    the same value through every check (a ``str`` subclass skips the fast path): the same value, or the same
    refusal naming the field, whatever the characters and the length."""
    value += "x" * pad
    fast = _outcome(value, selects=selects)
    assert fast == _outcome(_NotExactlyStr(value), selects=selects)
    assert fast == value or fast.startswith("refused: name ")


def test_enum_value_spellings_and_concreteness():
    """Kafka's tools' names, the enum's names and codes; never a bool; concrete refuses ANY and UNKNOWN."""
    for spelling in ("IdempotentWrite", "IDEMPOTENT_WRITE", "idempotent-write", 12, AclOperation.IDEMPOTENT_WRITE):
        assert enum_value(AclOperation, spelling, "operation") is AclOperation.IDEMPOTENT_WRITE
    with pytest.raises(FieldError, match="not bool"):
        enum_value(AclOperation, True, "operation")
    with pytest.raises(FieldError, match="not ANY"):
        enum_value(AclOperation, "any", "operation", concrete=True)


def test_principal_needs_both_parts():
    for bad in ("alice", "User:", ":alice"):
        with pytest.raises(FieldError, match="not of the form Type:Name"):
            principal(bad)


# -- one parser, one range, one bound: every caller sees the same rule --------------------------------

TYPE = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"], exclude_characters=":"),
               min_size=1, max_size=12)
NAME = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), min_size=1, max_size=24)


@given(kind=TYPE, name=NAME)
def test_a_principal_round_trips_through_its_parts(kind, name):
    """principal_text then principal_parts gives back the parts, even with colons in the name (User:a:b)."""
    joined = principal_text(kind, name)
    assert principal_parts(joined) == (kind, name)
    assert principal(joined) == joined
    assert principal_text(*principal_parts(joined)) == joined


@pytest.mark.parametrize("bad", ["alice", "User:", ":alice", ":", ""])
def test_a_principal_without_both_parts_is_refused_naming_field_and_value(bad):
    with pytest.raises(FieldError) as info:
        principal_parts(bad, "owner")
    assert str(info.value) == f"owner {bad!r} is not of the form Type:Name" and info.value.field == "owner"


def test_a_token_owner_or_renewer_that_is_not_type_name_is_invalid_principal_type_naming_it(store):
    """Kafka's INVALID_PRINCIPAL_TYPE, with the field and the value in the message; no token is issued."""
    end = store.log.end_offset
    for kwargs, field in (({"owner": "bob"}, "owner"), ({"renewers": ["User:"]}, "renewer")):
        with pytest.raises(InvalidPrincipalTypeException) as info:
            store.create_delegation_token(context=ADMIN, **kwargs)
        assert info.value.error.code == ErrorCode.INVALID_PRINCIPAL_TYPE and info.value.error.message.startswith(field)
    assert store.log.end_offset == end


def test_access_timeline_refuses_a_principal_as_the_acls_do(store):
    """The forensic query and create_acls refuse 'alice' with the same words."""
    with pytest.raises(QueryError) as query:
        store.access_timeline("alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    (created,) = store.create_acls([acl("orders", principal="alice")], context=ADMIN)
    assert str(query.value) == created.message == "principal 'alice' is not of the form Type:Name"


@given(value=st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1])))
def test_int64_accepts_exactly_what_the_log_can_store(value):
    """An integer passes int64 iff the stored format (Avro long) can encode it: no check admits a value the
    codec then refuses, none refuses one it could store."""
    try:
        write_long(value)
        storable = True
    except OverflowError:
        storable = False
    try:
        assert int64(value, "period") == value and storable
    except FieldError as exc:
        assert not storable and str(exc) == f"period must be a 64-bit integer, not {value!r}"


@pytest.mark.parametrize("value", [True, False, 1.0, "5", None])
def test_int64_refuses_what_is_not_an_integer(value):
    with pytest.raises(FieldError, match="must be a 64-bit integer"):
        int64(value, "period")


@pytest.mark.parametrize("requested", [2**63, True, "1000"])
def test_a_token_period_outside_int64_is_invalid_request_naming_it(store, requested):
    """create_delegation_token: the one int64 rule, its error naming the argument; nothing is written."""
    end = store.log.end_offset
    with pytest.raises(InvalidRequestException) as info:
        store.create_delegation_token(context=ADMIN, max_lifetime_ms=requested)
    assert info.value.error.message == f"max_lifetime_ms must be a 64-bit integer, not {requested!r}"
    assert store.log.end_offset == end


@given(value=st.one_of(st.sampled_from([m.name for m in ScramMechanism] + ["SCRAM-SHA-256", "scram_sha_512", "MD5"]),
                       st.integers(-3, 5), st.booleans(), st.none(), st.text(max_size=6)))
def test_enum_or_unknown_is_enum_value_or_unknown(value):
    """The lenient read (a mechanism the request names) agrees with the strict one, and reads the rest as UNKNOWN."""
    try:
        strict = enum_value(ScramMechanism, value, "mechanism")
    except FieldError:
        strict = ScramMechanism.UNKNOWN
    assert enum_or_unknown(ScramMechanism, value) is strict


def test_a_bool_is_no_scram_mechanism(store):
    """True is not SCRAM-SHA-256 (code 1): the per-user error is UNSUPPORTED_SASL_MECHANISM."""
    result = store.alter_user_scram_credentials([upsert("bob", mech=True)], context=ADMIN)  # type: ignore[arg-type]
    assert result["bob"].code == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_reraised_as_keeps_the_message_and_lets_other_errors_through():
    with pytest.raises(QueryError, match="^owner must be a string, not int$"):
        with reraised_as(QueryError):
            text(5, "owner")
    with pytest.raises(KeyError):
        with reraised_as(QueryError):
            raise KeyError("x")


def test_nonempty_text_refuses_empty():
    assert nonempty_text("t", "resource name") == "t"
    with pytest.raises(FieldError, match="^resource name must not be empty$"):
        nonempty_text("", "resource name")


@pytest.mark.parametrize("operation, resource_type, name, message", [
    ("READS", "TOPIC", "t", "operation is not valid: unknown AclOperation 'READS'"),
    ("READ", "ANY", "t", "resource type must be one concrete ResourceType, not ANY"),
    ("ANY", "TOPIC", "t", "operation must be one concrete AclOperation, not ANY"),
    ("READ", "TOPIC", "", "resource name must not be empty"),
    ("READ", "TOPIC", "t\x00", "resource name 't\\x00' contains the control character U+0000"),
])
def test_who_could_refuses_a_bad_argument_naming_it(store, operation, resource_type, name, message):
    with pytest.raises(QueryError) as info:
        store.who_could(operation, resource_type, name)
    assert str(info.value).startswith(message)


def test_the_store_and_the_scram_client_share_one_iteration_floor(store):
    """Kafka's ScramMechanism.minIterations: the store refuses to keep a credential below it and the client
    refuses to log in below it (ScramSaslClient); at the floor both go ahead."""
    results = store.alter_user_scram_credentials([upsert("low", iterations=MIN_ITERATIONS - 1),
                                                  upsert("floor", iterations=MIN_ITERATIONS)], context=ADMIN)
    assert results["low"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL and results["floor"].code == ErrorCode.NONE
    assert "minimum 4096" in results["low"].message
    for iterations, refused in ((MIN_ITERATIONS - 1, True), (MIN_ITERATIONS, False)):
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, "floor", b"pw", nonce="abc")
        client.first()
        server_first = f"r=abcdef,s={base64.b64encode(b'salt').decode()},i={iterations}"
        if refused:
            with pytest.raises(SaslAuthenticationException, match="less than the minimum 4096"):
                client.final(server_first)
        else:
            assert client.final(server_first).startswith("c=biws,r=abcdef,p=")
    with pytest.raises(InvalidValueError, match="default_iterations"):
        StoreConfig(default_iterations={ScramMechanism.SCRAM_SHA_256: MIN_ITERATIONS - 1})


@pytest.mark.parametrize("argv, message", [
    (["who-could", "--operation", "Any", "--topic", "t"], "error: unknown operation 'Any' (valid operation names: All,"),
    (["timeline", "--principal", "User:a", "--host", "1.1.1.1", "--operation", "Fly", "--topic", "t"], "error: unknown operation 'Fly'"),
    (["authorize", "--principal", "User:a", "--host", "1.1.1.1", "--operation", "Fly", "--topic", "t"],
     "error: unknown operation 'Fly'"),
    (["acls", "--list", "--topic", "t", "--resource-pattern-type", "glob"],
     "error: --resource-pattern-type is not valid: unknown PatternType 'glob'"),
    (["history", "--topic", "t", "--resource-pattern-type", "glob"],
     "error: --resource-pattern-type is not valid: unknown PatternType 'glob'"),
])
def test_the_cli_reads_an_option_the_same_way_in_every_command(tmp_path, monkeypatch, capsys, argv, message):
    """--operation and --resource-pattern-type: one rule and one message wherever they are taken; exit 2."""
    make_store(tmp_path, monkeypatch)
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err, err


def test_a_question_takes_any_string_a_write_only_text(store):
    """authorize('User:a', ..., 't\\x00') answers (no ACL can hold that name: denied); create_acls refuses it;
    a name that is no string is refused by both with the same words."""
    assert store.authorize("User:a", "1.1.1.1", "READ", "TOPIC", "t\x00") is False
    assert store.create_acls([acl("t\x00")], context=ADMIN)[0].code == ErrorCode.INVALID_REQUEST
    with pytest.raises(FieldError) as asked:
        store.authorize("User:a", "1.1.1.1", "READ", "TOPIC", 5)
    (written,) = store.create_acls([acl(5)], context=ADMIN)  # type: ignore[arg-type]
    assert str(asked.value) == written.message == "resource name must be a string, not int"
