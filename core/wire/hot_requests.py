"""The hot requests decoded by hand: DescribeAcls, the one read whose bytes differ per request, and
SaslAuthenticate, sent twice by every login with the exchange's own SCRAM message.

A small request kio has not seen before costs ~30 us to decode, two thirds of it the length
check (``secmeta.core.wire.bounds``) that must precede kio's native reader.  A DescribeAcls
request is flat (an int8, three nullable strings, three more int8s) and this reader reads it
straight from the frame, every length checked against the bytes that remain, and builds
the same kio entity kio's reader builds.  It answers only the plain shape (no tagged fields,
valid UTF-8, no trailing bytes unless they are allowed): for anything else it returns None
and the caller decodes with kio, which accepts or refuses it as before.
tests/core/wire/test_hot_requests.py checks both properties at every served version.
A SaslAuthenticate request is one byte string (int32 length; compact in the flexible v2) after the
header: ``sasl_authenticate_request`` reads it the same way, and the same test file checks it likewise.

``describe_acls_fields`` is the same reading without the entity: the request's seven filter values
as a tuple (``DescribeAclsFields``), for the server's inline answer (``secmeta.core.server.acl_apis``),
which needs nothing else from the request.  ``describe_acls_key`` reads the header alone (the same
checks) and keys the request by its version and the bytes after the header (the body: the filter), so
the server finds the answer it keeps for the same filter without reading the body.
"""

from __future__ import annotations

import struct

from secmeta.core.wire import bounds
from secmeta.core.wire.codec import ApiKey, RequestFrame, first_flexible_version, request_class

__all__ = ["FIELD_NAMES", "DescribeAclsFields", "describe_acls_body", "describe_acls_fields", "describe_acls_key",
           "describe_acls_request", "fields_of", "sasl_authenticate_request"]

#: The request's filter values in the order of ``DescribeAclsFields``: resource type, resource name, pattern type,
#: principal, host, operation, permission type (kio's field names).
FIELD_NAMES = ("resource_type_filter", "resource_name_filter", "pattern_type_filter", "principal_filter",
               "host_filter", "operation", "permission_type")
DescribeAclsFields = tuple[int, str | None, int, str | None, str | None, int, int]

_HEADER = struct.Struct(">hhih")      # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FLEXIBLE_FROM = first_flexible_version(ApiKey.DESCRIBE_ACLS)  # (request header v2 from there on)
_DESCRIBE_ACLS = ApiKey.DESCRIBE_ACLS     # read once: a member read off its class costs ~0.25 us on Python 3.11
_SASL_AUTHENTICATE = ApiKey.SASL_AUTHENTICATE
_SASL_FLEXIBLE_FROM = first_flexible_version(ApiKey.SASL_AUTHENTICATE)


class _Unsure(Exception):
    """Not the plain shape: let kio decide."""


def describe_acls_request(frame: bytes, *, trailing_ok: bool) -> RequestFrame | None:
    """The decoded DescribeAcls request of ``frame`` (a served version), or None: decode it with kio."""
    read = describe_acls_fields(frame, trailing_ok=trailing_ok)
    if read is None:
        return None
    version, correlation_id, client_id, fields = read
    resource_type, name, pattern_type, principal, host, operation, permission = fields
    request = request_class(ApiKey.DESCRIBE_ACLS, version)(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern_type,
        principal_filter=principal, host_filter=host, operation=operation, permission_type=permission)
    return RequestFrame(ApiKey.DESCRIBE_ACLS, version, correlation_id, client_id, request)


def describe_acls_fields(frame: bytes, *, trailing_ok: bool
                         ) -> tuple[int, int, str | None, DescribeAclsFields] | None:
    """(api version, correlation id, client id, filter values) of the DescribeAcls request ``frame`` (its api
    key DescribeAcls, its version served), or None: decode it with kio."""
    try:
        return _read(frame, trailing_ok)
    except (_Unsure, struct.error, IndexError, UnicodeDecodeError):
        return None


def describe_acls_key(frame: bytes) -> tuple[int, int, int, bytes] | None:
    """(api version, correlation id, where the body starts, key) of the DescribeAcls request ``frame`` (its api key
    DescribeAcls, its version served, a plain header: as ``describe_acls_fields`` checks it), or None; the key is
    the version's two bytes and the body's bytes.  The body is not read (``describe_acls_body`` reads it):
    requests of equal keys are the same filter (trailing bytes included), whatever their correlation and client
    ids."""
    try:
        version, correlation_id, _, pos = _header(frame)
    except (_Unsure, struct.error, IndexError, UnicodeDecodeError):
        return None
    return version, correlation_id, pos, frame[2:4] + frame[pos:]


def describe_acls_body(frame: bytes, version: int, pos: int, *, trailing_ok: bool) -> DescribeAclsFields | None:
    """The filter values of the body at ``pos`` of a DescribeAcls request of ``version`` whose header
    ``describe_acls_key`` read, or None: decode it with kio."""
    try:
        return _body(frame, version, pos, trailing_ok)
    except (_Unsure, struct.error, IndexError, UnicodeDecodeError):
        return None


def fields_of(request: object) -> DescribeAclsFields:
    """The filter values of a decoded DescribeAcls request (a kio entity), as ``describe_acls_fields`` reads them."""
    return tuple(getattr(request, name) for name in FIELD_NAMES)  # type: ignore[return-value]


def _header(frame: bytes, api: ApiKey = _DESCRIBE_ACLS, flexible_from: int = _FLEXIBLE_FROM
            ) -> tuple[int, int, str | None, int]:
    """(version, correlation id, client id, where the body starts) of an ``api`` request's plain header."""
    api_key, version, correlation_id, size = _HEADER.unpack_from(frame)
    low, high = api.versions
    if api_key != api or not low <= version <= high:
        raise _Unsure()
    pos = _HEADER.size
    client_id = None
    if size >= 0:
        client_id, pos = _text(frame, pos, size), pos + size
    elif size != -1:
        raise _Unsure()
    if version >= flexible_from:
        pos = _no_tags(frame, pos)
    return version, correlation_id, client_id, pos


def sasl_authenticate_request(frame: bytes, *, trailing_ok: bool) -> RequestFrame | None:
    """The decoded SaslAuthenticate request of ``frame`` (a served version), or None: decode it with kio."""
    try:
        version, correlation_id, client_id, pos = _header(frame, _SASL_AUTHENTICATE, _SASL_FLEXIBLE_FROM)
        if version >= _SASL_FLEXIBLE_FROM:
            size, pos = bounds.read_uvarint(frame, pos)
            size -= 1                   # compact bytes: length + 1 (0 is null, which this field may not be)
        else:
            (size,) = _I32.unpack_from(frame, pos)
            pos += 4
        end = pos + size
        if size < 0 or end > len(frame):
            raise _Unsure()
        auth_bytes = frame[pos:end]
        if version >= _SASL_FLEXIBLE_FROM:
            end = _no_tags(frame, end)
        if end < len(frame) and not trailing_ok:
            raise _Unsure()
    except (_Unsure, bounds.LengthError, struct.error, IndexError, UnicodeDecodeError):
        return None
    request = request_class(_SASL_AUTHENTICATE, version)(auth_bytes=auth_bytes)
    return RequestFrame(_SASL_AUTHENTICATE, version, correlation_id, client_id, request)


def _read(frame: bytes, trailing_ok: bool) -> tuple[int, int, str | None, DescribeAclsFields]:
    version, correlation_id, client_id, pos = _header(frame)
    return version, correlation_id, client_id, _body(frame, version, pos, trailing_ok)


def _body(frame: bytes, version: int, pos: int, trailing_ok: bool) -> DescribeAclsFields:
    flexible = version >= _FLEXIBLE_FROM
    string = _compact if flexible else _legacy
    resource_type = _int8(frame, pos)
    name, pos = string(frame, pos + 1)
    pattern_type = _int8(frame, pos)
    principal, pos = string(frame, pos + 1)
    host, pos = string(frame, pos)
    operation, permission = _int8(frame, pos), _int8(frame, pos + 1)
    pos += 2
    if flexible:
        pos = _no_tags(frame, pos)
    if pos > len(frame) or (pos < len(frame) and not trailing_ok):
        raise _Unsure()
    return resource_type, name, pattern_type, principal, host, operation, permission


def _int8(frame: bytes, pos: int) -> int:
    value = frame[pos]
    return value - 256 if value > 127 else value


def _text(frame: bytes, pos: int, size: int) -> str:
    end = pos + size
    if end > len(frame):
        raise _Unsure()
    return frame[pos:end].decode()


def _legacy(frame: bytes, pos: int) -> tuple[str | None, int]:
    (size,) = _I16.unpack_from(frame, pos)
    pos += 2
    if size == -1:
        return None, pos
    if size < 0:
        raise _Unsure()
    return _text(frame, pos, size), pos + size


def _compact(frame: bytes, pos: int) -> tuple[str | None, int]:
    first = frame[pos]
    if first >= 0x80:                  # a long string: leave it to kio
        raise _Unsure()
    if first == 0:
        return None, pos + 1
    size = first - 1
    return _text(frame, pos + 1, size), pos + 1 + size


def _no_tags(frame: bytes, pos: int) -> int:
    if frame[pos] != 0:               # tagged fields present: leave them to kio
        raise _Unsure()
    return pos + 1
