"""What the point-in-time queries answer, whichever engine read the tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    from_output_name,
    output_name,
)
from secmeta.projections.tokens import TOKEN_FIELDS, TokenInfo

__all__ = ["AclInForce", "AliveToken", "acl_binding"]


@dataclass(frozen=True, slots=True)
class AclInForce:
    """An ACL in force at a point, and the logged change that created it."""

    acl_id: str
    binding: AclBinding
    created_offset: int
    created_ms: int
    created_by: str
    created_by_host: str
    created_request_id: str

    def to_dict(self) -> dict:
        b = self.binding
        return {"acl_id": self.acl_id, "resource_type": output_name(b.restype), "resource_name": b.name,
                "pattern_type": output_name(b.resource_pattern_type), "principal": b.principal, "host": b.host,
                "operation": output_name(b.operation), "permission_type": output_name(b.permission_type),
                "created_offset": self.created_offset, "created_ms": self.created_ms,
                "created_by": self.created_by, "created_by_host": self.created_by_host,
                "created_request_id": self.created_request_id}


@dataclass(frozen=True, slots=True)
class AliveToken(TokenInfo):
    """A token alive at some moment of the window (no HMAC: the tables never hold one).

    ``alive_from_ms``: the first moment of the window it was alive;
    ``expiry_timestamp_ms``: its expiry as it stood in its last interval alive in the window.
    """

    alive_from_ms: int

    def to_dict(self) -> dict:
        return {**{name: getattr(self, name) for name in TOKEN_FIELDS}, "renewers": list(self.renewers),
                "alive_from_ms": self.alive_from_ms}


def acl_binding(row: Any) -> AclBinding:
    """The binding of an ACL table row, a mapping or a Spark Row (its seven binding columns, enums by their
    output names)."""
    return AclBinding.of(from_output_name(ResourceType, row["resource_type"]), row["resource_name"],
                         from_output_name(PatternType, row["pattern_type"]), row["principal"], row["host"],
                         from_output_name(AclOperation, row["operation"]),
                         from_output_name(AclPermissionType, row["permission_type"]))
