"""Reading a segment's batches with every batch checked against the hash chain link before it."""

from __future__ import annotations

from collections.abc import Iterator

from secmeta.core.errors import CorruptLogError
from secmeta.core.log.errors import DivergedError
from secmeta.core.log.format import Batch, FrameError
from secmeta.core.log.segment import Segment
from secmeta.events.errors import UnknownKeyError
from secmeta.events.keyring import Keyring


class Chain:
    """Checks batches against their chain links, with the keyring's chain keys (cached by key id)."""

    def __init__(self, keyring: Keyring):
        self.keyring = keyring
        self.key_id = keyring.newest_id
        self.key = keyring.chain_key(self.key_id)
        self._keys = {self.key_id: self.key}

    def chained(self, seg: Segment, position: int, offset: int, prev: bytes | None, *, size: int) -> Iterator[Batch]:
        """The batches from byte ``position`` (where offset ``offset`` starts), each checked against
        the chain link before it; with ``prev`` None the first batch read only lends its link."""
        for batch in self.frames(seg, position, size, offset):
            if prev is not None:
                self.check_link(seg, batch, prev)
                yield batch
            prev = batch.link

    def check_link(self, seg: Segment, batch: Batch, prev: bytes | None) -> None:
        key = self._keys.get(batch.key_id)
        if key is None:
            try:
                key = self._keys[batch.key_id] = self.keyring.chain_key(batch.key_id)
            except UnknownKeyError:
                raise CorruptLogError(
                    f"segment {seg.name}: the batch at offset {batch.base_offset} is linked with key id "
                    f"{batch.key_id!r}, which is not in the keyring, so it cannot be checked",
                    segment=seg.name, offset=batch.base_offset,
                ) from None
        if prev is None or batch.expected_link(key, prev) != batch.link:
            raise CorruptLogError(
                f"segment {seg.name}: the batch at offset {batch.base_offset} fails its hash chain link: "
                "it or the batch before it was altered",
                segment=seg.name, offset=batch.base_offset,
            )

    def frames(self, seg: Segment, position: int, size: int, expected: int | None) -> Iterator[Batch]:
        """The frames from byte ``position`` to ``size``, each at the offset the one before ends at."""
        try:
            for batch in seg.frames(position, size):
                if expected is not None and batch.base_offset != expected:
                    raise CorruptLogError(
                        f"segment {seg.name}: batch at byte {batch.position} has offset "
                        f"{batch.base_offset} where {expected} was expected",
                        segment=seg.name,
                        offset=expected,
                    )
                expected = batch.next_offset
                yield batch
        except FrameError as exc:
            at = expected if expected is not None else seg.base_offset
            raise CorruptLogError(
                f"segment {seg.name} is corrupt at byte {exc.position} (after offset {at}): {exc}",  # type: ignore[attr-defined]
                segment=seg.name,
                offset=at,
            ) from None

    def tail_batches(self, seg: Segment) -> list[Batch]:
        """A sealed segment's batches from its last indexed position on."""
        return list(self.frames(seg, seg.position_for(seg.next_offset), seg.size, None))

    def last_link_of(self, seg: Segment) -> bytes:
        """The link of a non-empty segment's last batch (read from its last indexed position)."""
        return self.tail_batches(seg)[-1].link


def check_extends(chain: Chain, batch: Batch, end: int, last_link: bytes) -> None:
    """DivergedError unless ``batch`` extends a log that ends at offset ``end`` with link ``last_link``: it
    starts at ``end`` and its link is the keyed link over ``last_link`` and itself (a key of the keyring)."""
    if batch.base_offset != end:
        raise DivergedError(
            f"the batch at offset {batch.base_offset} does not extend the local log, which ends at offset {end}"
            + (": the batches between are missing" if batch.base_offset > end else
               ": the local log already holds that offset"), offset=min(end, batch.base_offset))
    try:
        key = chain.keyring.chain_key(batch.key_id)
    except UnknownKeyError:
        raise DivergedError(f"the batch at offset {end} is linked with key id {batch.key_id!r}, which is not in the "
                            "keyring, so it cannot be checked against the local log", offset=end) from None
    if batch.expected_link(key, last_link) != batch.link:
        raise DivergedError(
            f"the batch at offset {end} does not chain from the local log's last link: the local log ends with "
            f"link {last_link.hex()[:16]}, the batch carries link {batch.link.hex()[:16]} made over another "
            "history (one of the two was rolled back, rewritten or forged)", offset=end)
