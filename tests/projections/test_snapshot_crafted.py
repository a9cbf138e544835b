"""A snapshot file whose CRC is valid but whose content is crafted (or damaged, the CRC then fixed up) is refused as
the store's own error naming the file, whatever fastavro or the codec raises on it.

Without a keyring only the CRC vouches for a file (a follower without one reads its checkpoints so), and a file of
format 5 has its metadata read before its HMAC is checked: decoding then meets the crafted bytes. A caller handles
``SnapshotError`` as a bad file (time travel falls back, ``log verify`` reports it, a follower starts over); anything
else was a raw traceback.
"""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.events.records import AclCreated, ScramCredentialDeleted, ScramCredentialUpserted
from secmeta.events.types import ScramMechanism
from secmeta.projections.delta_snapshot import DeltaState, SecurityDeltaSnapshot
from secmeta.projections.image import SecurityDelta
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    SnapshotError,
    read_snapshot,
    read_snapshot_info,
    write_snapshot,
)
from tests.logkit import acl_created, make_keyring
from tests.projections.test_image_snapshot import SECRET, sample_image, write_older

IMAGE = sample_image()


def _delta_state() -> DeltaState:
    delta = SecurityDelta(IMAGE)
    delta.replay(ScramCredentialUpserted("carol", ScramMechanism.SCRAM_SHA_256, 4096, SECRET))
    delta.replay(ScramCredentialDeleted("alice", ScramMechanism.SCRAM_SHA_512))
    for i in range(3):
        delta.replay(AclCreated(f"new-{i}", acl_created(i).event.binding))
    return DeltaState(IMAGE.next_offset, IMAGE.next_offset + 5, delta.net())


#: (what the file is, its codec, how it is written: directory -> path, the keyring it is read with)
KINDS = {
    "checkpoint or policy snapshot": SecurityImageSnapshot(),
    "delta checkpoint": SecurityDeltaSnapshot(),
    "format 5, signed": SecurityImageSnapshot(),
}

edits = st.lists(st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.floats(0, 1, exclude_max=True), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=8)),
), min_size=1, max_size=4)


def _written(kind: str, directory: Path):
    """A real file of ``kind`` (as the store, time travel or a follower writes it) and the keyring it is read with."""
    if kind == "format 5, signed":
        keyring = make_keyring(directory)
        return write_older(directory, IMAGE, 5, keyring=keyring).path, keyring
    state = IMAGE if kind == "checkpoint or policy snapshot" else _delta_state()
    info = write_snapshot(directory, KINDS[kind], state, next_offset=state.next_offset, link=b"\1" * 32,
                          timestamp_ms=1)
    return info.path, None


def _edited(data: bytes, changes) -> bytes:
    """``data`` (a file) with its body edited and its CRC (the last 4 bytes) fixed up."""
    body = bytearray(data[:-4])
    for what, where, arg in changes:
        at = int(where * len(body))
        if what == "flip":
            body[at] ^= arg
        elif what == "cut":
            del body[at:at + arg]
        else:
            body[at:at] = arg
    return bytes(body) + zlib.crc32(body).to_bytes(4, "big")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(KINDS)), changes=edits)
def test_a_crafted_file_with_a_valid_crc_is_refused_as_a_snapshot_error_naming_it(kind, changes):
    """Bytes flipped, cut out or put in anywhere before the CRC, the CRC fixed up: reading the file either gives a
    state (without a keyring the CRC is all that vouches) or refuses it as SnapshotError naming the file, never
    another exception (EOFError, struct.error, IndexError, KeyError... from fastavro or the codec). A signed file
    is always refused."""
    with tempfile.TemporaryDirectory() as tmp:
        path, keyring = _written(kind, Path(tmp))
        original = path.read_bytes()
        path.write_bytes(_edited(original, changes))
        for read in (lambda: read_snapshot(path, KINDS[kind], keyring),
                     lambda: read_snapshot(path, KINDS[kind], keyring, check_crc=True),
                     lambda: read_snapshot_info(path, keyring)):
            try:
                read()
            except SnapshotError as exc:
                assert path.name in str(exc)
            else:
                assert keyring is None or path.read_bytes() == original


def test_the_files_read_back_unedited():
    """The property's files are real ones: unedited, each reads back."""
    with tempfile.TemporaryDirectory() as tmp:
        for number, kind in enumerate(KINDS):
            (Path(tmp) / str(number)).mkdir()
            path, keyring = _written(kind, Path(tmp) / str(number))
            info, _ = read_snapshot(path, KINDS[kind], keyring)
            assert info.next_offset in (IMAGE.next_offset, IMAGE.next_offset + 5)
