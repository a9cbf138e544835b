"""The image the committed snapshots of older formats hold (tests/projections/data/format<N>/), and how they were
made: ``python -m tests.projections.older_snapshots DIR`` with a checkout that writes that format (its
interpreter: the events here are written with ``secmeta.events`` and ``SecurityDelta`` alone, which every format
shares).  ``node_rows`` writes the ACL index as format 4's ``AclNodesRow`` chunks (no format writes them since
format 5: the tests' format-4 writer)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator
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
from secmeta.projections.acl_index import AclIndex
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import _nodes, _NodesRow
from secmeta.projections.section_arrays import separator_of

DATA = Path(__file__).parent / "data"
ACL_CHUNK = 65536  # ACLs from which a format-4 index chunk ends (after a whole node)


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


def node_rows(index: AclIndex, size: int) -> Iterator[dict]:
    """The index's nodes as format-4 AclNodesRow values, each ending after the node that brings it to ``size``
    ACLs (what format 4 wrote)."""
    row = _NodesRow()
    for resource_type, pattern_type, name, node, source in _nodes(index):
        row.add_node(resource_type, pattern_type, name, node, source)
        if len(row.ids) >= size:
            yield node_row(row)
            row = _NodesRow()
    if row.ids:
        yield node_row(row)


def node_row(row: _NodesRow) -> dict:
    """The AclNodesRow value of the gathered nodes ``row``."""
    columns = (row.names, list(row.principals), row.ids, list(row.hosts))
    separator = separator_of(columns, below=sys.maxunicode + 1)  # "": strings length-prefixed
    names, principals, ids, hosts = (_joined(column, separator) for column in columns)
    return {
        "separator": separator,
        "resource_types": bytes(row.resource_types),
        "pattern_types": bytes(row.pattern_types),
        "names": names,
        "group_counts": _u32_bytes(row.group_counts),
        "principals": principals,
        "group_principals": _u32_bytes(row.group_principals),
        "acl_counts": _u32_bytes(row.acl_counts),
        "acl_ids": ids,
        "hosts": hosts,
        "acl_hosts": _u32_bytes(row.acl_hosts),
        "operations": bytes(row.operations),
        "permission_types": bytes(row.permissions),
    }


def _joined(column: list[str], separator: str) -> str:
    """A string column as one string: joined by the separator, or each string as length ':' string."""
    if separator:
        return separator.join(column)
    return "".join(f"{len(text)}:{text}" for text in column)


def _u32_bytes(values: array) -> bytes:
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


if __name__ == "__main__":
    write(Path(sys.argv[1]))
