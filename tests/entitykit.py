"""A throwaway entity kind, declared as events/entities.py declares ours, for the derivation tests.

A widget opens with a colour and a size, is repainted (an update carrying the colour only), and
closes when scrapped or when a resize sets its size to None (``closed_when_none``, as a quota's
removed value). Nothing in secmeta names it: whatever handles it was derived from the declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

from secmeta.events.entities import EntityKind

__all__ = ["WIDGETS", "WidgetMade", "WidgetPainted", "WidgetResized", "WidgetScrapped", "widget_kind_of"]


@dataclass(frozen=True, slots=True)
class WidgetMade:
    widget_id: str
    owner: str
    colour: str
    size: int | None

    @property
    def entity_key(self) -> str:
        return f"widget:{self.widget_id}"


@dataclass(frozen=True, slots=True)
class WidgetPainted:
    widget_id: str
    colour: str
    brush: str  # not an attribute: stays out of the widget's state

    @property
    def entity_key(self) -> str:
        return f"widget:{self.widget_id}"


@dataclass(frozen=True, slots=True)
class WidgetResized:
    widget_id: str
    size: int | None

    @property
    def entity_key(self) -> str:
        return f"widget:{self.widget_id}"


@dataclass(frozen=True, slots=True)
class WidgetScrapped:
    widget_id: str

    @property
    def entity_key(self) -> str:
        return f"widget:{self.widget_id}"


WIDGETS = EntityKind(
    "widget", key=("widget_id",), attributes=("owner", "colour", "size"),
    opens=(WidgetMade,), updates=(WidgetPainted, WidgetResized), closes=(WidgetScrapped,),
    principals=lambda event: (event.owner,) if isinstance(event, WidgetMade) else (),
    table="widgets", intervals_table="widget_intervals", closed_when_none="size", carries_parties=True)


def widget_kind_of(event) -> EntityKind:
    """``secmeta.events.entities.kind_of`` for a world whose only kind is ``WIDGETS``."""
    if type(event) not in WIDGETS.event_types:
        raise KeyError(type(event).__name__)
    return WIDGETS
