"""Kafka client settings: a ``--command-config`` properties file, and merging with ours.

The file is the one Kafka's own tools take: one ``key=value`` per line,
blank lines and lines starting with ``#`` or ``!`` ignored, whitespace
around keys and values trimmed.  Values are kept as strings (librdkafka
accepts strings for every setting).  A line that is not ``key=value``
raises ``ClientConfigError`` naming the file and line number.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from events.errors import InvalidValueError

__all__ = ["ClientConfigError", "client_settings", "parse_client_config", "read_client_config"]


class ClientConfigError(InvalidValueError):
    """A client properties file or setting that cannot be used; the message says where."""


def parse_client_config(text: str, source: str = "<client config>") -> dict[str, str]:
    """Settings from properties text; ``source`` names it in errors."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise ClientConfigError(
                f"{source}, line {number}: expected key=value, got {_shown(line)}"
            )
        if not key:
            raise ClientConfigError(f"{source}, line {number}: a setting has no key before '='")
        if any(c.isspace() for c in key):
            raise ClientConfigError(
                f"{source}, line {number}: key {key!r} contains whitespace"
            )
        settings[key] = value.strip()
    return settings


def read_client_config(path: str | os.PathLike) -> dict[str, str]:
    """Settings from a properties file (``--command-config``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ClientConfigError(f"client config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigError(f"client config file {path} cannot be read: {exc}") from None
    return parse_client_config(text, str(path))


def client_settings(
    bootstrap: str,
    client_config: Mapping[str, object] | None = None,
    *,
    defaults: Mapping[str, object] | None = None,
    enforced: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The configuration for one client: ``defaults``, then the user's settings, then ``enforced``.

    ``bootstrap`` sets bootstrap.servers unless the user's settings do.  A
    user setting that contradicts an enforced one (for example
    ``enable.idempotence=false`` for the publisher) raises ClientConfigError.
    """
    out: dict[str, object] = dict(defaults or {})
    if bootstrap:
        out["bootstrap.servers"] = bootstrap
    for key, value in (client_config or {}).items():
        if key == "bootstrap.servers" and bootstrap:
            continue  # the command line wins, as in Kafka's tools
        out[key] = value
    for key, value in (enforced or {}).items():
        given = (client_config or {}).get(key)
        if given is not None and _norm(key, given) != _norm(key, value):
            raise ClientConfigError(
                f"client setting {key}={given} is not allowed here: it must be {_norm(key, value)}"
            )
        out[key] = value
    if not out.get("bootstrap.servers"):
        raise ClientConfigError("no bootstrap servers: give --bootstrap-server or bootstrap.servers")
    return out


def _norm(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    if key in ("acks", "request.required.acks") and text == "-1":
        return "all"
    return text


def _shown(line: str, limit: int = 60) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")
