"""secmeta's stored format: Avro event schemas, the codec, event records and secret sealing."""

from .codec import SINGLE_OBJECT_MARKER, EventCodec
from .errors import (
    EventSchemaError,
    EventsError,
    KeyringError,
    MalformedEventError,
    SealedSecretError,
    UnknownKeyError,
    UnknownSchemaError,
)
from .keyring import Keyring, MasterKey, ScramSecret, SealedSecret, open_scram, seal_scram
from .records import (
    EVENT_TYPES,
    AclCreated,
    AclDeleted,
    DelegationTokenExpired,
    DelegationTokenIssued,
    DelegationTokenRemoved,
    DelegationTokenRenewed,
    Envelope,
    Event,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
    TokenRemovalReason,
    entity_key,
)
from .redact import redacted
from .schemas import SCHEMA_DIR, avro_fingerprint

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_DIR",
    "SINGLE_OBJECT_MARKER",
    "AclCreated",
    "AclDeleted",
    "DelegationTokenExpired",
    "DelegationTokenIssued",
    "DelegationTokenRemoved",
    "DelegationTokenRenewed",
    "Envelope",
    "Event",
    "EventCodec",
    "EventSchemaError",
    "EventsError",
    "Keyring",
    "KeyringError",
    "MalformedEventError",
    "MasterKey",
    "ScramCredentialDeleted",
    "ScramCredentialUpserted",
    "ScramSecret",
    "SealedSecret",
    "SealedSecretError",
    "TokenRemovalReason",
    "UnknownKeyError",
    "UnknownSchemaError",
    "avro_fingerprint",
    "entity_key",
    "open_scram",
    "redacted",
    "seal_scram",
]
