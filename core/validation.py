"""The one validation layer at the public API boundary: every name, host, enum and secret a caller hands in.

The store's control functions (which serve the Python API, the CLI and the protocol server alike)
call these before anything is logged, so a value that passes here can be stored, shown and matched;
one that does not raises ``FieldError`` (an InvalidValueError) naming the field and the problem, and
the caller turns it into its per-item ``ApiError(INVALID_REQUEST)`` or request-level exception.

Rules (stricter than Kafka where noted in the README's list of differences):

- text (principals, resource names, user names, token owners and renewers, hosts, request ids): a
  ``str`` of valid UTF-8 (no lone surrogate), no control character (Unicode category Cc: C0, DEL,
  C1), no invisible format character (``unseen_character``: bidirectional controls such as U+202E,
  zero-width characters, line separators), at most ``MAX_NAME_BYTES`` (1,024) bytes encoded; a
  string that only selects (a filter, a question: ``selects=True``) may hold format characters, to
  name what an older log holds. Kafka bounds only the protocol string
  (32,767 bytes) and topic names (249 characters); nothing in Kafka needs a longer name than 1,024.
- principals: ``Type:Name`` with both parts non-empty, split at the first colon (Kafka's
  SecurityUtils.parseKafkaPrincipal); ``principal_parts`` is the one parser, ``principal_text`` joins.
- 64-bit integers (periods, lifetimes, timestamps): an int, never a bool, inside Kafka's long
  (``secmeta.events.types.is_int64``, the stored format's range).
- ACL hosts: ``*``, an IPv4 or IPv6 address written canonically (as ``ipaddress`` prints it: no
  leading zeros, lower-case compressed IPv6, no zone index, IPv4-mapped IPv6 written as the IPv4
  address Java reports for such a client), or (our extension) a canonical CIDR
  range. Kafka stores any string and matches it literally against the client's address, so a host
  name or a non-canonical spelling is an ACL that can never match; we refuse it.
- strings a question takes (authorize's names): any ``str`` (``string``); a name no ACL can hold
  matches none.
- enums: the enum itself, its name in any case and spelling Kafka's tools use (``IDEMPOTENT_WRITE``,
  ``IdempotentWrite``, ``idempotent-write``) or its code; never a bool (``enum_value``, on the stored
  enums' own ``parse``). ``enum_or_unknown`` reads anything else as UNKNOWN, for a request whose
  unknown value is its own error (an unsupported SCRAM mechanism). Nothing else calls ``parse``.
- SCRAM iteration counts: Kafka's bounds, ``secmeta.core.auth.scram`` MIN_ITERATIONS/MAX_ITERATIONS.
- errors: ``reraised_as(SomeError)`` turns a FieldError into the error a caller's API raises, with
  the same message.
- secrets (passwords, salts, salted passwords): ``bytes``, or ``str`` encoded as UTF-8; a str with
  a lone surrogate (an undecodable byte from argv, a file or stdin) is refused, and a password must
  be UTF-8 (Kafka's passwords are strings); a failure never carries the value, not even as the
  context of the error.
- client quota values: Kafka's ClientQuotaControlManager.validateQuotaKeyValue (greater than 0; for
  a LONG or INT key no larger than its maximum and integral within 1e-6); NaN and infinity are
  refused (Kafka stores NaN, and infinity for DOUBLE keys).
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import TypeVar

from secmeta.events.errors import InvalidValueError
from secmeta.events.types import INT64_MAX, INT64_MIN, is_int64

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_NAME_BYTES",
    "FieldError",
    "acl_host",
    "enum_or_unknown",
    "enum_value",
    "int64",
    "is_int64",
    "nonempty_text",
    "optional_text",
    "principal",
    "principal_parts",
    "principal_text",
    "quota_value",
    "reraised_as",
    "secret_bytes",
    "string",
    "text",
    "unseen_character",
]

MAX_NAME_BYTES = 1024
_SHOWN = 64  # characters of a refused value quoted in an error
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]))

E = TypeVar("E", bound=IntEnum)


class FieldError(InvalidValueError):
    """A value refused at the API boundary; ``field`` names it and the message says why."""

    def __init__(self, field: str, problem: str):
        self.field = field
        super().__init__(f"{field} {problem}")


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def string(value: object, field: str) -> str:
    """``value`` if it is a ``str`` of any content (a question's argument: a name no ACL can hold
    matches none); else FieldError naming ``field``."""
    if not isinstance(value, str):
        raise FieldError(field, f"must be a string, not {type(value).__name__}")
    return value


def text(value: object, field: str, *, max_bytes: int = MAX_NAME_BYTES, selects: bool = False) -> str:
    """``value`` if it is a string secmeta can store and show; else FieldError naming ``field``.

    ``selects``: the string only selects what is stored (a filter, a question), so it may name what an
    older log holds: invisible format characters are let through (``unseen_character`` is not applied).
    """
    if type(value) is str and value.isascii() and value.isprintable() and len(value) <= max_bytes:
        return value    # printable ASCII (one pass each in C): no surrogate, control or unseen character, a byte each
    string(value, field)
    if _SURROGATE.search(value):
        raise FieldError(field, f"{_shown(value)} is not valid UTF-8 (it holds a lone surrogate)")
    control = _CONTROL.search(value)
    if control:
        raise FieldError(field, f"{_shown(value)} contains the control character U+{ord(control.group()):04X}")
    if not selects:
        unseen = unseen_character(value)
        if unseen is not None:
            raise FieldError(field, f"contains {unseen}")
    if len(value) * 4 > max_bytes and len(value.encode("utf-8")) > max_bytes:
        raise FieldError(field, f"is {len(value.encode('utf-8'))} bytes long; the limit is {max_bytes} bytes")
    return value


def unseen_character(value: str) -> str | None:
    """The first character of ``value`` that changes how a name looks without being seen, described
    (``U+202E (RIGHT-TO-LEFT OVERRIDE), a bidirectional control``), or None.

    Refused in names: Unicode's invisible format characters (category Cf: the bidirectional controls
    U+202A-202E, U+2066-2069, U+200E/F, U+061C, and U+200B-200D, U+2060, U+FEFF, U+00AD, tags...)
    and the line and paragraph separators U+2028/U+2029 (Zl, Zp), which can reorder, hide or break
    what history and ``--list`` display.  Control characters (Cc) are ``text``'s own check.
    """
    if value.isprintable():  # the usual name: one pass in C
        return None
    for char in value:
        category = unicodedata.category(char)
        if category in ("Cf", "Zl", "Zp"):
            kind = ("a bidirectional control" if char in _BIDI_CONTROLS else
                    "an invisible format character" if category == "Cf" else "a line separator")
            return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')}), {kind}"
    return None


def optional_text(value: object, field: str, *, selects: bool = False) -> str | None:
    """None, or ``text(value, field)``."""
    return None if value is None else text(value, field, selects=selects)


def nonempty_text(value: object, field: str, *, selects: bool = False) -> str:
    """``text(value, field)`` that is not empty."""
    if text(value, field, selects=selects) == "":
        raise FieldError(field, "must not be empty")
    return value  # type: ignore[return-value]


def principal_parts(value: object, field: str = "principal", *, selects: bool = False) -> tuple[str, str]:
    """(type, name) of a ``Type:Name`` principal that passes ``text``, split at the first colon (so
    ``User:a:b`` is ``("User", "a:b")``, as Kafka's SecurityUtils.parseKafkaPrincipal splits it)."""
    kind, colon, name = text(value, field, selects=selects).partition(":")
    if not (colon and kind and name):
        raise FieldError(field, f"{_shown(value)} is not of the form Type:Name")  # type: ignore[arg-type]
    return kind, name


def principal(value: object, field: str = "principal", *, selects: bool = False) -> str:
    """A ``Type:Name`` principal that passes ``text`` (``principal_parts``)."""
    principal_parts(value, field, selects=selects)
    return value  # type: ignore[return-value]


def principal_text(kind: str | None, name: str | None) -> str:
    """``Type:Name`` of its parts (KafkaPrincipal.toString); None reads as empty."""
    return f"{kind or ''}:{name or ''}"


def int64(value: object, field: str) -> int:
    """``value`` if it is an int (never a bool) inside Kafka's signed 64-bit long."""
    if not is_int64(value):
        raise FieldError(field, f"must be a 64-bit integer, not {value!r}")
    return value  # type: ignore[return-value]


@contextmanager
def reraised_as(error: type[Exception]) -> Iterator[None]:
    """Inside the block, a FieldError is raised as ``error`` with its message (the API's own error type)."""
    try:
        yield
    except FieldError as exc:
        raise error(str(exc)) from None


def acl_host(value: object, field: str = "host") -> str:
    """'*', a canonical IPv4/IPv6 address or a canonical CIDR range."""
    host = text(value, field)
    if host == "*":
        return host
    if not host:
        raise FieldError(field, "must not be empty (use '*' for any host)")
    if "%" in host:
        raise FieldError(field, f"{_shown(host)} has a zone index; ACL hosts are addresses without one")
    try:
        parsed = ipaddress.ip_network(host, strict=True) if "/" in host else ipaddress.ip_address(host)
    except ValueError:
        what = "a CIDR range (write the network address, e.g. 10.0.0.0/8)" if "/" in host else (
            "an IP address (ACLs match the client's address, never a host name)")
        raise FieldError(field, f"{_shown(host)} is not '*' or {what}") from None
    mapped = getattr(parsed, "ipv4_mapped", None)
    if mapped is not None:  # Java (and so Kafka) sees such a client as its IPv4 address
        raise FieldError(field, f"{_shown(host)} is an IPv4-mapped IPv6 address: write {str(mapped)!r}")
    if str(parsed) != host:
        raise FieldError(field, f"{_shown(host)} is not written canonically: write {str(parsed)!r}")
    return host


def enum_value(enum_type: type[E], value: object, field: str, *, concrete: bool = False) -> E:
    """``value`` as a member of ``enum_type``: the member, its name (any case, Kafka's spellings) or code.

    ``concrete`` refuses UNKNOWN and ANY (a value a request must name exactly).
    """
    if isinstance(value, enum_type):
        member = value
    elif isinstance(value, bool) or not isinstance(value, str | int):
        raise FieldError(field, f"must be a {enum_type.__name__} or its name, not {type(value).__name__}")
    else:
        try:
            member = enum_type.parse(value)  # type: ignore[attr-defined]
        except ValueError as exc:
            raise FieldError(field, f"is not valid: {exc}") from None
    if concrete and member.name in ("UNKNOWN", "ANY"):
        raise FieldError(field, f"must be one concrete {enum_type.__name__}, not {member.name}")
    return member


def enum_or_unknown(enum_type: type[E], value: object) -> E:
    """``value`` as a member of ``enum_type`` (as ``enum_value`` reads it), or UNKNOWN for anything else:
    Kafka's fromString / fromCode, for a request whose unknown value is an error of its own (an
    unsupported SCRAM mechanism) rather than a malformed field."""
    try:
        return enum_value(enum_type, value, enum_type.__name__)
    except FieldError:
        return enum_type(0)


def secret_bytes(value: object, field: str, *, utf8: bool = False) -> bytes:
    """A password, salt or salted password as bytes (a str as UTF-8); errors never hold the value.

    A str holding a lone surrogate (``os.fsdecode`` and argv make one of each byte that is not
    UTF-8) is refused; with ``utf8`` (a password: Kafka's are Java strings) so are bytes that are
    not UTF-8.  Checked, never caught: a UnicodeError carries the whole value in its ``object``.
    """
    if isinstance(value, bytes | bytearray):
        if utf8 and not _is_utf8(value):
            raise FieldError(field, _NOT_UTF8)
        return bytes(value)
    if not isinstance(value, str):
        raise FieldError(field, f"must be bytes, not {type(value).__name__}")
    if _SURROGATE.search(value):
        raise FieldError(field, _NOT_UTF8)
    return value.encode("utf-8")


_NOT_UTF8 = "is not valid UTF-8 (it holds a byte that is not UTF-8, or a lone surrogate)"


def _is_utf8(data: bytes | bytearray) -> bool:
    """Whether ``data`` decodes as UTF-8; the UnicodeDecodeError (holding ``data``) goes no further."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def quota_value(value: object, key: str, integral_max: int | None) -> float:
    """A client quota's value as a float, in Kafka's words when refused (``integral_max``: None for a DOUBLE key)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(f"Quota {key}", f"must be a number, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise FieldError(f"Quota {key}", f"must be a finite number, not {value}")
    if value <= 0:
        raise FieldError(f"Quota {key}", "must be greater than 0")
    if integral_max is not None:
        if value > float(integral_max):  # as Java compares: the LONG maximum as a double is 2**63
            kind = "an INT" if integral_max < 2**31 else "a LONG"
            raise FieldError(f"Proposed value for {key}", f"is too large for {kind}.")
        if abs(math.fmod(value, 1.0)) > 1e-6:
            raise FieldError(key, "cannot be a fractional value.")
    return value
