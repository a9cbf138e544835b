"""A throwaway certificate authority for the demo, benchmarks and tests: never for production.

    ca = make_ca(directory)          # ca.pem, server.pem/.key (SAN 127.0.0.1, localhost), client.pem/.key
    ServerConfig(ssl=ca.server_ssl())
    {"ssl.ca.location": str(ca.ca_cert)}    # what a librdkafka client needs to trust it

EC P-256 keys, valid from five minutes ago for two days, written unencrypted beside the
certificates.  librdkafka checks the broker's host name, so the server certificate names
127.0.0.1 (IP SAN) and localhost.  The client certificate's subject is ``CLIENT_DN`` as
Kafka prints it (RFC 2253, last RDN first).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from secmeta.core.server.listeners import ClientAuth, SslConfig

__all__ = ["CLIENT_DN", "TestCA", "make_ca"]

#: The client certificate's subject as Kafka prints it (RFC 2253, last RDN first).
CLIENT_DN = "CN=client-1,OU=tests,O=secmeta"


@dataclass(frozen=True)
class TestCA:
    """PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate."""

    __test__ = False  # not a pytest class

    directory: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_dn: str = CLIENT_DN

    def server_ssl(self, client_auth: ClientAuth | str = ClientAuth.NONE) -> SslConfig:
        """The server's TLS settings: its certificate and key, this CA for client certificates."""
        auth = client_auth if isinstance(client_auth, ClientAuth) else ClientAuth.parse(client_auth)
        return SslConfig(str(self.server_cert), str(self.server_key), str(self.ca_cert), auth)

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        """A client-side context trusting the CA (hostname checked), optionally presenting the client cert."""
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        if with_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def _name(*pairs: tuple[Any, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in pairs])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _certificate(subject: x509.Name, issuer: x509.Name, public_key, signing_key, *, ca: bool,
                 extensions: list | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    for extension in extensions or []:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def make_ca(directory: str | Path) -> TestCA:
    """Write ca.pem, server.pem/server.key (SAN IP 127.0.0.1, DNS localhost) and client.pem/client.key."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name((NameOID.COMMON_NAME, "secmeta test CA"), (NameOID.ORGANIZATION_NAME, "secmeta"))
    ca_cert = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True,
                           extensions=[x509.KeyUsage(False, False, False, False, False, True, True, False, False)])
    paths = {n: directory / n for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}
    paths["ca.pem"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _certificate(
        _name((NameOID.COMMON_NAME, "localhost")), ca_name, server_key.public_key(), ca_key, ca=False,
        extensions=[x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                 x509.DNSName("localhost")]),
                    x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])])
    paths["server.pem"].write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(paths["server.key"], server_key)

    client_key = ec.generate_private_key(ec.SECP256R1())
    # RDNs in certificate order O, OU, CN: Kafka prints them last first (CN=...,OU=...,O=...).
    client_cert = _certificate(
        _name((NameOID.ORGANIZATION_NAME, "secmeta"), (NameOID.ORGANIZATIONAL_UNIT_NAME, "tests"),
              (NameOID.COMMON_NAME, "client-1")),
        ca_name, client_key.public_key(), ca_key, ca=False,
        extensions=[x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])])
    paths["client.pem"].write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(paths["client.key"], client_key)
    return TestCA(directory, paths["ca.pem"], paths["server.pem"], paths["server.key"],
                  paths["client.pem"], paths["client.key"])
