"""kafka-configs.sh's client quota configs: values of ``--add-config``, and the lines ``--describe`` prints.

As ConfigCommand (tools/.../ConfigCommand.java): each quota value is parsed as a double ("Cannot parse
quota configuration value for K: V"), and a described entity is one line
``Quota configs for user-principal 'alice', client-id 'c1' are producer_byte_rate=1024.0``, values
written as Java's ``Double.toString`` (``20000.0``, ``1.0E7``, ``5.0E-4``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING

from secmeta.core.cli.display import printable
from secmeta.core.errors import InvalidValueError
from secmeta.core.quota_keys import CLIENT_ID, QUOTA_KEYS, USER

if TYPE_CHECKING:
    from secmeta.events.records import ClientQuotaEntity

__all__ = ["KEYS", "described", "java_double", "quota_line", "quota_values"]

KEYS = tuple(QUOTA_KEYS[USER])  # the keys of users and clients (ips are not offered by secmeta configs)
_PARTS = {USER: "user-principal", CLIENT_ID: "client-id"}


def quota_values(entries: Mapping[str, str], source: str) -> dict[str, float]:
    """The quota keys of ``entries`` with their values as floats; other keys are errors naming them."""
    unknown = [key for key in entries if key not in KEYS]
    if unknown:
        raise InvalidValueError(f"{source}: unknown config {', '.join(map(repr, unknown))} for quotas: "
                                f"the accepted keys are {', '.join(KEYS)}")
    values = {}
    for key, text in entries.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise InvalidValueError(f"Cannot parse quota configuration value for {key}: {text}") from None
    return values


def java_double(value: float) -> str:
    """``value`` as Java's Double.toString writes it: plain from 10^-3 to 10^7, else d.dddE±n."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text or "n" in text else f"{text}.0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    fraction = "".join(map(str, digits[1:])) or "0"
    return f"{'-' if sign else ''}{digits[0]}.{fraction}E{len(digits) + int(exponent) - 1}"


def described(entity: ClientQuotaEntity) -> str:
    """``user-principal 'alice', the default client-id``: the entity as ConfigCommand names it."""
    return ", ".join(f"the default {_PARTS.get(t, t)}" if n is None else f"{_PARTS.get(t, t)} '{n}'"
                     for t, n in entity.parts)


def quota_line(entity: ClientQuotaEntity, values: Mapping[str, float]) -> str:
    """The line --describe prints for one entity."""
    joined = ", ".join(f"{key}={java_double(value)}" for key, value in values.items())
    return printable(f"Quota configs for {described(entity)} are {joined}")
