"""Frames, headers and API versions of Kafka's protocol, encoded and decoded by kio.

A frame on the wire is a 4-byte big-endian size followed by a header and a body.
Request headers are v1 (non-flexible) or v2 (flexible) and start with the same four
fields (api key, api version, correlation id, client id), so they can be read before
the request's version is known to be served.  ApiVersions responses always carry
response header v0, which kio's response classes already declare.

``ApiKey`` is the one table of the APIs secmeta serves: key, Kafka's name, versions.
``build(cls, **values)`` constructs any kio entity from plain Python values, dropping
values for fields this version lacks (but that another version of the API has), so
handlers can be written once for every version.

A handler may answer with an ``EncodedResponse`` instead of a kio entity: a body already in
wire bytes (kio's encoding kept for reuse, ``encoded``, or a hand-specialised encoder's,
``secmeta.core.wire.hot_responses``); ``encode_response`` frames both alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import io
import pkgutil
import struct
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i64

from secmeta.core.errors import SecmetaError
from secmeta.core.wire import bounds

__all__ = [
    "ApiKey",
    "EncodedResponse",
    "FrameError",
    "RequestFrame",
    "UnsupportedApi",
    "api_name",
    "build",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "response_frame_parts",
    "encoded",
    "uvarint",
    "first_flexible_version",
    "flexible_response_header",
    "frame_size",
    "peek_header",
    "request_class",
    "response_class",
]


class ApiKey(IntEnum):
    """The APIs secmeta serves, each with the versions it serves (inclusive).

    ``ApiKey.DESCRIBE_ACLS == 29``; ``.kafka_name`` is "DescribeAcls"; ``.versions`` is (1, 3).
    """

    versions: tuple[int, int]

    def __new__(cls, key: int, low: int, high: int) -> ApiKey:
        member = int.__new__(cls, key)
        member._value_ = key
        member.versions = (low, high)
        return member

    METADATA = 3, 0, 13
    SASL_HANDSHAKE = 17, 0, 1
    API_VERSIONS = 18, 0, 4
    DESCRIBE_ACLS = 29, 1, 3
    CREATE_ACLS = 30, 1, 3
    DELETE_ACLS = 31, 1, 3
    SASL_AUTHENTICATE = 36, 0, 2
    CREATE_DELEGATION_TOKEN = 38, 1, 3
    RENEW_DELEGATION_TOKEN = 39, 1, 2
    EXPIRE_DELEGATION_TOKEN = 40, 1, 2
    DESCRIBE_DELEGATION_TOKEN = 41, 1, 3
    DESCRIBE_CLIENT_QUOTAS = 48, 0, 1
    ALTER_CLIENT_QUOTAS = 49, 0, 1
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50, 0, 0
    ALTER_USER_SCRAM_CREDENTIALS = 51, 0, 0
    DESCRIBE_CLUSTER = 60, 0, 2

    @property
    def kafka_name(self) -> str:
        """The API's name in Kafka's message definitions (DESCRIBE_ACLS -> DescribeAcls)."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def served(cls, api_key: int, api_version: int) -> bool:
        """True if ``api_key`` is served at ``api_version``."""
        api = cls._value2member_map_.get(api_key)
        return api is not None and api.versions[0] <= api_version <= api.versions[1]


def api_name(api_key: int) -> str:
    """Kafka's name of a served API, or "api key N"."""
    api = ApiKey._value2member_map_.get(api_key)
    return api.kafka_name if api is not None else f"api key {api_key}"


class FrameError(SecmetaError):
    """A frame that cannot be decoded (truncated, garbage, trailing bytes)."""


class UnsupportedApi(SecmetaError):
    """A request for an API key or version this server does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"unsupported request: {api_name(api_key)} v{api_version}")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


class RequestFrame(NamedTuple):
    """One decoded request: its header fields and its kio request entity (never in the repr:
    requests carry salted passwords, token HMACs and SASL messages).  A named tuple: one is
    made per request, at a fraction of a frozen dataclass's cost."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Any

    @property
    def name(self) -> str:
        return api_name(self.api_key)

    def __repr__(self) -> str:
        return (f"RequestFrame(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


def frame_size(prefix: bytes) -> int:
    """The size announced by a frame's 4-byte prefix."""
    return int(_SIZE.unpack(prefix)[0])


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame, without decoding the rest."""
    if len(frame) < _HEADER.size:
        raise FrameError(f"truncated request header ({len(frame)} bytes)")
    return _HEADER.unpack_from(frame)


def decode_request(frame: bytes, *, trailing_ok: bool = False) -> RequestFrame:
    """Decode one request frame (without its size prefix).

    Raises UnsupportedApi for a key or version that is not served (the caller may
    still answer it, e.g. ApiVersions' fallback) and FrameError for anything malformed.
    ``trailing_ok`` ignores bytes after the request, as Kafka's broker does (its
    RequestContext.parseRequest never checks for them; librdkafka 2.16 sends one extra
    tag byte after AlterUserScramCredentials v0).
    """
    api_key, api_version, correlation_id = peek_header(frame)
    if not ApiKey.served(api_key, api_version):
        raise UnsupportedApi(api_key, api_version, correlation_id)
    if api_key in _RECURRING and len(frame) <= _RECURRING_MAX_BYTES and type(frame) is bytes:
        # the same request again (librdkafka asks the same Metadata, a poller the same DescribeAcls):
        # decoded once per distinct bytes, the correlation id aside (kio entities are immutable)
        kept = _decoded_without_correlation(frame[:4] + b"\0\0\0\0" + frame[8:], trailing_ok)
        return RequestFrame(api_key, api_version, correlation_id, kept.client_id, kept.request)
    return _decoded(frame, trailing_ok)


#: Requests that clients repeat byte for byte and that carry no secret: their decodings are kept.  SaslHandshake
#: names only a mechanism (every login sends the same bytes); SaslAuthenticate, which carries SCRAM messages, never is.
_RECURRING = frozenset({3, 17, 18, 29, 60})     # Metadata, SaslHandshake, ApiVersions, DescribeAcls, DescribeCluster
_RECURRING_MAX_BYTES = 1024
_RECURRING_KEPT = 512                       # distinct requests kept (at most 512 KiB of frames)


@functools.lru_cache(maxsize=_RECURRING_KEPT)
def _decoded_without_correlation(frame: bytes, trailing_ok: bool) -> RequestFrame:
    return _decoded(frame, trailing_ok)


@cache
def _hand_readers() -> dict[int, Callable[..., RequestFrame | None]]:
    """The requests read by hand (DescribeAcls, SaslAuthenticate) and their readers (the one list of them), imported
    once, on first use (their module imports this one; an import statement per request cost about a microsecond)."""
    from secmeta.core.wire.hot_requests import describe_acls_request, sasl_authenticate_request

    return {int(ApiKey.DESCRIBE_ACLS): describe_acls_request, int(ApiKey.SASL_AUTHENTICATE): sasl_authenticate_request}


def _decoded(frame: bytes, trailing_ok: bool) -> RequestFrame:
    api_key, api_version, correlation_id = peek_header(frame)
    hand_reader = _hand_readers().get(api_key)
    if hand_reader is not None:
        decoded = hand_reader(frame, trailing_ok=trailing_ok)
        if decoded is not None:
            return decoded
    request_cls = request_class(api_key, api_version)
    try:
        # kio's native reader allocates announced array lengths up front: bound them first.
        bounds.check(request_cls, frame, bounds.check(request_cls.__header_schema__, frame, 0))
    except bounds.LengthError as exc:
        raise FrameError(f"malformed {api_name(api_key)} v{api_version} request: {exc}") from None
    try:
        header, header_size = entity_reader(request_cls.__header_schema__)(frame, 0)
        request, body_size = entity_reader(request_cls)(frame, header_size)
    except (SerialError, ValueError, IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        # kio raises KeyError for an unknown tagged field
        raise FrameError(f"malformed {api_name(api_key)} v{api_version} request: {type(exc).__name__}") from None
    null = _null_field(request)
    if null is not None:
        # Kafka's generated readers refuse this ("non-nullable field ... was serialized as null").
        raise FrameError(f"malformed {api_name(api_key)} v{api_version} request: non-nullable field {null} is null")
    trailing = len(frame) - header_size - body_size
    if trailing and not trailing_ok:
        raise FrameError(f"malformed {api_name(api_key)} v{api_version} request: {trailing} trailing bytes")
    return RequestFrame(api_key, api_version, correlation_id, header.client_id, request)


def _null_field(entity: Any) -> str | None:
    """The path of the first field that is None although its type is not nullable (kio reads a
    null array or string without complaint), or None."""
    for f in _fields(type(entity)):
        value = getattr(entity, f.name)
        if value is None:
            if not f.nullable:
                return f.name
            continue
        if f.nested is not None:
            for item in value if isinstance(value, tuple) else (value,):
                inner = _null_field(item)
                if inner is not None:
                    return f"{f.name}.{inner}"
    return None


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body in wire bytes, with what the frame around it needs.

    ``flexible_header``: response header v1 (the correlation id and an empty tagged-field
    section) rather than v0; ``error_code``: the body's top-level error code, for a caller
    that acts on it (ApiVersions).  It never holds a secret: only public answers are kept
    encoded (ApiVersions, Metadata, DescribeCluster, DescribeAcls)."""

    flexible_header: bool
    body: bytes = field(repr=False)
    error_code: int = 0


_SIZE_AND_ID = struct.Struct(">ii")
_SIZE_ID_AND_NO_TAGS = struct.Struct(">iiB")     # response header v1: the correlation id, no tagged fields


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A whole response frame (size prefix included) for ``response`` (a kio response entity
    or an ``EncodedResponse``)."""
    if type(response) is EncodedResponse:
        return b"".join(response_frame_parts(correlation_id, response))
    header_cls = type(response).__header_schema__
    return _framed(header_cls, header_cls(correlation_id=correlation_id), response)


def response_frame_parts(correlation_id: int, response: Any) -> tuple[bytes, ...]:
    """``encode_response``'s frame as the parts to write one after the other (``transport.writelines``): an
    ``EncodedResponse``'s size prefix and header, then its body as it is held, not copied into a frame (a
    kept DescribeAcls answer is tens of KB); a kio entity's whole frame as one part."""
    if type(response) is not EncodedResponse:
        return (encode_response(correlation_id, response),)
    body = response.body
    if response.flexible_header:
        return _SIZE_ID_AND_NO_TAGS.pack(len(body) + 5, correlation_id, 0), body
    return _SIZE_AND_ID.pack(len(body) + 4, correlation_id), body


def uvarint(n: int) -> bytes:
    """``n`` as an unsigned varint (flexible versions' lengths: the length + 1, and tagged-field counts)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encoded(response: Any) -> EncodedResponse:
    """``response`` (a kio response entity) encoded by kio, kept as bytes: for an answer that is
    the same for many requests (the caller caches it), framed later with each one's correlation id."""
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    return EncodedResponse(_flexible_header(type(response)), out.getvalue(), int(getattr(response, "error_code", 0)))


@cache
def _flexible_header(response_cls: type) -> bool:
    """Whether a response class's header carries tagged fields (response header v1)."""
    return bool(response_cls.__header_schema__.__flexible__)


def flexible_response_header(api_key: int, api_version: int) -> bool:
    """Whether the response of this API version has response header v1 (tagged fields)."""
    return _flexible_header(response_class(api_key, api_version))


@cache
def first_flexible_version(api: ApiKey) -> int:
    """The first served version of ``api`` that is flexible (compact lengths, tagged fields), as kio's schema says
    (Kafka's flexibleVersions): the one owner of that number for the requests and answers read and written by hand."""
    low, high = api.versions
    for version in range(low, high + 1):
        if request_class(api, version).__flexible__:
            return version
    raise ValueError(f"{api.kafka_name} has no flexible version among those served (v{low}-v{high})")


def encode_request(correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """A whole request frame (size prefix included) for ``request`` (a kio request entity)."""
    header_cls = type(request).__header_schema__
    header = header_cls(request_api_key=request.__api_key__, request_api_version=request.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    return _framed(header_cls, header, request)


def _framed(header_cls: type, header: Any, entity: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_cls)(out, header)
    entity_writer(type(entity))(out, entity)
    size = out.tell() - 4
    out.seek(0)
    out.write(_SIZE.pack(size))
    return out.getvalue()


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame (without its size prefix)."""
    response_cls = _read_as(api_key, api_version)
    try:
        bounds.check(response_cls, frame, bounds.check(response_cls.__header_schema__, frame, 0))
        header, header_size = entity_reader(response_cls.__header_schema__)(frame, 0)
        response, _ = entity_reader(response_cls)(frame, header_size)
    except (bounds.LengthError, SerialError, ValueError, IndexError, KeyError, UnicodeDecodeError,
            OverflowError) as exc:
        raise FrameError(f"malformed {api_name(api_key)} v{api_version} response: "
                         f"{type(exc).__name__}") from None
    return int(header.correlation_id), response


@cache
def request_class(api_key: int, api_version: int) -> type:
    """kio's request class of an API version (kio resolves it by name on every call: cached here)."""
    return load_request_schema(api_key, api_version)


@cache
def response_class(api_key: int, api_version: int) -> type:
    """kio's response class of an API version (cached, as ``request_class``)."""
    return load_response_schema(api_key, api_version)


# A KRaft broker answers an ExpireDelegationToken with a negative period with that period as ExpiryTimestampMs
# (DelegationTokenControlManager.expireDelegationToken: setExpiryTimestampMs(expiryTimePeriodMs)); Kafka declares the
# field int64, which kio reads as a datetime and refuses below 1970.  A client reads it as the int64 it is.
_EXPIRE_DELEGATION_TOKEN = 40


@cache
def _read_as(api_key: int, api_version: int) -> type:
    """The class a response of this API version is read as: kio's, but for ExpireDelegationToken's, whose int64
    timestamps are read as plain int64 (a KRaft broker may answer -1: above)."""
    cls = response_class(api_key, api_version)
    if api_key != _EXPIRE_DELEGATION_TOKEN:
        return cls
    fields = [(f.name, i64, field(metadata={"kafka_type": "int64"})) if f.metadata.get("kafka_type") == "datetime_i64"
              else (f.name, f.type, field(metadata=f.metadata)) for f in dataclasses.fields(cls)]
    kept = {name: getattr(cls, name) for name in ("__type__", "__version__", "__flexible__", "__api_key__",
                                                  "__header_schema__")}
    return dataclasses.make_dataclass(cls.__name__, fields, namespace=kept, frozen=True, slots=True, kw_only=True)


# -- kio entities by reflection, once per class --------------------------------------------

def build(cls: type, /, **values: Any) -> Any:
    """An instance of the kio entity ``cls`` from plain values.

    Keys this version lacks are dropped if another version of the same entity has them
    (a key no version has is a TypeError: a typo in the caller); ints become the field's
    primitive type, error codes become kio's ErrorCode, milliseconds become timedeltas,
    and lists of dicts (or of already-built entities) become tuples of the nested entity
    type.  A field without a default that is not given is a TypeError (a bug in the caller).
    """
    kwargs = {}
    for f in _fields(cls):
        if f.name in values:
            kwargs[f.name] = f.convert(values[f.name])
        elif f.required:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}: no value for required field {f.name!r}")
    if len(kwargs) != len(values):
        unknown = set(values) - _names_in_any_version(cls)
        if unknown:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}: no version has the field(s) {sorted(unknown)}")
    return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class _Field:
    """How one field of a kio entity is built and checked."""

    name: str
    convert: Callable[[Any], Any]   # a plain value -> the field's type
    required: bool                  # no default
    nullable: bool                  # None is a valid value
    nested: type | None             # the entity type held (alone or in a tuple), if any


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        inner, nullable = tp, False
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = typing.get_args(tp)
            nullable = type(None) in args
            inner = next(a for a in args if a is not type(None))
        item = typing.get_args(inner)[0] if typing.get_origin(inner) is tuple else inner
        nested = item if dataclasses.is_dataclass(item) else None
        plan.append(_Field(f.name, _converter(tp), required, nullable, nested))
    return tuple(plan)


@cache
def _names_in_any_version(cls: type) -> frozenset[str]:
    """Field names of ``cls`` in every version of its API (kio.schema.<api>.v<N>.<module>)."""
    names = {f.name for f in dataclasses.fields(cls)}
    parts = cls.__module__.split(".")
    if len(parts) == 5 and parts[:2] == ["kio", "schema"] and parts[3].startswith("v"):
        package = importlib.import_module(".".join(parts[:3]))
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("v"):
                module = importlib.import_module(f"{package.__name__}.{info.name}.{parts[4]}")
                sibling = getattr(module, cls.__name__, None)
                if sibling is not None:
                    names.update(f.name for f in dataclasses.fields(sibling))
    return frozenset(names)


_SIGNED_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _converter(tp: Any) -> Callable[[Any], Any]:
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
        zero = tp(datetime.timedelta(0))   # throttle_time=0 on every response: built once
        return lambda v: zero if v == 0 else tp(v if isinstance(v, datetime.timedelta)
                                                else datetime.timedelta(milliseconds=int(v)))
    if tp is uuid.UUID:
        return lambda v: v if isinstance(v, uuid.UUID) else uuid.UUID(str(v))
    if dataclasses.is_dataclass(tp):
        return lambda v: v if isinstance(v, tp) else build(tp, **v)
    if isinstance(tp, type) and issubclass(tp, int) and tp not in (int, bool):
        bits = _SIGNED_BITS.get(tp.__name__)
        if bits is None:
            return lambda v: tp(int(v))
        # kio's i8..i64 check their range when constructed (~2 us each): an int in range is kept
        # as it is (kio's writers take it), anything else goes through kio's own check.
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return lambda v: v if type(v) is int and low <= v <= high else tp(int(v))
    return lambda v: v
