"""The logged settings: the settings that decide access, changed only by ``SecuritySettingAltered``.

Kafka keeps such settings as ConfigRecords of the cluster's BROKER resource; secmeta logs them
the same way, so the settings in force at any point are the image's at that point, and an answer
about the past (``as_of``, who-could, timeline) uses the settings of the past.  ``LOGGED`` declares
each one: its name (Kafka's where Kafka has one), the StoreConfig field it sets, and its text form.

``in_force(config, image)`` is the one owner of "which settings decide here": ``config`` with every
setting the image logged.  A setting the log never set (a store written before settings were
logged, or a Python-API store that never called ``alter_settings``) keeps its config value.

``delegation.token.secret.fingerprint`` identifies the token secret without revealing it: an
HMAC-SHA256 keyed by the secret over a fixed label.  Once logged, a process whose
SECMETA_TOKEN_SECRET has another fingerprint may not create, renew, expire or show token HMACs.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from secmeta.core import validation
from secmeta.core.config import TOKEN_SECRET_ENV, StoreConfig
from secmeta.core.errors import DelegationTokenDisabledException, InvalidValueError
from secmeta.events.entities import principals_in
from secmeta.events.records import SecuritySettingAltered
from secmeta.events.types import AclOperation, ScramMechanism

__all__ = ["LOGGED", "Setting", "check_config", "decides_access", "describe", "events_for",
           "in_force", "initial_events", "rights_to_change", "with_values", "require_token_secret",
           "secret_fingerprint", "setting", "token_secret_pin"]

_FINGERPRINT_LABEL = b"secmeta delegation token secret fingerprint v1"


def secret_fingerprint(secret: bytes) -> str:
    """The token secret's keyed fingerprint (hex of HMAC-SHA256(secret, fixed label)); never the secret."""
    return hmac.new(bytes(secret), _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()


# -- text forms ---------------------------------------------------------------------------

def _bool(text: str, name: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise InvalidValueError(f"setting {name} = {text!r} is invalid: expected true or false")
    return text.lower() == "true"


def _millis(text: str, name: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise InvalidValueError(f"setting {name} = {text!r} is invalid: expected a positive number of milliseconds")
    return int(text)


def _principals(text: str, name: str) -> frozenset[str]:
    parts = principals_in(text)
    for p in parts:
        validation.principal(p, f"setting {name}'s principal")
    return frozenset(parts)


def _mechanism(text: str, name: str) -> ScramMechanism:
    mech = next((m for m in ScramMechanism if m is not ScramMechanism.UNKNOWN
                 and m.mechanism_name == text.strip().upper()), None)
    if mech is None:
        raise InvalidValueError(f"setting {name}: {text!r} is not a SCRAM mechanism "
                                "(SCRAM-SHA-256 or SCRAM-SHA-512)")
    return mech


def _mechanisms(text: str, name: str) -> frozenset[ScramMechanism]:
    return frozenset(_mechanism(p, name) for p in text.split(",") if p.strip())


def _iterations(text: str, name: str) -> dict[ScramMechanism, int]:
    out: dict[ScramMechanism, int] = {}
    for part in (p for p in text.split(",") if p.strip()):
        mech, sep, count = part.partition("=")
        if not sep or not count.strip().isdigit():
            raise InvalidValueError(f"setting {name}: {part!r} is not MECHANISM=ITERATIONS "
                                    "(e.g. SCRAM-SHA-256=8192,SCRAM-SHA-512=8192)")
        out[_mechanism(mech, name)] = int(count.strip())
    return out


def _fingerprint(text: str, name: str) -> str:
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise InvalidValueError(f"setting {name} = {text!r} is invalid: expected 64 lowercase hex digits "
                                "(the fingerprint `secmeta config --describe` shows for a secret)")
    return text


#: The rights on the cluster that setting or deleting a setting needs. Every setting needs ALTER_CONFIGS (Kafka's
#: right for broker configs, the one quota tooling holds). A setting that decides who is authorized or who may log
#: in (a login or token path) also needs ALTER, the right CreateAcls/DeleteAcls need: changing it is never more
#: powerful than writing ACLs. (Kafka reads super.users and allow.everyone.if.no.acl.found only from the
#: authorizer's static config; no AlterConfigs request changes them.)
TUNING: tuple[AclOperation, ...] = (AclOperation.ALTER_CONFIGS,)
ACCESS: tuple[AclOperation, ...] = (AclOperation.ALTER_CONFIGS, AclOperation.ALTER)


@dataclass(frozen=True, slots=True)
class Setting:
    """One logged setting: its name, the StoreConfig field it sets, its text form both ways, and ``rights``:
    the rights on the cluster a request that sets or deletes it needs (TUNING or ACCESS, above)."""

    name: str
    field: str
    parse: Callable[[str, str], Any]
    text: Callable[[Any], str]
    doc: str
    rights: tuple[AclOperation, ...] = TUNING

    def value_of(self, text: str) -> object:
        return self.parse(text, self.name)


LOGGED: tuple[Setting, ...] = (
    Setting("super.users", "super_users", _principals, lambda v: ";".join(sorted(v)),
            "principals allowed everything, joined by ';' (Kafka's super.users)", ACCESS),
    Setting("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", _bool, lambda v: str(v).lower(),
            "whether a resource without ACLs is open to everyone", ACCESS),
    Setting("delegation.token.max.lifetime.ms", "token_max_lifetime_ms", _millis, str,
            "a token's longest life"),
    Setting("delegation.token.expiry.time.ms", "token_expiry_time_ms", _millis, str,
            "how long a token lives without renewal"),
    Setting("delegation.token.secret.fingerprint", "token_secret_fingerprint", _fingerprint, str,
            "the keyed fingerprint of the token secret that HMACs tokens (never the secret)", ACCESS),
    Setting("sasl.enabled.mechanisms", "enabled_mechanisms", _mechanisms,
            lambda v: ",".join(sorted(m.mechanism_name for m in v)),
            "the SCRAM mechanisms logins and credentials may use", ACCESS),
    Setting("secmeta.scram.default.iterations", "default_iterations", _iterations,
            lambda v: ",".join(f"{m.mechanism_name}={n}" for m, n in sorted(v.items(), key=lambda i: i[0].mechanism_name)),
            "iterations of a credential given without a count, per mechanism"),
    Setting("secmeta.allow.plaintext.passwords", "allow_plaintext_passwords", _bool, lambda v: str(v).lower(),
            "whether a password may be set over a connection without TLS", ACCESS),
    Setting("secmeta.scram.accept.doubled.client.nonce", "accept_doubled_client_nonce", _bool,
            lambda v: str(v).lower(),
            "whether a SCRAM login may repeat its client nonce in client-final, as librdkafka < 2.6.1 does "
            "(Kafka 3.8.1-3.9 accept it, Kafka 4 refuses it)", ACCESS),
)
_BY_NAME: dict[str, Setting] = {s.name: s for s in LOGGED}
_BY_FIELD: dict[str, Setting] = {s.field: s for s in LOGGED}
_DEFAULTS = StoreConfig()


def rights_to_change(names: Iterable[object]) -> list[tuple[str, AclOperation]]:
    """(setting name, right on the cluster) for every right a request setting or deleting ``names`` needs beyond
    TUNING's, which every such request needs and is checked for first, in request order (each Setting's
    ``rights``). A name that is no setting adds nothing: ``events_for`` refuses it."""
    return [(s.name, right) for s in (_BY_NAME.get(n) for n in names if isinstance(n, str)) if s is not None
            for right in s.rights if right not in TUNING]


def decides_access(name: str) -> bool:
    """Whether ``name`` is a logged setting that decides who is authorized or who may log in: one whose ``rights``
    include ALTER on the cluster (ACCESS, above), the right writing ACLs needs. An unknown name decides nothing."""
    s = _BY_NAME.get(name)
    return s is not None and AclOperation.ALTER in s.rights


def access_settings_saved(saved: Mapping[str, object]) -> dict[str, object]:
    """The settings that decide access (``decides_access``) a saved config (config.json's object, by field name)
    gives, a default where it names none, super users as a set: two saved configs decide access alike exactly
    when these are equal (tuning, paths and budgets may differ from node to node)."""
    given = {s.field: saved.get(s.field, getattr(_DEFAULTS, s.field)) for s in LOGGED
             if decides_access(s.name) and s.field != "token_secret_fingerprint"}
    given["super_users"] = frozenset(given["super_users"])  # type: ignore[call-overload]
    return given


def setting(name: object) -> Setting:
    """The logged setting called ``name``; InvalidValueError listing the names otherwise."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise InvalidValueError(f"unknown setting {name!r}: the logged settings are {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


# -- the settings in force at a point ------------------------------------------------------

_cache_lock = threading.Lock()
_cache: dict[int, tuple[StoreConfig, object, StoreConfig]] = {}


def in_force(config: StoreConfig, image) -> StoreConfig:
    """``config`` with the settings ``image`` (a SecurityImage) logged: the settings that decide at that point."""
    logged = image.settings
    if not len(logged):
        return config
    key = id(config)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] is config and hit[1] is logged.values:
        return hit[2]
    result = with_values(config, dict(logged))
    with _cache_lock:
        if len(_cache) > 64:
            _cache.clear()
        _cache[key] = (config, logged.values, result)
    return result


def with_values(config: StoreConfig, values: Mapping[str, str]) -> StoreConfig:
    """``config`` with logged settings' values (name -> text). A setting the log returned to its default
    (value None) is not among them: ``config``'s value decides it, the default unless the config gives one."""
    changes = {_BY_NAME[name].field: _BY_NAME[name].value_of(text) for name, text in values.items() if name in _BY_NAME}
    return config.with_(**changes) if changes else config


def describe(config: StoreConfig, image) -> list[dict]:
    """Every logged setting at ``image``: name, value in force (text), source (log, config or default), doc."""
    current = in_force(config, image)
    rows = []
    for s in LOGGED:
        value = getattr(current, s.field)
        source = ("log" if s.name in image.settings else
                  "default" if value == getattr(_DEFAULTS, s.field) else "config")
        rows.append({"name": s.name, "value": _text_of(s, value), "source": source, "doc": s.doc})
    return rows


def _text_of(s: Setting, value: object) -> str | None:
    return None if value is None else s.text(value)


# -- changing them -----------------------------------------------------------------------

def events_for(config: StoreConfig, image, set_: Mapping[str, str], delete: Iterable[str]) -> list[SecuritySettingAltered]:
    """The events that set ``set_`` (name -> text) and return ``delete`` to their defaults, checked first:
    an unknown name or bad value raises InvalidValueError naming it, and nothing is logged.
    A setting already as asked logs nothing."""
    delete = list(delete)
    both = set(set_) & set(delete)
    if both:
        raise InvalidValueError(f"setting {sorted(both)[0]} is both set and deleted in one request")
    changes: dict[str, object] = {}
    texts: dict[str, str | None] = {}
    for name, text in set_.items():
        s = setting(name)
        if not isinstance(text, str):
            raise InvalidValueError(f"setting {name}'s value must be text, not {type(text).__name__}")
        value = s.value_of(text)
        changes[s.field] = value
        texts[name] = s.text(value)  # canonical form
    for name in delete:
        s = setting(name)
        changes[s.field] = getattr(config, s.field)  # what decides once the log no longer sets it
        texts[name] = None
    try:
        in_force(config, image).with_(**changes)  # StoreConfig's checks (types, ranges) on the result
    except InvalidValueError as exc:
        raise InvalidValueError(f"{exc} (config field names map to settings: "
                                f"{', '.join(f'{s.field}={s.name}' for s in LOGGED if s.field in changes)})") from None
    return [SecuritySettingAltered(name, text) for name, text in texts.items() if image.settings.get(name) != text]


def initial_events(config: StoreConfig, image) -> list[SecuritySettingAltered]:
    """The events that log ``config``'s value of every logged setting the log has not set yet
    (the fingerprint only when a token secret is configured)."""
    events = []
    for s in LOGGED:
        if s.name in image.settings:
            continue
        if s.field == "token_secret_fingerprint":
            if config.token_secret is not None:
                events.append(SecuritySettingAltered(s.name, secret_fingerprint(config.token_secret)))
            continue
        events.append(SecuritySettingAltered(s.name, s.text(getattr(config, s.field))))
    return events


# -- checks --------------------------------------------------------------------------------

def check_config(config: StoreConfig, image, where: str = "the store's config.json") -> None:
    """Refuse a config that sets a logged setting to another value than the log's (InvalidValueError naming
    the setting and the command that changes it). A setting counts as set when config.json names it, or when
    a StoreConfig built in code gives it a value other than its default."""
    for name, text in image.settings:
        s = _BY_NAME.get(name)
        if s is None or s.field == "token_secret_fingerprint":
            continue
        given = getattr(config, s.field)
        if s.field not in config.from_file and given == getattr(_DEFAULTS, s.field):
            continue
        if given != s.value_of(text):
            raise InvalidValueError(
                f"{where} sets {s.field} = {s.text(given)!r}, but the log's setting {name} is {text!r}: settings "
                f"that decide access change only by a logged event (secmeta config --alter --add-config "
                f"'{name}=...'); remove {s.field} from the file")


FINGERPRINT = "delegation.token.secret.fingerprint"


def token_secret_pin(config: StoreConfig, image) -> list[SecuritySettingAltered]:
    """The event that logs the token secret's fingerprint when the log names none yet (``config``: the settings
    in force at ``image``; a token secret configured): the first token issued under a secret pins it, in a store
    whose log holds its settings (``secmeta init``'s; a store whose log holds none is decided by its config)."""
    if config.token_secret is None or config.token_secret_fingerprint is not None or not len(image.settings):
        return []
    return [SecuritySettingAltered(FINGERPRINT, secret_fingerprint(config.token_secret))]


def require_token_secret(config: StoreConfig) -> bytes | None:
    """The configured token secret if the log's fingerprint (if any) names it; DelegationTokenDisabledException
    naming SECMETA_TOKEN_SECRET otherwise (this process cannot make or check the store's token HMACs). ``config`` is the settings in force (``in_force``)."""
    secret = config.token_secret
    pinned = config.token_secret_fingerprint
    if secret is None or pinned is None:
        return secret
    if not hmac.compare_digest(secret_fingerprint(secret), pinned):
        raise DelegationTokenDisabledException(
            f"{TOKEN_SECRET_ENV} is not the token secret this store's tokens were issued under (its fingerprint "
            f"differs from the logged setting delegation.token.secret.fingerprint); set {TOKEN_SECRET_ENV} to "
            f"that secret, or log the new one with secmeta config --alter --add-config "
            f"'delegation.token.secret.fingerprint={secret_fingerprint(secret)}'")
    return secret
