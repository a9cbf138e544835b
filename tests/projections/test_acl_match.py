"""Filter matching, host/CIDR matching and operation masks (secmeta.projections.acl_match)."""

import ipaddress

from hypothesis import example, given
from hypothesis import strategies as st

from secmeta.events.types import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acl_match import (
    ALLOW_MASK,
    DENY_MASK,
    OPERATIONS_BY_TYPE,
    acl_bit,
    acl_network,
    all_operations_bits,
    covers,
    filter_matches,
    host_matches,
)
from tests.storekit import acl

T, L, P = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED
READ, ALLOW = AclOperation.READ, AclPermissionType.ALLOW


def f(**fields):
    return AclBindingFilter.of(**fields)


def test_any_filter_matches_everything():
    """The empty filter selects any ACL."""
    assert filter_matches(AclBindingFilter.any(), acl(pattern=P, rtype=ResourceType.GROUP))


def test_resource_type_must_be_equal_unless_any():
    """A filter on TOPIC does not select a GROUP ACL."""
    assert not filter_matches(f(resource_type=T), acl(rtype=ResourceType.GROUP))


def test_pattern_any_requires_equal_name():
    """Pattern ANY with a name selects only ACLs with exactly that name."""
    assert filter_matches(f(name="foo"), acl(pattern=P)) and not filter_matches(
        f(name="foobar"), acl(pattern=P)
    )


def test_exact_pattern_type_must_be_equal():
    """A LITERAL filter does not select a PREFIXED ACL of the same name."""
    assert not filter_matches(f(name="foo", pattern_type=L), acl(pattern=P))


def test_exact_pattern_type_and_name_select():
    """A PREFIXED filter selects the PREFIXED ACL of that name."""
    assert filter_matches(f(name="foo", pattern_type=P), acl(pattern=P))


def test_names_are_case_sensitive():
    """'Foo' does not select 'foo'."""
    assert not filter_matches(f(name="Foo"), acl())


def test_match_selects_literal_wildcard():
    """MATCH selects a LITERAL '*' ACL for any name."""
    assert filter_matches(f(name="anything", pattern_type=PatternType.MATCH), acl(name="*"))


def test_match_selects_prefixed_acl_that_prefixes_the_name():
    """MATCH selects a PREFIXED ACL whose name starts the filter name."""
    assert filter_matches(f(name="foobar", pattern_type=PatternType.MATCH), acl(pattern=P))


def test_match_rejects_prefixed_acl_longer_than_name():
    """MATCH does not select a PREFIXED ACL 'foo' for the name 'fo'."""
    assert not filter_matches(f(name="fo", pattern_type=PatternType.MATCH), acl(pattern=P))


def test_match_rejects_other_literal():
    """MATCH does not select a LITERAL ACL of another name."""
    assert not filter_matches(f(name="foobar", pattern_type=PatternType.MATCH), acl())


def test_match_without_name_selects_all_patterns():
    """MATCH with a null name selects any pattern type."""
    assert filter_matches(f(pattern_type=PatternType.MATCH), acl(pattern=P))


def test_covers_a_prefix_equal_to_the_name():
    """A PREFIXED 'foo' applies to the topic 'foo' itself (Kafka StandardAuthorizerTest.testPrefixAcls:
    alice's PREFIXED 'fooa' allows DESCRIBE on the topic 'fooa')."""
    assert covers(acl(pattern=P).pattern, T, "foo") and covers(acl(pattern=P).pattern, T, "foo_bar")
    assert not covers(acl(pattern=P).pattern, T, "fo")


def test_covers_literal_names_and_the_literal_wildcard():
    """A LITERAL applies to its own name only; a LITERAL '*' to every name of its type, '*' included."""
    assert covers(acl().pattern, T, "foo") and not covers(acl().pattern, T, "foobar")
    assert covers(acl(name="*").pattern, T, "anything") and covers(acl(name="*").pattern, T, "*")
    assert not covers(acl(name="*").pattern, ResourceType.GROUP, "anything")
    assert not covers(acl(name="*", pattern=P).pattern, T, "anything")  # a PREFIXED '*' is the prefix '*'


def test_null_principal_and_host_match_any():
    """None principal/host select any entry; a given one must be equal."""
    assert filter_matches(f(principal=None, host=None), acl(host="10.0.0.1")) and not (
        filter_matches(f(principal="User:bob"), acl())
    )


def test_operation_and_permission_any_or_equal():
    """Operation/permission ANY select anything; a given value must be equal."""
    entry = acl(op=AclOperation.WRITE, perm=AclPermissionType.DENY)
    assert filter_matches(f(), entry) and not filter_matches(f(operation=READ), entry)
    assert not filter_matches(f(permission_type=ALLOW), entry)


def test_filter_host_is_exact_not_cidr():
    """A filter host compares as a string, CIDR or not."""
    assert not filter_matches(f(host="10.0.0.1"), acl(host="10.0.0.0/8"))


def test_host_wildcard_and_exact():
    """'*' and an equal string apply; another string does not."""
    assert host_matches("*", "h") and host_matches("h", "h") and not host_matches("h", "g")


def test_cidr_v4_contains_address():
    """10.0.0.0/8 applies to 10.1.2.3 and not to 11.0.0.1."""
    assert host_matches("10.0.0.0/8", "10.1.2.3") and not host_matches("10.0.0.0/8", "11.0.0.1")


def test_cidr_v6_contains_address():
    """2001:db8::/32 applies to 2001:db8::1 and not to 2001:db9::1."""
    assert host_matches("2001:db8::/32", "2001:db8::1")
    assert not host_matches("2001:db8::/32", "2001:db9::1")


def test_cidr_does_not_cross_ip_versions():
    """::/0 does not apply to an IPv4 address."""
    assert not host_matches("::/0", "10.0.0.1")


def test_cidr_ignores_non_ip_hosts():
    """A host name never falls inside a range."""
    assert not host_matches("10.0.0.0/8", "kafka-client.local")


def test_invalid_cidr_is_an_exact_string():
    """'10.0.0.0/99' is not a range but still equals itself."""
    assert not host_matches("10.0.0.0/99", "10.0.0.1") and host_matches(
        "10.0.0.0/99", "10.0.0.0/99"
    )


def test_cidr_refuses_dotted_quads_with_leading_zeros():
    """'010.0.0.1' (octal to inet_aton) is not an address inside 10.0.0.0/8 or 8.0.0.0/8; as an
    exact host string it still applies."""
    assert not host_matches("10.0.0.0/8", "010.0.0.1") and not host_matches("8.0.0.0/8", "010.0.0.1")
    assert host_matches("010.0.0.1", "010.0.0.1")


_OCTETS = st.one_of(
    st.integers(0, 300).map(str),
    st.text("0123456789", max_size=4),
    st.sampled_from(["", " 1", "1 ", "+1", "-0", "0x1", "\u0663", "1\x00", "\udcff"]),
)
_HOSTS = st.one_of(
    st.lists(_OCTETS, min_size=1, max_size=6).map(".".join),
    st.ip_addresses().map(str),
    st.text(max_size=24),
)
_NETWORKS = ["0.0.0.0/0", "10.0.0.0/8", "192.168.1.0/24", "255.255.255.255/32", "::/0", "2001:db8::/32"]


@given(_HOSTS, st.sampled_from(_NETWORKS))
@example("fe80::1%eth0", "::/0")
@example("::ffff:10.1.2.3", "10.0.0.0/8")
def test_cidr_membership_is_the_standard_librarys(host, network):
    """A client host falls inside a CIDR ACL host exactly when Python's ipaddress reads it as an
    address in that network (dotted quads, IPv6, scope ids, junk alike)."""
    try:
        expected = ipaddress.ip_address(host) in ipaddress.ip_network(network)
    except ValueError:
        expected = False
    assert host_matches(network, host) is expected


def test_allow_of_read_implies_describe_mask():
    """READ's ALLOW bit is in DESCRIBE's allow mask but not in its deny mask."""
    read_allow = acl_bit(READ, ALLOW)
    read_deny = acl_bit(READ, AclPermissionType.DENY)
    assert ALLOW_MASK[AclOperation.DESCRIBE] & read_allow
    assert not DENY_MASK[AclOperation.DESCRIBE] & read_deny


def test_unknown_permission_has_no_bit():
    """An ACL neither ALLOW nor DENY contributes nothing."""
    assert acl_bit(READ, AclPermissionType.ANY) == 0


def test_kip430_totals():
    """All operations of each type give the KIP-430 totals."""
    totals = {t: all_operations_bits(t) for t in OPERATIONS_BY_TYPE}
    assert totals == {
        ResourceType.TOPIC: 3576,
        ResourceType.GROUP: 3400,
        ResourceType.CLUSTER: 8096,
        ResourceType.TRANSACTIONAL_ID: 272,
        ResourceType.DELEGATION_TOKEN: 256,
        ResourceType.USER: 24576,
    }


def _reference_network(host: str):
    """``ipaddress``'s reading of a CIDR ACL host (host bits masked off), or None."""
    if "/" not in host:
        return None
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        return None
    return network.version, int(network.network_address), int(network.netmask)


_octets = st.one_of(st.integers(0, 255).map(str), st.sampled_from(["256", "01", "00", "-1", "", " 1", "1a", "٣"]))
_lengths = st.one_of(st.integers(0, 33).map(str), st.sampled_from(["", "08", "032", "-0", "+8", "٣", "255.255.255.0",
                                                                   "0.0.0.255", "8 "]))


@given(st.lists(_octets, min_size=3, max_size=5), _lengths)
@example(["10", "0", "0", "1"], "24")
@example(["2001:db8::"], "32")
def test_a_cidr_host_reads_as_ipaddress_reads_it(octets, length):
    """acl_network reads a range as ``ipaddress.ip_network(strict=False)`` does: dotted quads with every prefix
    length, bad octets, leading zeros, netmask and hostmask forms, IPv6."""
    host = ".".join(octets) + "/" + length
    acl_network.cache_clear()
    assert acl_network(host) == _reference_network(host)
