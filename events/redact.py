"""A JSON-safe view of an envelope with every secret replaced by a marker."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from .keyring import SealedSecret
from .records import Envelope
from .types import AclBinding, output_name

__all__ = ["redacted"]


def redacted(envelope: Envelope) -> dict[str, Any]:
    """The envelope as a JSON-serialisable dict: enums by Kafka's name (``types.output_name``: SCRAM-SHA-256,
    TOPIC), sealed secrets as ``<sealed:KEY_ID>``."""
    return {
        "offset": envelope.offset,
        "timestamp_ms": envelope.timestamp_ms,
        "actor_principal": envelope.actor_principal,
        "actor_host": envelope.actor_host,
        "request_id": envelope.request_id,
        "actor_asserted": envelope.actor_asserted,
        "operator": {
            "user": envelope.operator_user,
            "host": envelope.operator_host,
            "pid": envelope.operator_pid,
            "program": envelope.operator_program,
        },
        "event_type": envelope.event_type,
        "entity_key": envelope.event.entity_key,
        "payload": _payload(envelope.event),
    }


def _payload(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, AclBinding):
            out.update(_binding(value))
        else:
            out[f.name] = _value(value)
    return out


def _binding(binding: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": output_name(binding.restype),
        "resource_name": binding.name,
        "pattern_type": output_name(binding.resource_pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": output_name(binding.operation),
        "permission_type": output_name(binding.permission_type),
    }


def _value(value: Any) -> Any:
    if isinstance(value, SealedSecret):
        return f"<sealed:{value.key_id}>"
    if isinstance(value, Enum):
        return output_name(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, (tuple, list)):
        return [_value(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _value(getattr(value, f.name)) for f in fields(value)}
    return value
