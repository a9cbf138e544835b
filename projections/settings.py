"""The image of the logged settings (Kafka's ConfigurationsImage for the cluster's BROKER resource).

Settings are kept by name, each its text form as ``SecuritySettingAltered`` logged it; a setting
set back to its default (value None) leaves the image, so the image holds exactly the settings
the log set. What a value means, and the defaults, are core's (secmeta.core.settings).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import immutables

__all__ = ["SettingsDelta", "SettingsImage"]


@dataclass(frozen=True, slots=True)
class SettingsImage:
    """Every logged setting: name -> value (text)."""

    values: immutables.Map = immutables.Map()
    EMPTY: ClassVar[SettingsImage]

    def get(self, name: str) -> str | None:
        """The logged value of ``name`` (None: never logged, or set back to its default)."""
        return self.values.get(name)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """(name, value) of every logged setting, in no particular order."""
        return iter(self.values.items())

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, name: str) -> bool:
        return name in self.values


SettingsImage.EMPTY = SettingsImage()


class SettingsDelta:
    """Changes to a SettingsImage: per name its value as it now stands (None: back to default)."""

    __slots__ = ("image", "_changes")

    def __init__(self, image: SettingsImage):
        self.image = image
        self._changes: dict[str, str | None] = {}

    def set(self, name: str, value: str | None) -> None:
        self._changes[name] = value

    def net(self) -> dict[str, str | None]:
        """The net change to the base image: name -> value as it stands (None: back to its default)."""
        return dict(self._changes)

    @classmethod
    def of_net(cls, image: SettingsImage, net: Mapping[str, str | None]) -> SettingsDelta:
        """A delta onto ``image`` holding ``net`` (what ``net`` gave for a delta onto the same image)."""
        delta = cls(image)
        delta._changes = dict(net)
        return delta

    def apply(self) -> SettingsImage:
        """The image with the changes; the base image itself if none had an effect."""
        base = self.image.values
        mutation = None
        for name, value in self._changes.items():
            if base.get(name) == value:
                continue
            if mutation is None:
                mutation = base.mutate()
            if value is None:
                del mutation[name]
            else:
                mutation[name] = value
        return self.image if mutation is None else SettingsImage(mutation.finish())
