"""Snapshot codec for SecurityImage: a meta row, credentials, ACL column chunks, tokens.

Each row holds one branch of a union: a meta row (the image's next_offset,
written first), a SCRAM credential (its secret stays sealed), a chunk of up
to ``ACL_CHUNK`` ACLs as one array per field (enums as Kafka's int codes) or
a delegation token.  Column chunks decode in bulk and the image builds its
index once from all of them.  Snapshots of format 1 hold one row per ACL
(``AclRow``); they still load.  Rows are written with explicit branch names;
the reader tells the branches apart by their fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from events.keyring import SealedSecret
from events.types import (
    AclBinding,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
)
from projections.acls import AclsImage, canonical_entry
from projections.image import SecurityImage
from projections.scram import ScramDelta, ScramImage
from projections.tokens import TokenInfo, TokensDelta, TokensImage

__all__ = ["SecurityImageSnapshot"]


def _field(name: str, avro_type, doc: str) -> dict:
    return {"name": name, "type": avro_type, "doc": doc}


_META = {
    "type": "record",
    "name": "MetaRow",
    "doc": "Where the image stands in the log (the first row).",
    "fields": [_field("next_offset", "long", "The offset of the first event not in the image.")],
}
_SCRAM = {
    "type": "record",
    "name": "ScramRow",
    "doc": "One SCRAM credential; salt and keys stay sealed.",
    "fields": [
        _field("user", "string", "The user the credential belongs to."),
        _field("mechanism", "int", "ScramMechanism code (1 SHA-256, 2 SHA-512)."),
        _field("iterations", "int", "PBKDF2 iteration count."),
        _field("key_id", "string", "Keyring key id the secret is sealed under."),
        _field("nonce", "bytes", "AES-GCM nonce of the sealed secret."),
        _field("ciphertext", "bytes", "AES-GCM ciphertext and tag of the sealed secret."),
    ],
}
_ACL = {
    "type": "record",
    "name": "AclRow",
    "doc": "One ACL binding and its id.",
    "fields": [
        _field("acl_id", "string", "The ACL's id."),
        _field("resource_type", "int", "ResourceType code."),
        _field("resource_name", "string", "Resource name or prefix."),
        _field("pattern_type", "int", "PatternType code (3 LITERAL, 4 PREFIXED)."),
        _field("principal", "string", "Principal, Type:Name."),
        _field("host", "string", "Host, or * for any."),
        _field("operation", "int", "AclOperation code."),
        _field("permission_type", "int", "AclPermissionType code."),
    ],
}
_ACL_COLUMNS = {
    "type": "record",
    "name": "AclColumnsRow",
    "doc": "A chunk of ACLs, one array per field; item i of every array is ACL i.",
    "fields": [
        _field("acl_ids", {"type": "array", "items": "string"}, "The ACLs' ids."),
        _field("resource_types", {"type": "array", "items": "int"}, "ResourceType codes."),
        _field("resource_names", {"type": "array", "items": "string"}, "Resource names or prefixes."),
        _field("pattern_types", {"type": "array", "items": "int"}, "PatternType codes (3 LITERAL, 4 PREFIXED)."),
        _field("principals", {"type": "array", "items": "string"}, "Principals, Type:Name."),
        _field("hosts", {"type": "array", "items": "string"}, "Hosts, or * for any."),
        _field("operations", {"type": "array", "items": "int"}, "AclOperation codes."),
        _field("permission_types", {"type": "array", "items": "int"}, "AclPermissionType codes."),
    ],
}
_TOKEN = {
    "type": "record",
    "name": "TokenRow",
    "doc": "One delegation token (no HMAC).",
    "fields": [
        _field("token_id", "string", "The token's id."),
        _field("owner", "string", "Owner principal."),
        _field("requester", "string", "Principal that requested the token."),
        _field("renewers", {"type": "array", "items": "string"}, "Renewer principals."),
        _field("issue_timestamp_ms", "long", "Issue time, epoch ms."),
        _field("expiry_timestamp_ms", "long", "Expiry time, epoch ms."),
        _field("max_timestamp_ms", "long", "Maximum lifetime end, epoch ms."),
    ],
}

SCHEMA = {
    "type": "record",
    "name": "SecurityImageRow",
    "namespace": "secmeta.snapshot",
    "doc": "One part of a SecurityImage snapshot.",
    "fields": [
        _field(
            "row",
            [_ACL_COLUMNS, _SCRAM, _TOKEN, _META],
            "The part: a chunk of ACLs, a credential, a token or the meta row.",
        )
    ],
}


class _Codes(dict):
    """Enum member by code; unknown codes read as UNKNOWN (0)."""

    def __init__(self, enum):
        super().__init__((int(m), m) for m in enum)
        self.unknown = enum(0)

    def __missing__(self, code):
        return self.unknown


_META_NAME, _SCRAM_NAME, _ACL_COLUMNS_NAME, _TOKEN_NAME = (
    f"secmeta.snapshot.{r['name']}" for r in (_META, _SCRAM, _ACL_COLUMNS, _TOKEN)
)
ACL_CHUNK = 65536  # ACLs per column row: bounds what one row holds while writing
_ACL_COLUMN_NAMES = tuple(f["name"] for f in _ACL_COLUMNS["fields"])
_RESOURCE_TYPES = _Codes(ResourceType)
_PATTERN_TYPES = _Codes(PatternType)


class SecurityImageSnapshot:
    """SnapshotCodec for SecurityImage; ``build`` restores next_offset from the meta row."""

    kind = "security-image"
    schema = SCHEMA

    def rows(self, image: SecurityImage) -> Iterator[dict]:
        yield {"row": (_META_NAME, {"next_offset": image.next_offset})}
        for user, entry in image.scram:
            secret = entry.secret
            yield {
                "row": (
                    _SCRAM_NAME,
                    {
                        "user": user,
                        "mechanism": int(entry.mechanism),
                        "iterations": entry.iterations,
                        "key_id": secret.key_id,
                        "nonce": secret.nonce,
                        "ciphertext": secret.ciphertext,
                    },
                )
            }
        for chunk in _chunks(image.acls, ACL_CHUNK):
            yield {"row": (_ACL_COLUMNS_NAME, _acl_columns(chunk))}
        for token in image.tokens:
            yield {
                "row": (
                    _TOKEN_NAME,
                    {
                        "token_id": token.token_id,
                        "owner": token.owner,
                        "requester": token.requester,
                        "renewers": list(token.renewers),
                        "issue_timestamp_ms": token.issue_timestamp_ms,
                        "expiry_timestamp_ms": token.expiry_timestamp_ms,
                        "max_timestamp_ms": token.max_timestamp_ms,
                    },
                )
            }

    def build(self, rows: Iterable[dict]) -> SecurityImage:
        scram = ScramDelta(ScramImage.EMPTY)
        tokens = TokensDelta(TokensImage.EMPTY)
        acls = _AclLoader()
        next_offset = 0
        for wrapped in rows:
            row = wrapped["row"]
            if "acl_ids" in row:
                acls.add_columns(row)
            elif "acl_id" in row:
                acls.add_row(row)
            elif "user" in row:
                scram.upsert(
                    row["user"],
                    ScramMechanism(row["mechanism"]),
                    row["iterations"],
                    SealedSecret(row["key_id"], row["nonce"], row["ciphertext"]),
                )
            elif "token_id" in row:
                tokens.issue(
                    TokenInfo(
                        row["token_id"],
                        row["owner"],
                        row["requester"],
                        tuple(row["renewers"]),
                        row["issue_timestamp_ms"],
                        row["expiry_timestamp_ms"],
                        row["max_timestamp_ms"],
                    )
                )
            else:
                next_offset = row["next_offset"]
        return SecurityImage(scram.apply(), acls.image(), tokens.apply(), next_offset)


def _chunks(acls: AclsImage, size: int) -> Iterator[list[tuple[str, AclBinding]]]:
    chunk: list[tuple[str, AclBinding]] = []
    for pair in acls:
        chunk.append(pair)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _acl_columns(chunk: list[tuple[str, AclBinding]]) -> dict[str, list]:
    columns: tuple[list, ...] = tuple([] for _ in _ACL_COLUMN_NAMES)
    ids, types, names, pattern_types, principals, hosts, operations, permissions = columns
    for acl_id, binding in chunk:
        pattern, entry = binding.pattern, binding.entry
        ids.append(acl_id)
        types.append(int(pattern.resource_type))
        names.append(pattern.name)
        pattern_types.append(int(pattern.pattern_type))
        principals.append(entry.principal)
        hosts.append(entry.host)
        operations.append(int(entry.operation))
        permissions.append(int(entry.permission_type))
    return dict(zip(_ACL_COLUMN_NAMES, columns))


class _AclLoader:
    """Gathers a snapshot's ACLs (column chunks or format-1 rows) into one image.

    Bindings share their entries (``canonical_entry``) and, per resource,
    their pattern; the index is built once, in bulk, by ``AclsImage.of``.
    """

    def __init__(self) -> None:
        self.acls: dict[str, AclBinding] = {}
        self.patterns: dict[tuple[int, str, int], ResourcePattern] = {}

    def _pattern(self, key: tuple[int, str, int]) -> ResourcePattern:
        pattern = self.patterns[key] = ResourcePattern(
            _RESOURCE_TYPES[key[0]], key[1], _PATTERN_TYPES[key[2]]
        )
        return pattern

    def add_columns(self, columns: dict[str, list]) -> None:
        acls, patterns, entry, binding = self.acls, self.patterns, canonical_entry, AclBinding
        for acl_id, resource_type, name, pattern_type, principal, host, operation, permission in zip(
            *(columns[name] for name in _ACL_COLUMN_NAMES), strict=True
        ):
            key = (resource_type, name, pattern_type)
            pattern = patterns.get(key) or self._pattern(key)
            acls[acl_id] = binding(pattern, entry(principal, host, operation, permission))

    def add_row(self, row: dict) -> None:
        """A format-1 ``AclRow`` (its fields are the column names in the singular)."""
        self.add_columns({name: [row[name[:-1]]] for name in _ACL_COLUMN_NAMES})

    def image(self) -> AclsImage:
        return AclsImage.of(self.acls.items())
