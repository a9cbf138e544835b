"""Every entity open in an image, as the event that opens it as it stands: replay's inverse.

Replaying ``opening_events(image)`` into an empty image gives ``image`` back (its offset aside).
A reader that keeps one event per entity (the Kafka mirror's compacted state topic) starts from
these where it cannot start from the log. Each kind's part of the image is its own projection's,
so each kind names its reader here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from secmeta.events.entities import (
    ACLS,
    CREDENTIALS,
    KEYS,
    KINDS,
    QUOTAS,
    RECOVERIES,
    SETTINGS,
    TOKENS,
    EntityKind,
)
from secmeta.events.records import (
    AclCreated,
    ClientQuotaAltered,
    Event,
    ScramCredentialUpserted,
    SecuritySettingAltered,
)
from secmeta.projections.image import SecurityImage

__all__ = ["opening_events"]

_OPEN: dict[str, Callable[[SecurityImage], Iterable[Event]]] = {
    ACLS.name: lambda image: (AclCreated(acl_id, binding) for acl_id, binding in image.acls),
    CREDENTIALS.name: lambda image: (ScramCredentialUpserted(user, entry.mechanism, entry.iterations, entry.secret)
                                     for user, entry in image.scram),
    TOKENS.name: lambda image: (info.issued() for info in image.tokens),
    QUOTAS.name: lambda image: (ClientQuotaAltered(entity, key, value)
                                for entity, values in image.quotas for key, value in values.items()),
    SETTINGS.name: lambda image: (SecuritySettingAltered(name, value) for name, value in image.settings),
    KEYS.name: lambda image: (),  # a key rotation is no state of the image: only the log holds it
    RECOVERIES.name: lambda image: (),  # a repair of the log is no state of the image: only the log holds it
}


def opening_events(image: SecurityImage, kinds: Iterable[EntityKind] = KINDS) -> Iterator[Event]:
    """The opening event of every entity of ``kinds`` open in ``image``, as the entity stands there."""
    for kind in kinds:
        try:
            reader = _OPEN[kind.name]
        except KeyError:
            raise KeyError(f"no reader of {kind.name} entities from an image: add one to "
                           f"secmeta.projections.entity_events") from None
        yield from reader(image)
