"""ControlResult: what a control function returns (Kafka's ControllerResult).

The events to append as one batch, and the response the caller gets once
they are durable and applied. A control function never changes state; the
store appends ``events``, replays them, then hands back ``response``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from secmeta.events.records import Event

__all__ = ["ControlResult"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ControlResult(Generic[R]):
    """The events a request produces (possibly none) and its response."""

    events: Sequence[Event]  # stored as a tuple
    response: R

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
