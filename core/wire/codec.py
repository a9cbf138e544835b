"""Frames, headers and API versions of Kafka's protocol, encoded and decoded by kio.

A frame on the wire is a 4-byte big-endian size followed by a header and a body.
Request headers are v1 (non-flexible) or v2 (flexible) and start with the same four
fields (api key, api version, correlation id, client id), so they can be read before
the request's version is known to be served.  ApiVersions responses always carry
response header v0, which kio's response classes already declare.

``build(cls, **values)`` constructs any kio entity from plain Python values, dropping
values for fields the version lacks, so handlers can be written once for every version.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import read_int16, read_int32
from kio.serial.writers import write_int32
from kio.static.primitive import i32Timedelta, i64Timedelta

from core.errors import SecmetaError

__all__ = [
    "API_NAMES",
    "SERVED_VERSIONS",
    "FrameError",
    "RequestFrame",
    "UnsupportedApi",
    "build",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "frame_size",
    "peek_header",
]

#: API key -> (min version, max version) that secmeta serves, inclusive.
SERVED_VERSIONS: dict[int, tuple[int, int]] = {
    3: (0, 13),    # Metadata
    17: (0, 1),    # SaslHandshake
    18: (0, 4),    # ApiVersions
    29: (1, 3),    # DescribeAcls
    30: (1, 3),    # CreateAcls
    31: (1, 3),    # DeleteAcls
    36: (0, 2),    # SaslAuthenticate
    38: (1, 3),    # CreateDelegationToken
    39: (1, 2),    # RenewDelegationToken
    40: (1, 2),    # ExpireDelegationToken
    41: (1, 3),    # DescribeDelegationToken
    50: (0, 0),    # DescribeUserScramCredentials
    51: (0, 0),    # AlterUserScramCredentials
    60: (0, 2),    # DescribeCluster
}

API_NAMES: dict[int, str] = {
    3: "Metadata", 17: "SaslHandshake", 18: "ApiVersions", 29: "DescribeAcls", 30: "CreateAcls",
    31: "DeleteAcls", 36: "SaslAuthenticate", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 60: "DescribeCluster",
}

API_VERSIONS_KEY = 18


class FrameError(SecmetaError):
    """A frame that cannot be decoded (truncated, garbage, trailing bytes)."""


class UnsupportedApi(SecmetaError):
    """A request for an API key or version this server does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        name = API_NAMES.get(api_key, f"api key {api_key}")
        super().__init__(f"unsupported request: {name} v{api_version}")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """One decoded request: its header fields and its kio request entity."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Any

    @property
    def name(self) -> str:
        return API_NAMES.get(self.api_key, f"api key {self.api_key}")


def frame_size(prefix: bytes) -> int:
    """The size announced by a frame's 4-byte prefix."""
    return int(read_int32(prefix, 0)[0])


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame, without decoding the rest."""
    try:
        api_key, _ = read_int16(frame, 0)
        api_version, _ = read_int16(frame, 2)
        correlation_id, _ = read_int32(frame, 4)
    except (SerialError, ValueError, IndexError) as exc:
        raise FrameError(f"truncated request header ({len(frame)} bytes)") from exc
    return int(api_key), int(api_version), int(correlation_id)


def is_served(api_key: int, api_version: int) -> bool:
    low_high = SERVED_VERSIONS.get(api_key)
    return low_high is not None and low_high[0] <= api_version <= low_high[1]


def decode_request(frame: bytes, *, trailing_ok: bool = False) -> RequestFrame:
    """Decode one request frame (without its size prefix).

    Raises UnsupportedApi for a key or version outside SERVED_VERSIONS (the caller may
    still answer it, e.g. ApiVersions' fallback) and FrameError for anything malformed.
    ``trailing_ok`` ignores bytes after the request, as Kafka's broker does (its
    RequestContext.parseRequest never checks for them; librdkafka 2.16 sends one extra
    tag byte after AlterUserScramCredentials v0).
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if not is_served(api_key, api_version):
        raise UnsupportedApi(api_key, api_version, correlation_id)
    request_cls = load_request_schema(api_key, api_version)
    try:
        header, header_size = entity_reader(request_cls.__header_schema__)(frame, 0)
        request, body_size = entity_reader(request_cls)(frame, header_size)
    except (SerialError, ValueError, IndexError, UnicodeDecodeError, OverflowError) as exc:
        raise FrameError(f"malformed {API_NAMES[api_key]} v{api_version} request: {type(exc).__name__}") from exc
    null = _null_field(request)
    if null is not None:
        # Kafka's generated readers refuse this ("non-nullable field ... was serialized as null").
        raise FrameError(f"malformed {API_NAMES[api_key]} v{api_version} request: non-nullable field {null} is null")
    trailing = len(frame) - header_size - body_size
    if trailing and not trailing_ok:
        raise FrameError(f"malformed {API_NAMES[api_key]} v{api_version} request: {trailing} trailing bytes")
    return RequestFrame(api_key, api_version, correlation_id, header.client_id, request)


def _null_field(entity: Any) -> str | None:
    """The path of the first field that is None although its type is not nullable (kio reads a
    null array or string without complaint), or None."""
    for name, (nullable, nested) in _null_plan(type(entity)).items():
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
            continue
        if nested:
            for item in value if isinstance(value, tuple) else (value,):
                inner = _null_field(item)
                if inner is not None:
                    return f"{name}.{inner}"
    return None


@cache
def _null_plan(cls: type) -> dict[str, tuple[bool, bool]]:
    """Field name -> (nullable, holds nested entities)."""
    hints = typing.get_type_hints(cls)
    plan = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        nullable = False
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = typing.get_args(tp)
            nullable = type(None) in args
            tp = next(a for a in args if a is not type(None))
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        plan[f.name] = (nullable, dataclasses.is_dataclass(item))
    return plan


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A whole response frame (size prefix included) for ``response`` (a kio response entity)."""
    header_cls = type(response).__header_schema__
    body = io.BytesIO()
    entity_writer(header_cls)(body, header_cls(correlation_id=correlation_id))
    entity_writer(type(response))(body, response)
    return _with_size(body.getvalue())


def encode_request(correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """A whole request frame (size prefix included) for ``request`` (a kio request entity)."""
    header_cls = type(request).__header_schema__
    header = header_cls(request_api_key=request.__api_key__, request_api_version=request.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    body = io.BytesIO()
    entity_writer(header_cls)(body, header)
    entity_writer(type(request))(body, request)
    return _with_size(body.getvalue())


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame (without its size prefix)."""
    response_cls = load_response_schema(api_key, api_version)
    try:
        header, header_size = entity_reader(response_cls.__header_schema__)(frame, 0)
        response, _ = entity_reader(response_cls)(frame, header_size)
    except (SerialError, ValueError, IndexError, UnicodeDecodeError, OverflowError) as exc:
        raise FrameError(f"malformed {API_NAMES.get(api_key, api_key)} v{api_version} response: "
                         f"{type(exc).__name__}") from exc
    return int(header.correlation_id), response


def request_class(api_key: int, api_version: int) -> type:
    return load_request_schema(api_key, api_version)


def response_class(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


def _with_size(payload: bytes) -> bytes:
    out = io.BytesIO()
    write_int32(out, len(payload))
    out.write(payload)
    return out.getvalue()


# -- building entities from plain values ------------------------------------------------

def build(cls: type, /, **values: Any) -> Any:
    """An instance of the kio entity ``cls`` from plain values.

    Keys the version does not have are dropped; ints become the field's primitive type,
    error codes become kio's ErrorCode, milliseconds become timedeltas, and lists of
    dicts (or of already-built entities) become tuples of the nested entity type.
    A field without a default that is not given is an error (a bug in the caller).
    """
    kwargs = {}
    for name, (convert, required) in _field_plan(cls).items():
        if name in values:
            kwargs[name] = convert(values[name])
        elif required:
            raise TypeError(f"{cls.__module__}.{cls.__name__}: no value for required field {name!r}")
    return cls(**kwargs)


@cache
def _field_plan(cls: type) -> dict[str, tuple[Any, bool]]:
    hints = typing.get_type_hints(cls)
    plan = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan[f.name] = (_converter(hints[f.name]), required)
    return plan


def _converter(tp: Any):
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        convert = _converter(inner[0]) if len(inner) == 1 else (lambda v: v)
        return lambda v: None if v is None else convert(v)
    if origin is tuple:
        item = _converter(typing.get_args(tp)[0])
        return lambda v: tuple(item(x) for x in v)
    if tp is KioErrorCode:
        return lambda v: v if isinstance(v, KioErrorCode) else KioErrorCode(int(v))
    if isinstance(tp, type) and issubclass(tp, datetime.timedelta):
        return lambda v: tp(v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v)))
    if tp is uuid.UUID:
        return lambda v: v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))
    if dataclasses.is_dataclass(tp):
        return lambda v: v if isinstance(v, tp) else build(tp, **v)
    if isinstance(tp, type) and issubclass(tp, int) and tp not in (int, bool):
        return lambda v: tp(int(v))
    return lambda v: v


def millis(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or an int passed through)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


# Re-exported for callers that need them to name field types.
Timedelta32, Timedelta64 = i32Timedelta, i64Timedelta
RequestHeaderPrefix = RequestHeaderV1
