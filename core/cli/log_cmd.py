"""``secmeta log``: dump, verify, snapshot and (explicitly) recover a store's log."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from secmeta.core.cli.common import (
    add_json_option,
    add_store_options,
    emit,
    emit_json,
    iso_time,
    keyring,
    store_path,
)
from secmeta.core.cli.forensics_cmd import EVENT_COLUMNS, event_text_row
from secmeta.core.cli.progress import Progress

if TYPE_CHECKING:  # each command imports what it runs, so registering the commands stays light
    from secmeta.core.log import VerifyReport
    from secmeta.core.log.witness import WitnessLine
    from secmeta.events.codec import EventCodec
    from secmeta.events.keyring import Keyring


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
    verify.add_argument("--witness", metavar="FILE", type=Path,
                        help="a file of lines `secmeta log head` printed (append each new one): the log must still hold "
                             "every line's offset with its link; a line that fails its HMAC fails the check")
    add_json_option(verify)
    verify.set_defaults(func=verify_cmd)

    recover = sub.add_parser(
        "recover", help="cut the log at an offset, quarantining the rest, and log the repair",
        description="The explicit repair of a log that open refuses (a damaged batch, a log ending before its "
                    "high-water mark or a derived file, a missing high-water file): keep the offsets below N, move "
                    "every byte from N on and every derived file past N (snapshots, checkpoints, the history "
                    "index) to DIR/quarantine/, record N as the high-water mark, and log a LogRecovered event (who, "
                    "when, why, the offsets cut, how many events, the link at the cut, the SHA-256 of the cut bytes) "
                    "as the first batch after the cut. A log that opens cleanly is refused unless --force. Asks for "
                    "confirmation (on a terminal, else reads the answer from stdin) unless --yes. Takes the writer "
                    "lock. The error open printed names the offset to give.")
    add_store_options(recover)
    what = recover.add_mutually_exclusive_group(required=True)
    what.add_argument("--truncate-to", dest="offset", type=int, metavar="N",
                      help="keep the offsets below N (N must end an intact batch), as Kafka's truncate-to")
    what.add_argument("--resume", action="store_true",
                      help="log a recovery that cut the log but was interrupted before its event was logged")
    recover.add_argument("--reason", default=DEFAULT_REASON, help="why, logged in the LogRecovered event")
    recover.add_argument("--force", action="store_true", help="cut even a log that opens cleanly (rolls back history)")
    recover.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    recover.set_defaults(func=recover_cmd)

    head = sub.add_parser("head", help="print the log's head as one authenticated line to keep elsewhere",
                          description="Print the log's next offset (its end: it holds the offsets below it, as Kafka's "
                                      "log end offset) and the chain link of the batch ending there, as one line "
                                      "authenticated with the store's key (and naming the store). Keep it outside "
                                      "the store, appending each new line to the same file; `secmeta log verify "
                                      "--witness FILE` later checks the store still holds every head in it.")
    add_store_options(head)
    head.set_defaults(func=head_cmd)

    snap = sub.add_parser("snapshot", help="write a snapshot of the current state",
                          description="Load the newest snapshot plus the log's tail and write a snapshot of the security image at the log's end.")
    add_store_options(snap)
    snap.set_defaults(func=snapshot_cmd)


LARGE_DUMP = 10_000  # events from which log dump shows its progress on stderr


def dump_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.log import Log
    from secmeta.events.redact import redacted

    with Log.open(store_path(args), keyring=keyring(args), read_only=True) as log:
        total = max(0, (log.end_offset if args.end is None else min(args.end, log.end_offset)) - args.start)
        rows = _with_progress((redacted(env) for env in log.read(args.start, args.end)), total)
        if args.json:
            emit(({**r, "time": iso_time(r["timestamp_ms"])} for r in rows), [], json=True)
            return 0
        emit(map(event_text_row, rows), EVENT_COLUMNS)
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


def verify_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.log.witness import read_witness

    path, ring = store_path(args), keyring(args)  # the store first: its absence is the first thing to say
    witnesses = read_witness(args.witness.read_text(), ring) if args.witness is not None else ()
    report, agreeing, problems = verify_store(path, ring, witnesses=witnesses)
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


def verify_store(path: str, ring: Keyring, codec: EventCodec | None = None,
                 witnesses: Sequence[WitnessLine] = ()) -> tuple[VerifyReport, int, list[str]]:
    """The log's report, how many snapshots were checked against it, and the snapshots that are unusable."""
    from secmeta.core.forensics.checkpoints import CHECKPOINT_DIR, delta_misplaced, list_delta_files
    from secmeta.core.forensics.history_index import condemn, index_problem
    from secmeta.core.forensics.index_seal import INDEX_DIR, INDEX_FILE
    from secmeta.core.log import Log, verify_log
    from secmeta.events.codec import EventCodec
    from secmeta.projections.delta_snapshot import SecurityDeltaSnapshot
    from secmeta.projections.image_snapshot import SecurityImageSnapshot
    from secmeta.projections.snapshot import SnapshotError, list_snapshots, misnamed, read_snapshot

    codec = codec or EventCodec()  # one for both reads of the log: building one costs tens of ms
    checkpoints, problems = [], []
    for snap in list_snapshots(f"{path}/snapshots") + list_snapshots(f"{path}/{CHECKPOINT_DIR}"):
        try:  # loaded as an open loads it (its sections' structure checked), its CRC checked too
            info = read_snapshot(snap, SecurityImageSnapshot(), ring, check_crc=True)[0]
        except SnapshotError as exc:
            problems.append(str(exc))
            continue
        if snap.parent.name == CHECKPOINT_DIR and (wrong := misnamed(snap, info.next_offset)):  # a checkpoint file
            # is found by its name (time travel refuses and deletes one that holds another offset); a policy
            # snapshot is used by the offset it holds
            problems.append(f"snapshot {snap}: {wrong}")
        else:
            checkpoints.append((info.next_offset, info.link))
    for snap in list_delta_files(Path(path) / CHECKPOINT_DIR):  # delta checkpoints: checked as the full ones
        try:
            info, state = read_snapshot(snap, SecurityDeltaSnapshot(), ring, check_crc=True)
        except SnapshotError as exc:
            problems.append(f"{exc} (a delta checkpoint in {snap.parent.name})")
            continue
        if misplaced := delta_misplaced(snap, state):  # time travel refuses (and deletes) such a file at its read
            problems.append(f"snapshot {snap.name}: {misplaced} (a delta checkpoint in {snap.parent.name})")
        else:
            checkpoints.append((info.next_offset, info.link))
    report = verify_log(path, keyring=ring, codec=codec, checkpoints=checkpoints, witnesses=witnesses)
    index = Path(path) / INDEX_DIR / INDEX_FILE
    if report.ok and index.exists():  # derived from the log: it must agree with it row by row
        with Log.open(path, keyring=ring, codec=codec, read_only=True, create=False) as log:
            if problem := index_problem(index, log, against_log=True):
                condemn(index, problem)  # never served again: not sealed at close, rebuilt at the next open
                problems.append(f"history index {index}: {problem} (the store rebuilds it when it next opens)")
    return report, len(checkpoints), problems


DEFAULT_REASON = "not given"


def recover_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.config import StoreConfig
    from secmeta.core.log.pending_recovery import cut_span
    from secmeta.core.log.recover import Recovery, record_pending

    path, ring = store_path(args), keyring(args)
    config = StoreConfig.load(path)
    if args.resume:
        print("the pending recovery is logged" if record_pending(path, ring, config.log) else
              "no recovery was pending: nothing to log")
        return 0
    with Recovery(path, args.offset, keyring=ring, config=config.log, clock=config.clock) as recovery:
        plan = recovery.plan
        if why := recovery.refusal(args.force):
            print(f"secmeta: error: {why}", file=sys.stderr)
            return 1
        if plan.problem is not None:
            print(f"open refuses the log: {plan.problem}")
        print(f"plan: {plan}")
        if not args.yes and not _confirmed("proceed? [y/N] "):
            print("secmeta: error: not confirmed; nothing was changed", file=sys.stderr)
            return 1
        event = recovery.execute(args.reason, force=args.force)
    print(f"recovered: kept the offsets below {event.from_offset}; cut {cut_span(event.from_offset, event.to_offset)} "
          f"({event.events} event(s), sha256 {event.digest}) into {Path(path) / event.quarantine}; "
          f"the recovery {event.recovery_id} is logged at offset {event.from_offset}")
    return 0


def _confirmed(prompt: str) -> bool:
    """The operator's answer: asked on a terminal, else the first line of stdin (none: no)."""
    if sys.stdin.isatty():
        answer = input(prompt)
    else:
        print(prompt, end="", flush=True)
        answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def head_cmd(args: argparse.Namespace) -> int:
    from secmeta.core.log import Log
    from secmeta.core.log.witness import Head, head_line

    ring = keyring(args)
    with Log.open(store_path(args), keyring=ring, read_only=True, create=False) as log:
        print(head_line(Head(log.store.store_id, log.end_offset, log.last_link), ring))
    return 0


def snapshot_cmd(args: argparse.Namespace) -> int:
    # The writer lock: snapshots are written into the store, so not beside a running writer
    # (which takes its own snapshots by policy).
    from secmeta.core.config import StoreConfig
    from secmeta.core.log import Log
    from secmeta.core.store.state import Snapshotter, load_state
    from secmeta.projections.image import SecurityProjection
    from secmeta.projections.image_snapshot import SecurityImageSnapshot
    from secmeta.projections.snapshot import SnapshotPolicy

    path = store_path(args)
    config = StoreConfig.load(path)
    with Log.open(path, keyring=keyring(args), config=config.log, create=False) as log:
        codec = SecurityImageSnapshot()
        loaded = load_state(log, SecurityProjection(), codec)
        print(loaded)
        info = Snapshotter(log, codec, SnapshotPolicy(), keep=config.keep_snapshots).snapshot(loaded.state, loaded.next_offset)
        print(f"wrote {info.path} ({info.rows} rows, {info.size} bytes) at offset {info.next_offset}")
    return 0

