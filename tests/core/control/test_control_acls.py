"""secmeta.core.control.acls: create, delete and describe ACLs, one rule per test."""

import itertools
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.config import StoreConfig
from secmeta.core.control.acls import (
    checked_binding,
    create_acls,
    delete_acls,
    describe_acls,
    random_uuids,
    validate_binding,
)
from secmeta.core.errors import (
    ApiError,
    ClusterAuthorizationException,
    ErrorCode,
    InvalidRequestException,
)
from secmeta.core.types import DeleteAclsResult
from secmeta.core.validation import MAX_NAME_BYTES
from secmeta.events.records import AclCreated, AclDeleted
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.core.control.controlkit import unpacked
from tests.storekit import ADMIN, acl

T = ResourceType
P = PatternType
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
CONFIG = StoreConfig()
OK = ApiError()


def allow(*_):
    return True


def deny(*_):
    return False


def ids():
    counter = itertools.count(1)
    return lambda: f"id{next(counter)}"


def create(*bindings, image=SecurityImage.EMPTY, config=CONFIG, decider=allow, new_id=None):
    return unpacked(create_acls(image, bindings, ADMIN, config=config, decider=decider, new_id=new_id or ids()))


def image_of(*bindings):
    events, results = create(*bindings)
    assert not any(results)
    delta = SecurityDelta(SecurityImage.EMPTY)
    for event in events:
        delta.replay(event)
    return delta.apply()


def delete(*filters, image, config=CONFIG, decider=allow):
    return unpacked(delete_acls(image, filters, ADMIN, config=config, decider=decider))


def flt(**kw):
    return AclBindingFilter.of(**kw)


# -- create ------------------------------------------------------------------------


def test_create_without_cluster_alter_raises():
    """create without ALTER on CLUSTER raises ClusterAuthorizationException."""
    with pytest.raises(ClusterAuthorizationException):
        create(acl(), decider=deny)


def test_create_asks_for_alter_on_the_cluster():
    """create asks the decider for ALTER on kafka-cluster."""
    calls = []
    create(acl(), decider=lambda *a: calls.append(a) or True)
    assert calls == [("User:admin", "10.0.0.1", Op.ALTER, T.CLUSTER, CLUSTER_NAME)]


def test_create_emits_acl_created_with_new_id():
    """A valid binding yields AclCreated with an id from new_id, and NONE."""
    events, results = create(acl(), new_id=lambda: "the-id")
    assert events == [AclCreated("the-id", acl())] and results == [OK]


def test_create_default_ids_are_uuids():
    """Without new_id, each new ACL gets a distinct random UUID string."""
    events = create_acls(SecurityImage.EMPTY, [acl("a"), acl("b")], ADMIN, config=CONFIG, decider=allow).events
    first, second = (e.acl_id for e in events)
    assert first != second and len(first) == 36 and first.count("-") == 4


@given(st.integers(0, 300))
def test_random_uuids_are_canonical_version_4_uuids(n):
    """random_uuids(n): n distinct strings, each the canonical text of a version-4, RFC 4122 UUID."""
    drawn = random_uuids(n)
    parsed = [uuid.UUID(text) for text in drawn]
    assert len(set(drawn)) == n
    assert all(str(u) == text and u.version == 4 and u.variant == uuid.RFC_4122 for u, text in zip(parsed, drawn))


_FIELD_VALUES = {
    "rtype": st.sampled_from([T.TOPIC, T.GROUP, T.CLUSTER, T.ANY, T.UNKNOWN, "topic", 2, True, None]),
    "pattern": st.sampled_from([P.LITERAL, P.PREFIXED, P.MATCH, "prefixed", 3, 1]),
    "name": st.sampled_from(["foo", CLUSTER_NAME, "", "a\x00b", "x" * (MAX_NAME_BYTES + 1), 7]),
    "principal": st.sampled_from(["User:alice", "User:bob", "User:*", "alice", "User:", "User:\ud800", b"User:x"]),
    "host": st.sampled_from(["*", "10.0.0.1", "10.0.0.0/8", "", "localhost", "::ffff:1.2.3.4", 1]),
    "op": st.sampled_from([Op.READ, Op.WRITE, Op.ANY, "read", "Write", 3, 1, True, Op.UNKNOWN]),
    "perm": st.sampled_from([ALLOW, DENY, AclPermissionType.ANY, "deny", 3, 1, False]),
}


@given(st.lists(st.fixed_dictionaries(_FIELD_VALUES), max_size=12))
def test_create_checks_each_binding_as_validate_binding_does(fields):
    """Within a request, entries seen before are not checked again: every binding still gets exactly the
    result validate_binding gives it alone, and the valid ones are logged as checked_binding resolves them."""
    bindings = [AclBinding.of(f["rtype"], f["name"], f["pattern"], f["principal"], f["host"], f["op"], f["perm"])
                for f in fields]
    events, results = create(*bindings)
    assert results == [validate_binding(b) for b in bindings]
    valid = list(dict.fromkeys(checked_binding(b) for b, r in zip(bindings, results) if r == OK))
    assert [e.binding for e in events] == valid


INVALID = {
    "resource type UNKNOWN": acl(rtype=T.UNKNOWN),
    "resource type ANY": acl(rtype=T.ANY),
    "pattern UNKNOWN": acl(pattern=P.UNKNOWN),
    "pattern ANY": acl(pattern=P.ANY),
    "pattern MATCH": acl(pattern=P.MATCH),
    "operation UNKNOWN": acl(op=Op.UNKNOWN),
    "operation ANY": acl(op=Op.ANY),
    "permission UNKNOWN": acl(perm=AclPermissionType.UNKNOWN),
    "permission ANY": acl(perm=AclPermissionType.ANY),
    "empty name": acl(name=""),
    "cluster not kafka-cluster": acl(rtype=T.CLUSTER, name="other", op=Op.ALTER),
    "principal without colon": acl(principal="alice"),
    "principal without name": acl(principal="User:"),
    "empty host": acl(host=""),
    "oversized name": acl(name="n" * (MAX_NAME_BYTES + 1)),
    "oversized principal": acl(principal="User:" + "p" * MAX_NAME_BYTES),
    "oversized host": acl(host="1" * (MAX_NAME_BYTES + 1)),
    "CIDR prefix too long": acl(host="10.0.0.0/33"),
    "CIDR garbage": acl(host="10.0.0/x"),
}


@pytest.mark.parametrize("binding", INVALID.values(), ids=INVALID.keys())
def test_create_invalid_binding_is_invalid_request(binding):
    """Each invalid binding gets INVALID_REQUEST and no event."""
    events, (result,) = create(binding)
    assert result.code == ErrorCode.INVALID_REQUEST and events == []


@pytest.mark.parametrize("field", ["name", "principal", "host"])
def test_create_oversized_field_is_named(field):
    """An oversized string gets a message naming the field and the limit."""
    binding = {"name": INVALID["oversized name"], "principal": INVALID["oversized principal"],
               "host": INVALID["oversized host"]}[field]
    _, (result,) = create(binding)
    assert field in result.message and str(MAX_NAME_BYTES) in result.message


def test_create_name_at_the_limit_is_accepted():
    """A name of exactly 1,024 bytes (in UTF-8: 512 two-byte characters) is accepted, one more byte is not."""
    _, (result,) = create(acl(name="é" * (MAX_NAME_BYTES // 2)))
    assert result == OK
    _, (result,) = create(acl(name="é" * (MAX_NAME_BYTES // 2) + "n"))
    assert result.code == ErrorCode.INVALID_REQUEST and "resource name" in result.message


def test_create_invalid_cidr_is_named():
    """An invalid CIDR host is named in the message."""
    _, (result,) = create(acl(host="10.0.0.0/33"))
    assert "10.0.0.0/33" in result.message


def test_create_resource_type_checked_before_name():
    """Resource type ANY with an empty name reports the resource type."""
    _, (result,) = create(acl(rtype=T.ANY, name=""))
    assert "resource type" in result.message and "ANY" in result.message


@pytest.mark.parametrize("host", ["*", "10.1.2.3", "2001:db8::1", "10.0.0.0/8", "2001:db8::/32"])
def test_create_accepts_valid_hosts(host):
    """'*', canonical addresses and canonical CIDR ranges (ours) are valid hosts."""
    _, (result,) = create(acl(host=host))
    assert result == OK


@pytest.mark.parametrize("host", ["broker.example.com", "999.999.999.999", "not a host!!", "010.0.0.1", "10.0.0.1 ",
                                  "fe80::1%eth0", "2001:DB8::1", "2001:db8:0:0::1", "::ffff:10.0.0.1", "10.0.0.1\n", "10.0.0.1\x00"])
def test_create_refuses_a_host_that_can_never_match(host):
    """A host name, a bad or non-canonical address, a zone index or a control character: refused, naming the host.

    Kafka stores any string and compares it with the client's address (AclEntry / StandardAcl host
    equality), so such an ACL would never match; secmeta refuses it (a documented difference)."""
    events, (result,) = create(acl(host=host))
    assert result.code == ErrorCode.INVALID_REQUEST and result.message.startswith("host") and events == []


def test_create_refuses_a_cidr_with_host_bits_set():
    """10.0.0.5/24 is refused with a hint: one range must have one spelling."""
    _, (result,) = create(acl(host="10.0.0.5/24"))
    assert result.code == ErrorCode.INVALID_REQUEST and "10.0.0.5/24" in result.message


def test_create_with_a_non_enum_field_is_a_per_item_error():
    """A binding whose resource type is neither a ResourceType, its name nor its code fails alone, naming the field."""
    events, results = create(acl(), acl(rtype=object()))
    assert results[0] == OK and len(events) == 1
    assert results[1].code == ErrorCode.INVALID_REQUEST and results[1].message.startswith("resource type")


def test_create_takes_enum_names_and_stores_the_enums():
    """Enum fields given by name (as Kafka's tools spell them) are stored as the enums themselves."""
    events, results = create(acl(rtype="topic", op="IdempotentWrite", perm="Allow", pattern="LITERAL"))
    assert results == [OK]
    binding = events[0].binding
    assert (binding.restype, binding.operation, binding.permission_type) == (T.TOPIC, Op.IDEMPOTENT_WRITE,
                                                                             AclPermissionType.ALLOW)
    assert type(binding.restype) is T and type(binding.operation) is Op


def test_create_cluster_named_kafka_cluster_is_valid():
    """A CLUSTER ACL named kafka-cluster is accepted."""
    _, (result,) = create(acl(rtype=T.CLUSTER, name=CLUSTER_NAME, op=Op.ALTER))
    assert result == OK


def test_create_prefixed_is_valid():
    """A PREFIXED pattern is accepted."""
    events, (result,) = create(acl(pattern=P.PREFIXED))
    assert result == OK and len(events) == 1


def test_create_identical_to_existing_writes_nothing():
    """An ACL identical in all seven fields to an existing one succeeds with no event."""
    events, results = create(acl(), image=image_of(acl()))
    assert events == [] and results == [OK]


def test_create_differing_in_one_field_is_new():
    """An ACL differing from an existing one only in its host is created."""
    events, _ = create(acl(host="10.0.0.1"), image=image_of(acl()))
    assert len(events) == 1


def test_create_identical_twice_in_one_request_writes_once():
    """The same binding twice in one request: two successes, one event."""
    events, results = create(acl(), acl())
    assert results == [OK, OK] and len(events) == 1


def test_create_results_align_with_bindings():
    """An invalid binding between valid ones gets its error in its position; the others apply."""
    events, results = create(acl("a"), acl(""), acl("c"))
    assert [r.code for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert [e.binding.name for e in events] == ["a", "c"]


def test_create_over_the_limit_raises():
    """More bindings than max_acl_changes_per_request raises InvalidRequestException."""
    with pytest.raises(InvalidRequestException):
        create(acl("a"), acl("b"), acl("c"), config=StoreConfig(max_acl_changes_per_request=2))


def test_create_at_the_limit_is_accepted():
    """Exactly max_acl_changes_per_request bindings are accepted."""
    events, _ = create(acl("a"), acl("b"), config=StoreConfig(max_acl_changes_per_request=2))
    assert len(events) == 2


def test_create_leaves_the_image_unchanged():
    """create returns events but never changes the image."""
    image = image_of(acl("a"))
    create(acl("b"), image=image)
    assert len(image.acls) == 1


# -- delete ------------------------------------------------------------------------


def test_delete_without_cluster_alter_raises():
    """delete without ALTER on CLUSTER raises ClusterAuthorizationException."""
    with pytest.raises(ClusterAuthorizationException):
        delete(flt(), image=image_of(acl()), decider=deny)


def test_delete_asks_for_alter_on_the_cluster():
    """delete asks the decider for ALTER on the cluster."""
    calls = []
    delete(flt(), image=SecurityImage.EMPTY, decider=lambda *a: calls.append(a) or True)
    assert [c[2:] for c in calls] == [(Op.ALTER, T.CLUSTER, CLUSTER_NAME)]


def test_delete_removes_matching_acl():
    """A filter yields AclDeleted with the id and binding, and lists the binding."""
    events, results = delete(flt(name="foo"), image=image_of(acl("foo"), acl("bar")))
    assert events == [AclDeleted("id1", acl("foo"))]
    assert results == [DeleteAclsResult(OK, (acl("foo"),))]


def test_delete_overlapping_filters_list_both_but_delete_once():
    """An ACL matched by two filters is listed under both and deleted once."""
    image = image_of(acl("foo"))
    events, results = delete(flt(name="foo"), flt(principal="User:alice"), image=image)
    assert len(events) == 1
    assert [r.acls for r in results] == [(acl("foo"),), (acl("foo"),)]


def test_delete_filter_matching_nothing_succeeds_empty():
    """A filter matching nothing gets NONE and no bindings."""
    events, results = delete(flt(name="zzz"), image=image_of(acl()))
    assert events == [] and results == [DeleteAclsResult(OK, ())]


@pytest.mark.parametrize("bad", [
    flt(resource_type=T.UNKNOWN), flt(pattern_type=P.UNKNOWN), flt(operation=Op.UNKNOWN),
    flt(permission_type=AclPermissionType.UNKNOWN),
], ids=["resource", "pattern", "operation", "permission"])
def test_delete_unknown_filter_field_is_invalid_request(bad):
    """A filter with an UNKNOWN field gets INVALID_REQUEST and removes nothing."""
    events, (result,) = delete(bad, image=image_of(acl()))
    assert result.error.code == ErrorCode.INVALID_REQUEST and result.acls == () and events == []


def test_delete_invalid_filter_does_not_block_others():
    """A valid filter still applies next to an invalid one."""
    events, results = delete(flt(operation=Op.UNKNOWN), flt(name="foo"), image=image_of(acl()))
    assert [r.error.code for r in results] == [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert len(events) == 1


def test_delete_match_filter_uses_applicability():
    """A MATCH filter removes the LITERAL equal, LITERAL '*' and PREFIXED-prefix ACLs only."""
    image = image_of(acl("foo"), acl("*"), acl("fo", pattern=P.PREFIXED), acl("foobar"), acl("x", pattern=P.PREFIXED))
    _, (result,) = delete(flt(resource_type=T.TOPIC, name="foo", pattern_type=P.MATCH), image=image)
    assert set(result.acls) == {acl("foo"), acl("*"), acl("fo", pattern=P.PREFIXED)}


def test_delete_any_pattern_filter_requires_equal_name():
    """A pattern ANY filter removes ACLs of either pattern type named exactly so, not '*' or prefixes."""
    image = image_of(acl("foo"), acl("foo", pattern=P.PREFIXED), acl("*"), acl("f", pattern=P.PREFIXED))
    _, (result,) = delete(flt(name="foo", pattern_type=P.ANY), image=image)
    assert set(result.acls) == {acl("foo"), acl("foo", pattern=P.PREFIXED)}


def test_delete_exact_pattern_filter_requires_that_pattern():
    """A PREFIXED filter does not remove the LITERAL ACL of the same name."""
    image = image_of(acl("foo"), acl("foo", pattern=P.PREFIXED))
    _, (result,) = delete(flt(name="foo", pattern_type=P.PREFIXED), image=image)
    assert result.acls == (acl("foo", pattern=P.PREFIXED),)


def test_delete_any_filter_matches_every_acl():
    """The all-ANY filter removes every ACL."""
    image = image_of(acl("a"), acl("b", perm=DENY), acl(rtype=T.GROUP))
    events, _ = delete(flt(), image=image)
    assert len(events) == 3


def test_delete_entry_fields_must_equal():
    """Principal, host, operation and permission filters select by equality."""
    image = image_of(acl(op=Op.READ), acl(op=Op.WRITE), acl(host="10.0.0.9", perm=DENY), acl(principal="User:bob"))
    _, (result,) = delete(flt(principal="User:alice", host="*", operation=Op.WRITE, permission_type=ALLOW),
                          image=image)
    assert result.acls == (acl(op=Op.WRITE),)


def test_delete_over_the_limit_raises():
    """Matching more ACLs in total than the limit raises InvalidRequestException."""
    image = image_of(acl("a"), acl("b"), acl("c"))
    with pytest.raises(InvalidRequestException):
        delete(flt(name="a"), flt(name="b"), flt(name="c"), image=image,
               config=StoreConfig(max_acl_changes_per_request=2))


def test_delete_limit_counts_distinct_acls():
    """An ACL matched by two filters counts once against the limit."""
    image = image_of(acl("a"), acl("b"))
    events, _ = delete(flt(name="a"), flt(), image=image, config=StoreConfig(max_acl_changes_per_request=2))
    assert len(events) == 2


def test_delete_leaves_the_image_unchanged():
    """delete returns events but never changes the image."""
    image = image_of(acl())
    delete(flt(), image=image)
    assert len(image.acls) == 1


# -- describe ----------------------------------------------------------------------


def test_describe_without_cluster_describe_raises():
    """describe without DESCRIBE on CLUSTER raises ClusterAuthorizationException."""
    with pytest.raises(ClusterAuthorizationException):
        describe_acls(image_of(acl()), flt(), ADMIN, decider=deny)


def test_describe_asks_for_describe_on_the_cluster():
    """describe asks the decider for DESCRIBE on the cluster."""
    calls = []
    describe_acls(SecurityImage.EMPTY, flt(), ADMIN, decider=lambda *a: calls.append(a) or True)
    assert [c[2] for c in calls] == [Op.DESCRIBE]


def test_describe_returns_the_matching_bindings():
    """describe returns exactly the bindings the filter selects."""
    image = image_of(acl("foo"), acl("bar"), acl("fo", pattern=P.PREFIXED))
    found = describe_acls(image, flt(name="foo", pattern_type=P.MATCH), ADMIN, decider=allow)
    assert sorted(found, key=str) == sorted([acl("foo"), acl("fo", pattern=P.PREFIXED)], key=str)


def test_describe_unknown_filter_raises_invalid_request():
    """A describe filter with an UNKNOWN field raises InvalidRequestException."""
    with pytest.raises(InvalidRequestException):
        describe_acls(image_of(acl()), flt(resource_type=T.UNKNOWN), ADMIN, decider=allow)
