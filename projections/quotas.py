"""The immutable client-quota image and the delta that derives the next one (Kafka's ClientQuotasImage/Delta).

Quotas are kept by entity (its canonical form, ``ClientQuotaEntity.__str__``), each a read-only
mapping key -> value.  ``QuotasDelta(image)`` records sets and removals; removing the last key of
an entity removes the entity (ClientQuotaControlManagerTest.testAlterAndRemove: "All quotas
removed, we should cleanup the map"), so no entity without keys is ever held.  Removing a key
that is not set raises InconsistentEventError: the control function never logs one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import immutables

from secmeta.projections.errors import InconsistentEventError

__all__ = ["QuotasDelta", "QuotasImage"]

_NONE: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True, repr=False)
class QuotasImage:
    """Every client quota: canonical entity -> {key: value}."""

    entities: immutables.Map = immutables.Map()  # entity -> MappingProxyType(key -> value)
    EMPTY: ClassVar[QuotasImage]

    def __repr__(self) -> str:
        return f"QuotasImage(<{len(self.entities)} entities>)"

    def get(self, entity: str) -> Mapping[str, float]:
        """The quotas of ``entity`` (empty if it has none)."""
        return self.entities.get(entity, _NONE)

    def __iter__(self) -> Iterator[tuple[str, Mapping[str, float]]]:
        """(entity, quotas) of every entity, in no particular order."""
        return iter(self.entities.items())

    def __len__(self) -> int:
        return len(self.entities)


QuotasImage.EMPTY = QuotasImage()


class QuotasDelta:
    """Changes to a QuotasImage: per entity its quotas as they now stand."""

    __slots__ = ("image", "_changes")

    def __init__(self, image: QuotasImage):
        self.image = image
        self._changes: dict[str, dict[str, float]] = {}

    def set(self, entity: str, key: str, value: float | None) -> None:
        """Set ``key`` of ``entity`` to ``value``, or remove it (None; an unset key raises InconsistentEventError)."""
        quotas = self._changes.get(entity)
        if quotas is None:
            quotas = self._changes[entity] = dict(self.image.get(entity))
        if value is not None:
            quotas[key] = value
        elif quotas.pop(key, None) is None:
            raise InconsistentEventError(f"removal of quota {key!r} of {entity!r}, which is not set")

    def net(self) -> dict[str, dict[str, float]]:
        """The net change to the base image: entity -> its quotas as they stand (empty: none left)."""
        return {entity: dict(quotas) for entity, quotas in self._changes.items()}

    @classmethod
    def of_net(cls, image: QuotasImage, net: Mapping[str, Mapping[str, float]]) -> QuotasDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image)."""
        delta = cls(image)
        delta._changes = {entity: dict(quotas) for entity, quotas in net.items()}
        return delta

    def apply(self) -> QuotasImage:
        """The image with the changes; the base image itself if none had an effect."""
        base = self.image.entities
        mutation = None
        for entity, quotas in self._changes.items():
            if base.get(entity, _NONE) == quotas:
                continue
            if mutation is None:
                mutation = base.mutate()
            if quotas:
                mutation[entity] = MappingProxyType(dict(quotas))  # the delta may go on changing its own
            else:
                del mutation[entity]
        if mutation is None:
            return self.image
        return QuotasImage(mutation.finish())
