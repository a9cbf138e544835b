"""Attacks on a store by someone who can write its directory but holds no key.

Each attack is made on a store that keeps its whole history (the default);
afterwards `secmeta log verify` must fail and both opens (read-only and writer)
must refuse with a CorruptLogError naming the offset, changing nothing, and no
answer of the tampered state is ever served.
"""

from __future__ import annotations

import json
import shutil

import pytest

from secmeta.core import RequestContext, SecurityStore
from secmeta.core.errors import CorruptLogError, SecmetaError
from secmeta.core.log import Log
from secmeta.core.log.anchor import ANCHOR_FILE, Anchor, write_anchor
from secmeta.core.log.highwater import HIGH_WATER_FILE
from secmeta.events.types import AclOperation, ResourceType
from secmeta.projections.snapshot import list_snapshots
from tests.logkit import (
    BOB_ALLOW,
    binding,
    build_tamper_store,
    cli_verify,
    frames_of,
    make_keyring,
    reframe,
    tamper_config,
)

PAYROLL = ("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "payroll-2026")


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A store keeping its history: 27 one-ACL batches in 7 segments; the last grant alice
    READ on public-* and deny bob READ on orders. Built once (a snapshot per batch takes seconds)."""
    directory = tmp_path_factory.mktemp("attacks")
    keyring = make_keyring(directory)
    build_tamper_store(directory / "store", keyring, retention=False)
    return directory, keyring


@pytest.fixture
def store(original, tmp_path):
    """This test's copy of the original store, its key file beside it: (store path, keyring)."""
    directory, keyring = original
    shutil.copytree(directory / "store", tmp_path / "store")
    shutil.copy2(directory / "keys.json", tmp_path / "keys.json")
    return tmp_path / "store", keyring


def segments(path):
    return sorted((path / "log").glob("*.log"))


def assert_refused(path, keyring, offset: int | None = None, match: str | None = None) -> CorruptLogError:
    """verify fails; both opens refuse with a CorruptLogError (at ``offset``) and change no file."""
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "FAILED" in out, out
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    for read_only in (True, False):
        with pytest.raises(CorruptLogError, match=match) as info:
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
        if offset is not None:
            assert info.value.offset == offset and str(offset) in str(info.value)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    return info.value


# -- rollback: the newest changes removed ------------------------------------------------


def test_truncating_at_a_batch_boundary_is_refused(store):
    """Cutting bob's DENY (the last batch) off the end, even with every snapshot deleted, is a rollback."""
    path, keyring = store
    last = segments(path)[-1]
    frames = frames_of(last)
    last.write_bytes(b"".join(frames[:-1]))
    for snap in list_snapshots(path / "snapshots"):
        snap.unlink()
    assert_refused(path, keyring, 26, match="removed from the end")


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_deleting_or_emptying_the_last_segment_is_refused(store, how):
    """The last segment gone or empty: the log ends before its high-water mark."""
    path, keyring = store
    last = segments(path)[-1]
    last.unlink() if how == "deleted" else last.write_bytes(b"")
    assert_refused(path, keyring, match="high-water mark")


def test_deleting_the_high_water_file_with_the_tail_is_refused(store):
    """Removing the mark as well does not make a rollback pass: a non-empty log needs its mark."""
    path, keyring = store
    last = segments(path)[-1]
    last.write_bytes(b"".join(frames_of(last)[:-1]))
    (path / "log" / HIGH_WATER_FILE).unlink()
    assert_refused(path, keyring, match="high-water file is missing")


def test_deleting_the_second_to_last_batch_is_refused_and_the_last_is_kept(store):
    """The batch after the gap is intact: it is reported, not cut off as a torn tail."""
    path, keyring = store
    last = segments(path)[-1]
    frames = frames_of(last)
    last.write_bytes(b"".join(frames[:-2] + frames[-1:]))
    assert_refused(path, keyring, 25, match="deleted, duplicated or reordered")
    assert last.stat().st_size == sum(map(len, frames)) - len(frames[-2])


# -- edits with a recomputed CRC --------------------------------------------------------


@pytest.mark.parametrize("sealed", [False, True], ids=["active-segment", "sealed-segment"])
def test_an_edited_batch_with_a_fixed_crc_is_never_served(store, sealed):
    """alice's prefix public- changed to payroll (CRC recomputed) and the snapshots deleted, so that
    replay must read the edited batch: verify fails and both opens refuse, naming its offset."""
    path, keyring = store
    if sealed:  # push alice's batch into a sealed segment
        with SecurityStore.open(path, tamper_config(False), keyring=keyring) as s:
            for i in range(100, 110):
                s.create_acls([binding(i)], context=RequestContext("User:admin", "10.0.0.1"))
    for snap in list_snapshots(path / "snapshots"):
        snap.unlink()
    for seg in segments(path):
        frames = frames_of(seg)
        hit = [i for i, f in enumerate(frames) if b"public-" in f]
        if hit:
            break
    assert (seg != segments(path)[-1]) == sealed
    frames[hit[0]] = reframe(frames[hit[0]], lambda body: body.replace(b"public-", b"payroll"))
    seg.write_bytes(b"".join(frames))
    assert_refused(path, keyring, 25, match="hash chain link")


# -- erasing the beginning of history ---------------------------------------------------


def test_deleting_the_oldest_segments_is_refused(store):
    """Without retention configured, a log that does not start at offset 0 lost its beginning."""
    path, keyring = store
    for seg in segments(path)[:2]:
        seg.unlink()
    assert_refused(path, keyring, 0, match="oldest segments were deleted")


def test_a_forged_retention_anchor_is_refused(store):
    """An anchor written without the key (from the link readable in the next segment) is not accepted."""
    path, keyring = store
    doomed = segments(path)[:2]
    first_kept = frames_of(segments(path)[2])[0]
    for seg in doomed:
        seg.unlink()
    forged = {"next_offset": int(segments(path)[0].stem), "link": first_kept[-32:].hex(), "covered_by": 8,
              "deleted": [s.name for s in doomed], "time_ms": 0}
    (path / "log" / ANCHOR_FILE).write_bytes(json.dumps(forged).encode() + b"\x03key" + bytes(32))
    assert_refused(path, keyring, match="retention anchor .* not valid")


def test_a_genuine_anchor_without_retention_configured_is_refused(store, tmp_path):
    """Even a sealed anchor (as retention writes it) is refused when retention is not configured."""
    path, keyring = store
    with Log.open(path, keyring=keyring, config=tamper_config(False).log, retention=True) as log:
        log.delete_segments_before(8)
    assert (path / "log" / ANCHOR_FILE).exists()
    assert_refused(path, keyring, 0, match="delete_covered_segments")


def test_an_anchor_from_another_store_sharing_the_keyring_is_refused(store, tmp_path):
    """The anchor is bound to its store id: one copied from another store does not open here."""
    path, keyring = store
    other = tmp_path / "other"
    build_tamper_store(other, keyring, retention=True)
    shutil.copy(other / "log" / ANCHOR_FILE, path / "log" / ANCHOR_FILE)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "delete_covered_segments": True}))
    for seg in segments(path)[:5]:
        seg.unlink()
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "not valid" in out
    with pytest.raises(CorruptLogError, match="retention anchor .* not valid"):
        SecurityStore.open(path, tamper_config(True), keyring=keyring, read_only=True)


def test_a_forged_anchor_in_a_retention_store_is_refused(tmp_path):
    """With retention configured, an anchor sealed with another key does not open either."""
    keyring, intruder = make_keyring(tmp_path), make_keyring(tmp_path, "intruder.json")
    path = tmp_path / "store"
    build_tamper_store(path, keyring, retention=True)
    import secmeta.core.store.storedir

    store_id = secmeta.core.store.storedir.StoreDirectory.open(path, create=False, writer=False).store_id
    write_anchor(path / "log", store_id, intruder, Anchor(0, bytes(32), 0, (), 0))
    with pytest.raises(CorruptLogError, match="not in the keyring"):
        SecurityStore.open(path, tamper_config(True), keyring=keyring, read_only=True)


# -- swapping identities ----------------------------------------------------------------


def test_changing_the_store_id_is_refused(store):
    """The first batch chains from a link bound to the store id: a new id breaks it."""
    path, keyring = store
    meta = json.loads((path / "secmeta.json").read_text())
    (path / "secmeta.json").write_text(json.dumps({**meta, "store_id": "00000000-0000-0000-0000-000000000000"}))
    assert_refused(path, keyring)


def test_a_snapshot_from_another_store_sharing_the_keyring_fails_verify(store, tmp_path):
    """Its HMAC is good, but it does not fit this log: verify says so, as open skips it."""
    path, keyring = store
    other = tmp_path / "other"
    build_tamper_store(other, keyring, retention=False)
    with SecurityStore.open(other, tamper_config(False), keyring=keyring) as s:
        s.create_acls([BOB_ALLOW], context=RequestContext())  # a duplicate: nothing logged, same offsets
    foreign = list_snapshots(other / "snapshots")[-1]
    shutil.copy(foreign, path / "snapshots" / "snapshot-00000000000000000026.avro")
    code, out = cli_verify(path, path.parent / "keys.json")
    assert code == 1 and "does not fit the log" in out, out
    with SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=True) as s:
        assert "snapshot-00000000000000000026.avro" in " ".join(s.loaded.rejected_snapshots)
        assert not s.authorize(*PAYROLL)


def test_answers_of_a_refused_open_are_never_given(store):
    """After the payroll edit nothing says alice may read payroll (a guard against a silent fallback)."""
    path, keyring = store
    last = segments(path)[-1]
    frames = frames_of(last)
    frames[-2] = reframe(frames[-2], lambda body: body.replace(b"public-", b"payroll"))
    last.write_bytes(b"".join(frames))
    for read_only in (True, False):
        with pytest.raises(SecmetaError):
            SecurityStore.open(path, tamper_config(False), keyring=keyring, read_only=read_only)
