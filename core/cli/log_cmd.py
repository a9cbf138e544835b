"""``secmeta log``: dump, verify, snapshot and (explicitly) recover a store's log."""

from __future__ import annotations

import argparse
import json
import sys

from core.cli.common import add_store_options, iso_time, keyring, print_table, store_path
from core.config import StoreConfig
from core.log import Log, VerifyReport, verify_log
from core.log.recover import truncate_after
from core.state import Snapshotter, load_state
from events.codec import EventCodec
from events.keyring import Keyring
from events.redact import redacted
from projections.image import SecurityProjection
from projections.image_snapshot import SecurityImageSnapshot
from projections.snapshot import SnapshotError, SnapshotPolicy, list_snapshots, read_snapshot_info


def register(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="inspect and maintain the metadata log", description="Inspect and maintain the metadata log.")
    sub = log.add_subparsers(dest="log_command", required=True, metavar="COMMAND")

    dump = sub.add_parser("dump", help="print logged events (secrets redacted)",
                          description="Print logged events with offset, time, actor and payload. Secret material is never shown.")
    add_store_options(dump)
    dump.add_argument("--from", dest="start", type=int, default=0, metavar="OFFSET", help="first offset (default 0)")
    dump.add_argument("--to", dest="end", type=int, default=None, metavar="OFFSET", help="stop before this offset")
    dump.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    dump.set_defaults(func=dump_cmd)

    verify = sub.add_parser("verify", help="check every CRC, offset and the keyed hash chain",
                            description="Check every batch's CRC, offset continuity, the keyed hash chain and "
                                        "that snapshots agree with the log. Exit code 1 and the first bad offset on failure.")
    add_store_options(verify)
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


def dump_cmd(args: argparse.Namespace) -> int:
    with Log.open(store_path(args), keyring=keyring(args), read_only=True) as log:
        rows = (redacted(env) for env in log.read(args.start, args.end))
        if args.json:
            out = sys.stdout
            out.write("[")
            for n, row in enumerate(rows):
                out.write(("," if n else "") + "\n  " + json.dumps(row, default=str))
            out.write("\n]\n")
            return 0
        print_table(
            ["OFFSET", "TIME", "ACTOR", "HOST", "EVENT", "ENTITY", "DETAILS"],
            (
                [r["offset"], iso_time(r["timestamp_ms"]), r["actor_principal"], r["actor_host"],
                 r["event_type"], r["entity_key"], _details(r["payload"])]
                for r in rows
            ),
        )
    return 0


def _details(payload: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in payload.items())


def verify_cmd(args: argparse.Namespace) -> int:
    report, agreeing, problems = verify_store(store_path(args), keyring(args))
    print(report)
    if agreeing and report.ok:
        print(f"{agreeing} snapshot(s) agree with the log")
    for problem in problems:
        print(f"snapshot problem: {problem}")
    return 0 if report.ok and not problems else 1


def verify_store(path: str, ring: Keyring, codec: EventCodec | None = None) -> tuple[VerifyReport, int, list[str]]:
    """The log's report, how many snapshots were checked against it, and the snapshots that are unusable."""
    checkpoints, problems = [], []
    for snap in list_snapshots(f"{path}/snapshots"):
        try:
            info = read_snapshot_info(snap, ring)
            checkpoints.append((info.next_offset, info.link))
        except SnapshotError as exc:
            problems.append(str(exc))
    return verify_log(path, keyring=ring, codec=codec, checkpoints=checkpoints), len(checkpoints), problems


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

