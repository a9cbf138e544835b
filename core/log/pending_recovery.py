"""A recovery done but not yet logged: the sealed marker that makes the next writer log it.

``secmeta log recover`` writes ``DIR/recovery-pending`` (the LogRecovered event to log, sealed
with the keyring) before it changes anything, then cuts the log and opens it for writing:
the writer's open appends the event as the log's next batch and only then deletes the marker.
A crash anywhere in between leaves the marker, so the repair is still logged by the next
writer open (fail closed): a reader refuses to open the log until then, and a writer refuses
when the log does not end where the marker says it was cut (the recovery was interrupted
before its cut: running it again finishes it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.seal import BrokenSealError, seal, unseal
from secmeta.core.operator import local_operator
from secmeta.core.store.storedir import StoreDirectory
from secmeta.events.durable import write_atomically
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope, LogRecovered, Operator

__all__ = ["PENDING_FILE", "Pending", "clear_pending", "cut_span", "os_actor", "read_pending",
           "recovered_envelope", "write_pending"]

PENDING_FILE = "recovery-pending"


def _path(store: StoreDirectory) -> Path:
    return store.path / PENDING_FILE


def _context(store: StoreDirectory) -> bytes:
    return b"secmeta/recovery-pending:" + store.store_id.encode()


def write_pending(store: StoreDirectory, keyring: Keyring, envelope: Envelope) -> None:
    """Durably record ``envelope`` (its event a LogRecovered) as the batch the next writer open must log."""
    body = json.dumps({"timestamp_ms": envelope.timestamp_ms, "actor_principal": envelope.actor_principal,
                       "actor_host": envelope.actor_host, "request_id": envelope.request_id,
                       "operator": dataclasses.asdict(envelope.operator),
                       "event": dataclasses.asdict(envelope.event)}, sort_keys=True).encode()
    write_atomically(_path(store), seal(keyring, _context(store), body))


@dataclass(frozen=True)
class Pending:
    """A recovery waiting to be logged: its event, in the envelope to log it in."""

    envelope: Envelope
    event: LogRecovered


def read_pending(store: StoreDirectory, keyring: Keyring) -> Pending | None:
    """The recovery waiting to be logged (None: none); CorruptLogError for a marker that is not ours."""
    try:
        data = _path(store).read_bytes()
    except FileNotFoundError:
        return None
    try:
        fields = json.loads(unseal(keyring, _context(store), data))
        event = LogRecovered(**fields["event"])
        return Pending(_envelope(fields["timestamp_ms"], fields["actor_principal"], fields["actor_host"],
                                 fields["request_id"], event, Operator(**fields.get("operator", {"user": "",
                                 "host": "", "pid": 0, "program": ""}))), event)
    except (BrokenSealError, ValueError, TypeError, KeyError) as exc:
        raise CorruptLogError(
            f"the pending-recovery marker {_path(store)} is not valid ({exc}): it was altered or forged. "
            "Nothing was changed; `secmeta log recover` writes a new one"
        ) from None


def clear_pending(store: StoreDirectory) -> None:
    _path(store).unlink(missing_ok=True)


def os_actor(user: str) -> str:
    """The actor of a write no Kafka principal made (a local repair): the OS user, in a form without the
    ``Type:`` of a Kafka principal, so it never reads as (nor matches a query for) one such as ``User:root``."""
    return f"{user} (os user)"


def recovered_envelope(event: LogRecovered, timestamp_ms: int) -> Envelope:
    """The envelope a recovery is logged in: actor and host are the local operator's (core.operator),
    asserted; no Kafka principal acts, so the actor is the OS user (``os_actor``)."""
    operator = local_operator()
    return _envelope(timestamp_ms, os_actor(operator.user), operator.host, f"recovery-{event.recovery_id}", event,
                     operator)


def _envelope(timestamp_ms: int, principal: str, host: str, request_id: str, event: LogRecovered,
              operator: Operator) -> Envelope:
    return Envelope(-1, timestamp_ms, principal, host, request_id, event, actor_asserted=True,
                    operator_user=operator.user, operator_host=operator.host, operator_pid=operator.pid,
                    operator_program=operator.program)


def cut_span(from_offset: int, to_offset: int) -> str:
    """How a cut of offsets [from_offset, to_offset) reads."""
    if to_offset - from_offset == 1:
        return f"offset {from_offset}"
    return f"offsets {from_offset} to {to_offset - 1}" if to_offset > from_offset else "no offsets"
