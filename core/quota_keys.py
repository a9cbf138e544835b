"""Kafka's client quota entity types and config keys (QuotaConfig), as plain values.

The rules that use them are ``secmeta.core.control.quotas``'; they live here so that the CLI can name
the keys in its help without loading the control functions.
"""

from __future__ import annotations

from secmeta.core.validation import INT64_MAX

__all__ = ["CLIENT_ID", "IP", "QUOTA_KEYS", "USER"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
_INT_MAX = 2**31 - 1  # Kafka's INT config type; LONG is INT64_MAX

# QuotaConfig: key -> the largest value of its integral config type (None: a DOUBLE key).
QUOTA_KEYS: dict[str, dict[str, int | None]] = {
    USER: {"producer_byte_rate": INT64_MAX, "consumer_byte_rate": INT64_MAX,
           "request_percentage": None, "controller_mutation_rate": None},
    IP: {"connection_creation_rate": _INT_MAX},
}
