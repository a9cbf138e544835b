"""The TLS tests' certificate authority: the demo's throwaway CA plus a client certificate.

    ca = make_ca(directory)          # ca.pem, server.pem/.key (SAN 127.0.0.1, localhost), client.pem/.key
    ca.client_context(with_cert=True)   # a Python client that trusts the CA and presents its certificate

The client certificate's subject is ``CLIENT_DN`` as Kafka prints it (RFC 2253, last RDN first).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, fields
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from secmeta.consumers import demo_ca
from secmeta.consumers.demo_ca import DemoCA

__all__ = ["CLIENT_DN", "TestCA", "make_ca"]

#: The client certificate's subject as Kafka prints it (RFC 2253, last RDN first).
CLIENT_DN = "CN=client-1,OU=tests,O=secmeta"


@dataclass(frozen=True)
class TestCA(DemoCA):
    """The demo's CA and server certificate, and a client certificate with subject ``CLIENT_DN``."""

    __test__ = False  # not a pytest class

    client_cert: Path
    client_key: Path

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        """A client-side context trusting the CA (hostname checked), optionally presenting the client cert."""
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        if with_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def make_ca(directory: str | Path) -> TestCA:
    """The demo's CA under ``directory``, plus client.pem/client.key."""
    ca = demo_ca.make_ca(directory)
    # RDNs in certificate order O, OU, CN: Kafka prints them last first (CN=...,OU=...,O=...).
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "secmeta"),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "tests"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "client-1")])
    cert, key = ca.issue("client", subject, ExtendedKeyUsageOID.CLIENT_AUTH)
    return TestCA(**{f.name: getattr(ca, f.name) for f in fields(ca)}, client_cert=cert, client_key=key)
