"""Persistent time-travel checkpoints: images at log offsets, on disk beside the log.

    DIR/checkpoints/snapshot-<next_offset>.avro                        a full checkpoint: the image at an offset
    DIR/checkpoints/deltas-<base>/snapshot-<next_offset>.avro          a delta checkpoint: the net change from the
                                                                        image of the full file at ``base`` to the
                                                                        image at ``next_offset``

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

Delta checkpoints (issue 24) cut the replay past a full file: between two full files the fill leaves
``deltas`` delta files, ``delta_spacing`` events apart, each the net change from the newest full file's image
to its offset (``SecurityDelta.net``: every ACL, credential, token, quota and setting changed, as it stands; a
``security-delta`` snapshot, ``projections.delta_snapshot``), so a point costs the full file's load, one delta's
``apply`` (no event decoded or recorded, no id absent from the base looked up: a change cost about half an event
replayed, ~6 against ~12 us CPU, at 10M events of the mixed log) and a replay of at most
``delta_spacing`` events.  A delta file is a snapshot like a full one (CRC, HMAC under the keyring's chain key,
the chain link of the batch that ends at its offset, ``snapshot_misfit``), also checked to name its directory's
base and its own offset; a bad one is reported once, deleted and never served.  A delta directory goes before
its full file (thinned or found bad) does.  The fill writes them, from the newest full file (read in place) to
the log's end, when a store opens and, as the log grows, whenever the log is ``delta_spacing`` past the newest
file of either kind (``write_in_background``).  The fill runs in a forked child, a stretch (load, replay,
files) per child: the writers' interpreter only waits for it (``_fill_forked``).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path

from secmeta.core.log import Log
from secmeta.core.log.fit import snapshot_misfit
from secmeta.core.snapshots.forked import ForkedCallError, call_forked, note
from secmeta.core.snapshots.forked_snapshot import snapshot_timeout, write_snapshot_forked
from secmeta.core.store.storedir import (
    CHECKPOINT_DELTA_PREFIX,
    CHECKPOINT_DIR,
    checkpoint_delta_dirs,
)
from secmeta.core.times import now_ms
from secmeta.projections.delta_snapshot import DeltaState, SecurityDeltaSnapshot
from secmeta.projections.gc_pause import paused_gc
from secmeta.projections.image import NetChanges, SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    SnapshotError,
    list_partial_snapshots,
    list_snapshots,
    misnamed,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)

__all__ = ["CHECKPOINT_DIR", "DEFAULT_DELTAS", "DEFAULT_EVERY", "DEFAULT_MAX_FILES", "CheckpointFiles",
           "delta_misplaced", "list_delta_files"]

logger = logging.getLogger("secmeta.checkpoints")
DEFAULT_EVERY = 50_000
DEFAULT_MAX_FILES = 96
DEFAULT_DELTAS = 3  # delta files between two full ones: at 10M events of the mixed log ~26k events apart
DELTA_PREFIX = CHECKPOINT_DELTA_PREFIX


def list_delta_files(directory: Path) -> list[Path]:
    """Every delta file under a checkpoint directory, by base then offset."""
    return [path for base in checkpoint_delta_dirs(directory) for path in list_snapshots(base)]


def delta_misplaced(path: Path, state: DeltaState) -> str | None:
    """Why the delta file at ``path`` (``deltas-<base>/snapshot-<offset>.avro``) is not the change its place names,
    the change from ``base`` to ``offset``, by the offsets its signed rows name (``state``); None when it is."""
    base = path.parent.name[len(DELTA_PREFIX):]
    offset = int(path.stem.rsplit("-", 1)[-1])
    if base.isdigit() and (state.base_offset, state.next_offset) == (int(base), offset):
        return None
    return (f"it holds the change from offset {state.base_offset} to {state.next_offset}, "
            f"not from {int(base) if base.isdigit() else base} to {offset}")


class CheckpointFiles:
    """The checkpoint files of one store: which offsets have one, writing and loading them."""

    def __init__(self, log: Log, every: int = DEFAULT_EVERY, max_files: int = DEFAULT_MAX_FILES,
                 deltas: int = DEFAULT_DELTAS):
        self.log = log
        self.every = every
        self.max_files = max_files
        self.deltas = deltas
        self.directory = log.store.checkpoint_dir
        self.problems: list[str] = []  # files found bad (each reported once, then deleted)
        self._codec = SecurityImageSnapshot(principals_when_read=True)  # a point reads a few nodes
        self._delta_codec = SecurityDeltaSnapshot()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._closed = threading.Event()
        self._pid = os.getpid()  # a process other than this one is the fill's forked child (``_in_child``)

    @property
    def _in_child(self) -> bool:
        """In the fill's forked child: it writes its files itself (not in another child) and notes the files it finds
        bad to the parent. Known by the process, not set by the fill: where ``os.fork`` does not exist the fill's
        stretch runs in this process (``call_forked``), and nothing of a child's may stay on this object then."""
        return os.getpid() != self._pid

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
        """The image in the file at ``offset``, or None (a bad file is reported once and deleted).  A file that cannot
        be read (an OSError: too many open files, no memory) is no bad file: the error is raised, nothing deleted."""
        path = snapshot_path(self.directory, offset)
        try:
            info, image = read_snapshot(path, self._codec, self.log.keyring)
            problem = self._misfit(info.next_offset, info.link, offset)
        except FileNotFoundError:
            return None
        except SnapshotError as exc:
            problem = str(exc)
        if problem is not None:
            self._remove_deltas(offset)  # they go before their base
            self._reject(path, problem)
            return None
        return replace(image, next_offset=offset)

    def _misfit(self, next_offset: int, link: bytes, offset: int) -> str | None:
        """Why a file holding the image at ``next_offset`` (the batch there linked by ``link``), found as the file at
        ``offset``, does not fit the log, or None."""
        problem = snapshot_misfit(next_offset, link, self.log.start_offset, self.log.end_offset, self.log.link_at)
        return problem or misnamed(snapshot_path(self.directory, offset), next_offset)

    def _reject(self, path: Path, problem: str) -> None:
        self.problems.append(f"{path.name}: {problem}")
        if self._in_child:  # a child has no stderr: the parent reports it, told before the file goes, whatever
            note(self.problems[-1])  # becomes of the child (``_found_in_child``)
        else:
            _report(path.name, problem)
        path.unlink(missing_ok=True)

    def _write_file(self, directory: Path, codec, state, offset: int, link: bytes) -> None:
        """Write ``state`` as the file at ``offset`` of ``directory``, signed and fsynced before it is renamed into
        place: in a forked child (off the writers' GIL; close() kills a child under way), unless this is the fill's
        child already."""
        if self._in_child:
            write_snapshot(directory, codec, state, next_offset=offset, link=link,
                           timestamp_ms=now_ms(self.log.clock), keyring=self.log.keyring)
        else:
            write_snapshot_forked(directory, codec, state, next_offset=offset, link=link,
                                  timestamp_ms=now_ms(self.log.clock), keyring=self.log.keyring, abort=self._closed)

    # -- delta files -------------------------------------------------------------------

    def delta_directory(self, base: int) -> Path:
        """Where the delta files of the full file at ``base`` are."""
        return self.directory / f"{DELTA_PREFIX}{base:020d}"

    def delta_offsets(self, base: int) -> list[int]:
        """The offsets that have a delta file against the full file at ``base``, ascending."""
        return [int(p.stem.rsplit("-", 1)[-1]) for p in list_snapshots(self.delta_directory(base))]

    def _deltas_within(self, base: int) -> list[int]:
        """``delta_offsets(base)`` within the log (one past its end, left by a longer history, fits nothing: it is
        refused when read and must not stop the fill writing the deltas the log has grown past)."""
        end = self.log.end_offset
        return [offset for offset in self.delta_offsets(base) if offset <= end]

    def delta_at_or_before(self, base: int, n: int) -> tuple[int, Path] | None:
        """The newest delta file of the full file at ``base`` whose offset is at most ``n``: (offset, path), or None."""
        offsets = self.delta_offsets(base)
        i = bisect.bisect_right(offsets, n) - 1
        return None if i < 0 else (offsets[i], snapshot_path(self.delta_directory(base), offsets[i]))

    def delta_spacing(self, spacing: int) -> int:
        """The events between the delta files of a stretch ``spacing`` events long between two full files."""
        return max(1, spacing // (self.deltas + 1))

    def load_delta(self, base: int, offset: int) -> NetChanges | None:
        """The net change from the image at ``base`` to the image at ``offset`` in the delta file there, or None (a bad
        file is reported once and deleted; an OSError is raised, as by ``load``)."""
        path = snapshot_path(self.delta_directory(base), offset)
        try:
            info, state = read_snapshot(path, self._delta_codec, self.log.keyring)
            problem = self._misfit(info.next_offset, info.link, offset) or delta_misplaced(path, state)
        except FileNotFoundError:
            return None
        except SnapshotError as exc:
            problem = str(exc)
        if problem is not None:
            self._reject(path, problem)
            return None
        # Which ids the base holds is taken from the file only when its HMAC vouched for it (a CRC anyone can compute):
        # an id wrongly said not to be held would be added beside the base's ACL rather than replace it.
        return state.net if self.log.keyring is not None else replace(state.net, acls_held=None)

    def write_delta(self, base: int, delta: SecurityDelta, offset: int) -> None:
        """Write the net change ``delta`` (onto the image at ``base``, the offset of a full file) makes by ``offset``
        (which must end a batch of the log) as the delta file there."""
        link = self.log.link_at(offset)
        if link is None or self._closed.is_set():
            return
        self._write_file(self.delta_directory(base), self._delta_codec, DeltaState(base, offset, delta.net()),
                         offset, link)

    def _remove_deltas(self, base: int) -> None:
        shutil.rmtree(self.delta_directory(base), ignore_errors=True)

    def _remove_orphans(self, offsets: list[int]) -> None:
        """Delete the delta directories whose full file is gone (a process stopped between the two deletions)."""
        held = set(offsets)
        for path in checkpoint_delta_dirs(self.directory):
            base = path.name[len(DELTA_PREFIX):]
            if not base.isdigit() or int(base) not in held:
                shutil.rmtree(path, ignore_errors=True)

    def _newest_written(self, offsets: list[int]) -> int | None:
        """The offset of the newest file of either kind, or None."""
        if not offsets:
            return None
        deltas = self._deltas_within(offsets[-1])
        return max([offsets[-1], *deltas[-1:]])

    def delta_due(self) -> bool:
        """Whether the log is ``delta_spacing`` past the newest file of either kind, with a full file to base on."""
        newest = self._newest_written(self.offsets())
        return (self.deltas > 0 and newest is not None
                and self.log.end_offset - newest >= self.delta_spacing(self.fill_spacing()))

    def write(self, image: SecurityImage) -> None:
        """Write ``image`` as the checkpoint at its offset (which must end a batch of the log)."""
        link = self.log.link_at(image.next_offset)
        if link is None or self._closed.is_set():
            return
        self._write_file(self.directory, self._codec, image, image.next_offset, link)
        self._thin()

    def _thin(self) -> None:
        """Past ``max_files``, delete the file whose removal leaves the smallest gap (never the newest), its delta
        files first."""
        offsets = self.offsets()
        while len(offsets) > self.max_files:
            bounds = [self.log.start_offset, *offsets]  # bounds[i] precedes offsets[i], bounds[i + 2] follows it
            i = min(range(len(offsets) - 1), key=lambda i: bounds[i + 2] - bounds[i])
            gone = offsets.pop(i)
            self._remove_deltas(gone)
            snapshot_path(self.directory, gone).unlink(missing_ok=True)

    def write_in_background(self, image: SecurityImage) -> None:
        """In a thread, when no other write is under way: write ``image`` when a full file is due, else run the fill
        when a delta file is (it replays from the newest full file, whose image the delta is against)."""
        if self.due(image):
            self._run(self._write_quietly, image)
        elif self.delta_due():
            self._run(self._fill_quietly, None)

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
            self._fill_forked(base)
        except Exception as exc:  # noqa: BLE001
            if self._closed.is_set():  # the close killed the child: the next open fills on
                logger.debug("time-travel checkpoint fill stopped at close: %s", exc)
            else:
                logger.warning("time-travel checkpoints not written: %s", exc)

    def _fill_forked(self, base: SecurityImage | None) -> None:
        """The fill, each stretch (the newest full file's load, the replay past it, the delta files and the next full
        file, encoded, signed and fsynced) in a forked child: the writers' interpreter only waits for it (issue 24:
        in a thread, a delta's load and replay held the writers' GIL for 0.8-1.5 s of CPU at 10M events).  The
        child sees the log and ``base`` as they stood at the fork and sends the files it finds bad as it finds them
        (reported here even when it then fails or is killed: ``_found_in_child``); a child
        that fails or is killed is reported (the caller logs it), its partial file removed, and leaves no file
        that does not count: one counts once renamed into place, after its fsync."""
        while not self._closed.is_set():
            newest = self._newest_written(self.offsets())
            try:
                more = call_forked(self._fill_in_child, base, timeout=2 * snapshot_timeout(
                    self.log.end_offset), abort=self._closed, on_note=self._found_in_child)
            except ForkedCallError:
                self._remove_partial_files()
                raise
            if not more or self._newest_written(self.offsets()) == newest:
                return  # the log's end reached, or no progress (never a loop that writes nothing)
            base = None  # the next stretch starts from the full file the child wrote

    def _fill_in_child(self, base: SecurityImage | None) -> bool:
        """In the fill's forked child: one stretch of ``_fill``; whether a full file was written and more may be due
        (the files found bad go to the parent as they are found)."""
        if self._in_child:  # not where the stretch runs in this process (no os.fork): the log is this one's
            _reopen_for_child(self.log)
        return self._fill(base, one_stretch=True)

    def _found_in_child(self, problem: str) -> None:
        """A file the fill's child found bad (``name: problem``), which it deletes once this is sent: reported."""
        self.problems.append(problem)
        _report(*problem.split(": ", 1))

    def _remove_partial_files(self) -> None:
        """Delete the temporary files a killed or failed fill child left (write_snapshot's ``.*.tmp``)."""
        for directory in [self.directory, *checkpoint_delta_dirs(self.directory)]:
            for path in list_partial_snapshots(directory):
                path.unlink(missing_ok=True)

    def fill_spacing(self) -> int:
        """The events between the files the fill writes (``spacing`` of the log's last image, whatever the image
        it starts from): at least ``every``, and so sparse that no file it writes is thinned again at once."""
        return max(self.every, (self.log.end_offset - self.log.start_offset) // self.max_files)

    def _fill(self, base: SecurityImage | None, *, one_stretch: bool = False) -> bool:
        """Replay from the newest good full file (else ``base``) to the log's end, writing files; with
        ``one_stretch``, stop after the first full file written.  Whether it stopped there."""
        offsets = self.offsets()
        self._remove_orphans(offsets)
        spacing = self.fill_spacing()
        step = self.delta_spacing(spacing) if self.deltas > 0 else spacing
        newest = self._newest_written(offsets)
        if newest is not None and self.log.end_offset - newest < step:
            return False  # no file is due past the newest, whatever its image: a reopened store loads none
        from_file = False
        for offset in reversed(offsets):
            loaded = self.load(offset)
            if loaded is not None:
                base, from_file = loaded, True
                break
        if base is None:
            return False
        since = base.next_offset
        written = self._deltas_within(since) if from_file else []
        last = max([since, *written[-1:]])
        with paused_gc():
            delta = SecurityDelta(base)
            for first, events in self.log.replay_batches(since, strict=True):  # never onto a base retention cut off
                if self._closed.is_set():
                    return False
                delta.replay_events(first, events)  # replay's bulk route
                end = first + len(events)
                if end - since >= spacing:
                    image = delta.apply(end)
                    self.write(image)
                    if one_stretch:
                        return True
                    # Go on from the file just written: its image is read in place, so the fill holds a file's
                    # bytes rather than the whole image, and later changes are deferred onto it.
                    loaded = self.load(image.next_offset)
                    image, from_file = loaded or image, loaded is not None
                    delta, since, last = SecurityDelta(image), end, end
                elif from_file and step < spacing and end - last >= step:  # deltas only against a full file
                    self.write_delta(since, delta, end)
                    last = end
        return False

    def wait(self) -> None:
        """Wait for a write under way."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Stop writing and wait for a write under way."""
        self._closed.set()
        self.wait()


def _report(name: str, problem: str) -> None:
    logger.warning("time-travel checkpoint %s ignored and deleted (it will be written again): %s", name, problem)


def _reopen_for_child(log: Log) -> None:
    """In a forked child: make ``log`` readable again.  The fork closed every descriptor but the result pipe, so
    each segment is opened again (read only), and the lock guarding the segment list is a new one (a writer's
    thread may have held the parent's at the fork, and is not in the child)."""
    state = log.state
    state.visible = threading.Condition(threading.Lock())
    for segment in state.segments:
        segment.fd = os.open(segment.path, os.O_RDONLY)
