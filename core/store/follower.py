"""A read-only image following a log: the batches another process appended, replayed into the image.

``LogFollower(log, image)`` starts at ``image.next_offset``; each ``catch_up(image)`` reads what
became visible since (``secmeta.core.log.tail.TailReader`` over a read-only ``Log``, whose
``refresh`` picks up new batches, new segments and what retention deleted) and returns the image
with it replayed, and the envelopes replayed.  It never waits and never writes.  A reader that
falls behind retention (its next offset deleted) raises ``OffsetOutOfRangeError``: it must load
again, from a snapshot, rather than serve a gap.

The serving processes of ``secmeta serve --processes N`` follow the writer's log this way
(``SecurityStore.catch_up`` on a store opened read-only); any process holding a read-only store
beside a writer (a standby, a replica whose local log another part appends to) can do the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from secmeta.core.log import Log
from secmeta.core.log.tail import TailReader
from secmeta.events.records import Envelope
from secmeta.projections.image import SecurityDelta, SecurityImage

__all__ = ["LogFollower", "replayed"]


def replayed(image: SecurityImage, envelopes: Sequence[Envelope], next_offset: int) -> SecurityImage:
    """``image`` with ``envelopes`` (whole batches, ending before ``next_offset``) replayed: the one
    way a batch becomes part of an image, for the writer's commit and for a follower alike."""
    delta = SecurityDelta(image)
    delta.replay_all(envelopes)
    return delta.apply(next_offset)


class LogFollower:
    """Follows ``log`` (opened read-only beside its writer) from an image's next offset."""

    def __init__(self, log: Log, image: SecurityImage):
        self._tail = TailReader(log, image.next_offset)

    def __repr__(self) -> str:
        return f"<LogFollower at {self._tail.position}>"

    @property
    def position(self) -> int:
        """The offset the next batch read starts at: every event before it has been returned."""
        return self._tail.position

    def catch_up(self, image: SecurityImage) -> tuple[SecurityImage, list[Envelope]]:
        """``image`` (at ``position``) with every batch visible now replayed, and those batches' events."""
        if image.next_offset != self._tail.position:
            raise ValueError(f"the image is at offset {image.next_offset}, the follower at {self._tail.position}")
        envelopes = self._tail.poll(timeout=0)
        if self._tail.position == image.next_offset:
            return image, []
        return replayed(image, envelopes, self._tail.position), envelopes
