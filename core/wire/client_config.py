"""Client settings as Kafka client properties, read from a ``--command-config`` file.

The keys are Kafka's (and librdkafka's, where they agree): ``bootstrap.servers``,
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
``sasl.jaas.config`` (ScramLoginModule's ``username``, ``password`` and ``tokenauth``
options, as Kafka's ScramLoginModule and ScramSaslClientCallbackHandler take them),
``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (``https``, the default,
checks the broker's host name; empty or ``none`` does not), ``client.id``,
``request.timeout.ms`` and ``socket.connection.setup.timeout.ms``.  Other keys are
ignored, as Kafka's tools ignore settings meant for other clients.

The file format is Java's ``.properties`` (java.util.Properties.load, read by the
javaproperties library; UTF-8 where Java reads ISO-8859-1): ``key=value``, ``key: value`` or
``key value``, ``#``/``!`` comments, backslash line continuations and escapes.  This is the one
parser of client settings: the Kafka jobs (secmeta.consumers.kafka.client_config) read theirs with it.
Passwords never show in reprs or error messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from secmeta.core import validation
from secmeta.core.errors import InvalidValueError

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "SECURITY_PROTOCOLS",
    "ClientConfig",
    "ClientConfigError",
    "load_properties",
    "parse_jaas_config",
    "parse_properties",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class ClientConfigError(InvalidValueError):
    """Client settings that cannot be used (never quotes a secret); the one such error, Kafka jobs' included."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to reach and log in to a broker."""

    bootstrap_servers: tuple[str, ...]
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    token_auth: bool = False
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    client_id: str = "secmeta-admin"
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, bootstrap_servers: str | None = None) -> ClientConfig:
        """Settings from Kafka client properties; ``bootstrap_servers`` (e.g. --bootstrap-server) wins."""
        servers = bootstrap_servers or props.get("bootstrap.servers")
        if not servers:
            raise ClientConfigError("no broker given: pass --bootstrap-server HOST:PORT or set bootstrap.servers")
        addresses = tuple(s.strip() for s in servers.split(",") if s.strip())
        for address in addresses:
            split_address(address)
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ClientConfigError(f"unknown security.protocol {protocol!r}; use one of {', '.join(SECURITY_PROTOCOLS)}")
        jaas = parse_jaas_config(props["sasl.jaas.config"]) if props.get("sasl.jaas.config") else {}
        mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
        mechanism = mechanism.strip().upper() if mechanism else None
        username = props.get("sasl.username") or jaas.get("username")
        password = props.get("sasl.password") or jaas.get("password")
        if protocol.startswith("SASL_"):
            if mechanism is None:
                raise ClientConfigError(f"security.protocol {protocol} needs sasl.mechanism "
                                        f"({' or '.join(SASL_MECHANISMS)})")
            if mechanism not in SASL_MECHANISMS:
                raise ClientConfigError(f"unsupported sasl.mechanism {mechanism!r}; use {' or '.join(SASL_MECHANISMS)}")
            if not username or password is None:
                raise ClientConfigError(f"security.protocol {protocol} needs sasl.username and sasl.password "
                                        "(or username and password in sasl.jaas.config)")
            with validation.reraised_as(ClientConfigError):  # refused here, before any connection, never quoted
                validation.secret_bytes(password, "sasl.password" if props.get("sasl.password") else
                                        "the password in sasl.jaas.config", utf8=True)
        identification = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if identification not in ("https", "", "none"):
            raise ClientConfigError(f"unknown ssl.endpoint.identification.algorithm {identification!r}; use https or none")
        return cls(
            bootstrap_servers=addresses,
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
            token_auth=str(jaas.get("tokenauth", "false")).lower() == "true",
            ssl_ca_location=_path(props.get("ssl.ca.location")),
            ssl_certificate_location=_path(props.get("ssl.certificate.location")),
            ssl_key_location=_path(props.get("ssl.key.location")),
            ssl_key_password=props.get("ssl.key.password"),
            ssl_check_hostname=identification == "https",
            client_id=props.get("client.id", "secmeta-admin"),
            request_timeout_s=_millis(props, "request.timeout.ms", 30000) / 1000,
            connect_timeout_s=_millis(props, "socket.connection.setup.timeout.ms", 10000) / 1000,
        )

    @classmethod
    def load(cls, bootstrap_servers: str | None, command_config: str | os.PathLike | None = None) -> ClientConfig:
        """Settings for a CLI run: --bootstrap-server plus the optional --command-config file."""
        props = load_properties(command_config) if command_config else {}
        return cls.from_properties(props, bootstrap_servers=bootstrap_servers)


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (``[::1]:9092`` for IPv6)."""
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClientConfigError(f"bad broker address {address!r}: expected HOST:PORT")
    return host, int(port)


def _path(value: str | None) -> str | None:
    return os.path.expanduser(value.strip()) if value and value.strip() else None


def _millis(props: Mapping[str, str], key: str, default: int) -> int:
    text = props.get(key)
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise ClientConfigError(f"{key} must be a positive number of milliseconds, got {text[:20]!r}")
    return int(text)


# -- java.util.Properties ---------------------------------------------------------------


def load_properties(path: str | os.PathLike, source: str = "client settings") -> dict[str, str]:
    """Read a Java ``.properties`` file (UTF-8); errors name ``source`` and the file, never a value."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ClientConfigError(f"cannot read {source} {name!r}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:  # raised outside the except: the UnicodeDecodeError holds the file's bytes, passwords too
        raise ClientConfigError(f"{source} {name!r} is not UTF-8 text")
    return parse_properties(text, source=f"{source} {name!r}")


def parse_properties(text: str, source: str = "client settings") -> dict[str, str]:
    """Parse Java ``.properties`` text (java.util.Properties.load, by javaproperties); later keys win.

    A bad ``\\uXXXX`` escape is named by ``source`` and line number only: the escape is part of a value.
    """
    import javaproperties  # here, not when the CLI starts: only --command-config files need it
    from javaproperties.util import ascii_splitlines

    props: dict[str, str] = {}
    line = 1
    elements = javaproperties.parse(text)
    while True:
        try:
            element = next(elements, None)
        except javaproperties.InvalidUEscapeError:
            element = False  # raised outside the except: the library's error quotes the escape, a password's too
        if element is False:
            raise ClientConfigError(f"{source}, line {line}: invalid \\u escape (\\u must be followed by "
                                    "4 hexadecimal digits)")
        if element is None:
            break
        if isinstance(element, javaproperties.KeyValue):
            props[element.key] = element.value
        line += len(ascii_splitlines(element.source))
    if "" in props:
        raise ClientConfigError(f"{source}: a setting has no key (a line starts with '=' or ':')")
    return props


# -- sasl.jaas.config -------------------------------------------------------------------

_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


def parse_jaas_config(text: str, modules: tuple[str, ...] = (SCRAM_LOGIN_MODULE,)) -> dict[str, str]:
    """The options of one ``<LoginModule> required key="value" ...;`` entry (Kafka's JaasConfig).

    Only the login modules in ``modules`` are accepted (secmeta's own client speaks SCRAM only);
    an error names what is wrong, never a value.
    """
    m = re.match(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if not m:
        raise ClientConfigError("cannot parse sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;'")
    if m.group(1) not in modules:
        raise ClientConfigError(f"sasl.jaas.config names {m.group(1)}; only {' or '.join(modules)} "
                                f"{'is' if len(modules) == 1 else 'are'} supported here")
    options: dict[str, str] = {}
    pos = m.end()
    while True:
        option = _JAAS_OPTION.match(text, pos)
        if not option:
            break
        value = option.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[option.group(1)] = value
        pos = option.end()
    rest = text[pos:].strip()
    if rest not in (";", ""):
        raise ClientConfigError(f"cannot parse sasl.jaas.config after option {len(options)}: expected key=\"value\" or ';'")
    return options
