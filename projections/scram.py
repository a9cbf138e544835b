"""The immutable SCRAM credential image and the delta that derives the next one.

``ScramImage`` maps user -> mechanism -> ``ScramEntry`` (iterations and the
sealed salt/keys; never plaintext).  ``ScramDelta(image)`` records upserts
and deletes; ``apply()`` returns a new image sharing every untouched user,
or the same image when nothing changed.  A user with no credential left is
not in the image.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import immutables

from secmeta.events.keyring import SealedSecret
from secmeta.events.types import ScramMechanism
from secmeta.projections.errors import InconsistentEventError

__all__ = ["ScramDelta", "ScramEntry", "ScramImage"]

_EMPTY_MAP: immutables.Map = immutables.Map()


@dataclass(frozen=True, slots=True)
class ScramEntry:
    """One credential: mechanism, iterations and the sealed secret (repr shows its key id only)."""

    mechanism: ScramMechanism
    iterations: int
    secret: SealedSecret


@dataclass(frozen=True, slots=True, repr=False)
class ScramImage:
    """Every SCRAM credential, by user then mechanism."""

    users_map: immutables.Map = _EMPTY_MAP  # user -> Map(mechanism -> ScramEntry)
    EMPTY: ClassVar[ScramImage]

    def __repr__(self) -> str:
        return f"ScramImage(<{len(self.users_map)} users>)"

    def get(self, user: str, mechanism: ScramMechanism) -> ScramEntry | None:
        """The credential of ``user`` for ``mechanism``, or None."""
        return self.users_map.get(user, _EMPTY_MAP).get(mechanism)

    def mechanisms(self, user: str) -> Mapping[ScramMechanism, ScramEntry]:
        """The credentials of ``user`` by mechanism (empty if the user has none)."""
        return self.users_map.get(user, _EMPTY_MAP)

    def users(self) -> Iterable[str]:
        """Every user with at least one credential, in no particular order."""
        return self.users_map.keys()

    def __len__(self) -> int:
        return len(self.users_map)

    def __contains__(self, user: object) -> bool:
        return user in self.users_map

    def __iter__(self) -> Iterator[tuple[str, ScramEntry]]:
        """(user, entry) for every credential."""
        for user, by_mechanism in self.users_map.items():
            for entry in by_mechanism.values():
                yield user, entry


ScramImage.EMPTY = ScramImage()


class ScramDelta:
    """Changes to a ScramImage: (user, mechanism) -> new entry, or None for deleted."""

    __slots__ = ("image", "_changes")

    def __init__(self, image: ScramImage):
        self.image = image
        self._changes: dict[str, dict[ScramMechanism, ScramEntry | None]] = {}

    def upsert(
        self, user: str, mechanism: ScramMechanism, iterations: int, secret: SealedSecret
    ) -> None:
        """Create or replace the credential of ``user`` for ``mechanism``."""
        entry = ScramEntry(mechanism, iterations, secret)
        self._changes.setdefault(user, {})[mechanism] = entry

    def get(self, user: str, mechanism: ScramMechanism) -> ScramEntry | None:
        """A credential as the delta stands (image plus changes)."""
        changes = self._changes.get(user)
        if changes is not None and mechanism in changes:
            return changes[mechanism]
        return self.image.get(user, mechanism)

    def delete(self, user: str, mechanism: ScramMechanism) -> None:
        """Delete a credential; one that does not exist raises InconsistentEventError (as Kafka's replay)."""
        if self.get(user, mechanism) is None:
            raise InconsistentEventError(
                f"deletion of the {ScramMechanism(mechanism).name} credential of user {user!r}, which does not exist")
        self._changes.setdefault(user, {})[mechanism] = None

    def net(self) -> dict[str, dict[ScramMechanism, ScramEntry | None]]:
        """The net change to the base image: user -> mechanism -> the credential as it stands, or None (deleted)."""
        return {user: dict(changes) for user, changes in self._changes.items()}

    @classmethod
    def of_net(cls, image: ScramImage, net: Mapping[str, Mapping[ScramMechanism, ScramEntry | None]]) -> ScramDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image)."""
        delta = cls(image)
        delta._changes = {user: dict(changes) for user, changes in net.items()}
        return delta

    def apply(self) -> ScramImage:
        """The image with the changes; the base image itself if none had an effect."""
        base = self.image.users_map
        users = None
        for user, changes in self._changes.items():
            old = base.get(user, _EMPTY_MAP)
            inner = None
            for mechanism, entry in changes.items():
                if old.get(mechanism) == entry:
                    continue
                if inner is None:
                    inner = old.mutate()
                if entry is None:
                    del inner[mechanism]
                else:
                    inner[mechanism] = entry
            if inner is None:
                continue
            if users is None:
                users = base.mutate()
            new = inner.finish()
            if new:
                users[user] = new
            else:
                del users[user]
        if users is None:
            return self.image
        return ScramImage(users.finish())
