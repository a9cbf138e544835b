"""Full verification of a log: every CRC, offset continuity, the keyed hash chain, decoding.

Read-only: it never repairs anything, it reports the first problem and where it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from core.log.format import FrameError, genesis_link
from core.log.log import ANCHOR_FILE
from core.log.segment import Segment
from core.storedir import StoreDirectory
from events.codec import EventCodec
from events.errors import EventsError
from events.keyring import Keyring


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    batches: int
    events: int
    end_offset: int
    first_bad_offset: int | None = None
    segment: str | None = None
    problem: str | None = None

    def __str__(self) -> str:
        if self.ok:
            return f"OK: {self.batches} batches, {self.events} events, CRCs and hash chain intact up to offset {self.end_offset}"
        where = f" in segment {self.segment}" if self.segment else ""
        return f"FAILED at offset {self.first_bad_offset}{where}: {self.problem}"


def verify_log(
    path: str | os.PathLike,
    *,
    keyring: Keyring,
    codec: EventCodec | None = None,
    checkpoints: Iterable[tuple[int, bytes]] = (),
) -> VerifyReport:
    """Check the whole log of the store at ``path``.

    ``checkpoints`` are (next_offset, link) pairs recorded elsewhere (snapshots):
    each must match the chain, which also exposes batches cut off the tail.
    """
    store = StoreDirectory.open(path, create=False, writer=False)
    store.check_keyring(keyring, writer=False)
    codec = codec or EventCodec()
    for schema in sorted(store.schema_dir.glob("*.avsc")):
        codec.register_writer_schema(schema.read_text())
    expected, link = 0, genesis_link(store.store_id)
    anchor = store.log_dir / ANCHOR_FILE
    if anchor.exists():
        meta = json.loads(anchor.read_text())
        expected, link = int(meta["next_offset"]), bytes.fromhex(meta["link"])
    links = {expected: link}
    batches = events = 0

    def failed(problem: str, segment: str | None = None) -> VerifyReport:
        return VerifyReport(False, batches, events, expected, expected, segment, problem)

    for base in sorted(int(p.stem) for p in store.log_dir.glob("*.log")):
        seg = Segment(store.log_dir, base, writable=False)
        try:
            if base != expected:
                return failed(f"segment starts at offset {base} but offset {expected} was expected "
                              "(a segment is missing, duplicated or renamed)", seg.name)
            for batch in seg.frames(0, seg.size):
                if batch.base_offset != expected:
                    return failed(f"batch at byte {batch.position} has offset {batch.base_offset} where "
                                  f"{expected} was expected (a batch was deleted, duplicated or reordered)", seg.name)
                if batch.key_id not in keyring.ids:
                    return failed(f"batch is linked with key id {batch.key_id!r}, which is not in the keyring", seg.name)
                if batch.expected_link(keyring.chain_key(batch.key_id), link) != batch.link:
                    return failed("hash chain broken: this batch or one before it was altered", seg.name)
                try:
                    decoded = codec.decode_batch(batch.payload, batch.schema_fp, batch.base_offset)
                except EventsError as exc:
                    return failed(f"batch does not decode: {exc}", seg.name)
                if [e.offset for e in decoded] != list(range(batch.base_offset, batch.next_offset)):
                    return failed("the events inside the batch do not carry the batch's offsets", seg.name)
                link, expected = batch.link, batch.next_offset
                links[expected] = link
                batches += 1
                events += batch.count
        except FrameError as exc:
            kind = "torn (incomplete)" if exc.truncated else "corrupt"
            return failed(f"{kind} batch at byte {exc.position}: {exc}", seg.name)  # type: ignore[attr-defined]
        finally:
            seg.close()
    for offset, want in checkpoints:
        if offset > expected:
            return failed(f"a snapshot records offset {offset} but the log ends at {expected}: "
                          "batches were removed from the end")
        if offset in links and links[offset] != want:
            return failed(f"a snapshot at offset {offset} records a different chain link: "
                          "the log was rewritten after that snapshot")
    return VerifyReport(True, batches, events, expected)
