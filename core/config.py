"""StoreConfig: every setting of a store, with Kafka's defaults where Kafka has one.

Settings are typed and checked when a StoreConfig is built, from Python or from ``config.json``:
each field's annotation below is its schema (type and range), and pydantic validates every value
against it in strict mode, so ``"no"`` is not a bool, ``True`` is not an int and ``"1000"`` is not a
number of milliseconds: the error names the setting, the value and the expected type, and nothing
is opened with a setting that failed (fail closed). A secret's value (``token_secret``) is never shown.

Why pydantic and not msgspec: pydantic validates Python values against a type (``TypeAdapter`` in
strict mode, with ranges and instance checks from the annotation), which is what a StoreConfig built
in code needs; msgspec checks types only while decoding or converting, not when a Struct is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin, get_type_hints

from secmeta.core import times, validation
from secmeta.core.auth.scram_crypto import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS
from secmeta.core.errors import InvalidValueError
from secmeta.core.log import LogConfig
from secmeta.events.types import ScramMechanism
from secmeta.projections.snapshot import SnapshotPolicy

DAY_MS = 24 * 3600 * 1000
CONFIG_FILE = "config.json"
TOKEN_SECRET_ENV = "SECMETA_TOKEN_SECRET"
INT32_MAX = 2**31 - 1
_SECRET_SETTINGS = frozenset({"token_secret"})
#: The shortest delegation-token secret accepted, from every route (StoreConfig, $SECMETA_TOKEN_SECRET, the CLI,
#: which reads that variable). The log publishes the secret's fingerprint (delegation.token.secret.fingerprint, one
#: HMAC-SHA256 over a fixed label) to every reader of the events, so a guessable secret would be found offline and
#: with it any token's password (HMAC-SHA512(secret, token id)); 32 random bytes cannot be guessed.
TOKEN_SECRET_MIN_BYTES = 32
_SHORT_SECRET = (f"a delegation-token secret must be at least {TOKEN_SECRET_MIN_BYTES} bytes (random): its "
                 "fingerprint, delegation.token.secret.fingerprint, is published with the log, so a shorter secret "
                 "could be guessed offline")


def _long_enough(secret: bytes) -> bool:
    """The one rule on a token secret's length (its type is the annotation's)."""
    return len(secret) >= TOKEN_SECRET_MIN_BYTES


def _token_secret(value: bytes) -> bytes:
    if not _long_enough(value):
        raise ValueError(_SHORT_SECRET)  # the value is never quoted
    return value


def _principal(value: str) -> str:
    try:
        return validation.principal(value, "the principal")
    except InvalidValueError as exc:
        raise ValueError(str(exc)) from None


def _mechanism(value: ScramMechanism) -> ScramMechanism:
    if value is ScramMechanism.UNKNOWN:
        raise ValueError("UNKNOWN is not a SCRAM mechanism")
    return value


@cache
def _annotations() -> dict[str, Any]:
    """The names StoreConfig's annotations use, in their validating (pydantic) form. pydantic is imported
    here, when a setting that is not its default is first checked, so a command whose store keeps the
    defaults never loads it (about a third of a small command's start)."""
    from pydantic import AfterValidator, Field, InstanceOf

    return {
        "Principal": Annotated[str, AfterValidator(_principal)],
        "Millis": Annotated[int, Field(gt=0, le=validation.INT64_MAX)],  # Kafka's LONG settings, atLeast(1)
        "Iterations": Annotated[int, Field(ge=MIN_ITERATIONS, le=MAX_ITERATIONS)],
        "Mechanism": Annotated[ScramMechanism, AfterValidator(_mechanism)],
        "TokenSecret": Annotated[bytes, AfterValidator(_token_secret)],
        "PydanticField": Field, "InstanceOf": InstanceOf, "INT32_MAX": INT32_MAX,
    }


if TYPE_CHECKING:  # what type checkers see of the names above (the annotations are strings until checked)
    from pydantic import Field as PydanticField  # noqa: F401
    from pydantic import InstanceOf

    Principal = str
    Millis = int
    Iterations = int
    Mechanism = ScramMechanism
    TokenSecret = bytes


@dataclass(frozen=True)
class PasswordPolicy:
    """KIP-506's optional policy: ``accept(password)`` and a description used in the error."""

    accept: Callable[[bytes], bool]
    description: str

    @classmethod
    def min_length(cls, n: int) -> PasswordPolicy:
        return cls(lambda p: len(p) >= n, f"passwords must be at least {n} bytes long")


@dataclass(frozen=True)
class StoreConfig:
    """Settings of a SecurityStore, checked when built (InvalidValueError naming the setting). Secrets never show in repr."""

    super_users: frozenset[Principal] = frozenset({"User:admin"})
    allow_everyone_if_no_acl_found: bool = False
    default_principal: Principal = "User:admin"
    # SCRAM (KIP-554 / KIP-506)
    enabled_mechanisms: frozenset[Mechanism] = frozenset({ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512})
    default_iterations: dict[Mechanism, Iterations] = field(
        default_factory=lambda: {ScramMechanism.SCRAM_SHA_256: DEFAULT_ITERATIONS, ScramMechanism.SCRAM_SHA_512: DEFAULT_ITERATIONS}
    )
    allow_plaintext_passwords: bool = False
    # librdkafka < 2.6.1's client-final nonce (<cnonce><cnonce><snonce>): Kafka 3.8.1-3.9 accept it, Kafka 4 refuses it
    accept_doubled_client_nonce: bool = True
    password_policy: InstanceOf[PasswordPolicy] | None = None
    # delegation tokens (KIP-48)
    token_secret: TokenSecret | None = field(default=None, repr=False)  # at least TOKEN_SECRET_MIN_BYTES
    token_max_lifetime_ms: Millis = 7 * DAY_MS
    token_expiry_time_ms: Millis = DAY_MS
    token_expiry_check_interval_ms: Millis = 3600 * 1000
    # the logged delegation.token.secret.fingerprint (secmeta.core.settings.in_force sets it; never from config.json)
    token_secret_fingerprint: str | None = None
    describe_tokens_include_hmac: bool = False
    # limits
    max_acl_changes_per_request: Annotated[int, PydanticField(gt=0, le=INT32_MAX)] = 10_000
    # durability and snapshots
    log: InstanceOf[LogConfig] = field(default_factory=LogConfig)
    snapshot_policy: InstanceOf[SnapshotPolicy] = field(default_factory=SnapshotPolicy)
    keep_snapshots: Annotated[int, PydanticField(ge=1, le=INT32_MAX)] = 2
    delete_covered_segments: bool = False
    # time travel: estimated bytes of past images held in memory (secmeta.core.forensics.timetravel; ~680 B per logged event covered)
    time_travel_memory_bytes: Annotated[int, PydanticField(ge=0, le=validation.INT64_MAX)] = 1 << 30
    key_file: str | InstanceOf[os.PathLike] | None = None
    clock: Callable[[], float] = field(default=times.wall_clock, repr=False, compare=False)
    # the fields config.json named (load); secmeta.core.settings.check_config compares them with the log's
    from_file: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __post_init__(self):
        # Collections given as lists or sets (config.json, callers) are frozen; a str is not a collection here.
        if isinstance(self.super_users, list | tuple | set):
            object.__setattr__(self, "super_users", frozenset(self.super_users))
        if isinstance(self.enabled_mechanisms, list | tuple | set | frozenset):
            object.__setattr__(self, "enabled_mechanisms", frozenset(
                validation.enum_value(ScramMechanism, m, "setting enabled_mechanisms") for m in self.enabled_mechanisms))
        if isinstance(self.default_iterations, dict):
            object.__setattr__(self, "default_iterations", {
                validation.enum_value(ScramMechanism, m, "setting default_iterations"): its
                for m, its in self.default_iterations.items()})
        _check_settings(self)

    def now_ms(self) -> int:
        return times.now_ms(self.clock)

    def with_(self, **changes) -> StoreConfig:
        return replace(self, **changes)

    # -- persisted settings (config.json in the store directory) -----------------

    _PERSISTED = ("super_users", "allow_everyone_if_no_acl_found", "default_principal", "allow_plaintext_passwords",
                  "accept_doubled_client_nonce",
                  "token_max_lifetime_ms", "token_expiry_time_ms", "token_expiry_check_interval_ms",
                  "describe_tokens_include_hmac", "max_acl_changes_per_request", "delete_covered_segments")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> StoreConfig:
        """Settings saved in ``DIR/config.json`` (if any); the token secret from $SECMETA_TOKEN_SECRET."""
        path = Path(directory) / CONFIG_FILE
        values: dict = {}
        if path.exists():
            try:
                values = json.loads(path.read_text())
            except ValueError as exc:
                raise InvalidValueError(f"{path} is not valid JSON: {exc}") from None
            if not isinstance(values, dict):
                raise InvalidValueError(f"{path} must hold a JSON object of settings, not {type(values).__name__}")
            unknown = set(values) - set(cls._PERSISTED)
            if unknown:
                raise InvalidValueError(f"{path} has unknown settings: {', '.join(sorted(unknown))}")
        secret = os.environb.get(TOKEN_SECRET_ENV.encode())  # bytes: nothing to encode, nothing to fail on
        if secret:
            if not _long_enough(secret):
                raise InvalidValueError(f"${TOKEN_SECRET_ENV} is invalid (value not shown): {_SHORT_SECRET}")
            values["token_secret"] = secret
        try:
            return cls(**values, from_file=frozenset(values) - {"token_secret"})
        except InvalidValueError as exc:
            raise InvalidValueError(f"{path}: {exc}") from None

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CONFIG_FILE
        data = {name: getattr(self, name) for name in self._PERSISTED}
        data["super_users"] = sorted(self.super_users)
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


# -- checking settings -------------------------------------------------------------------

@cache
def _schemas() -> dict[str, object]:
    return get_type_hints(StoreConfig, localns=_annotations(), include_extras=True)


@cache
def _model(names: frozenset[str]) -> type[Any]:
    """One strict pydantic model whose fields are StoreConfig's annotations of ``names``."""
    from pydantic import ConfigDict, create_model

    strict = ConfigDict(strict=True, arbitrary_types_allowed=True, hide_input_in_errors=True)
    hints = _schemas()
    return create_model("StoreConfig", __config__=strict, **{name: (hints[name], ...) for name in sorted(names)})


def _never(_value: object) -> bool:
    return False


def _is_default(f: Field, value: object) -> bool:
    """``value`` is the field's default, of the very same type (True is not 1): known valid, nothing to check."""
    default = f.default if f.default is not MISSING else (
        f.default_factory() if f.default_factory is not MISSING else MISSING)
    return default is not MISSING and type(value) is type(default) and value == default


#: Settings with a plain check that accepts only values their annotation accepts (a value it does not accept
#: goes to pydantic, which decides and says why): the token secret from $SECMETA_TOKEN_SECRET and the secret's
#: fingerprint the log pins (settings.in_force sets it on every open of a store that issued tokens) need no pydantic.
_PLAINLY_VALID: dict[str, Callable[[object], bool]] = {
    "token_secret": lambda value: type(value) is bytes and _long_enough(value),
    "token_secret_fingerprint": lambda value: type(value) is str,
    # InstanceOf settings: pydantic checks only the instance's type (each class checks its own values when built);
    # a benchmark's or program's own snapshot policy cost every open 0.1 s of pydantic (issue 24, state_shapes)
    "snapshot_policy": lambda value: type(value) is SnapshotPolicy,
    "log": lambda value: type(value) is LogConfig,
}


def _check_settings(config: StoreConfig) -> None:
    # from_file is load()'s record of which names config.json held (checked there against _PERSISTED)
    values = {f.name: getattr(config, f.name) for f in fields(config)
              if f.name != "from_file" and not _is_default(f, getattr(config, f.name))
              and not _PLAINLY_VALID.get(f.name, _never)(getattr(config, f.name))}
    if not values:
        return
    from pydantic import ValidationError

    try:
        _model(frozenset(values)).model_validate(values)
        return
    except ValidationError as exc:
        problem = exc.errors(include_input=False)[0]
    name = str(problem["loc"][0])
    value = values[name]
    shown = "(hidden)" if name in _SECRET_SETTINGS else repr(value)
    message = problem["msg"].removeprefix("Value error, ")
    # raised outside the except block, so pydantic's error (which holds the input) is not chained to it
    raise InvalidValueError(f"setting {name} = {shown} ({type(value).__name__}) is invalid: expected "
                            f"{_type_name(_schemas()[name])}: {message}")


def _type_name(hint: object) -> str:
    """A reader's name for a setting's type: 'bool', 'int', 'frozenset[str]', 'bytes or None'."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, type(int | None)):
        return " or ".join(_type_name(a) for a in args)
    if origin is not None and args and origin.__module__ == "builtins":
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    if hint is type(None):
        return "None"
    return getattr(hint, "__name__", str(hint)).replace("InstanceOf", "")


__all__ = ["StoreConfig", "PasswordPolicy"]
