"""SecurityImageSnapshot: the image round-trips through a snapshot file, secrets stay sealed."""

import tempfile
from unittest.mock import patch

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.events.keyring import SealedSecret
from secmeta.events.records import AclCreated, DelegationTokenIssued, ScramCredentialUpserted
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections import image_snapshot, snapshot
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    CorruptSnapshotError,
    SnapshotError,
    read_snapshot,
    write_snapshot,
)
from tests.logkit import make_keyring
from tests.storekit import ADMIN, acl, store_at

CODEC = SecurityImageSnapshot()
SECRET = SealedSecret("k-7", b"\x11" * 12, b"sealed-bytes-" * 3)


def sample_image(next_offset=42):
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay(ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 4096, SECRET))
    delta.replay(ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_512, 8192, SECRET))
    for i, pattern in enumerate((PatternType.LITERAL, PatternType.PREFIXED)):
        binding = AclBinding.of(
            ResourceType.GROUP,
            f"g{i}",
            pattern,
            "User:bob",
            "10.0.0.1",
            AclOperation.DESCRIBE,
            AclPermissionType.DENY,
        )
        delta.replay(AclCreated(f"acl-{i}", binding))
    delta.replay(DelegationTokenIssued("t1", "User:a", "User:b", ("User:c", "User:d"), 1, 2, 3))
    return delta.apply(next_offset)


def round_trip(tmp_path, image):
    info = write_snapshot(
        tmp_path, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32, timestamp_ms=0
    )
    return read_snapshot(info.path, CODEC)[1]


def all_fields(schema):
    """Every field of every record in a schema, nested ones included."""
    if isinstance(schema, list):
        for branch in schema:
            yield from all_fields(branch)
    elif isinstance(schema, dict):
        for field in schema.get("fields", ()):
            yield field
            yield from all_fields(field["type"])


def test_image_round_trips_through_a_snapshot(tmp_path):
    """An image with credentials, ACLs and a token reads back equal."""
    image = sample_image()
    assert round_trip(tmp_path, image) == image


def test_empty_image_round_trips(tmp_path):
    """The empty image reads back as an equal empty image."""
    assert round_trip(tmp_path, SecurityImage.EMPTY) == SecurityImage.EMPTY


def test_next_offset_is_restored(tmp_path):
    """build() restores the image's next_offset from the meta row."""
    assert round_trip(tmp_path, sample_image(next_offset=1234)).next_offset == 1234


def test_rows_hold_a_meta_row_credentials_acl_chunks_and_tokens():
    """rows() yields a meta row, one row per credential, the ACL index in one chunk, one row per token."""
    names = [name.rsplit(".", 1)[1] for name, _ in (r["row"] for r in CODEC.rows(sample_image()))]
    assert names == ["MetaRow", "ScramRow", "ScramRow", "AclNodesRow", "TokenRow"]


def with_acls(image, count):
    delta = SecurityDelta(image)
    for i in range(count):
        binding = AclBinding.of(
            ResourceType.TOPIC, f"t{i % 3}", PatternType.LITERAL, f"User:u{i}", "*",
            AclOperation.READ, AclPermissionType.ALLOW,
        )
        delta.replay(AclCreated(f"extra-{i}", binding))
    return delta.apply()


def test_acls_spread_over_several_index_chunks_read_back(tmp_path, monkeypatch):
    """An image with more ACLs than one chunk holds is written as several chunks of whole nodes and reads back equal."""
    monkeypatch.setattr(image_snapshot, "ACL_CHUNK", 2)
    image = with_acls(sample_image(), 5)  # nodes g0, g1 (1 ACL each), t0, t1 (2 each), t2 (1)
    chunks = [row for name, row in (r["row"] for r in CODEC.rows(image)) if "group_counts" in row]
    per_chunk = sorted(len(c["acl_ids"].split(c["separator"])) for c in chunks)
    assert len(chunks) > 1 and sum(per_chunk) == 7 and max(per_chunk) <= 3
    assert round_trip(tmp_path, image) == image


def test_strings_holding_the_usual_separators_round_trip(tmp_path):
    """Ids, names, principals and hosts holding newlines and NULs read back as they were."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    for i, text in enumerate(("a\nb", "c\x00d", "e\x1f\x1e\tf", "\n")):
        binding = AclBinding.of(ResourceType.TOPIC, f"t{text}", PatternType.LITERAL, f"User:{text}", f"h{text}",
                                AclOperation.READ, AclPermissionType.ALLOW)
        delta.replay(AclCreated(f"id{i}{text}", binding))
    image = delta.apply(4)
    loaded = round_trip(tmp_path, image)
    assert loaded == image and sorted(loaded.acls) == sorted(image.acls)


def one_acl_image(name, principal="User:a"):
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay(AclCreated("id", AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*",
                                                AclOperation.READ, AclPermissionType.ALLOW)))
    return delta.apply(1)


def index_chunks(image):
    return [row for _, row in (r["row"] for r in CODEC.rows(image)) if "group_counts" in row]


def test_a_chunk_holding_the_usual_separators_and_many_more_characters_round_trips(tmp_path):
    """A name holding the usual separators and 20,000 other characters is joined by a character it does not hold."""
    name = "\n\x00\x1f\x1e\t" + "".join(chr(c) for c in range(0x20, 0x20 + 20_000) if not 0xD800 <= c < 0xE000)
    image = one_acl_image(name)
    [chunk] = index_chunks(image)
    assert len(chunk["separator"]) == 1 and chunk["separator"] not in name
    assert round_trip(tmp_path, image) == image


def test_a_chunk_holding_every_character_is_written_length_prefixed(tmp_path):
    """A chunk whose strings hold every character (no separator is free) is still written, each string
    length-prefixed and flagged by an empty separator, and reads back equal."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    image = one_acl_image(every, principal="User:1:2")
    [chunk] = index_chunks(image)
    assert chunk["separator"] == "" and chunk["principals"] == "8:User:1:2"
    loaded = round_trip(tmp_path, image)
    assert loaded == image and loaded.acls.get("id").pattern.name == every


def damaged(**changes):
    """A snapshot codec whose index chunks carry ``changes``."""

    class Damaged(SecurityImageSnapshot):
        def rows(self, image):
            for wrapped in super().rows(image):
                name, fields = wrapped["row"]
                yield {"row": (name, {**fields, **changes})} if "group_counts" in fields else wrapped

    return Damaged()


def u32s(*values):
    return b"".join(value.to_bytes(4, "little") for value in values)


# sample_image's one chunk: nodes GROUP LITERAL 'g0' and GROUP PREFIXED 'g1', one group of User:bob each.
@pytest.mark.parametrize(("changes", "problem"), [
    ({"operations": b""}, "ACL index chunk .*column lengths disagree"),  # fewer operations than ACLs
    ({"pattern_types": b"\x02\x02"}, "ACL index chunk .*resource type 3 and pattern type 2, which no ACL has"),
    ({"acl_ids": "acl-0\nacl-0"}, "ACL id is listed twice"),  # one id twice
    ({"group_counts": u32s(0, 2)}, "node GROUP LITERAL 'g0' holds no principal's group"),
    ({"acl_counts": u32s(0, 2)}, "a group of node GROUP LITERAL 'g0' holds no ACL"),
    ({"names": "g0\ng0", "pattern_types": b"\x03\x03"}, "a node is listed twice .GROUP LITERAL 'g0'"),
    ({"group_counts": u32s(2, 0)}, "node GROUP LITERAL 'g0' lists a principal's group twice"),
    ({"separator": "", "names": "2:g0x:g1"}, "ACL index chunk .*has no length at character 4"),
    ({"separator": "", "names": "2:g0", "principals": "8:User:bob", "acl_ids": "5:acl-05:acl-1",
      "hosts": "8:10.0.0.18:10.0.0.1"}, "column lengths disagree"),
    ({"separator": "", "names": "2:g09:g1", "principals": "8:User:bob", "acl_ids": "5:acl-05:acl-1",
      "hosts": "8:10.0.0.18:10.0.0.1"}, "a length-prefixed string runs past its column"),
])
def test_an_index_chunk_that_is_no_index_is_refused(tmp_path, changes, problem):
    """A chunk whose columns disagree, name a pattern type no ACL has, repeat an id, hold a node without groups
    or a group without ACLs, list one node twice or one principal twice in a node, or whose length-prefixed
    strings are malformed fails as a corrupt snapshot
    naming what is wrong."""
    image = sample_image()
    info = write_snapshot(tmp_path, damaged(**changes), image, next_offset=42, link=b"\0" * 32,
                          timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError, match=problem):
        read_snapshot(info.path, CODEC)


def test_a_node_repeated_in_a_later_chunk_is_refused(tmp_path, monkeypatch):
    """A node a second chunk lists again (its first listing would be silently replaced) fails as a corrupt snapshot."""
    monkeypatch.setattr(image_snapshot, "ACL_CHUNK", 1)
    info = write_snapshot(tmp_path, damaged(names="g0", pattern_types=b"\x03"), sample_image(), next_offset=42,
                          link=b"\0" * 32, timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError, match="a node is listed twice .GROUP LITERAL 'g0'"):
        read_snapshot(info.path, CODEC)


@pytest.mark.parametrize("form", [1, 2])
def test_a_snapshot_of_a_development_format_is_refused_naming_it(tmp_path, monkeypatch, form):
    """A snapshot marked format 1 or 2 (development formats no release wrote) is refused, naming its format."""
    monkeypatch.setattr(snapshot, "SNAPSHOT_FORMAT", form)
    info = write_snapshot(tmp_path, CODEC, sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0)
    monkeypatch.undo()
    with pytest.raises(SnapshotError, match=f"format {form}, a development format no release wrote; "
                                            "this secmeta reads formats 3 and 4 .`secmeta log snapshot` writes a new one"):
        read_snapshot(info.path, CODEC)


def test_a_store_whose_snapshot_is_of_a_development_format_replays_its_log(tmp_path, monkeypatch):
    """A store whose one snapshot is marked format 2 opens with that snapshot refused (the reason kept) and the
    state replayed from its log."""
    keyring = make_keyring(tmp_path)
    with store_at(tmp_path / "store", keyring) as store:
        store.create_acls([acl("orders"), acl("payments", principal="User:bob")], context=ADMIN)
        monkeypatch.setattr(snapshot, "SNAPSHOT_FORMAT", 2)
        store.snapshot()
        monkeypatch.undo()
    with store_at(tmp_path / "store", keyring) as store:
        assert store.loaded.snapshot is None and store.loaded.replayed_events == 2
        assert "format 2, a development format no release wrote" in store.loaded.rejected_snapshots[0]
        assert {b.name for b in store.describe_acls(AclBindingFilter(), context=ADMIN)} == {"orders", "payments"}


# Random ACL images: a few names (literal and prefixed, so nodes hold many principals), hosts, any principal.
acl_bindings = st.builds(
    AclBinding.of,
    st.sampled_from([ResourceType.TOPIC, ResourceType.TOPIC, ResourceType.GROUP]),
    st.sampled_from(["a", "a", "ab", "*", "t\nx"]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from([f"User:u{i}" for i in range(12)] + ["User:*"]),
    st.sampled_from(["*", "*", "10.0.0.1", "10.0.0.0/8", "::1"]),
    st.sampled_from([AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


@settings(deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z0-9-]{1,6}", fullmatch=True), acl_bindings, max_size=80),
       st.integers(0, 20), st.sampled_from([1, 7, 65536]))
def test_random_images_round_trip_in_chunks_of_any_size(acls, crowd, chunk):
    """A random ACL image, plus a topic held by ``crowd`` principals (one group, a few, many), written in
    index chunks of any size reads back equal."""
    acls = {**acls, **{f"crowd{i}": AclBinding.of(ResourceType.TOPIC, "crowd", PatternType.PREFIXED, f"User:c{i}",
                                                   "*", AclOperation.READ, AclPermissionType.ALLOW)
                       for i in range(crowd)}}
    delta = SecurityDelta(SecurityImage.EMPTY)
    for binding, acl_id in {binding: acl_id for acl_id, binding in acls.items()}.items():  # one id per binding
        delta.replay(AclCreated(acl_id, binding))
    image = delta.apply(len(acls))
    with tempfile.TemporaryDirectory() as directory, patch.object(image_snapshot, "ACL_CHUNK", chunk):
        info = write_snapshot(directory, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32,
                              timestamp_ms=0)
        loaded = read_snapshot(info.path, CODEC)[1]
    assert loaded == image and sorted(loaded.acls) == sorted(image.acls)


def test_a_snapshot_of_a_newer_format_is_refused_naming_it(tmp_path, monkeypatch):
    """A snapshot whose format this code does not know is refused with the format in the message."""
    monkeypatch.setattr(snapshot, "SNAPSHOT_FORMAT", snapshot.SNAPSHOT_FORMAT + 1)
    info = write_snapshot(tmp_path, CODEC, sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0)
    monkeypatch.undo()
    with pytest.raises(SnapshotError, match=f"format {snapshot.SNAPSHOT_FORMAT + 1}"):
        read_snapshot(info.path, CODEC)


def test_scram_rows_hold_the_sealed_secret():
    """A credential row carries the sealed key id, nonce and ciphertext as stored."""
    rows = [row for _, row in (r["row"] for r in CODEC.rows(sample_image())) if "user" in row]
    assert {(r["key_id"], r["nonce"], r["ciphertext"]) for r in rows} == {
        (SECRET.key_id, SECRET.nonce, SECRET.ciphertext)
    }


def test_every_schema_field_has_a_doc():
    """Every field of the snapshot schema, nested ones included, has a doc."""
    assert all(field.get("doc") for field in all_fields(CODEC.schema))


def test_schema_parses_as_avro():
    """The schema is a valid Avro record schema."""
    assert fastavro.parse_schema(CODEC.schema)["type"] == "record"


def test_kind_names_the_security_image():
    """The codec's kind is 'security-image'."""
    assert CODEC.kind == "security-image"
