"""``secmeta demo``: the main job on an embedded default store, narrated."""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from core.cli.common import iso_time, print_table
from core.errors import NotAStoreError
from core.log import Log, verify_log
from core.scram import credential_from_password
from core.state import Snapshotter, load_state
from events.keyring import Keyring, seal_scram
from events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    Envelope,
    ScramCredentialUpserted,
)
from events.redact import redacted
from events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from projections.latest import LatestByKey, LatestByKeySnapshot
from projections.snapshot import SnapshotPolicy


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="run the demo scenario on a local store",
        description="Build a store under the working directory, write a realistic stream of security "
                    "changes, snapshot, reopen, verify and show that tampering is detected.",
    )
    demo.add_argument("--dir", default="demo-store", help="store directory to (re)create (default ./demo-store)")
    demo.add_argument("--events", type=int, default=20_000, help="how many events to write (default 20000)")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = Path(args.dir).resolve()
    key_file = store.with_name(store.name + ".keys.json")
    _fresh(store, key_file)
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    print(f"== secmeta demo: store {store}\n   keyring {key_file} (key {keyring.newest_id})")

    rng = random.Random(7)
    with Log.open(store, keyring=keyring) as log:
        start = time.perf_counter()
        written = _write_workload(log, keyring, rng, args.events)
        took = time.perf_counter() - start
        print(f"\n1. appended {written} events in {log.segments().__len__()} segment(s), "
              f"fsync per batch: {written / took:,.0f} events/s")
        codec = LatestByKeySnapshot(log.codec)
        state = load_state(log, LatestByKey(), codec).state
        info = Snapshotter(log, codec, SnapshotPolicy()).snapshot(state, log.end_offset)
        print(f"2. snapshot at offset {info.next_offset}: {info.rows} live entities, {info.size:,} bytes")
        log.append([_acl(rng, i) for i in range(5)])

    with Log.open(store, keyring=keyring) as log:
        print(f"3. reopened: {log.recovery}")
        loaded = load_state(log, LatestByKey(), LatestByKeySnapshot(log.codec))
        print(f"   {loaded}")
        print("\n4. the last events, as `secmeta log dump` shows them (secrets redacted):")
        rows = [redacted(e) for e in log.read(max(0, log.end_offset - 8))]
        print_table(
            ["OFFSET", "TIME", "ACTOR", "EVENT", "ENTITY"],
            [[r["offset"], iso_time(r["timestamp_ms"]), r["actor_principal"], r["event_type"], r["entity_key"]] for r in rows],
        )

    print(f"\n5. secmeta log verify: {verify_log(store, keyring=keyring)}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tampered"
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns("LOCK"))
        segment = sorted((copy / "log").glob("*.log"))[0]
        data = bytearray(segment.read_bytes())
        data[len(data) // 2] ^= 0x01
        segment.write_bytes(bytes(data))
        print(f"6. one bit flipped in a copy's {segment.name}: {verify_log(copy, keyring=keyring)}")
    print(f"\nTry: secmeta log dump --store {store} --key-file {key_file} --from 0 --to 10")
    return 0


def _fresh(store: Path, key_file: Path) -> None:
    if store.exists():
        if not (store / "secmeta.json").exists():
            raise NotAStoreError(f"{store} exists and is not a secmeta store; the demo will not overwrite it")
        shutil.rmtree(store)
    key_file.unlink(missing_ok=True)


def _acl(rng: random.Random, i: int, acl_id: str | None = None) -> Envelope:
    kind = rng.random()
    rtype = ResourceType.GROUP if kind < 0.1 else ResourceType.TOPIC
    pattern = PatternType.PREFIXED if rng.random() < 0.2 else PatternType.LITERAL
    permission = AclPermissionType.DENY if rng.random() < 0.2 else AclPermissionType.ALLOW
    binding = AclBinding.of(
        rtype, f"{'orders' if i % 3 else 'payments'}-{i % 500}", pattern, f"User:svc-{i % 300}", "*",
        rng.choice([AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]), permission,
    )
    return Envelope(-1, int(time.time() * 1000), "User:admin", "10.1.2.3", f"req-{i // 50}",
                    AclCreated(acl_id or str(uuid.UUID(int=rng.getrandbits(128))), binding))


def _write_workload(log: Log, keyring: Keyring, rng: random.Random, total: int) -> int:
    written = 0
    live: list[Envelope] = []
    users = [f"svc-{n}" for n in range(300)]
    while written < total:
        batch = [_acl(rng, written + i) for i in range(min(500, total - written))]
        live.extend(batch[::10])
        for doomed in live[:10]:
            ev = doomed.event
            batch.append(Envelope(-1, doomed.timestamp_ms, "User:security", "10.1.2.4", "cleanup", AclDeleted(ev.acl_id, ev.binding)))
        live = live[10:]
        user = rng.choice(users)
        cred = credential_from_password(ScramMechanism.SCRAM_SHA_256, f"pw-{user}".encode(), 4096)
        sealed = seal_scram(keyring, user, cred.mechanism, cred.salt, cred.stored_key, cred.server_key)
        now = int(time.time() * 1000)
        batch.append(Envelope(-1, now, "User:admin", "10.1.2.3", "scram", ScramCredentialUpserted(user, cred.mechanism, 4096, sealed)))
        batch.append(Envelope(-1, now, "User:alice", "10.1.2.5", "token", DelegationTokenIssued(
            uuid.uuid4().hex[:22], "User:etl", "User:alice", ("User:bob",), now, now + 86_400_000, now + 604_800_000)))
        log.append(batch)
        written += len(batch)
    return written
