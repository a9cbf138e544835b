"""Kafka client settings for the Kafka jobs: a ``--command-config`` file as librdkafka settings.

The file is the one Kafka's own tools take, read by the one properties parser
(secmeta.core.wire.client_config.load_properties, a real java.util.Properties reader). Kafka's JVM client
settings that librdkafka spells differently are translated:

- ``sasl.jaas.config`` with PlainLoginModule or ScramLoginModule: its ``username`` and ``password``
  become ``sasl.username`` / ``sasl.password`` (Kafka's JaasConfig syntax);
- ``ssl.endpoint.identification.algorithm=`` (empty: no host-name check) becomes ``none``;
- PEM given inline (``ssl.truststore.certificates``, ``ssl.keystore.certificate.chain``,
  ``ssl.keystore.key``) becomes ``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``.

A JVM-only key with no librdkafka equivalent (JKS/PKCS12 stores, Java classes, serializers) is
refused with ClientConfigError naming it and what to use instead. Other keys pass through unchanged
(librdkafka takes most of Kafka's names, e.g. ``security.protocol``, ``sasl.mechanism``,
``ssl.ca.location``, ``client.id``). Values stay strings; no error ever quotes a value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from secmeta.core.wire.client_config import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    ClientConfigError,
    load_properties,
    parse_jaas_config,
)

__all__ = ["JVM_ONLY", "ClientConfigError", "client_settings", "librdkafka_settings", "read_client_config"]

_PEM = "librdkafka reads PEM files: convert the store (keytool / openssl) and set "
JVM_ONLY: Mapping[str, str] = {
    "ssl.truststore.location": _PEM + "ssl.ca.location",
    "ssl.truststore.password": _PEM + "ssl.ca.location (a PEM CA file has no password)",
    "ssl.truststore.type": _PEM + "ssl.ca.location",
    "ssl.keystore.location": _PEM + "ssl.certificate.location and ssl.key.location",
    "ssl.keystore.password": _PEM + "ssl.key.password for the PEM key",
    "ssl.keystore.type": _PEM + "ssl.certificate.location and ssl.key.location",
    "ssl.trustmanager.algorithm": "librdkafka uses OpenSSL's verification; leave it out",
    "ssl.keymanager.algorithm": "librdkafka uses OpenSSL; leave it out",
    "ssl.protocol": "librdkafka negotiates the TLS version with OpenSSL; leave it out",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version with OpenSSL; leave it out",
    "ssl.engine.factory.class": "a Java class; librdkafka has ssl.engine.location for OpenSSL engines",
    "sasl.login.callback.handler.class": "a Java class; librdkafka cannot load it",
    "sasl.client.callback.handler.class": "a Java class; librdkafka cannot load it",
    "sasl.login.class": "a Java class; librdkafka cannot load it",
    "security.providers": "Java security providers; librdkafka uses OpenSSL",
    "interceptor.classes": "Java classes; librdkafka cannot load them",
    "metric.reporters": "Java classes; librdkafka reports statistics through statistics.interval.ms",
    "key.serializer": "the Kafka jobs encode their own records; leave it out",
    "value.serializer": "the Kafka jobs encode their own records; leave it out",
    "key.deserializer": "the Kafka jobs decode their own records; leave it out",
    "value.deserializer": "the Kafka jobs decode their own records; leave it out",
    "default.api.timeout.ms": "use the command's --timeout",
}
_RENAMED = {
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}


def librdkafka_settings(props: Mapping[str, str], source: str = "client settings") -> dict[str, str]:
    """Kafka client properties as librdkafka settings; ClientConfigError naming every key without one."""
    unsupported = sorted(key for key in props if key in JVM_ONLY)
    if unsupported:
        raise ClientConfigError(f"{source}: " + "; ".join(
            f"{key} has no librdkafka equivalent ({JVM_ONLY[key]})" for key in unsupported))
    out: dict[str, str] = {}
    for key, value in props.items():
        if key == "sasl.jaas.config":
            continue
        if key == "ssl.endpoint.identification.algorithm" and not value.strip():
            value = "none"  # Kafka's empty value turns the check off; librdkafka spells that 'none'
        out[_RENAMED.get(key, key)] = value
    if props.get("sasl.jaas.config"):
        options = parse_jaas_config(props["sasl.jaas.config"], (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE))
        if options.get("tokenauth", "false").lower() == "true":
            raise ClientConfigError(f"{source}: sasl.jaas.config has tokenauth=true; librdkafka cannot log in "
                                    "with a delegation token over SCRAM")
        for option, key in (("username", "sasl.username"), ("password", "sasl.password")):
            if option in options:
                out.setdefault(key, options[option])  # an explicit sasl.username / sasl.password wins
    return out


def read_client_config(path: str | os.PathLike) -> dict[str, str]:
    """The librdkafka settings of a properties file (``--command-config``)."""
    return librdkafka_settings(load_properties(path), source=os.fspath(path))


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
