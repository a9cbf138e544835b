"""Snapshot codec for SecurityImage: one Avro row per credential, ACL and token.

Each row holds one branch of a union: a meta row (the image's next_offset,
written first), a SCRAM credential (its secret stays sealed), an ACL (enums
as Kafka's int codes) or a delegation token.  Rows are written with
explicit branch names; the reader tells the branches apart by their fields.
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
            "row", [_ACL, _SCRAM, _TOKEN, _META], "The part: an ACL, credential, token or meta row."
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


_META_NAME, _SCRAM_NAME, _ACL_NAME, _TOKEN_NAME = (
    f"secmeta.snapshot.{r['name']}" for r in (_META, _SCRAM, _ACL, _TOKEN)
)
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
        for acl_id, binding in image.acls:
            pattern, entry = binding.pattern, binding.entry
            yield {
                "row": (
                    _ACL_NAME,
                    {
                        "acl_id": acl_id,
                        "resource_type": int(pattern.resource_type),
                        "resource_name": pattern.name,
                        "pattern_type": int(pattern.pattern_type),
                        "principal": entry.principal,
                        "host": entry.host,
                        "operation": int(entry.operation),
                        "permission_type": int(entry.permission_type),
                    },
                )
            }
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
        next_offset = 0

        def acls() -> Iterator[tuple[str, AclBinding]]:
            nonlocal next_offset
            binding, pattern, entry = AclBinding, ResourcePattern, canonical_entry
            resource_types, pattern_types = _RESOURCE_TYPES, _PATTERN_TYPES
            for wrapped in rows:
                row = wrapped["row"]
                if "acl_id" in row:
                    yield (
                        row["acl_id"],
                        binding(
                            pattern(
                                resource_types[row["resource_type"]],
                                row["resource_name"],
                                pattern_types[row["pattern_type"]],
                            ),
                            entry(
                                row["principal"],
                                row["host"],
                                row["operation"],
                                row["permission_type"],
                            ),
                        ),
                    )
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

        acl_image = AclsImage.of(acls())
        return SecurityImage(scram.apply(), acl_image, tokens.apply(), next_offset)
