"""kafka-configs.sh's user configs as SCRAM settings: ``--add-config`` text, ``--add-config-file``, ``--delete-config``.

The grammar is ConfigCommand's (tools/.../ConfigCommand.java, parseConfigsToBeAdded and
parseIterationsAndPasswordBytes): ``k1=v1,k2=[v1,v2]``, where square brackets group a value
holding commas; a SCRAM value is ``[iterations=N,password=P]``, iterations optional, the password
the rest of the value (commas included); ``[password=P,iterations=N]`` is taken too (the order is free,
as Kafka users expect), the password then everything before the last ``,iterations=N``.  The keys here are the SCRAM mechanisms;
quota keys go to core/cli/quota_configs.py.  Two secmeta additions: a value without ``password=``
asks for the password (the command does), and what ConfigCommand would take silently but
surprisingly is refused (a key given twice: Kafka keeps the last; a password that itself holds
``,iterations=``, which could not be told from the setting).  Errors name keys, never a value: a value may
be a password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from secmeta.core import validation
from secmeta.core.cli.quota_configs import KEYS as QUOTA_KEYS
from secmeta.core.errors import InvalidValueError
from secmeta.events.types import ScramMechanism

# ConfigCommand's accepted SCRAM keys (ScramMechanism.isScram): the mechanism names, exactly.
MECHANISMS = {m.mechanism_name: m for m in ScramMechanism if m is not ScramMechanism.UNKNOWN}
_ACCEPTED = f"{', '.join(MECHANISMS)} (SCRAM credentials) or {', '.join(QUOTA_KEYS)} (quotas)"
_VALUE = re.compile(r"iterations=(?P<iterations>-?[0-9]+)(?:,password=(?P<after>.*))?"
                    r"|password=(?P<before>.*?),iterations=(?P<iterations_after>-?[0-9]+)|password=(?P<only>.*)|",
                    re.DOTALL)
_SHAPE = ("[iterations=N,password=P] or [password=P,iterations=N] (iterations is optional; leave password out to "
          "be asked for it)")


@dataclass(frozen=True, slots=True)
class ScramSetting:
    """One mechanism's value: iterations (-1: the store's default) and the password (None: ask for it)."""

    mechanism: ScramMechanism
    iterations: int
    password: bytes | None = field(repr=False)


def split_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[v1,v2]`` as {key: value}, brackets kept; commas and ``=`` inside brackets belong to the value."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                break
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise InvalidValueError("--add-config has unbalanced square brackets (a password holding '[' or ']' "
                                "cannot be given there: leave it out to be asked for it, or use --add-config-file)")
    items.append(text[start:])
    out: dict[str, str] = {}
    for item in items:
        key, value = _key_value(item)
        if key in out:
            raise InvalidValueError(f"--add-config gives {_named(key)} twice: give each config once")
        out[key] = value
    return out


def _key_value(item: str) -> tuple[str, str]:
    depth, equals = 0, []
    for i, char in enumerate(item):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "=" and depth == 0:
            equals.append(i)
    if len(equals) != 1:
        raise InvalidValueError('--add-config: every config must be "key=val", or "key=[val1,val2]" to group '
                                "values which contain commas (the text is not repeated: it may hold a password)")
    return item[:equals[0]].strip(), item[equals[0] + 1:].strip()


def scram_settings(entries: Mapping[str, str], source: str) -> list[ScramSetting]:
    """The SCRAM settings of ``entries`` (from ``source``: --add-config or the file); other keys are errors."""
    unknown = [key for key in entries if key not in MECHANISMS]
    if unknown:
        raise InvalidValueError(f"{source}: unknown config {', '.join(_named(k) for k in unknown)} for users: "
                                f"the accepted keys are {_ACCEPTED}")
    return [_setting(MECHANISMS[key], _unbracketed(key, value)) for key, value in entries.items()]


def _unbracketed(key: str, value: str) -> str:
    if value.startswith("[") and value.endswith("]"):
        return value[1:-1]
    if value.startswith("["):
        raise InvalidValueError(f"{key}: the value opens '[' and does not close it; expected {_SHAPE}")
    return value


def _setting(mechanism: ScramMechanism, value: str) -> ScramSetting:
    name = mechanism.mechanism_name
    m = _VALUE.fullmatch(value)
    if m is None:
        raise InvalidValueError(f"{name}: expected {_SHAPE}; the value is not repeated (it may hold a password)")
    password = next((m.group(g) for g in ("after", "before", "only") if m.group(g) is not None), None)
    if password is not None and re.search(r",\s*iterations=", password):
        raise InvalidValueError(f"{name}: iterations is given twice, or a password holds ',iterations=' "
                                f"({_SHAPE}; such a password can only be typed when asked for)")
    given = m.group("iterations") or m.group("iterations_after")
    iterations = int(given) if given is not None else -1
    return ScramSetting(mechanism, iterations, None if password is None else password_bytes(password, name))


def password_bytes(password: str | bytes, mechanism_name: str) -> bytes:
    """A typed password as UTF-8 bytes; one that is not UTF-8 (argv and files hold an undecodable byte as a
    lone surrogate) is a usage error naming the mechanism's password field, never quoting it."""
    return validation.secret_bytes(password, f"{mechanism_name} password", utf8=True)


def deleted_mechanisms(values: list[str]) -> list[ScramMechanism]:
    """--delete-config values (each comma-separated, as ConfigCommand's) as mechanisms; other keys are errors."""
    keys = [key.strip() for value in values for key in value.split(",")]
    unknown = [key for key in keys if key not in MECHANISMS]
    if unknown:
        raise InvalidValueError(f"--delete-config: unknown config {', '.join(_named(k) for k in unknown)} for users: "
                                f"the accepted keys are {_ACCEPTED}")
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise InvalidValueError(f"--delete-config gives {', '.join(twice)} twice: give each config once")
    return [MECHANISMS[key] for key in keys]


def _named(key: str) -> str:
    return repr(key if len(key) <= 40 else key[:40] + "...")
