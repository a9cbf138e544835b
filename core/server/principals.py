"""Principals of connections that do not authenticate with SASL, as Kafka's DefaultKafkaPrincipalBuilder names them.

PLAINTEXT gives ``User:ANONYMOUS``.  SSL gives ``User:<subject DN>`` of the client
certificate, written as Java's ``X500Principal.getName()`` (RFC 2253): RDNs from the last
to the first, keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as its
OID with the DER value in hex; ``User:ANONYMOUS`` when no certificate was presented.
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


def _der_value(attribute: x509.NameAttribute) -> bytes:
    raw = attribute.value.encode("utf-8") if isinstance(attribute.value, str) else bytes(attribute.value)
    tag = attribute._type.value  # the ASN.1 string type the certificate used
    size = len(raw)
    if size < 0x80:
        length = bytes([size])
    else:
        body = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(body)]) + body
    return bytes([tag]) + length + raw


def _attribute(attribute: x509.NameAttribute) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    if keyword is None:
        return f"{attribute.oid.dotted_string}=#{_der_value(attribute).hex()}"
    text = attribute.rfc4514_string()
    return keyword + text[text.index("="):]


def dn_rfc2253(name: x509.Name) -> str:
    """``name`` as Java's X500Principal.getName() prints it (RFC 2253)."""
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(name.rdns))


def tls_principal(ssl_object: ssl.SSLObject | None) -> str:
    """``User:<subject DN>`` of the peer's certificate, or User:ANONYMOUS without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return "User:" + dn_rfc2253(x509.load_der_x509_certificate(der).subject)
