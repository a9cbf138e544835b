"""Small builders shared by the log, snapshot and CLI tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from secmeta.events.keyring import Keyring
from secmeta.events.records import AclCreated, AclDeleted, Envelope
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


class Clock:
    """A settable clock (seconds since the epoch) for StoreConfig(clock=...): time moves only when told."""

    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_keyring(directory: Path, name: str = "keys.json") -> Keyring:
    path = Path(directory) / name
    Keyring.generate_file(path)
    return Keyring.from_file(path)


def binding(i: int) -> AclBinding:
    return AclBinding.of(
        ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:user-{i}", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )


def acl_created(i: int, ts: int = 1_000, acl_id: str | None = None) -> Envelope:
    return Envelope(-1, ts, "User:admin", "10.0.0.1", f"req-{i}", AclCreated(acl_id or str(uuid.UUID(int=i)), binding(i)))


def acl_deleted(i: int, ts: int = 1_000) -> Envelope:
    return Envelope(-1, ts, "User:admin", "10.0.0.1", f"del-{i}", AclDeleted(str(uuid.UUID(int=i)), binding(i)))


def strip(envelopes) -> list[tuple]:
    """What a test compares: offset, time, actor and event of each envelope."""
    return [(e.offset, e.timestamp_ms, e.actor_principal, e.request_id, e.event) for e in envelopes]


# -- tampering: a small store, fresh copies of it, and what each party makes of a copy ----------


ALICE_READ = AclBinding.of(ResourceType.TOPIC, "public-", PatternType.PREFIXED, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)
BOB_DENY = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.DENY)
BOB_ALLOW = AclBinding.of(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:bob", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)


def tamper_config(retention: bool, clock: Clock | None = None):
    """Small segments (several sealed, each with index files), a snapshot every 8 events."""
    from secmeta.core.config import StoreConfig
    from secmeta.core.log import LogConfig
    from secmeta.projections.snapshot import SnapshotPolicy

    return StoreConfig(log=LogConfig(segment_bytes=1024, index_interval_bytes=128),
                       snapshot_policy=SnapshotPolicy(every_events=8, every_bytes=None),
                       delete_covered_segments=retention, clock=clock or Clock())


def build_tamper_store(path: Path, keyring: Keyring, *, retention: bool) -> list[int]:
    """A store whose last batches grant alice READ on public-* and deny bob READ on orders.

    One ACL per request (one batch each), one second apart; returns the batch timestamps (ms).
    """
    from secmeta.core import RequestContext, SecurityStore

    clock = Clock()
    config = tamper_config(retention, clock)
    times = []
    with SecurityStore.open(path, config, keyring=keyring) as store:
        config.save(path)  # so that `secmeta log verify` knows whether retention is configured
        for b in [binding(i) for i in range(24)] + [BOB_ALLOW, ALICE_READ, BOB_DENY]:
            clock.t += 1
            times.append(int(clock.t * 1000))
            store.create_acls([b], context=RequestContext("User:admin", "10.0.0.1"))
            store.wait_for_snapshots()
    return times


def served(path: Path, keyring: Keyring, *, retention: bool, read_only: bool, times: list[int]):
    """What an open serves: the image, alice's and bob's answers, and the offset of every batch time."""
    from secmeta.core import SecurityStore

    with SecurityStore.open(path, tamper_config(retention), keyring=keyring, read_only=read_only) as store:
        return (store.image, store.authorize("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "public-x"),
                store.authorize("User:bob", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "orders"),
                tuple(store.log.offset_for_timestamp(t) for t in times))


def cli_verify(path: Path, key_file: Path) -> tuple[int, str]:
    """``secmeta log verify`` as a user runs it: exit code and output."""
    import contextlib
    import io

    from secmeta.core.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["log", "verify", "--store", str(path), "--key-file", str(key_file)])
    return code, out.getvalue()


def frames_of(segment: Path) -> list[bytes]:
    """The raw frames of a segment file, in order."""
    from secmeta.core.log.segment import Segment

    seg = Segment(segment.parent, int(segment.stem), writable=False)
    try:
        data = segment.read_bytes()
        return [data[b.position : b.position + b.size] for b in seg.frames()]
    finally:
        seg.close()


def reframe(frame: bytes, edit) -> bytes:
    """``frame`` with its body changed by ``edit`` (bytes -> bytes) and the CRC recomputed to match."""
    import zlib

    from secmeta.core.log.format import PREFIX

    body = edit(frame[PREFIX.size :])
    return PREFIX.pack(len(body) + 4, zlib.crc32(body)) + body
