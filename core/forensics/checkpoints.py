"""Persistent time-travel checkpoints: images at log offsets, on disk beside the log.

    DIR/checkpoints/snapshot-<next_offset>.avro

A checkpoint file is a snapshot (secmeta.projections.snapshot: CRC, HMAC under the
keyring's chain key, the chain link of the batch that ends at its offset), one
every ``spacing`` events: ``every``, or a ``max_files``-th of the log, whichever
is more; past ``max_files`` files the one whose removal leaves the smallest gap is
deleted, so the disk holds at most ``max_files`` images.  Since snapshot format 5
a file is loaded without work per ACL (its index is read in place, each node made
when first asked for, the events replayed after it deferred into the nodes they
touch: ``acl_deferred``), so what a point costs is mostly the replay from the
nearest file: files are spaced by events alone (issue 24: at 10M events of the
mixed log, 96 files ~104k events apart, a replay of ~0.5 s CPU at most; format 4
spaced them a tenth of the image's ACLs apart as well, since a load cost ~1.6 us
per ACL).  They are written in the background: as the log grows
(from the images time travel already holds) and, when a store opens, for the
stretch of log that has none yet (``fill``).  A cold process answers its first
``as_of`` from the nearest checkpoint file plus a short replay instead of
replaying the log from its start.  A file that is truncated, tampered with,
written under another key or does not fit the log's chain is reported once,
deleted and written again later; it is never served.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

from secmeta.core.log import Log
from secmeta.core.log.fit import snapshot_misfit
from secmeta.core.snapshots.forked_snapshot import write_snapshot_forked
from secmeta.core.store.storedir import CHECKPOINT_DIR
from secmeta.core.times import now_ms
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    SnapshotError,
    list_snapshots,
    read_snapshot,
    snapshot_path,
)

__all__ = ["CHECKPOINT_DIR", "DEFAULT_EVERY", "DEFAULT_MAX_FILES", "CheckpointFiles"]

logger = logging.getLogger("secmeta.checkpoints")
DEFAULT_EVERY = 50_000
DEFAULT_MAX_FILES = 96


class CheckpointFiles:
    """The checkpoint files of one store: which offsets have one, writing and loading them."""

    def __init__(self, log: Log, every: int = DEFAULT_EVERY, max_files: int = DEFAULT_MAX_FILES):
        self.log = log
        self.every = every
        self.max_files = max_files
        self.directory = log.store.checkpoint_dir
        self.problems: list[str] = []  # files found bad (each reported once, then deleted)
        self._codec = SecurityImageSnapshot(principals_when_read=True)  # a point reads a few nodes
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._closed = threading.Event()

    def offsets(self) -> list[int]:
        """The offsets that have a checkpoint file, ascending."""
        return [int(p.stem.rsplit("-", 1)[-1]) for p in list_snapshots(self.directory)]

    def spacing(self, image: SecurityImage) -> int:
        """How many events past the newest file ``image`` must be to be written as the next one."""
        return max(self.every, (image.next_offset - self.log.start_offset) // self.max_files)

    def due(self, image: SecurityImage) -> bool:
        """Whether ``image`` is ``spacing(image)`` events past the newest file (or the log's start)."""
        offsets = self.offsets()
        return image.next_offset - (offsets[-1] if offsets else self.log.start_offset) >= self.spacing(image)

    def load(self, offset: int) -> SecurityImage | None:
        """The image in the file at ``offset``, or None (a bad file is reported once and deleted)."""
        path = self.directory / f"snapshot-{offset:020d}.avro"
        try:
            info, image = read_snapshot(path, self._codec, self.log.keyring)
            problem = snapshot_misfit(info.next_offset, info.link, self.log.start_offset, self.log.end_offset,
                                      self.log.link_at)
            if problem is None and info.next_offset != offset:
                problem = f"it holds offset {info.next_offset}, not {offset}"
        except FileNotFoundError:
            return None
        except (SnapshotError, OSError) as exc:
            problem = str(exc)
        if problem is not None:
            self._reject(path, problem)
            return None
        return replace(image, next_offset=offset)

    def _reject(self, path: Path, problem: str) -> None:
        self.problems.append(f"{path.name}: {problem}")
        logger.warning("time-travel checkpoint %s ignored and deleted (it will be written again): %s",
                       path, problem)
        path.unlink(missing_ok=True)

    def write(self, image: SecurityImage) -> None:
        """Write ``image`` as the checkpoint at its offset (which must end a batch of the log)."""
        link = self.log.link_at(image.next_offset)
        if link is None or self._closed.is_set():
            return
        write_snapshot_forked(self.directory, self._codec, image, next_offset=image.next_offset, link=link,
                              timestamp_ms=now_ms(self.log.clock), keyring=self.log.keyring,
                              abort=self._closed)  # off the writers' GIL; close() kills a child under way
        self._thin()

    def _thin(self) -> None:
        """Past ``max_files``, delete the file whose removal leaves the smallest gap (never the newest)."""
        offsets = self.offsets()
        while len(offsets) > self.max_files:
            bounds = [self.log.start_offset, *offsets]  # bounds[i] precedes offsets[i], bounds[i + 2] follows it
            i = min(range(len(offsets) - 1), key=lambda i: bounds[i + 2] - bounds[i])
            snapshot_path(self.directory, offsets.pop(i)).unlink(missing_ok=True)

    def write_in_background(self, image: SecurityImage) -> None:
        """Write ``image`` in a thread when it is due and no other write is under way."""
        if self.due(image):
            self._run(self._write_quietly, image)

    def fill(self, base: SecurityImage | None) -> None:
        """In a thread: replay from the newest good file (else ``base``) to the log's end, writing files."""
        self._run(self._fill_quietly, base)

    def _run(self, target, *args) -> None:
        with self._thread_lock:
            if self._closed.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=target, args=args, name="secmeta-checkpoints", daemon=True)
            self._thread.start()

    def _write_quietly(self, image: SecurityImage) -> None:
        try:
            self.write(image)
        except Exception as exc:  # noqa: BLE001 - a checkpoint is an optimisation: never take the store down
            logger.warning("time-travel checkpoint at offset %d not written: %s", image.next_offset, exc)

    def _fill_quietly(self, base: SecurityImage | None) -> None:
        try:
            self._fill(base)
        except Exception as exc:  # noqa: BLE001
            logger.warning("time-travel checkpoints not written: %s", exc)

    def fill_spacing(self) -> int:
        """The events between the files the fill writes (``spacing`` of the log's last image, whatever the image
        it starts from): at least ``every``, and so sparse that no file it writes is thinned again at once."""
        return max(self.every, (self.log.end_offset - self.log.start_offset) // self.max_files)

    def _fill(self, base: SecurityImage | None) -> None:
        offsets = self.offsets()
        spacing = self.fill_spacing()
        if offsets and self.log.end_offset - offsets[-1] < spacing:
            return  # no file is due past the newest, whatever its image: a reopened store loads none
        for offset in reversed(offsets):
            loaded = self.load(offset)
            if loaded is not None:
                base = loaded
                break
        if base is None:
            return
        since = base.next_offset
        with paused_gc():
            delta = SecurityDelta(base)
            for first, events in self.log.replay_batches(since, strict=True):  # never onto a base retention cut off
                if self._closed.is_set():
                    return
                delta.replay_events(first, events)  # replay's bulk route
                end = first + len(events)
                if end - since >= spacing:
                    image = delta.apply(end)
                    self.write(image)
                    # Go on from the file just written: its image is read in place, so the fill holds a file's
                    # bytes rather than the whole image, and later changes are deferred onto it.
                    image = self.load(image.next_offset) or image
                    delta, since = SecurityDelta(image), end

    def wait(self) -> None:
        """Wait for a write under way."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Stop writing and wait for a write under way."""
        self._closed.set()
        self.wait()
