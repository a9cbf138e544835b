"""Principals of connections that do not authenticate with SASL, as Kafka's DefaultKafkaPrincipalBuilder names them.

PLAINTEXT gives ``User:ANONYMOUS``.  SSL gives ``User:<subject DN>`` of the client
certificate, written as Java's ``X500Principal.getName()`` (RFC 2253): RDNs from the last
to the first, keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as its
OID with the DER value in hex; ``User:ANONYMOUS`` when no certificate was presented.
Kafka's DefaultKafkaPrincipalBuilder passes that name through SslPrincipalMapper, whose
default rule keeps it as it is.

A value is escaped as OpenJDK's ``sun.security.x509.AVA.toRFC2253String`` escapes it, which is
not RFC 4514's minimum (what cryptography's ``rfc4514_string`` writes): each of ``,=+<>#;"\\``
is preceded by a backslash wherever it stands ("this implementation also recognizes '=' and '#'
as characters which need escaping"), a NUL is written ``\00``, every other character as it is,
and then every leading and every trailing space or carriage return is preceded by a backslash
(all of a run, not only the first or last).
"""

from __future__ import annotations

import ssl

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["ANONYMOUS", "dn_rfc2253", "tls_principal"]

ANONYMOUS = "User:ANONYMOUS"

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID",
}


def _tlv(der: bytes, at: int) -> tuple[int, int]:
    """(start, end) of the value of the DER element at ``at``."""
    length, start = der[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(der[start:start + count], "big"), start + count
    return start, start + length


def _encoded_values(name: x509.Name) -> list[dict[str, list[bytes]]]:
    """Per RDN, OID -> the DER of its attribute values (tag, length and content as the certificate has
    them), read from the name's public DER encoding: Name ::= SEQUENCE OF SET OF SEQUENCE {oid, value}."""
    der = name.public_bytes()
    rdns = []
    at, end = _tlv(der, 0)
    while at < end:
        set_at, set_end = _tlv(der, at)
        values: dict[str, list[bytes]] = {}
        while set_at < set_end:
            attr_at, attr_end = _tlv(der, set_at)
            _, oid_end = _tlv(der, attr_at)
            values.setdefault(_oid_text(der[attr_at:oid_end]), []).append(der[oid_end:attr_end])
            set_at = attr_end
        rdns.append(values)
        at = set_end
    return rdns


def _oid_text(element: bytes) -> str:
    """The dotted text of a DER OBJECT IDENTIFIER element."""
    content = element[_tlv(element, 0)[0]:]
    arcs, value = [], 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in (first, arcs[0] - 40 * first, *arcs[1:]))


#: AVA.toRFC2253String's ``escapees``: each is preceded by a backslash wherever it stands in a value.
_ESCAPEES = frozenset(',=+<>#;"\\')
#: What it counts as leading or trailing whitespace, each character of which is preceded by a backslash.
_EDGE_WHITESPACE = frozenset(" \r")


def _value_text(value: str) -> str:
    """``value`` escaped as Java's AVA.toRFC2253String escapes a string value (module docstring)."""
    chars = ["\\" + c if c in _ESCAPEES else "\\00" if c == "\0" else c for c in value]
    lead = next((i for i, c in enumerate(chars) if c not in _EDGE_WHITESPACE), len(chars))
    trail = next((i for i in range(len(chars) - 1, -1, -1) if chars[i] not in _EDGE_WHITESPACE), -1)
    return "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(chars))


def _attribute(attribute: x509.NameAttribute, encoded: dict[str, list[bytes]]) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    if keyword is None:
        return f"{attribute.oid.dotted_string}=#{encoded[attribute.oid.dotted_string].pop(0).hex()}"
    value = attribute.value
    return f"{keyword}={_value_text(value if isinstance(value, str) else value.decode())}"


def dn_rfc2253(name: x509.Name) -> str:
    """``name`` as Java's X500Principal.getName() prints it (RFC 2253)."""
    encoded = _encoded_values(name)
    return ",".join("+".join(_attribute(a, values) for a in rdn)
                    for rdn, values in reversed(list(zip(name.rdns, encoded, strict=True))))


def tls_principal(ssl_object: ssl.SSLObject | None) -> str:
    """``User:<subject DN>`` of the peer's certificate, or User:ANONYMOUS without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return "User:" + dn_rfc2253(x509.load_der_x509_certificate(der).subject)
