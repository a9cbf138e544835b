"""The segmented, append-only, fsync'd metadata log: ``Log`` ties its parts together.

Opening (loader), appending with group commit (append), chain-checked reads
(reading), tailing (tail), a read-only log following the writer (refresh) and
deleting covered segments (retention) each live in their own module; they share
the open log's ``LogState``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence

from secmeta.core.errors import SecmetaError
from secmeta.core.log.append import Appender, AppendResult
from secmeta.core.log.chain import Chain
from secmeta.core.log.config import FsyncPolicy, LogConfig
from secmeta.core.log.format import Batch
from secmeta.core.log.highwater import HighWater
from secmeta.core.log.loader import LogLoader, RecoveryReport, write_genesis_mark
from secmeta.core.log.pending_recovery import clear_pending
from secmeta.core.log.reading import Reader
from secmeta.core.log.refresh import refresh
from secmeta.core.log.retention import delete_segments_before, retention_configured
from secmeta.core.log.segment import Segment
from secmeta.core.log.state import LogState
from secmeta.core.log.tail import TailReader, wait_for
from secmeta.core.store.commit_gate import PendingBatch
from secmeta.core.store.storedir import StoreDirectory
from secmeta.core.times import Clock, now_ms, wall_clock
from secmeta.events.codec import EventCodec
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope

OPEN_ATTEMPTS = 3  # a read-only open retries when the writer deletes a file it was about to read


class Log:
    """A store directory's log. Use ``Log.open``; one writer process per directory."""

    def __init__(self, store: StoreDirectory, keyring: Keyring, codec: EventCodec, config: LogConfig, read_only: bool,
                 retention: bool = False, clock: Clock = wall_clock):
        self.store = store
        self.retention = retention
        self.keyring = keyring
        self.codec = codec
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self.recovery = RecoveryReport()
        self.logged_recovery: Envelope | None = None  # a pending recovery's event this open logged first
        self._high_water = HighWater(store.log_dir, store.store_id, keyring)
        chain = Chain(keyring)
        self._loader = LogLoader(store, keyring, codec, chain, config, self._high_water,
                                 read_only=read_only, retention=retention)
        self.state = LogState(store.store_id)
        self._reader = Reader(self.state, chain, codec, refresh=self.refresh if read_only else None)
        self._writer = Appender(self.state, store, keyring, codec, chain, config, self._high_water)
        self._flusher: threading.Thread | None = None

    # -- opening ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        keyring: Keyring,
        codec: EventCodec | None = None,
        config: LogConfig | None = None,
        create: bool = True,
        read_only: bool = False,
        retention: bool | None = None,
        clock: Clock = wall_clock,
    ) -> Log:
        """Open the log of the store at ``path`` (creating the store if allowed).

        ``retention``: whether covered segments may have been deleted (a log that does not
        start at offset 0 is refused otherwise); None takes the store's saved setting.
        ``clock`` stamps what the log writes itself (a retention anchor, a new store).
        """
        for attempt in range(OPEN_ATTEMPTS):
            store = StoreDirectory.open(path, create=create and not read_only, writer=not read_only, clock=clock,
                                        initialise=lambda new: write_genesis_mark(new, keyring))
            try:
                store.check_keyring(keyring, writer=not read_only)
                allowed = retention_configured(store) if retention is None else retention
                log = cls(store, keyring, codec or EventCodec.fresh(), config or LogConfig(), read_only, allowed, clock)
                log._load()
                break
            except FileNotFoundError:
                store.close()
                if not read_only or attempt == OPEN_ATTEMPTS - 1:
                    raise
            except BaseException:
                store.close()
                raise
        if not read_only and log.config.fsync == FsyncPolicy.INTERVAL:
            log._flusher = threading.Thread(target=log._writer.flush_every, args=(log.config.fsync_interval_ms / 1000,),
                                            name="secmeta-log-flush", daemon=True)
            log._flusher.start()
        return log

    def _load(self) -> None:
        self._loader.load_schemas()
        loaded, self.recovery = self._loader.load()
        self.state.take(loaded)
        self._reader.keep_verified(self._loader.verified)
        self._loader.verified = None
        if self._loader.pending is not None:  # a recovery's LogRecovered: the first batch after its cut
            self._writer.append([self._loader.pending])
            self._writer.flush()
            clear_pending(self.store)
            self.logged_recovery = self._loader.pending

    # -- appending -------------------------------------------------------------

    def append(self, envelopes: Sequence[Envelope], gate: Callable[[PendingBatch], None] | None = None) -> AppendResult:
        """Append one batch; returns once it is durable per the fsync policy (secmeta.core.log.append).
        ``gate`` commits the batch elsewhere first (secmeta.core.store.commit_gate)."""
        self._check_writer()
        return self._writer.append(envelopes, gate)

    def frame_batch(self, envelopes: Sequence[Envelope], base: int, prev_link: bytes) -> tuple[bytes, bytes, int]:
        """Frame a batch to be appended at ``base`` after the batch whose link is ``prev_link`` (a replicated writer
        frames queued writes ahead of committing them together): frame, link, timestamp; nothing is written."""
        self._check_writer()
        return self._writer.frame_batch(envelopes, base, prev_link)

    def append_frame(self, frame: bytes) -> tuple[list[Envelope], AppendResult]:
        """Append, byte for byte, a batch framed by another copy of this log once it is checked to extend this
        one (DivergedError naming the offset otherwise); its events and where it landed."""
        self._check_writer()
        return self._writer.append_frame(frame)

    def append_frames(self, frames: Sequence[bytes]) -> list[tuple[list[Envelope], AppendResult]]:
        """``append_frame`` for consecutive batches with one sync after the last (a replicated writer's group)."""
        self._check_writer()
        return self._writer.append_frames(frames)

    def _check_writer(self) -> None:
        if self.read_only:
            raise SecmetaError("this log was opened read-only")

    def check_in_place(self) -> None:
        """Before creating a file by path: the store directory must still be the one locked, else the log fails."""
        self._writer.check_in_place()

    def flush(self) -> None:
        """Fsync everything written so far (any policy)."""
        if not self.read_only:
            self._writer.flush()

    def add_writer_schema(self, schema_json: str) -> None:
        """Learn (and keep beside the log) the writer schema of batches another copy of the log appended."""
        self._check_writer()
        self._loader.add_schema(schema_json)

    def writer_schemas(self) -> list[str]:
        """Every writer schema the log's batches may be written with, as stored (this codec's last)."""
        return self._loader.writer_schemas()

    # -- reading ---------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.state.start_offset

    @property
    def end_offset(self) -> int:
        """The offset the next event will get, counting only what readers may see."""
        return self.state.visible_end

    @property
    def last_link(self) -> bytes:
        return self.state.last_link

    @property
    def closed(self) -> bool:
        return self._writer.closed

    def link_at(self, next_offset: int) -> bytes | None:
        """The chain link of the batch ending at ``next_offset`` (None if no batch ends there)."""
        return self._reader.link_at(next_offset)

    def batches(self, start: int = 0, end: int | None = None, *, strict: bool = False) -> Iterator[Batch]:
        """The visible batches holding offsets in [start, end) (see secmeta.core.log.reading)."""
        return self._reader.batches(start, end, strict=strict)

    def decode(self, batch: Batch) -> list[Envelope]:
        return self._reader.decode(batch)

    def read(self, start: int = 0, end: int | None = None, *, strict: bool = False) -> Iterator[Envelope]:
        """Yield the visible events with offsets in [start, end), decoded (``strict`` as for ``batches``)."""
        for events in self._reader.read_batches(start, end, strict=strict):
            yield from events

    def read_batches(self, start: int = 0, end: int | None = None, *,
                     strict: bool = False) -> Iterator[list[Envelope]]:
        """``read``'s events a batch at a time (a batch cut by ``start`` or ``end`` holds only its part)."""
        return self._reader.read_batches(start, end, strict=strict)

    def replay_batches(self, start: int = 0, end: int | None = None, *,
                       strict: bool = False) -> Iterator[tuple[int, list]]:
        """The events in [start, end) a batch at a time, as replay reads them (``EventCodec.decode_events``),
        each list with the offset of its first event."""
        return self._reader.replay_batches(start, end, strict=strict)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset of the first batch whose time is >= ``timestamp_ms`` (end_offset if none)."""
        return self._reader.offset_for_timestamp(timestamp_ms)

    def segments(self) -> list[Segment]:
        with self.state.visible:
            return list(self.state.segments)

    # -- following -------------------------------------------------------------

    def wait_for(self, offset: int, timeout: float | None) -> bool:
        """Block until ``end_offset > offset`` or the timeout passes; True if it did."""
        return wait_for(self, offset, timeout)

    def tail(self, start: int = 0) -> TailReader:
        return TailReader(self, start)

    def refresh(self) -> None:
        """For a read-only log: pick up batches and segments another process appended since."""
        if self.read_only:
            refresh(self.state, self._loader)

    # -- retention -------------------------------------------------------------

    def delete_segments_before(self, offset: int) -> list[str]:
        """Delete sealed segments whose every event is below ``offset`` (secmeta.core.log.retention)."""
        self._check_writer()
        return delete_segments_before(self._writer, offset, configured=self.retention,
                                      now_ms=lambda: now_ms(self.clock))

    # -- closing ---------------------------------------------------------------

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self.read_only and self._writer.failed is None:
                self.flush()
        finally:
            self._writer.closed = True
        if self._flusher is not None:
            self._flusher.join(timeout=2)
        self.state.close()
        self._high_water.close()
        self.store.close()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else f"fsync={self.config.fsync.value}"
        return f"<Log {self.store.path} offsets [{self.start_offset}, {self.end_offset}) {mode}>"
