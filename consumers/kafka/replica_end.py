"""Where the follower's local log ends on the history topic, recorded beside the log at each append.

A follower that restarts from its local log (ahead of its checkpoint after a crash) checks the topic from the
local log's last event, as it would from a checkpoint: the cluster and topic it was read from, the Kafka offset of
its message and its store batch's link (``ReplicaEnd``).  ``DIR/local-log-end`` holds two slots of ``SLOT``
bytes, each a CRC32 and length, then a JSON body with a sequence number.  Before each append the local log's new
end goes into the slot that does not hold its current end (one pwrite, no sync: the log's own append is
fsynced, and a second sync per append slowed catch-up by up to half, 3.65 to 5.50 s wall for 200k events), so
whichever end a kill leaves the log at (a torn append is cut at open), a slot records it, and a slot torn in the write fails its CRC; at open the
newest slot recording the log's end is taken.  After a power loss the record may lag the durable log (or be ahead
of it, or gone): no slot then records the log's end, and the follower resumes from its checkpoint, checking what it
reads again against the local log (``LocalReplica.rejoin``), rather than follow on from an end it cannot check.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from secmeta.consumers.kafka.topic_identity import TopicIdentity
from secmeta.core.errors import SecmetaError
from secmeta.events.durable import fsync_dir

__all__ = ["END_FILE", "SLOT", "EndRecord", "ReplicaEnd"]

END_FILE = "local-log-end"
SLOT = 4096
_HEAD = struct.Struct(">II")  # the body's CRC32 and length


@dataclass(frozen=True, slots=True)
class ReplicaEnd:
    """The local log's end (``next_offset``), the Kafka offset of its last event's message, that event's store batch
    link (None: the message carried none) and the cluster and topic it was read from (None: not known)."""

    next_offset: int
    kafka_offset: int
    link: bytes | None = field(repr=False)
    identity: TopicIdentity | None = None


class EndRecord:
    """The two-slot file of ``ReplicaEnd`` records at ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if created:
            fsync_dir(self.path.parent)
        self._slots = [self._read_slot(at) for at in (0, 1)]  # (sequence number, end), or None: empty or torn
        self._kept: int | None = None  # the slot recording the log's end: never written over
        self._written: int | None = None

    def read(self, next_offset: int) -> ReplicaEnd | None:
        """The newest record of the end ``next_offset`` (None: none), whose slot is then kept."""
        found = [(slot[0], at) for at, slot in enumerate(self._slots) if slot and slot[1].next_offset == next_offset]
        if not found:
            return None
        sequence, self._kept = max(found)
        return next(end for seq, end in filter(None, self._slots) if seq == sequence)

    def write(self, end: ReplicaEnd) -> None:
        """Record ``end`` in the slot not kept (the older one if none is), as the newest record (written, not
        synced: see the module)."""
        at = (1 - self._kept) if self._kept is not None else int(self._sequence(1) < self._sequence(0))
        sequence = max(self._sequence(0), self._sequence(1)) + 1
        body = json.dumps({"sequence": sequence, "next_offset": end.next_offset, "kafka_offset": end.kafka_offset,
                           "link": None if end.link is None else end.link.hex(),
                           "identity": None if end.identity is None else end.identity.to_json()}).encode()
        if _HEAD.size + len(body) > SLOT:
            raise SecmetaError(f"the local log's end record is {len(body)} bytes, over the {SLOT}-byte slot of "
                               f"{self.path} (a topic name or cluster id that long is not recorded)")
        data = _HEAD.pack(zlib.crc32(body), len(body)) + body
        os.pwrite(self._fd, data.ljust(SLOT, b"\0"), at * SLOT)
        self._slots[at], self._written = (sequence, end), at

    def keep_written(self) -> None:
        """The end last written is now the log's (appended): its slot is kept."""
        self._kept = self._written

    def _sequence(self, at: int) -> int:
        slot = self._slots[at]
        return 0 if slot is None else slot[0]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _read_slot(self, at: int) -> tuple[int, ReplicaEnd] | None:
        raw = os.pread(self._fd, SLOT, at * SLOT)
        if len(raw) < _HEAD.size:
            return None
        crc, length = _HEAD.unpack_from(raw)
        body = raw[_HEAD.size:_HEAD.size + length]
        if length == 0 or len(body) != length or zlib.crc32(body) != crc:
            return None
        try:
            data = json.loads(body)
            sequence, next_offset, kafka_offset = data["sequence"], data["next_offset"], data["kafka_offset"]
            if not all(type(n) is int and n >= 0 for n in (sequence, next_offset, kafka_offset)):
                return None
            link = None if data["link"] is None else bytes.fromhex(data["link"])
            identity = TopicIdentity.from_json(data["identity"])
        except (ValueError, KeyError, TypeError):
            return None
        return sequence, ReplicaEnd(next_offset, kafka_offset, link, identity)
