"""Kafka's ``listeners`` / ``advertised.listeners`` settings and the TLS contexts they need.

``PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094``: each listener is named after its
security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); an empty host binds every
interface, port 0 binds an ephemeral port (tests).  ``ssl_context`` builds the server's
context from PEM files, with Kafka's ``ssl.client.auth`` (none, requested, required).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from secmeta.core.errors import SecmetaError

if TYPE_CHECKING:  # ssl is imported when a TLS context is made, not when the CLI registers `serve`
    import ssl

__all__ = [
    "ClientAuth",
    "Listener",
    "ListenerError",
    "SecurityProtocol",
    "SslConfig",
    "parse_advertised",
    "parse_listeners",
    "ssl_context",
]


class ListenerError(SecmetaError, ValueError):
    """A listeners string or TLS setting that cannot be used; the message names the bad part."""


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class ClientAuth(Enum):
    """Kafka's ssl.client.auth: whether the server asks TLS clients for a certificate."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"

    @classmethod
    def parse(cls, text: str) -> ClientAuth:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ListenerError(f"ssl client auth {text!r} is not one of none, requested, required") from None


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: its name (= its security protocol), bind host and port."""

    name: str
    protocol: SecurityProtocol
    host: str       # "" = every interface
    port: int       # 0 = ephemeral

    def __str__(self) -> str:
        return f"{self.name}://{_host_text(self.host)}:{self.port}"


_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<hostport>.*)$")


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _parse_entry(entry: str, what: str) -> tuple[str, str, int]:
    match = _ENTRY.match(entry)
    if not match:
        raise ListenerError(f"{what} entry {entry!r} is not of the form PROTOCOL://HOST:PORT")
    name, hostport = match["name"].upper(), match["hostport"]
    if hostport.startswith("["):
        host, sep, rest = hostport[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ListenerError(f"{what} entry {entry!r}: an IPv6 host must be written [ADDRESS]:PORT")
        port_text = rest[1:]
        _check_ip(host, entry, what, version=6)
    else:
        host, sep, port_text = hostport.rpartition(":")
        if not sep:
            raise ListenerError(f"{what} entry {entry!r} has no port (expected PROTOCOL://HOST:PORT)")
        if host and not _is_ip(host) and not _HOSTNAME.match(host):
            raise ListenerError(f"{what} entry {entry!r}: host {host!r} is not an IP address or host name")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenerError(f"{what} entry {entry!r}: port {port_text!r} is not a number from 0 to 65535")
    return name, host, int(port_text)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _check_ip(host: str, entry: str, what: str, *, version: int) -> None:
    try:
        if ipaddress.ip_address(host).version == version:
            return
    except ValueError:
        pass
    raise ListenerError(f"{what} entry {entry!r}: host {host!r} is not an IPv{version} address")


def _entries(text: str, what: str) -> list[str]:
    entries = [e.strip() for e in (text or "").split(",")]
    if not any(entries):
        raise ListenerError(f"{what} is empty: give e.g. PLAINTEXT://127.0.0.1:9092")
    if not all(entries):
        raise ListenerError(f"{what} {text!r} has an empty entry")
    return entries


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """The listeners of a Kafka ``listeners`` string, in order."""
    listeners: list[Listener] = []
    for entry in _entries(text, "listeners"):
        name, host, port = _parse_entry(entry, "listeners")
        try:
            protocol = SecurityProtocol(name)
        except ValueError:
            names = ", ".join(p.value for p in SecurityProtocol)
            raise ListenerError(f"listeners entry {entry!r}: {name} is not a security protocol ({names})") from None
        if any(other.name == name for other in listeners):
            raise ListenerError(f"listeners entry {entry!r}: listener {name} is given twice")
        if port and any(other.port == port for other in listeners):
            raise ListenerError(f"listeners entry {entry!r}: port {port} is used by another listener")
        listeners.append(Listener(name, protocol, host, port))
    return tuple(listeners)


def parse_advertised(text: str | None, listeners: tuple[Listener, ...]) -> dict[str, tuple[str, int]]:
    """Listener name -> advertised (host, port) from ``advertised.listeners`` (None: none given).

    Every advertised name must be a listener; a listener not named keeps its bound address.
    """
    if text is None:
        return {}
    names = {listener.name for listener in listeners}
    out: dict[str, tuple[str, int]] = {}
    for entry in _entries(text, "advertised listeners"):
        name, host, port = _parse_entry(entry, "advertised listeners")
        if name not in names:
            raise ListenerError(f"advertised listeners entry {entry!r}: there is no listener {name}")
        if name in out:
            raise ListenerError(f"advertised listeners entry {entry!r}: listener {name} is given twice")
        if not host or host in ("0.0.0.0", "::"):
            raise ListenerError(f"advertised listeners entry {entry!r}: a client cannot connect to host {host!r}")
        if port == 0:
            raise ListenerError(f"advertised listeners entry {entry!r}: port 0 cannot be advertised")
        out[name] = (host, port)
    return out


@dataclass(frozen=True, slots=True)
class SslConfig:
    """PEM files of the server's certificate and key, and the CA that client certificates must chain to."""

    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE


def ssl_context(config: SslConfig | None) -> ssl.SSLContext:
    """The server-side TLS context of ``config`` (TLS 1.2 or newer)."""
    import ssl

    if config is None or not config.cert:
        raise ListenerError("a TLS listener (SSL, SASL_SSL) needs --ssl-cert (and --ssl-key unless the cert file holds the key)")
    for flag, path in (("--ssl-cert", config.cert), ("--ssl-key", config.key), ("--ssl-ca", config.ca)):
        if path is not None and not Path(path).is_file():
            raise ListenerError(f"{flag} {path}: no such file")
    if config.client_auth is not ClientAuth.NONE and not config.ca:
        raise ListenerError(f"ssl client auth {config.client_auth.value} needs --ssl-ca to verify client certificates")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.cert, config.key)
    except (ssl.SSLError, OSError) as exc:
        raise ListenerError(f"cannot load the server certificate {config.cert} / key {config.key}: {exc}") from None
    if config.ca:
        try:
            context.load_verify_locations(cafile=config.ca)
        except (ssl.SSLError, OSError) as exc:
            raise ListenerError(f"cannot load the CA file {config.ca}: {exc}") from None
    context.verify_mode = {ClientAuth.NONE: ssl.CERT_NONE, ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
                           ClientAuth.REQUIRED: ssl.CERT_REQUIRED}[config.client_auth]
    return context
