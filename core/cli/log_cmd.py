"""``secmeta log``: dump, verify, snapshot and (explicitly) recover a store's log."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from secmeta.core.cli.common import (
    add_json_option,
    add_store_options,
    emit,
    emit_json,
    iso_time,
    keyring,
    store_path,
)
from secmeta.core.cli.forensics_cmd import EVENT_COLUMNS
from secmeta.core.cli.progress import Progress
from secmeta.core.config import StoreConfig
from secmeta.core.forensics.checkpoints import CHECKPOINT_DIR
from secmeta.core.forensics.history_index import INDEX_DIR, INDEX_FILE, condemn, index_problem
from secmeta.core.log import Log, VerifyReport, verify_log
from secmeta.core.log.recover import truncate_after
from secmeta.core.store.state import Snapshotter, load_state
from secmeta.events.codec import EventCodec
from secmeta.events.keyring import Keyring
from secmeta.events.redact import redacted
from secmeta.projections.image import SecurityProjection
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import (
    SnapshotError,
    SnapshotPolicy,
    list_snapshots,
    read_snapshot_info,
)


def register(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="inspect and maintain the metadata log", description="Inspect and maintain the metadata log.")
    sub = log.add_subparsers(dest="log_command", required=True, metavar="COMMAND")

    dump = sub.add_parser("dump", help="print logged events (secrets redacted)",
                          description="Print logged events with offset, time, actor and payload. Secret material is never shown.")
    add_store_options(dump)
    dump.add_argument("--from-offset", dest="start", type=int, default=0, metavar="N", help="first offset")
    dump.add_argument("--to-offset", dest="end", type=int, default=None, metavar="N",
                      help="stop before this offset (default: the log's end)")
    dump.add_argument("--from", dest="start", type=int, help=argparse.SUPPRESS)  # the old spellings
    dump.add_argument("--to", dest="end", type=int, help=argparse.SUPPRESS)
    add_json_option(dump)
    dump.set_defaults(func=dump_cmd)

    verify = sub.add_parser("verify", help="check every CRC, offset and the keyed hash chain",
                            description="Check every batch's CRC, offset continuity, the keyed hash chain and "
                                        "that snapshots agree with the log. Exit code 1 and the first bad offset on failure.")
    add_store_options(verify)
    add_json_option(verify)
    verify.set_defaults(func=verify_cmd)

    recover = sub.add_parser(
        "recover", help="cut a log that open refuses after an offset, quarantining the rest",
        description="The explicit repair of a log that open refuses (a damaged batch, a log ending before its "
                    "high-water mark, a missing high-water file): keep the batches before OFFSET, move every byte "
                    "after it and every snapshot past it to DIR/quarantine/, record OFFSET as the high-water mark. "
                    "Takes the writer lock. The error open printed names the offset to give.")
    add_store_options(recover)
    recover.add_argument("--truncate-after", dest="offset", type=int, required=True, metavar="OFFSET",
                         help="keep offsets below this one (a batch boundary)")
    recover.add_argument("--reason", default="", help="why, recorded in the quarantine's recovery.json")
    recover.set_defaults(func=recover_cmd)

    snap = sub.add_parser("snapshot", help="write a snapshot of the current state",
                          description="Load the newest snapshot plus the log's tail and write a snapshot of the security image at the log's end.")
    add_store_options(snap)
    snap.set_defaults(func=snapshot_cmd)


LARGE_DUMP = 10_000  # events from which log dump shows its progress on stderr


def dump_cmd(args: argparse.Namespace) -> int:
    with Log.open(store_path(args), keyring=keyring(args), read_only=True) as log:
        total = max(0, (log.end_offset if args.end is None else min(args.end, log.end_offset)) - args.start)
        rows = _with_progress((redacted(env) for env in log.read(args.start, args.end)), total)
        if args.json:
            emit(({**r, "time": iso_time(r["timestamp_ms"])} for r in rows), [], json=True)
            return 0
        emit(({**r, "time": iso_time(r["timestamp_ms"]), "details": _details(r["payload"])} for r in rows),
             EVENT_COLUMNS)
    return 0


def _with_progress(rows, total: int):
    """The rows, reporting how many were read when there are enough for the wait to be noticed."""
    if total < LARGE_DUMP:
        yield from rows
        return
    with Progress("log dump", unit="events") as progress:
        progress.update(0, total)
        for count, row in enumerate(rows, 1):
            if count % 1_000 == 0 or count == total:
                progress.update(count)
            yield row


def _details(payload: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in payload.items())


def verify_cmd(args: argparse.Namespace) -> int:
    report, agreeing, problems = verify_store(store_path(args), keyring(args))
    if args.json:
        emit_json({**dataclasses.asdict(report), "snapshots_agreeing": agreeing if report.ok else 0,
                   "snapshot_problems": problems})
        return 0 if report.ok and not problems else 1
    print(report)
    if agreeing and report.ok:
        print(f"{agreeing} snapshot(s) agree with the log")
    for problem in problems:
        print(f"snapshot problem: {problem}")
    return 0 if report.ok and not problems else 1


def verify_store(path: str, ring: Keyring, codec: EventCodec | None = None) -> tuple[VerifyReport, int, list[str]]:
    """The log's report, how many snapshots were checked against it, and the snapshots that are unusable."""
    codec = codec or EventCodec()  # one for both reads of the log: building one costs tens of ms
    checkpoints, problems = [], []
    for snap in list_snapshots(f"{path}/snapshots") + list_snapshots(f"{path}/{CHECKPOINT_DIR}"):
        try:
            info = read_snapshot_info(snap, ring)
            checkpoints.append((info.next_offset, info.link))
        except SnapshotError as exc:
            problems.append(str(exc))
    report = verify_log(path, keyring=ring, codec=codec, checkpoints=checkpoints)
    index = Path(path) / INDEX_DIR / INDEX_FILE
    if report.ok and index.exists():  # derived from the log: it must agree with it row by row
        with Log.open(path, keyring=ring, codec=codec, read_only=True, create=False) as log:
            if problem := index_problem(index, log, against_log=True):
                condemn(index, problem)  # never served again: not sealed at close, rebuilt at the next open
                problems.append(f"history index {index}: {problem} (the store rebuilds it when it next opens)")
    return report, len(checkpoints), problems


def recover_cmd(args: argparse.Namespace) -> int:
    print(truncate_after(store_path(args), args.offset, keyring=keyring(args), reason=args.reason))
    return 0


def snapshot_cmd(args: argparse.Namespace) -> int:
    # The writer lock: snapshots are written into the store, so not beside a running writer
    # (which takes its own snapshots by policy).
    path = store_path(args)
    config = StoreConfig.load(path)
    with Log.open(path, keyring=keyring(args), config=config.log, create=False) as log:
        codec = SecurityImageSnapshot()
        loaded = load_state(log, SecurityProjection(), codec)
        print(loaded)
        info = Snapshotter(log, codec, SnapshotPolicy(), keep=config.keep_snapshots).snapshot(loaded.state, loaded.next_offset)
        print(f"wrote {info.path} ({info.rows} rows, {info.size} bytes) at offset {info.next_offset}")
    return 0

