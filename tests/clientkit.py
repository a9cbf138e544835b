"""Kafka client properties for secmeta's own wire client (secmeta.core.wire.client) against a serverkit server.

    props = client_properties(server, "SASL_SSL", "admin", ADMIN_PASSWORD)   # dict of Kafka client properties
    with remote_admin(server, "SASL_SSL", "admin", ADMIN_PASSWORD) as admin:  # RemoteAdmin over that listener
        admin.describe_acls(ANY_ACL)
    path = write_command_config(tmp_path, props)                            # a --command-config file
    with refusing_port() as port:                                           # connecting there is refused
        ...
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from secmeta.core.wire.client import ClientConfig, RemoteAdmin
from secmeta.events.types import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tests.serverkit import RunningServer

__all__ = ["ANY_ACL", "client_properties", "refusing_port", "remote_admin", "write_command_config"]

ANY_ACL = AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def client_properties(server: RunningServer, listener: str, user: str | None = None, password: str | None = None,
                      mechanism: str = "SCRAM-SHA-256", *, token: bool = False, **extra: str) -> dict[str, str]:
    """Properties for ``listener``: the test CA for TLS, SCRAM login through sasl.jaas.config for SASL."""
    props = {"bootstrap.servers": server.bootstrap(listener), "security.protocol": listener,
             "request.timeout.ms": "10000", "socket.connection.setup.timeout.ms": "5000"}
    if "SSL" in listener:
        assert server.ca is not None
        props["ssl.ca.location"] = str(server.ca.ca_cert)
    if listener.startswith("SASL"):
        user = user or "admin"
        password = password if password is not None else server.passwords[user]
        tokenauth = " tokenauth=true" if token else ""
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{password}"{tokenauth};'
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return props


def remote_admin(server: RunningServer, listener: str, user: str | None = None, password: str | None = None,
                 mechanism: str = "SCRAM-SHA-256", **kwargs: Any) -> RemoteAdmin:
    """A RemoteAdmin logged in on ``listener`` (see client_properties)."""
    return RemoteAdmin(ClientConfig.from_properties(client_properties(server, listener, user, password, mechanism,
                                                                      **kwargs)))


def write_command_config(directory: Path, props: dict[str, str], name: str = "client.properties") -> Path:
    """A --command-config file holding ``props`` (bootstrap.servers left out: the CLI passes --bootstrap-server)."""
    path = Path(directory) / name
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if k != "bootstrap.servers"))
    return path


@contextmanager
def refusing_port() -> Iterator[int]:
    """A 127.0.0.1 port bound but not listening for the block: a connection there is refused
    (no race with another process taking a port released too early)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
