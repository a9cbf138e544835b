"""Where a node may resume reading its log topic: a hint beside the store, never trusted alone.

Reading the topic from its first record at every start costs time in proportion to the whole history. A
node records, beside its store (``replication-resume.json``), the Kafka offset of the last batch record
it applied and that batch's end offset and link. On start, when its local log still holds that batch,
it reads from that record: the record must be there and be that batch (the same link: by the keyed
chain, the same history before it), or the node reads from the first record as before. So a stale,
lost or wrong hint costs only time; it can never make a node accept a topic that does not hold its log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from secmeta.core.log import Log
from secmeta.events.durable import write_atomically

__all__ = ["RESUME_FILE", "ResumePoint", "read_resume_point", "write_resume_point"]

RESUME_FILE = "replication-resume.json"


@dataclass(frozen=True)
class ResumePoint:
    """The batch record at ``kafka_offset`` of ``topic`` ends at log offset ``next_offset`` with ``link``."""

    topic: str
    kafka_offset: int
    next_offset: int
    link: bytes = field(repr=False)
    seeded: bool = False  # the topic's seeded record lies before it


def read_resume_point(log: Log, topic: str) -> ResumePoint | None:
    """The recorded point, if it names ``topic`` and the local log holds that batch; else None."""
    try:
        data = json.loads((log.store.path / RESUME_FILE).read_text())
        point = ResumePoint(str(data["topic"]), int(data["kafka_offset"]), int(data["next_offset"]),
                            bytes.fromhex(data["link"]), data.get("seeded") is True)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if point.topic != topic or not log.start_offset < point.next_offset <= log.end_offset:
        return None
    return point if log.link_at(point.next_offset) == point.link else None


def write_resume_point(log: Log, point: ResumePoint) -> None:
    body = {"topic": point.topic, "kafka_offset": point.kafka_offset, "next_offset": point.next_offset,
            "link": point.link.hex(), "seeded": point.seeded}
    write_atomically(log.store.path / RESUME_FILE, json.dumps(body).encode())
