"""SecurityImageSnapshot: the image round-trips through a snapshot file (format 6, and the older formats 5 and 4
that still load), secrets stay sealed, a damaged ACL or token section or chunk is refused."""

import hashlib
import hmac
import io
import struct
import tempfile
import uuid
import zlib
from array import array
from pathlib import Path
from unittest.mock import patch

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.events.keyring import Keyring, SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    ScramCredentialUpserted,
    TokenRemovalReason,
)
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections import acl_section, image_snapshot, snapshot
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    CorruptSnapshotError,
    SnapshotError,
    read_snapshot,
    write_snapshot,
)
from secmeta.projections.token_section import encode_tokens
from secmeta.projections.tokens import TOKEN_FIELDS, TokenInfo
from tests.logkit import make_keyring
from tests.projections import older_snapshots
from tests.storekit import ADMIN, acl, store_at

CODEC = SecurityImageSnapshot()


class Format5(SecurityImageSnapshot):
    """The format-5 codec: the ACL index alone as the section (in the layout of today's, which reads both: the
    committed snapshot of test_a_format_5_snapshot_written_by_the_format_5_code_still_loads holds format 5's own),
    each token a row."""

    def section(self, image):
        return image_snapshot._NodesRow.of(image.acls.index).section()

    def rows(self, image):
        yield from super().rows(image)
        for token in image.tokens:
            yield {"row": ("secmeta.snapshot.TokenRow",
                           {**{name: getattr(token, name) for name in TOKEN_FIELDS}, "renewers": list(token.renewers)})}


class Format4(Format5):
    """The format-4 codec: the ACL index as AclNodesRow chunks of ``ACL_CHUNK`` ACLs, no section."""

    section = None

    def rows(self, image):
        yield from super().rows(image)
        for row in older_snapshots.node_rows(image.acls.index, older_snapshots.ACL_CHUNK):
            yield {"row": ("secmeta.snapshot.AclNodesRow", row)}


FORMAT4, FORMAT5 = Format4(), Format5()


def write_older(directory, image, form, codec=None, keyring=None):
    """``image`` as formats 4 and 5 wrote it: format 5's 16-byte preamble and section (format 4: none), the
    container, a trailer whose HMAC (given a keyring) is checked after the CRC, its key id in the metadata."""
    codec = codec or (FORMAT5 if form == 5 else FORMAT4)
    with patch.object(snapshot, "SNAPSHOT_FORMAT", form):
        metadata = snapshot._metadata(codec, image.next_offset, b"\0" * 32, 0)
    section = codec.section(image) if codec.section is not None else None
    if keyring is not None:
        metadata["secmeta.mac_key_id"] = keyring.newest_id
    container = io.BytesIO()
    fastavro.writer(container, fastavro.parse_schema(codec.schema), codec.rows(image), metadata=metadata,
                    codec="null")
    data = container.getvalue()
    if section is not None:
        data = snapshot.PREAMBLE5.pack(snapshot.PREAMBLE5_MAGIC, sum(map(len, section))) + b"".join(section) + data
    digest = bytes(32) if keyring is None else hmac.new(keyring.chain_key(keyring.newest_id), snapshot.MAC_LABEL,
                                                        hashlib.sha256)
    if keyring is not None:
        digest.update(data)
        digest = digest.digest()
    data += digest + b"SMSN"
    path = snapshot.snapshot_path(directory, image.next_offset)
    path.write_bytes(data + zlib.crc32(data).to_bytes(4, "big"))
    return snapshot.read_snapshot_info(path)


def write_format4(directory, image, codec=FORMAT4):
    """``image`` written as format 4 wrote it."""
    return write_older(directory, image, 4, codec)


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


def round_trip(tmp_path, image, form=6):
    if form in (4, 5):
        info = write_older(tmp_path, image, form)
    else:
        info = write_snapshot(tmp_path, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32, timestamp_ms=0)
    assert snapshot.read_snapshot_info(info.path).format == form
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


@pytest.mark.parametrize("form", [6, 5, 4])
def test_image_round_trips_through_a_snapshot(tmp_path, form):
    """An image with credentials, ACLs and a token reads back equal, from this format and from formats 5 and 4."""
    image = sample_image()
    assert round_trip(tmp_path, image, form) == image


def test_empty_image_round_trips(tmp_path):
    """The empty image reads back as an equal empty image."""
    assert round_trip(tmp_path, SecurityImage.EMPTY) == SecurityImage.EMPTY


def test_next_offset_is_restored(tmp_path):
    """build() restores the image's next_offset from the meta row."""
    assert round_trip(tmp_path, sample_image(next_offset=1234)).next_offset == 1234


def test_rows_hold_a_meta_row_and_credentials_and_the_acls_and_tokens_are_the_section():
    """rows() yields a meta row and one row per credential; the ACL index and the tokens are the section."""
    names = [name.rsplit(".", 1)[1] for name, _ in (r["row"] for r in CODEC.rows(sample_image()))]
    assert names == ["MetaRow", "ScramRow", "ScramRow"]
    section = b"".join(CODEC.section(sample_image()))
    assert b"acl-0" in section and b"User:c" in section and b"t1" in section


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
    monkeypatch.setattr(older_snapshots, "ACL_CHUNK", 2)
    image = with_acls(sample_image(), 5)  # nodes g0, g1 (1 ACL each), t0, t1 (2 each), t2 (1)
    chunks = index_chunks(image)
    per_chunk = sorted(len(c["acl_ids"].split(c["separator"])) for c in chunks)
    assert len(chunks) > 1 and sum(per_chunk) == 7 and max(per_chunk) <= 3
    assert round_trip(tmp_path, image, 4) == image


@pytest.mark.parametrize("form", [6, 5, 4])
def test_strings_holding_the_usual_separators_round_trip(tmp_path, form):
    """Ids, names, principals and hosts holding newlines and NULs read back as they were."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    for i, text in enumerate(("a\nb", "c\x00d", "e\x1f\x1e\tf", "\n")):
        binding = AclBinding.of(ResourceType.TOPIC, f"t{text}", PatternType.LITERAL, f"User:{text}", f"h{text}",
                                AclOperation.READ, AclPermissionType.ALLOW)
        delta.replay(AclCreated(f"id{i}{text}", binding))
    image = delta.apply(4)
    loaded = round_trip(tmp_path, image, form)
    assert loaded == image and sorted(loaded.acls) == sorted(image.acls)
    assert all(loaded.acls.get(acl_id) == binding for acl_id, binding in image.acls)


def one_acl_image(name, principal="User:a"):
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay(AclCreated("id", AclBinding.of(ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*",
                                                AclOperation.READ, AclPermissionType.ALLOW)))
    return delta.apply(1)


def index_chunks(image):
    return [row for _, row in (r["row"] for r in FORMAT4.rows(image)) if "group_counts" in row]


def test_a_chunk_holding_the_usual_separators_and_many_more_characters_round_trips(tmp_path):
    """A name holding the usual separators and 20,000 other characters is joined by a character it does not hold."""
    name = "\n\x00\x1f\x1e\t" + "".join(chr(c) for c in range(0x20, 0x20 + 20_000) if not 0xD800 <= c < 0xE000)
    image = one_acl_image(name)
    [chunk] = index_chunks(image)
    assert len(chunk["separator"]) == 1 and chunk["separator"] not in name
    assert round_trip(tmp_path, image, 4) == image
    assert round_trip(tmp_path, image) == image


def test_a_chunk_holding_every_character_is_written_length_prefixed(tmp_path):
    """A format-4 chunk whose strings hold every character (no separator is free) is still written, each string
    length-prefixed and flagged by an empty separator, and reads back equal."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    image = one_acl_image(every, principal="User:1:2")
    [chunk] = index_chunks(image)
    assert chunk["separator"] == "" and chunk["principals"] == "8:User:1:2"
    loaded = round_trip(tmp_path, image, 4)
    assert loaded == image and loaded.acls.get("id").pattern.name == every


def acl_section_separator(section: bytes) -> int:
    """The separator code (code point + 1, 0: none) an ACL section's header names (the u32 after its magic)."""
    return int.from_bytes(section[8:12], "little")


@pytest.mark.parametrize("form", [5, 6])
def test_a_section_holding_every_separator_it_tries_is_delimited_by_offsets_alone(tmp_path, form):
    """A section whose strings hold every separator it would try is written with none (its strings delimited by
    their offsets alone, review 26: the same path as a name of every character, 0.01 s instead of 0.5 s) and
    reads back equal.  The name: the usual separators and every character from U+0020 to U+1FFF."""
    name = "\n\x00\x1f\x1e\t" + "".join(chr(c) for c in range(0x20, 0x2000))
    image = one_acl_image(name, principal="User:1:2")
    section = b"".join(FORMAT5.section(image) if form == 5 else CODEC.section(image))
    acl_section_at = 0 if form == 5 else image_snapshot._PARTS.size
    assert acl_section_separator(section[acl_section_at:]) == 0
    loaded = round_trip(tmp_path, image, form)
    assert loaded == image and loaded.acls.get("id").pattern.name == name


def damaged(**changes):
    """A snapshot codec whose index chunks carry ``changes``."""

    class Damaged(Format4):
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
    info = write_format4(tmp_path, sample_image(), damaged(**changes))
    with pytest.raises(CorruptSnapshotError, match=problem):
        read_snapshot(info.path, CODEC)


def test_a_node_repeated_in_a_later_chunk_is_refused(tmp_path, monkeypatch):
    """A node a second chunk lists again (its first listing would be silently replaced) fails as a corrupt snapshot."""
    monkeypatch.setattr(older_snapshots, "ACL_CHUNK", 1)
    info = write_format4(tmp_path, sample_image(), damaged(names="g0", pattern_types=b"\x03"))
    with pytest.raises(CorruptSnapshotError, match="a node is listed twice .GROUP LITERAL 'g0'"):
        read_snapshot(info.path, CODEC)


@pytest.mark.parametrize("form", [1, 2])
def test_a_snapshot_of_a_development_format_is_refused_naming_it(tmp_path, monkeypatch, form):
    """A snapshot marked format 1 or 2 (development formats no release wrote) is refused, naming its format."""
    monkeypatch.setattr(snapshot, "SNAPSHOT_FORMAT", form)
    info = write_snapshot(tmp_path, CODEC, sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0)
    monkeypatch.undo()
    with pytest.raises(SnapshotError, match=f"format {form}, a development format no release wrote; "
                                            "this secmeta reads formats 3, 4, 5 and 6 .`secmeta log snapshot` writes a new one"):
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
       st.integers(0, 20), st.sampled_from([None, 1, 7, 65536]))
def test_random_images_round_trip_as_a_section_and_in_chunks_of_any_size(acls, crowd, chunk):
    """A random ACL image, plus a topic held by ``crowd`` principals (one group, a few, many), written as a
    format-6 section (chunk None) or in format-4 index chunks of any size reads back equal, every id found."""
    acls = {**acls, **{f"crowd{i}": AclBinding.of(ResourceType.TOPIC, "crowd", PatternType.PREFIXED, f"User:c{i}",
                                                   "*", AclOperation.READ, AclPermissionType.ALLOW)
                       for i in range(crowd)}}
    delta = SecurityDelta(SecurityImage.EMPTY)
    for binding, acl_id in {binding: acl_id for acl_id, binding in acls.items()}.items():  # one id per binding
        delta.replay(AclCreated(acl_id, binding))
    image = delta.apply(len(acls))
    with tempfile.TemporaryDirectory() as directory, patch.object(older_snapshots, "ACL_CHUNK", chunk or 1):
        loaded = round_trip(Path(directory), image, 6 if chunk is None else 4)
    assert loaded == image and sorted(loaded.acls) == sorted(image.acls)
    assert all(loaded.acls.get(acl_id) == binding for acl_id, binding in image.acls)
    assert loaded.acls.get("absent") is None and "absent" not in loaded.acls


def test_a_snapshot_of_a_newer_format_is_refused_naming_it(tmp_path, monkeypatch):
    """A snapshot whose format this code does not know is refused with the format in the message."""
    monkeypatch.setattr(snapshot, "SNAPSHOT_FORMAT", snapshot.SNAPSHOT_FORMAT + 1)
    info = write_snapshot(tmp_path, CODEC, sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0)
    monkeypatch.undo()
    with pytest.raises(SnapshotError, match=f"format {snapshot.SNAPSHOT_FORMAT + 1}"):
        read_snapshot(info.path, CODEC)


def test_a_snapshot_framed_in_a_newer_format_is_refused_naming_it_and_the_store_replays(tmp_path, caplog):
    """A file whose preamble names format 7 (``SMSN``, 0, 0, 0, 7, then a layout this secmeta cannot know, ending
    in the trailer's CRC) is refused as newer than this secmeta reads, with or without the keyring, not as
    unreadable (issue 24, S3); a store whose snapshot it is replays its log and its warning says why.  A format-6
    file whose format byte alone was flipped to 7 fails its CRC: it is refused as corrupt."""
    keyring = make_keyring(tmp_path)
    with store_at(tmp_path / "store", keyring) as store:
        store.create_acls([acl("orders"), acl("payments", principal="User:bob")], context=ADMIN)
        path = store.snapshot().path
    data = bytearray(path.read_bytes())
    data[7] = 7
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError, match=f"snapshot {path.name} is corrupt: it names format 7, newer "
                                                   "than this secmeta reads, but it fails its CRC check"):
        read_snapshot(path, CODEC, keyring)
    future = bytes(data[:-4]) + b"a layout of the future" + bytes(32) + b"SMSN"
    path.write_bytes(future + zlib.crc32(future).to_bytes(4, "big"))
    newer = f"snapshot {path.name} has format 7, newer than this secmeta reads .formats up to 6.: a newer secmeta"
    for ring in (None, keyring):
        with pytest.raises(SnapshotError, match=newer) as refused:
            read_snapshot(path, CODEC, ring)
        assert not isinstance(refused.value, CorruptSnapshotError)
    with caplog.at_level("WARNING", logger="secmeta.snapshots"), store_at(tmp_path / "store", keyring) as store:
        assert store.loaded.snapshot is None and store.loaded.replayed_events == 2
        assert {b.name for b in store.describe_acls(AclBindingFilter(), context=ADMIN)} == {"orders", "payments"}
    assert any("has format 7, newer than this secmeta reads" in r.getMessage() and "replay" in r.getMessage()
               for r in caplog.records)


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


def sectioned(damage=lambda s: s, damage_tokens=lambda s: s):
    """A snapshot codec whose ACL section is ``damage(section bytes)`` and token section ``damage_tokens(...)``
    (then signed as they are)."""

    class Damaged(SecurityImageSnapshot):
        def section(self, image):
            return image_snapshot.image_section(
                [damage(b"".join(image_snapshot._NodesRow.of(image.acls.index).section()))],
                [damage_tokens(b"".join(encode_tokens(image.tokens)))])

    return Damaged()


def _header_field(section: bytes, index: int, value: int) -> bytes:
    """The section with its header's ``index``-th u32 count (0: separator, 1: nodes, ...) set to ``value``."""
    at = 8 + 4 * index
    return section[:at] + value.to_bytes(4, "little") + section[at + 4:]


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda s: b"XXXXXXXX" + s[8:], "ACL index chunk .*the ACL section starts with b'XXXXXXXX'"),
    (lambda s: s[:40], "ACL index chunk .*the ACL section is truncated .40 bytes"),
    (lambda s: s[:-16], "ACL index chunk .*array .* runs past the ACL section"),
    (lambda s: _header_field(s, 1, 3), "ACL index chunk .*column .* holds 2 values, not 3"),
    (lambda s: _header_field(s, 3, 5), "ACL index chunk .*column .* holds 3 values, not 6"),
    (lambda s: s.replace(bytes([AclOperation.DESCRIBE, AclOperation.DESCRIBE]), b"\x7f\x7f", 1),
     "ACL index chunk .*an operation or permission code no ACL has"),
    (lambda s: array_item(s, acl_section._HEADER.size, "id_offsets", acl_section._LAYOUT,
                          1, 13), "ACL index chunk .*a string column's offsets do not run from 0 to 12 without"),
])
def test_a_damaged_acl_section_is_refused_at_open(tmp_path, damage, problem):
    """A signed section whose header, arrays or codes do not hold an index fails as a corrupt snapshot naming
    what is wrong, before the image is used."""
    info = write_snapshot(tmp_path, sectioned(damage), sample_image(), next_offset=42, link=b"\0" * 32,
                          timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError, match=problem):
        read_snapshot(info.path, CODEC)


def test_a_section_node_that_holds_no_index_fails_when_first_made(tmp_path):
    """A node whose groups repeat a principal (columns only a pass over every ACL would check at open) fails
    naming the node when a lookup first makes it, never answering from it."""
    from secmeta.projections.acl_section import encode_section, read_section
    from secmeta.projections.acl_table import TableError

    section = encode_section(bytes([2]), bytes([3]), ["t"], [2], ["User:a"], [0, 0], [1, 1], ["i1", "i2"],
                             ["*"], [0, 0], bytes([3, 3]), bytes([3, 3]))
    table = read_section(memoryview(b"".join(section)))
    with pytest.raises(TableError, match="node TOPIC LITERAL 't' lists a principal's group twice"):
        table.index().node(ResourceType.TOPIC, PatternType.LITERAL, "t")


def test_a_snapshot_without_its_acl_section_is_refused(tmp_path):
    """A format-6 image snapshot written without its section (which would read as no ACLs) is refused."""

    class Sectionless(SecurityImageSnapshot):
        section = None

    info = write_snapshot(tmp_path, Sectionless(), sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError, match="format 6 of a 'security-image' state without its section"):
        read_snapshot(info.path, CODEC)


@pytest.mark.parametrize(("damage", "reason"), [("flip", "fails its HMAC check: it was altered, truncated or forged"),
                                               ("truncate", "has no snapshot trailer: it is truncated")])
def test_a_store_whose_snapshot_is_damaged_replays_its_log(tmp_path, damage, reason):
    """A store whose one (format-6, authenticated) snapshot has a byte of its ACL section flipped, or lost its
    end, opens with the snapshot refused (the reason kept) and its state replayed from the log."""
    keyring = make_keyring(tmp_path)
    with store_at(tmp_path / "store", keyring) as store:
        store.create_acls([acl("orders"), acl("payments", principal="User:bob")], context=ADMIN)
        path = store.snapshot().path
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[data.index(b"orders")] ^= 1
    else:
        del data[len(data) // 2:]
    path.write_bytes(bytes(data))
    with store_at(tmp_path / "store", keyring) as store:
        assert store.loaded.snapshot is None and store.loaded.replayed_events == 2
        assert reason in store.loaded.rejected_snapshots[0]
        assert {b.name for b in store.describe_acls(AclBindingFilter(), context=ADMIN)} == {"orders", "payments"}


def many_tokens_image(count=50):
    """An image with ``count`` tokens (every third with renewers) and an ACL."""
    delta = SecurityDelta(sample_image(0))
    for i in range(count):
        delta.replay(DelegationTokenIssued(f"tok-{i}", f"User:o{i % 7}", f"User:r{i % 3}",
                                           tuple(f"User:n{j}" for j in range(i % 3)), i, 1000 + i, 5000 + i))
    return delta.apply(count + 8)


def test_tokens_read_back_from_the_section_and_replay_onto_them_as_onto_the_written_image(tmp_path):
    """Tokens read from the section equal the written ones, each by id; renewing, removing and issuing tokens
    on the loaded image gives what the same events give on the written one."""
    image = many_tokens_image()
    loaded = round_trip(tmp_path, image)
    assert loaded == image and loaded.tokens.get("tok-4") == image.tokens.get("tok-4")
    assert loaded.tokens.get("tok-5").renewers == ("User:n0", "User:n1") and loaded.tokens.get("absent") is None
    events = [DelegationTokenRenewed("tok-1", -1, 9999), DelegationTokenRemoved("tok-2", TokenRemovalReason.EXPIRED_BY_REQUEST),
              DelegationTokenIssued("tok-new", "User:x", "User:x", (), 1, 2, 3)]
    after = []
    for base in (image, loaded):
        delta = SecurityDelta(base)
        delta.replay_all(Envelope(i, 0, "User:admin", "h", "r", e) for i, e in enumerate(events))
        after.append(delta.apply())
    assert after[0] == after[1] and sorted(t.token_id for t in after[1].tokens) == sorted(
        t.token_id for t in after[0].tokens)


def array_item(section: bytes, table: int, name: str, names, index: int, value: int) -> bytes:
    """The section (whose table of arrays, named ``names``, starts at byte ``table``) with item ``index``
    (negative: from the end) of its array ``name`` set to ``value``."""
    entry = table + 24 * list(names).index(name)  # (typecode, offset, items)
    code, at, items = struct.unpack_from("<cxxxxxxxQQ", section, entry)
    size = array(code.decode()).itemsize
    at += size * (index % items)
    return section[:at] + array(code.decode(), [value]).tobytes() + section[at + size:]


def token_item(section: bytes, name: str, index: int, value: int) -> bytes:
    """The token section with item ``index`` of its array ``name`` set to ``value``."""
    from secmeta.projections.token_section import _COUNTS, _NAMES

    return array_item(section, 16 + 8 * _COUNTS, name, _NAMES, index, value)  # after the header and counts


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda s: token_item(s, "renewer_start", -2, 0), "the token renewers. starts do not run from 0 to 51 without decreasing"),
    (lambda s: token_item(s, "id_offsets", 3, 0), "a string column's offsets do not run from 0 to"),
    (lambda s: token_item(s, "principal_offsets", 5, 2), "a string column's offsets do not run from 0 to"),
    (lambda s: s[:20], "token section does not hold tokens: the SMTOK section is truncated"),
    (lambda s: b"XXXXXXXX" + s[8:], "token section does not hold tokens: the SMTOK section starts with b'XXXXXXXX'"),
    (lambda s: s[:-24], "token section does not hold tokens: array .* runs past the SMTOK section"),
    (lambda s: s.replace(b"tok-4", b"tok-3", 1), "the section lists a token id twice"),
])
def test_a_damaged_token_section_is_refused_at_open(tmp_path, damage, problem):
    """A signed token section that is cut short, foreign, lists an id twice, or whose renewers' starts or string
    offsets decrease or end elsewhere than their column's end fails as a corrupt snapshot at open (issue 24, S1: a
    token's renewers that ended before they started failed only when the token was first looked up, during a
    login)."""
    info = write_snapshot(tmp_path, sectioned(damage_tokens=damage), many_tokens_image(), next_offset=58,
                          link=b"\0" * 32, timestamp_ms=0)
    with pytest.raises(CorruptSnapshotError, match=problem):
        read_snapshot(info.path, CODEC)


def test_a_store_whose_token_section_is_damaged_replays_its_log_and_verify_reports_it(tmp_path, monkeypatch, capsys):
    """A store whose snapshot (signed) has a token's renewers ending before they start opens with that snapshot
    refused, the reason kept, and its tokens replayed from the log (each looked up as written); ``secmeta log
    verify`` reports the snapshot as a problem and exits 1."""
    from secmeta.core.cli import main
    from secmeta.core.log import Log

    keys = tmp_path / "keys.json"
    Keyring.generate_file(keys)
    keyring = Keyring.from_file(keys)
    issued = [DelegationTokenIssued(f"tok-{i}", "User:o", "User:r", tuple(f"User:n{j}" for j in range(i % 3)),
                                    i, 10**15, 10**15) for i in range(6)]
    with Log.open(tmp_path / "store", keyring=keyring) as log:
        log.append([Envelope(-1, 1, "User:admin", "h", "r", event) for event in issued])
    with store_at(tmp_path / "store", keyring) as store:
        info = store.snapshot()
        image = store.image
    write_snapshot(info.path.parent, sectioned(damage_tokens=lambda s: token_item(s, "renewer_start", -2, 0)), image,
                   next_offset=info.next_offset, link=info.link, timestamp_ms=0, keyring=keyring)
    with store_at(tmp_path / "store", keyring) as store:
        assert store.loaded.snapshot is None and store.loaded.replayed_events == 6
        assert "the token renewers' starts do not run from 0" in store.loaded.rejected_snapshots[0]
        assert [store.image.tokens.get(e.token_id) for e in issued] == [TokenInfo.of(e) for e in issued]
    monkeypatch.setenv("SECMETA_KEY_FILE", str(keys))
    capsys.readouterr()
    assert main(["log", "verify", "--store", str(tmp_path / "store")]) == 1
    out = capsys.readouterr().out
    assert f"snapshot problem: snapshot {info.path.name} is not a readable snapshot: the token section" in out


def test_an_authenticated_snapshot_is_checked_by_its_hmac_alone(tmp_path):
    """Given the keyring, a format-6 snapshot is checked by its HMAC alone: its CRC field damaged, it still
    loads; without the keyring the CRC is what is checked, and refuses it."""
    keyring = make_keyring(tmp_path)
    image = sample_image()
    info = write_snapshot(tmp_path, CODEC, image, next_offset=42, link=b"\0" * 32, timestamp_ms=0, keyring=keyring)
    data = bytearray(info.path.read_bytes())
    data[-1] ^= 0xFF
    info.path.write_bytes(bytes(data))
    assert read_snapshot(info.path, CODEC, keyring)[1] == image
    with pytest.raises(CorruptSnapshotError, match="fails its CRC check"):
        read_snapshot(info.path, CODEC)


def test_a_flipped_byte_in_the_key_id_is_reported_corrupt_and_an_unknown_key_is_named(tmp_path):
    """Given the keyring, a format-6 snapshot whose preamble's key id has a byte flipped (so it names no key of the
    keyring) is refused as corrupt, naming the file (issue 24, S2: it was reported as signed under a key the
    keyring lacks); one intact but signed under another keyring's key is refused naming that key."""
    keyring, other = make_keyring(tmp_path), make_keyring(tmp_path, "other.json")
    info = write_snapshot(tmp_path, CODEC, sample_image(), next_offset=42, link=b"\0" * 32, timestamp_ms=0,
                          keyring=keyring)
    with pytest.raises(SnapshotError, match=f"snapshot {info.path.name} is authenticated with key "
                                            f"'{keyring.newest_id}', which is not in the keyring") as refused:
        read_snapshot(info.path, CODEC, other)
    assert not isinstance(refused.value, CorruptSnapshotError)
    data = bytearray(info.path.read_bytes())
    data[snapshot.PREAMBLE.size] ^= 1  # the key id's first character
    info.path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError, match=f"snapshot {info.path.name} is corrupt: it fails its CRC check"):
        read_snapshot(info.path, CODEC, keyring)


@pytest.mark.parametrize("form", [5, 4])
def test_an_older_authenticated_snapshot_loads_and_its_damage_is_refused(tmp_path, form):
    """A format-5 or format-4 snapshot made under the keyring loads equal with it; a byte of it flipped, it is
    refused (its CRC), and signed under a key the keyring lacks, it is refused naming the key."""
    keyring = make_keyring(tmp_path)
    image = many_tokens_image(5)
    info = write_older(tmp_path, image, form, keyring=keyring)
    assert info.format == form and read_snapshot(info.path, CODEC, keyring)[1] == image
    with pytest.raises(SnapshotError, match="which is not in the keyring"):
        read_snapshot(info.path, CODEC, make_keyring(tmp_path, "other.json"))
    data = bytearray(info.path.read_bytes())
    data[data.index(b"User:bob")] ^= 1
    info.path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError, match="fails its CRC check"):
        read_snapshot(info.path, CODEC, keyring)


def test_a_truncated_authenticated_snapshot_is_refused(tmp_path):
    """A format-6 snapshot cut anywhere is refused under the keyring, never parsed into an image."""
    keyring = make_keyring(tmp_path)
    info = write_snapshot(tmp_path, CODEC, many_tokens_image(), next_offset=58, link=b"\0" * 32, timestamp_ms=0,
                          keyring=keyring)
    data = info.path.read_bytes()
    for cut in (10, 30, len(data) // 3, len(data) // 2, len(data) - 41, len(data) - 1):
        info.path.write_bytes(data[:cut])
        with pytest.raises(CorruptSnapshotError, match="truncated|HMAC check|runs past it"):
            read_snapshot(info.path, CODEC, keyring)


def test_a_format_5_snapshot_written_by_the_format_5_code_still_loads(tmp_path):
    """The committed snapshot that format 5's code wrote (tests/projections/older_snapshots.py) loads under its
    keyring equal to its image, answers as it, and a byte of it flipped is refused."""
    from tests.projections.older_snapshots import DATA, older_image

    keys = tmp_path / "keys.json"  # a checkout leaves the committed key file readable by all: a copy for its owner
    keys.write_bytes((DATA / "format5" / "keys.json").read_bytes())
    keys.chmod(0o600)
    keyring = Keyring.from_file(keys)
    [path] = snapshot.list_snapshots(DATA / "format5")
    info, loaded = read_snapshot(path, CODEC, keyring)
    image = older_image()
    assert info.format == 5 and loaded == image and sorted(loaded.acls) == sorted(image.acls)
    assert all(loaded.acls.get(acl_id) == binding for acl_id, binding in image.acls)
    assert sorted(loaded.tokens, key=lambda t: t.token_id) == sorted(image.tokens, key=lambda t: t.token_id)
    data = bytearray(path.read_bytes())
    data[data.index(b"User:u3")] ^= 1
    (tmp_path / path.name).write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError, match="fails its CRC check"):
        read_snapshot(tmp_path / path.name, CODEC, keyring)


def uuid_image(count, spell=str):
    """An image of ``count`` ACLs whose ids are UUIDs, spelled by ``spell``."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    for i in range(count):
        delta.replay(AclCreated(spell(uuid.UUID(int=i * 7919 + 1, version=4)), AclBinding.of(
            ResourceType.TOPIC, f"t{i % 9}", PatternType.LITERAL, f"User:u{i % 13}", "*", AclOperation.READ,
            AclPermissionType.ALLOW)))
    return delta.apply(count)


def test_uuid_ids_take_16_bytes_and_read_back_and_replay_as_written(tmp_path):
    """A section of canonical UUID ids holds 16 bytes per id (the file is at least 20 bytes per ACL smaller than
    one whose ids are the same UUIDs in capitals, kept as text); both read back equal, every id found, and
    deleting ACLs on the loaded image by id gives what it gives on the written one."""
    sizes = {}
    for name, spell in (("canonical", str), ("capitals", lambda u: str(u).upper())):
        image = uuid_image(300, spell)
        info = write_snapshot(tmp_path / name, CODEC, image, next_offset=300, link=b"\0" * 32, timestamp_ms=0)
        sizes[name] = info.size
        loaded = read_snapshot(info.path, CODEC)[1]
        assert loaded == image and all(loaded.acls.get(acl_id) == binding for acl_id, binding in image.acls)
        assert loaded.acls.get(spell(uuid.UUID(int=5, version=4))) is None
        gone = [(acl_id, binding) for acl_id, binding in sorted(image.acls)[::3]]
        after = []
        for base in (image, loaded):
            delta = SecurityDelta(base)
            for acl_id, binding in gone:
                delta.replay(AclDeleted(acl_id, binding))
            after.append(delta.apply())
        assert after[0] == after[1] and len(after[1].acls) == 200
    assert sizes["capitals"] - sizes["canonical"] >= 300 * 20


@given(st.lists(st.uuids(), max_size=4))
def test_a_uuid_column_spells_each_id_as_the_uuid_module_does(ids):
    """``uuid_texts`` (the one spelling of an id's 16 bytes: new ACL ids, a section's UUID column) gives
    ``str(uuid.UUID)`` for each id, alone or in a run; a position past the column is an IndexError, not an id."""
    from secmeta.projections.section_arrays import Uuids, uuid_texts

    raw = b"".join(u.bytes for u in ids)
    column = Uuids(memoryview(raw))
    assert uuid_texts(raw) == column[:] == [column[i] for i in range(len(ids))] == list(map(str, ids))
    with pytest.raises(IndexError):
        column[len(ids)]


TOKEN_SECTION = b"".join(encode_tokens(many_tokens_image().tokens))


@settings(deadline=None, max_examples=200)
@given(st.lists(st.tuples(st.integers(0, len(TOKEN_SECTION) - 1), st.integers(1, 255)), min_size=1, max_size=3))
def test_a_token_section_with_any_bytes_changed_is_refused_at_open_or_every_token_is_made(flips):
    """Whatever bytes of a token section change, reading it raises SectionError (the snapshot is refused at
    open), or every token it lists is then made without error: no damage waits for a token's first lookup."""
    from secmeta.projections.section_arrays import SectionError
    from secmeta.projections.token_section import read_tokens

    data = bytearray(TOKEN_SECTION)
    for at, mask in flips:
        data[at] ^= mask
    try:
        tokens = read_tokens(memoryview(bytes(data)))
    except SectionError:
        return
    assert len(list(tokens)) == len(tokens)


@pytest.mark.parametrize("surrogate", [0xD800, 0xDFFF])
def test_a_section_naming_a_surrogate_as_its_separator_is_refused(surrogate):
    """Found by the token-section property above: a changed header byte named a surrogate (U+D800-U+DFFF) as
    the separator, and reading the strings failed to encode it (UnicodeEncodeError, not the section's error).
    No string is split on a surrogate, so a header naming one is damage, refused as a SectionError."""
    from secmeta.projections.section_arrays import SectionError, separator_code, separator_named

    with pytest.raises(SectionError, match="no character"):
        separator_named(surrogate + 1)
    assert separator_named(separator_code("\ue000")) == "\ue000"  # the first character past them still reads
