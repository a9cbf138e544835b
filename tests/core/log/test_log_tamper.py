"""Tampering with a store as someone with write access to its directory but no keys would.

Every byte of a small store's last segment, newest snapshot and derived files
(high-water mark, retention anchor, index files) is flipped, one fresh copy per
flip: `secmeta log verify` (the function the command runs) and both opens
(read-only and writer) must refuse it, or it must be provably harmless: both
opens serve exactly the untouched store's state and time lookups.  A refused
writer open changes no file, so nothing is ever silently truncated.

The snapshot is the largest file (7,000 bytes, 80 s at one copy and three opens
per flip), and an open reads it through one function, `read_snapshot`, that
either refuses it (the open then skips it) or returns its state.  So every byte
of it is flipped through `read_snapshot` as an open and as a verification call it,
and whole copies are judged at its first and last bytes (preamble, key id,
HMAC, magic, CRC) and at a sample of the rest, which ties that function's
verdict to the opens' and verify's.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from secmeta.core.cli.log_cmd import verify_store
from secmeta.core.errors import SecmetaError
from secmeta.core.log import Log
from secmeta.core.store.state import load_state
from secmeta.events.codec import EventCodec
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import SnapshotError, list_snapshots, read_snapshot
from tests.logkit import build_tamper_store, make_keyring, tamper_config

SEED = 20261124
CODEC = EventCodec()  # building one costs ~10 ms; every open of every copy shares it


@pytest.fixture(scope="module")
def original():
    """(store path, keyring, retention, batch times, what an open serves) for an untouched store.

    Retention is configured so that the store has every kind of derived file (a retention
    anchor besides the high-water mark, index files and snapshots); copies live in memory
    (/dev/shm) where there is one, so that thousands of them take seconds.
    """
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        keyring = make_keyring(Path(tmp))
        path = Path(tmp) / "store"
        times = build_tamper_store(path, keyring, retention=True)
        yield path, keyring, True, times, serve(path, keyring, True, times, read_only=True)


@pytest.fixture
def work(original):
    """A scratch directory beside the original store."""
    scratch = original[0].parent / "work"
    scratch.mkdir()
    yield scratch
    shutil.rmtree(scratch)


CONFIGS = {retention: tamper_config(retention) for retention in (False, True)}  # validating one costs ~1 ms


def serve(path: Path, keyring, retention: bool, times: list[int], *, read_only: bool):
    """What an open serves (as SecurityStore.open loads it): the image and the offset of every batch time."""
    config = CONFIGS[retention]
    with Log.open(path, keyring=keyring, codec=CODEC, config=config.log, read_only=read_only, retention=retention) as log:
        loaded = load_state(log, SecurityProjection(), SecurityImageSnapshot())
        return loaded.state, loaded.next_offset, tuple(log.offset_for_timestamp(t) for t in times)


def files_of(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` by name below it, with its bytes (os.walk: pathlib's rglob is a
    fifth of each trial's time; the name by slicing: os.path.relpath is half of this function's)."""
    files = {}
    root = os.path.join(path, "")
    for folder, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                files[full[len(root):]] = f.read()
    return files


def judge(copy: Path, keyring, retention: bool, times: list[int], truth) -> str:
    """'detected', 'harmless' (both opens serve the truth; verify may still flag it), or what went wrong."""
    report, _, problems = verify_store(str(copy), keyring, CODEC)
    verify_caught = not report.ok or bool(problems)
    outcomes, before = [], files_of(copy)
    for read_only in (True, False):
        try:
            outcomes.append(serve(copy, keyring, retention, times, read_only=read_only))
        except SecmetaError as exc:
            outcomes.append(exc)
            if files_of(copy) != before:
                return f"a refused {'read-only' if read_only else 'writer'} open changed files ({exc})"
    refused = [isinstance(o, SecmetaError) for o in outcomes]
    if all(refused):
        return "detected" if verify_caught else f"both opens refuse ({outcomes[0]}) but verify passes"
    if all(o == truth for o in outcomes):
        return "harmless, flagged by verify" if verify_caught else "harmless"
    return f"served something else: read-only {outcomes[0]!r:.200}, writer {outcomes[1]!r:.200}; verify ok={not verify_caught}"


def tampered_files(path: Path) -> list[str]:
    """The last segment, the newest snapshot and every derived file of the log."""
    log_dir = path / "log"
    names = [sorted(log_dir.glob("*.log"))[-1], list_snapshots(path / "snapshots")[-1], log_dir / "high-water"]
    names += sorted(log_dir.glob("*.index")) + sorted(log_dir.glob("*.timeindex")) + sorted(log_dir.glob("retention-anchor"))
    return [str(p.relative_to(path)) for p in names]


def flipped(data: bytes, i: int, name: str) -> bytes:
    """``data`` with byte ``i`` changed, the same way for the same file and offset in every test."""
    changed = bytearray(data)
    changed[i] ^= random.Random(f"{SEED}:{name}:{i}").randrange(1, 256)
    return bytes(changed)


def flip_every_byte(original, work: Path, name: str, offsets: list[int] | None = None) -> dict[str, list[int]]:
    """The verdict of each flip of the file ``name`` (at every offset, or those given), each on a fresh copy."""
    path, keyring, retention, times, truth = original
    data = (path / name).read_bytes()
    verdicts: dict[str, list[int]] = {}
    copy = work / "copy"
    for i in range(len(data)) if offsets is None else offsets:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy)
        (copy / name).write_bytes(flipped(data, i, name))
        verdicts.setdefault(judge(copy, keyring, retention, times, truth), []).append(i)
    return verdicts


def read_verdicts(original, work: Path, name: str) -> dict[str, list[int]]:
    """For each byte of the snapshot ``name`` flipped: what ``read_snapshot`` makes of it, as an open calls it
    (HMAC) and as a verification does (HMAC and CRC): 'refused', 'refused by verify' (an open loads the same
    state as from the untouched file), or what went wrong."""
    path, keyring = original[0], original[1]
    data = (path / name).read_bytes()
    truth = read_snapshot(path / name, SecurityImageSnapshot(), keyring)[1]
    target = work / Path(name).name
    verdicts: dict[str, list[int]] = {}
    for i in range(len(data)):
        target.write_bytes(flipped(data, i, name))
        outcomes = []
        for check_crc in (False, True):
            try:
                outcomes.append(read_snapshot(target, SecurityImageSnapshot(), keyring, check_crc=check_crc)[1])
            except SnapshotError:
                outcomes.append(None)
        if outcomes == [None, None]:
            verdict = "refused"
        elif outcomes[1] is None:
            verdict = "refused by verify" if outcomes[0] == truth else "loaded something else, refused by verify"
        else:
            verdict = "loaded by verify"
        verdicts.setdefault(verdict, []).append(i)
    return verdicts


def sampled_offsets(size: int, name: str) -> list[int]:
    """The snapshot's first and last 48 bytes (preamble and key id; HMAC, magic and CRC) and 40 offsets between."""
    ends = set(range(min(48, size))) | set(range(max(0, size - 48), size))
    middle = sorted(set(range(size)) - ends)
    return sorted(ends | set(random.Random(f"{SEED}:{name}:sample").sample(middle, min(40, len(middle)))))


@pytest.fixture
def quick_fsync(monkeypatch):
    """Durability is the crash tests' subject; here fsyncs would only make 10,000 opens slow."""
    import secmeta.core.log.highwater
    import secmeta.core.log.segment
    import secmeta.events.durable

    def nothing(fd):
        return None

    for module in (secmeta.core.log.highwater, secmeta.core.log.segment):
        monkeypatch.setattr(module, "_datasync", nothing)
    monkeypatch.setattr(secmeta.events.durable.os, "fsync", nothing)


def test_the_untouched_store_verifies_and_opens(original):
    """The baseline: verify passes and both opens serve the same state."""
    path, keyring, retention, times, truth = original
    report, snapshots, problems = verify_store(str(path), keyring, CODEC)
    assert report.ok and snapshots == 2 and not problems, (report, problems)
    assert serve(path, keyring, retention, times, read_only=False) == truth


@pytest.mark.parametrize("kind", [
    pytest.param("segment", marks=pytest.mark.slow),  # tens of seconds: one copy and three opens per byte
    "snapshot",  # every byte through read_snapshot, whole copies at a sample: a few seconds
    "high-water", "index", "timeindex", "retention-anchor",
])
def test_every_byte_flip_is_detected_or_harmless(original, work, quick_fsync, kind):
    """Each flip of each byte: verify and both opens refuse it; an index file flip is flagged by verify
    while both opens rebuild the index from the data and serve the untouched state and time lookups."""
    path = original[0]
    names = [n for n in tampered_files(path) if _kind(n) == kind]
    assert names, f"the store has no {kind} file"
    for name in names:
        size = len((path / name).read_bytes())
        if kind == "snapshot":
            crc = set(range(size - 4, size))  # an open checks the HMAC alone: a flip of the CRC is harmless
            read = read_verdicts(original, work, name)
            assert set(read.get("refused by verify", ())) == crc, f"{name}: {read.keys()}"
            assert set(read) == {"refused", "refused by verify"}, f"{name}: { {v: at[:5] for v, at in read.items()} }"
        verdicts = flip_every_byte(original, work, name, sampled_offsets(size, name) if kind == "snapshot" else None)
        bad = {v: at[:5] for v, at in verdicts.items() if v not in ("detected", "harmless, flagged by verify")}
        assert not bad, f"{name}: {bad}"
        if kind in ("index", "timeindex"):  # sealed: open rebuilds a damaged one from the data
            assert set(verdicts) == {"harmless, flagged by verify"}, f"{name}: {verdicts.keys()}"
        elif kind == "snapshot":  # the whole store agrees with read_snapshot at each sampled byte
            assert set(verdicts.get("harmless, flagged by verify", ())) == crc, f"{name}: {verdicts.keys()}"
            assert set(verdicts) == {"detected", "harmless, flagged by verify"}, f"{name}: {verdicts.keys()}"
        else:
            assert set(verdicts) == {"detected"}, f"{name}: {({v: len(at) for v, at in verdicts.items()})}"


def _kind(name: str) -> str:
    if name.endswith(".log"):
        return "segment"
    if name.endswith(".avro"):
        return "snapshot"
    return Path(name).suffix.lstrip(".") or Path(name).name
