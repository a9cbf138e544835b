"""A throwaway certificate authority for ``secmeta demo``'s SASL_SSL step: never for production.

    ca = make_ca(directory)          # ca.pem/.key, server.pem/.key (SAN 127.0.0.1, localhost)
    ServerConfig(ssl=ca.server_ssl())
    {"ssl.ca.location": str(ca.ca_cert)}    # what a librdkafka client needs to trust it
    ca.issue("client", subject, ExtendedKeyUsageOID.CLIENT_AUTH)   # one more certificate it signs

EC P-256 keys, valid from five minutes ago for two days, written unencrypted (mode 0600)
beside the certificates.  librdkafka checks the broker's host name, so the server
certificate names 127.0.0.1 (IP SAN) and localhost.  The TLS tests and the serve benchmark
use it too (tests/testca.py adds a client certificate for mutual TLS).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from secmeta.core.server.listeners import ClientAuth, SslConfig

__all__ = ["DemoCA", "make_ca"]


@dataclass(frozen=True)
class DemoCA:
    """PEM files of a throwaway CA and of a server certificate it signed for 127.0.0.1/localhost."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path

    def server_ssl(self, client_auth: ClientAuth | str = ClientAuth.NONE) -> SslConfig:
        """The server's TLS settings: its certificate and key, this CA for client certificates."""
        auth = client_auth if isinstance(client_auth, ClientAuth) else ClientAuth.parse(client_auth)
        return SslConfig(str(self.server_cert), str(self.server_key), str(self.ca_cert), auth)

    def issue(self, stem: str, subject: x509.Name, usage: ObjectIdentifier,
              names: Sequence[x509.GeneralName] = ()) -> tuple[Path, Path]:
        """Sign a certificate for ``subject`` (extended key ``usage``, subject alternative ``names``);
        write ``<stem>.pem`` and ``<stem>.key`` in the directory and return their paths."""
        signing_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        issuer = x509.load_pem_x509_certificate(self.ca_cert.read_bytes()).subject
        key = ec.generate_private_key(ec.SECP256R1())
        extensions: list[x509.ExtensionType] = [x509.ExtendedKeyUsage([usage])]
        if names:
            extensions.append(x509.SubjectAlternativeName(list(names)))
        cert, key_path = self.directory / f"{stem}.pem", self.directory / f"{stem}.key"
        cert.write_bytes(_certificate(subject, issuer, key.public_key(), signing_key, ca=False,
                                      extensions=extensions).public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert, key_path


def _name(*pairs: tuple[ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in pairs])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _certificate(subject: x509.Name, issuer: x509.Name, public_key, signing_key, *, ca: bool,
                 extensions: Sequence[x509.ExtensionType] = ()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def make_ca(directory: str | Path) -> DemoCA:
    """Write ca.pem/ca.key and server.pem/server.key (SAN IP 127.0.0.1, DNS localhost) under ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name((NameOID.COMMON_NAME, "secmeta throwaway CA"), (NameOID.ORGANIZATION_NAME, "secmeta"))
    ca_cert = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True,
                           extensions=[x509.KeyUsage(False, False, False, False, False, True, True, False, False)])
    ca = DemoCA(directory, directory / "ca.pem", directory / "ca.key", directory / "server.pem",
                directory / "server.key")
    ca.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca.ca_key, ca_key)
    ca.issue("server", _name((NameOID.COMMON_NAME, "localhost")), ExtendedKeyUsageOID.SERVER_AUTH,
             [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    return ca
