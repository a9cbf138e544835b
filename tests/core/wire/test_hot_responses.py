"""The responses the server keeps or writes as bytes are byte for byte kio's, at every version we advertise."""

from __future__ import annotations

import weakref

from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.core.wire import convert, hot_responses
from secmeta.core.wire.codec import (
    ApiKey,
    build,
    decode_response,
    encode_response,
    encoded,
    response_class,
    response_frame_parts,
)
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsDelta, AclsImage

# names and hosts of every length class: empty, short, and past one varint byte (127) and 255
_TEXT = st.one_of(st.text(max_size=8), st.text(min_size=120, max_size=300))
_PATTERN_TYPES = [PatternType.LITERAL, PatternType.PREFIXED]
_RESOURCE_TYPES = [t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)]
_OPERATIONS = [o for o in AclOperation if o not in (AclOperation.ANY, AclOperation.UNKNOWN)]


@st.composite
def _bindings(draw) -> list[AclBinding]:
    """ACLs on a few resources, interleaved, some resources and principals shared (groups of several ACLs)."""
    patterns = draw(st.lists(st.tuples(st.sampled_from(_RESOURCE_TYPES), _TEXT, st.sampled_from(_PATTERN_TYPES)),
                             min_size=1, max_size=4))
    principals = draw(st.lists(_TEXT.map(lambda name: f"User:{name}"), min_size=1, max_size=3))
    entries = draw(st.lists(st.tuples(st.integers(0, len(patterns) - 1), st.sampled_from(principals),
                                      st.sampled_from(["*", "10.0.0.1", "10.0.0.0/8"]) | _TEXT,
                                      st.sampled_from(_OPERATIONS),
                                      st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])),
                            max_size=60))
    return [AclBinding.of(*patterns[i][:2], patterns[i][2], principal, host, op, perm)
            for i, principal, host, op, perm in entries]


@st.composite
def _filters(draw, bindings: list[AclBinding]) -> AclBindingFilter:
    """A filter naming nothing, or fields of one of the ACLs (so that some groups are selected in part)."""
    if not bindings or draw(st.booleans()):
        return AclBindingFilter.of(draw(st.sampled_from([ResourceType.ANY, *_RESOURCE_TYPES])))
    b = draw(st.sampled_from(bindings))
    return AclBindingFilter.of(
        draw(st.sampled_from([ResourceType.ANY, b.restype])),
        draw(st.sampled_from([None, b.name])),
        draw(st.sampled_from([PatternType.ANY, PatternType.MATCH, b.resource_pattern_type])),
        draw(st.sampled_from([None, b.principal])), draw(st.sampled_from([None, b.host])),
        draw(st.sampled_from([AclOperation.ANY, b.operation])),
        draw(st.sampled_from([AclPermissionType.ANY, b.permission_type])))


def _kio_frame(api_key: ApiKey, version: int, correlation_id: int, **fields) -> bytes:
    return encode_response(correlation_id, build(response_class(api_key, version), throttle_time=0, **fields))


_DESCRIBE_ACLS_VERSIONS = range(ApiKey.DESCRIBE_ACLS.versions[0], ApiKey.DESCRIBE_ACLS.versions[1] + 1)
_CORRELATION = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), bindings=_bindings(), version=st.sampled_from(_DESCRIBE_ACLS_VERSIONS),
       correlation_id=_CORRELATION)
def test_describe_acls_by_hand_is_kios_encoding(data, bindings, version, correlation_id):
    """DescribeAcls' hand-written answer of an image's selected groups (or whole index nodes, for a filter on the
    pattern alone) equals kio's for the same ACLs, grouped by resource, at v1-v3, and so does the same answer
    again (each whole group's or node's encoding kept)."""
    image = AclsImage.of((f"id{i}", b) for i, b in enumerate(bindings))
    f = data.draw(_filters(bindings))
    kio = _kio_frame(ApiKey.DESCRIBE_ACLS, version, correlation_id, error_code=0, error_message=None,
                     resources=convert.resources_fields([b for _, b in image.matching(f)]))
    for whole_nodes in (False, True, False, True):
        ours = encode_response(correlation_id, hot_responses.describe_acls_response(
            version, image.selection(f, whole_nodes=whole_nodes)))
        assert ours == kio
        answer = hot_responses.describe_acls_response(version, image.selection(f, whole_nodes=whole_nodes))
        parts = response_frame_parts(correlation_id, answer)    # the server's inline path writes these in order
        assert b"".join(parts) == kio and parts[-1] is answer.body
    assert decode_response(ApiKey.DESCRIBE_ACLS, version, ours[4:])[0] == correlation_id


_EVERY_ACL = AclBindingFilter.of()


def _read_back(version: int, image: AclsImage, f: AclBindingFilter = _EVERY_ACL) -> list[AclBinding]:
    frame = encode_response(3, hot_responses.describe_acls_response(version, image.selection(f, whole_nodes=True)))
    return convert.bindings_from_resources(decode_response(ApiKey.DESCRIBE_ACLS, version, frame[4:])[1].resources)


def test_describe_acls_by_hand_reads_back_as_the_bindings():
    """A client reading the hand-written answer gets every binding, each resource's ACLs together."""
    bindings = [AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, f"User:u{i}", "*",
                              AclOperation.READ, AclPermissionType.ALLOW) for i, name in enumerate("abab")]
    image = AclsImage.of((f"id{i}", b) for i, b in enumerate(bindings))
    for version in _DESCRIBE_ACLS_VERSIONS:
        got = _read_back(version, image)
        assert sorted(got, key=repr) == sorted(bindings, key=repr)
        assert [b.name for b in got] in (["a", "a", "b", "b"], ["b", "b", "a", "a"])


def test_a_changed_group_is_encoded_afresh():
    """After a write replaces a group, its answer holds the group's new ACLs, not the encoding kept for the old."""
    def acl(operation):
        return AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:u", "*", operation,
                             AclPermissionType.ALLOW)

    before = AclsImage.of([("id0", acl(AclOperation.READ))])
    delta = AclsDelta(before)
    delta.add("id1", acl(AclOperation.WRITE))
    after = delta.apply()
    for version in _DESCRIBE_ACLS_VERSIONS:
        assert _read_back(version, before) == [acl(AclOperation.READ)]
        assert sorted(_read_back(version, after), key=repr) == sorted([acl(AclOperation.READ), acl(AclOperation.WRITE)], key=repr)
        assert _read_back(version, before) == [acl(AclOperation.READ)]


def test_a_changed_node_is_encoded_afresh():
    """After a write adds or removes another principal's ACL on a resource (its index node replaced), the answer
    on the resource alone holds the node's new ACLs, not the encoding kept for the old node."""
    def acl(principal):
        return AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, principal, "10.0.0.1",
                             AclOperation.READ, AclPermissionType.ALLOW)

    orders = AclBindingFilter.of(ResourceType.TOPIC, "orders", PatternType.MATCH)
    images, held = [AclsImage.EMPTY], []
    for n in (1, 3, 12, 2):     # one principal's group, a few principals, many, a few again
        delta = AclsDelta(images[-1])
        for i in range(len(held), n):
            delta.add(f"id{i}", acl(f"User:u{i}"))
        for i in range(n, len(held)):
            delta.remove(f"id{i}")
        held = [acl(f"User:u{i}") for i in range(n)]
        images.append(delta.apply())
        for version in _DESCRIBE_ACLS_VERSIONS:
            assert sorted(_read_back(version, images[-1], orders), key=repr) == sorted(held, key=repr)
    for version in _DESCRIBE_ACLS_VERSIONS:
        assert len(_read_back(version, images[2], orders)) == 3     # an older image's answer is still its own


_CLUSTER_APIS = {
    ApiKey.API_VERSIONS: lambda ops, host: {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": k.versions[0], "max_version": k.versions[1]} for k in ApiKey]},
    ApiKey.METADATA: lambda ops, host: {
        "brokers": [{"node_id": 1, "host": host, "port": 9092, "rack": None}], "cluster_id": "c", "controller_id": 1,
        "topics": [], "cluster_authorized_operations": ops, "error_code": 0},
    ApiKey.DESCRIBE_CLUSTER: lambda ops, host: {
        "error_code": 0, "error_message": None, "endpoint_type": 1, "cluster_id": "c", "controller_id": 1,
        "brokers": [{"broker_id": 1, "host": host, "port": 9092, "rack": None, "is_fenced": False}],
        "cluster_authorized_operations": ops},
}


@settings(max_examples=60, deadline=None)
@given(api=st.sampled_from(sorted(_CLUSTER_APIS)), data=st.data(), correlation_id=_CORRELATION,
       operations=st.integers(-(2**31), 2**31 - 1), host=_TEXT)
def test_a_kept_encoding_frames_as_kio_frames_the_entity(api, data, correlation_id, operations, host):
    """An answer kept encoded and framed later with another correlation id equals kio's frame of it, at every
    version of ApiVersions, Metadata and DescribeCluster (their header v0 or v1 included)."""
    version = data.draw(st.integers(*api.versions))
    entity = build(response_class(api, version), throttle_time=0, **_CLUSTER_APIS[api](operations, host))
    kept = encoded(entity)
    assert encode_response(correlation_id, kept) == encode_response(correlation_id, entity)
    assert kept.error_code == 0
    parts = response_frame_parts(correlation_id, kept)     # written one after the other: the same frame
    assert b"".join(parts) == encode_response(correlation_id, entity) and parts[-1] is kept.body


def test_kept_encodings_do_not_pin_an_index_table_an_image_no_longer_holds():
    """Encodings are kept per group, and a group made from an index table holds the whole table: once the groups of a
    newer table are encoded, the older table (of an image nobody holds) is freed, not kept until the cache fills."""
    import gc


    def image_of(names):   # one principal's ACLs from several hosts on each topic: a group made from the table
        return AclsImage.of((f"{name}{i}", AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, "User:u",
                                                           f"10.0.0.{i}", AclOperation.READ, AclPermissionType.ALLOW))
                            for name in names for i in range(3))

    old = image_of(["a", "b"])
    assert len(_read_back(3, old)) == 6
    (old_table,) = {group.columns for group, _chosen in old.selection(AclBindingFilter.of())}
    old_ref = weakref.ref(old_table)
    newer = image_of(["c"])
    assert [b.name for b in _read_back(3, newer)] == ["c"] * 3
    del old, old_table
    gc.collect()
    assert old_ref() is None


def _batch_built_image(batches: int = 3, per_batch: int = 40):
    """An image built as a follower builds it: batches of new ACLs on new topics through the incremental apply,
    each batch's ACLs grouped into a table of its own (``acls.TABLE_FROM``), so its nodes come from several
    tables: two principals per topic (a table's node) and one principal from two hosts (a table's group)."""
    image, held = AclsImage.EMPTY, []
    for b in range(batches):
        delta = AclsDelta(image)
        for t in range(per_batch):
            for i, (principal, host) in enumerate((("User:a", "10.0.0.1"), ("User:b", "10.0.0.2"))):
                name, principal = (f"b{b}t{t}", principal) if t % 2 else (f"b{b}solo{t}", "User:c")
                binding = AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, principal, host,
                                        AclOperation.READ, AclPermissionType.ALLOW)
                delta.add(f"id{b}-{t}-{i}", binding)
                held.append(binding)
        image = delta.apply()
    return image, held


def test_answers_spanning_the_tables_of_a_batch_built_image_are_kept_and_hold_each_write():
    """On an image whose nodes come from several batch tables, a repeated DescribeAcls finds every node's
    encoding kept (none cleared by another table's), answers as the first time, and after a write the next answer
    holds the write (read-your-writes)."""
    from secmeta.projections.acl_table import AclTable

    image, held = _batch_built_image()
    holders = list(image.selection(_EVERY_ACL, whole_nodes=True))
    tables = {getattr(h, "source", None) or getattr(h, "columns", None) for h, _ in holders}
    assert len({t for t in tables if isinstance(t, AclTable)}) == 3
    kept = hot_responses._HELD_BYTES._kept
    first = _read_back(3, image)
    hits = kept.hits
    assert _read_back(3, image) == first
    assert kept.hits - hits == len(holders)  # every node's encoding found kept
    assert sorted(first, key=repr) == sorted(held, key=repr)
    write = AclBinding.of(ResourceType.TOPIC, "b0t1", PatternType.LITERAL, "User:z", "*", AclOperation.WRITE,
                          AclPermissionType.ALLOW)
    delta = AclsDelta(image)
    delta.add("new", write)
    after = delta.apply()
    assert sorted(_read_back(3, after), key=repr) == sorted([*held, write], key=repr)
    assert sorted(_read_back(3, image), key=repr) == sorted(held, key=repr)


def test_a_kept_encoding_of_a_node_a_write_changed_does_not_pin_its_table():
    """A node of a loaded table whose first group a write replaced (its other groups still the table's): its
    answer holds the write, and once no image holds the table, the table is freed (nothing kept pins it)."""
    import gc


    names = [f"t{n}" for n in range(3)]
    image = AclsImage.of((f"{name}-{p}", AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, f"User:{p}",
                                                       "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW))
                         for name in names for p in "abc")
    (table,) = {node.source for node, _ in image.selection(_EVERY_ACL, whole_nodes=True)}
    table_ref = weakref.ref(table)
    del table
    delta = AclsDelta(image)
    delta.remove("t0-a")  # User:a's group of t0 replaced: t0's node is a write's, of the table's other groups
    delta.add("t0-a2", AclBinding.of(ResourceType.TOPIC, "t0", PatternType.LITERAL, "User:a", "*",
                                     AclOperation.WRITE, AclPermissionType.ALLOW))
    after = delta.apply()
    t0 = AclBindingFilter.of(ResourceType.TOPIC, "t0", PatternType.MATCH)
    for _ in range(2):
        assert sorted((b.principal, b.host) for b in _read_back(3, after, t0)) == [
            ("User:a", "*"), ("User:b", "10.0.0.1"), ("User:c", "10.0.0.1")]
    del image, delta, after
    gc.collect()
    assert table_ref() is None
