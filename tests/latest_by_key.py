"""A generic state for tests: the latest event per entity key (acl:<id>, scram:<user>:<mech>, token:<id>).

It needs no knowledge of what events mean, so it serves to test the log and
snapshot machinery (a projection and a snapshot codec that are not the
security image's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from immutables import Map

from secmeta.events.codec import EventCodec
from secmeta.events.records import Envelope

LatestState = Map  # entity key -> Envelope


class LatestByKey:
    """Projection: keeps the newest envelope per entity key."""

    empty: LatestState = Map()

    def apply(self, state: LatestState, envelopes: Sequence[Envelope]) -> LatestState:
        with state.mutate() as m:
            for env in envelopes:
                m[env.event.entity_key] = env
            return m.finish()


class LatestByKeySnapshot:
    """Snapshot codec for LatestByKey: one row per key, the event as its Avro body."""

    kind = "latest-by-key"
    schema = {
        "type": "record",
        "name": "LatestEvent",
        "namespace": "secmeta.snapshot",
        "doc": "The newest event logged for one entity key.",
        "fields": [
            {"name": "key", "type": "string", "doc": "Entity key, e.g. acl:<id>."},
            {"name": "offset", "type": "long", "doc": "Log offset of the event."},
            {"name": "timestamp_ms", "type": "long", "doc": "Event time, epoch ms."},
            {"name": "actor_principal", "type": "string", "doc": "Who made the change."},
            {"name": "actor_host", "type": "string", "doc": "From where."},
            {"name": "request_id", "type": "string", "doc": "The request it belonged to."},
            {"name": "event_type", "type": "string", "doc": "Event record name."},
            {
                "name": "body",
                "type": "bytes",
                "doc": "The event, Avro-encoded with its current schema.",
            },
        ],
    }

    def __init__(self, codec: EventCodec):
        self.codec = codec

    def rows(self, state: LatestState) -> Iterable[dict]:
        for key, env in state.items():
            yield {
                "key": key,
                "offset": env.offset,
                "timestamp_ms": env.timestamp_ms,
                "actor_principal": env.actor_principal,
                "actor_host": env.actor_host,
                "request_id": env.request_id,
                "event_type": env.event_type,
                "body": self.codec.encode_event(env.event),
            }

    def build(self, rows: Iterable[dict]) -> LatestState:
        decode = self.codec.decode_event
        with Map().mutate() as m:
            for r in rows:
                event = decode(r["event_type"], r["body"])
                m[r["key"]] = Envelope(
                    r["offset"],
                    r["timestamp_ms"],
                    r["actor_principal"],
                    r["actor_host"],
                    r["request_id"],
                    event,
                    self.codec.event_fingerprint(r["event_type"]),
                )
            return m.finish()
