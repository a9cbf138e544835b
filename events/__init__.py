"""secmeta's stored format: Avro event schemas, the codec, event records and secret sealing.

Each name is imported on first use, so importing a module of this package (its errors, its
types) loads neither the codec nor the keyring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from secmeta.events.lazy_exports import lazy_exports

if TYPE_CHECKING:  # the same names for type checkers (tests/test_packaging.py checks they are the same)
    from secmeta.events.codec import SINGLE_OBJECT_MARKER, EventCodec
    from secmeta.events.errors import (
        EventSchemaError,
        EventsError,
        KeyringError,
        MalformedEventError,
        SealedSecretError,
        UnknownKeyError,
        UnknownSchemaError,
    )
    from secmeta.events.keyring import (
        Keyring,
        MasterKey,
        ScramSecret,
        SealedSecret,
        open_scram,
        seal_scram,
    )
    from secmeta.events.records import (
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
    from secmeta.events.redact import redacted
    from secmeta.events.schemas import SCHEMA_DIR, avro_fingerprint

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {
    "secmeta.events.codec": ("SINGLE_OBJECT_MARKER", "EventCodec"),
    "secmeta.events.errors": (
        "EventSchemaError", "EventsError", "KeyringError", "MalformedEventError",
        "SealedSecretError", "UnknownKeyError", "UnknownSchemaError",
    ),
    "secmeta.events.keyring": (
        "Keyring", "MasterKey", "ScramSecret", "SealedSecret", "open_scram", "seal_scram",
    ),
    "secmeta.events.records": (
        "EVENT_TYPES", "AclCreated", "AclDeleted", "DelegationTokenExpired",
        "DelegationTokenIssued", "DelegationTokenRemoved", "DelegationTokenRenewed", "Envelope",
        "Event", "ScramCredentialDeleted", "ScramCredentialUpserted", "TokenRemovalReason",
        "entity_key",
    ),
    "secmeta.events.redact": ("redacted",),
    "secmeta.events.schemas": ("SCHEMA_DIR", "avro_fingerprint"),
})
