"""Check a frame's announced lengths against its size before kio's native reader sees it.

kio 0.6.5's native reader allocates an array's announced item count up front: a frame of a
few bytes that announces 2**32 - 2 items makes it abort the whole process (Rust's "memory
allocation ... failed"), before any authentication.  Kafka's generated readers refuse such a
frame ("Tried to allocate a collection of size N, but there are only M bytes remaining").
``check(cls, frame, offset)`` walks the wire layout of a kio entity class (regular fields,
arrays, nullable structs and tagged fields, flexible or not) reading only lengths and
skipping bytes, and raises ``LengthError`` for any array, string or bytes field that
announces more items or bytes than remain.  It returns the offset after the entity.  It does
not decode values; kio does that afterwards, on a frame whose lengths are now known to fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from secmeta.core.errors import SecmetaError

__all__ = ["LengthError", "check", "read_uvarint"]


class LengthError(SecmetaError):
    """A frame announces more than it holds (or ends inside a field)."""


_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4,
          "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8,
          "datetime_i64": 8, "uuid": 16}
_VARINT = {"uvarint", "uvarlong", "svarint", "svarlong"}
_SIZED = {"string", "bytes", "records"}

# A step reads one field at ``offset`` of ``frame`` and returns the offset after it.
Step = Callable[[bytes, int], int]


def check(cls: type, frame: bytes, offset: int) -> int:
    """The offset after the ``cls`` entity starting at ``offset``; LengthError if it does not fit."""
    return _entity_step(cls)(frame, offset)


def _need(frame: bytes, offset: int, n: int, what: str) -> int:
    if n < 0 or offset + n > len(frame):
        raise LengthError(f"{what} announces {n} bytes at offset {offset}, but {max(0, len(frame) - offset)} remain")
    return offset + n


def read_uvarint(frame: bytes, offset: int) -> tuple[int, int]:
    """(the unsigned varint at ``offset``, where it ends); LengthError past the frame's end or 10 bytes."""
    value, shift = 0, 0
    while True:
        if offset >= len(frame):
            raise LengthError(f"varint runs past the end of the frame at offset {offset}")
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 63:
            raise LengthError(f"varint longer than 10 bytes at offset {offset}")


def _int(frame: bytes, offset: int, size: int, what: str) -> tuple[int, int]:
    end = _need(frame, offset, size, what)
    return int.from_bytes(frame[offset:end], "big", signed=True), end


def _primitive_step(kafka_type: str, flexible: bool, name: str) -> Step:
    if kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        return lambda frame, offset: _need(frame, offset, size, name)
    if kafka_type in _VARINT:
        return lambda frame, offset: read_uvarint(frame, offset)[1]
    if kafka_type not in _SIZED:
        raise TypeError(f"field {name}: unknown kafka_type {kafka_type!r}")
    if flexible:   # compact: unsigned varint length + 1, 0 = null
        def compact(frame: bytes, offset: int) -> int:
            n, offset = read_uvarint(frame, offset)
            return offset if n == 0 else _need(frame, offset, n - 1, name)
        return compact
    width = 2 if kafka_type == "string" else 4   # legacy: int16 / int32 length, -1 = null

    def legacy(frame: bytes, offset: int) -> int:
        n, offset = _int(frame, offset, width, name)
        return offset if n == -1 else _need(frame, offset, n, name)
    return legacy


def _array_step(item: Step, flexible: bool, name: str) -> Step:
    def array(frame: bytes, offset: int) -> int:
        if flexible:
            n, offset = read_uvarint(frame, offset)
            n -= 1
        else:
            n, offset = _int(frame, offset, 4, name)
        if n < 0:   # null (compact 0, legacy -1): nullability is checked after decoding
            return offset
        if n > len(frame) - offset:   # every item takes at least one byte
            raise LengthError(f"{name} announces {n} items at offset {offset}, "
                              f"but {len(frame) - offset} bytes remain")
        for _ in range(n):
            offset = item(frame, offset)
        return offset
    return array


def _nullable_entity_step(inner: Step, name: str) -> Step:
    def nullable(frame: bytes, offset: int) -> int:
        marker, offset = _int(frame, offset, 1, name)
        return offset if marker < 0 else inner(frame, offset)
    return nullable


def _field_step(field: dataclasses.Field, flexible: bool, header: bool, tagged: bool) -> Step:
    name = field.name
    if header and name == "client_id":   # always a legacy nullable string (RequestHeader.json)
        return _primitive_step("string", False, name)
    kind = classify_field(field)
    match kind:
        case PrimitiveField() | PrimitiveTupleField():
            item = _primitive_step(field.metadata["kafka_type"], flexible, name)
        case EntityField(entity) | EntityTupleField(entity):
            item = _entity_step(entity)
            if isinstance(kind, EntityField) and not tagged and is_optional(field):
                item = _nullable_entity_step(item, name)
    return _array_step(item, flexible, name) if kind.is_array else item


@cache
def _entity_step(cls: type) -> Step:
    flexible = bool(cls.__flexible__)
    header = cls.__name__ == "RequestHeader"
    regular: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            regular.append(_field_step(field, flexible, header, tagged=False))
        else:
            tagged[int(tag)] = _field_step(field, flexible, header, tagged=True)

    def entity(frame: bytes, offset: int) -> int:
        for step in regular:
            offset = step(frame, offset)
        if not flexible:
            return offset
        count, offset = read_uvarint(frame, offset)
        if count > len(frame) - offset:
            raise LengthError(f"{cls.__name__} announces {count} tagged fields at offset {offset}")
        for _ in range(count):
            tag, offset = read_uvarint(frame, offset)
            size, offset = read_uvarint(frame, offset)
            end = _need(frame, offset, size, f"{cls.__name__} tagged field {tag}")
            known = tagged.get(tag)
            if known is not None and known(frame[:end], offset) != end:
                raise LengthError(f"{cls.__name__} tagged field {tag} does not fill its {size} bytes")
            offset = end
        return offset

    return entity
