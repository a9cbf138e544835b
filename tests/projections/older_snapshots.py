"""The image the committed snapshots of older formats hold (tests/projections/data/format<N>/), and how they were
made: ``python -m tests.projections.older_snapshots DIR`` with a checkout that writes that format (its
interpreter: the events here are written with ``secmeta.events`` and ``SecurityDelta`` alone, which every format
shares)."""

from __future__ import annotations

import sys
from pathlib import Path

from secmeta.events.keyring import Keyring, SealedSecret
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    ScramCredentialUpserted,
)
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.image import SecurityDelta, SecurityImage

DATA = Path(__file__).parent / "data"


def older_image() -> SecurityImage:
    """ACLs (UUID ids and others, several principals and hosts per node, one deleted), credentials, tokens."""
    delta = SecurityDelta(SecurityImage.EMPTY)
    secret = SealedSecret("k-old", b"\x01" * 12, b"sealed" * 8)
    delta.replay(ScramCredentialUpserted("alice", ScramMechanism.SCRAM_SHA_256, 4096, secret))
    for i in range(40):
        binding = AclBinding.of(ResourceType.TOPIC if i % 4 else ResourceType.GROUP, f"t{i % 6}",
                                PatternType.PREFIXED if i % 5 == 0 else PatternType.LITERAL, f"User:u{i % 7}",
                                "*" if i % 3 else f"10.0.0.{i}", AclOperation.READ if i % 2 else AclOperation.WRITE,
                                AclPermissionType.DENY if i % 9 == 0 else AclPermissionType.ALLOW)
        acl_id = f"{i:08x}-0000-4000-8000-{i:012x}" if i % 10 else f"acl-{i}"
        delta.replay(AclCreated(acl_id, binding))
        if i == 13:
            delta.replay(AclDeleted(acl_id, binding))
    for i in range(12):
        delta.replay(DelegationTokenIssued(f"tok{i}", f"User:o{i % 3}", "User:r", tuple(f"User:n{j}" for j in range(i % 3)),
                                           i, 1000 + i, 2000 + i))
    return delta.apply(99)


def write(directory: Path) -> None:
    """The older image as the running checkout's snapshot format writes it, under a new keyring in ``directory``."""
    from secmeta.projections.image_snapshot import SecurityImageSnapshot
    from secmeta.projections.snapshot import write_snapshot

    directory.mkdir(parents=True, exist_ok=True)
    Keyring.generate_file(directory / "keys.json")
    write_snapshot(directory, SecurityImageSnapshot(), older_image(), next_offset=99, link=b"\x07" * 32,
                   timestamp_ms=1_700_000_000_000, keyring=Keyring.from_file(directory / "keys.json"))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
