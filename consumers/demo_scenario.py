"""The demo scenario ``secmeta demo`` runs (secmeta.consumers.demo): the main job on an embedded default
store, narrated, then the Kafka mirror and the Spark tables (each skipped, with a note, when its extra
is not installed)."""

from __future__ import annotations

import argparse
import base64
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from secmeta.core.cli.common import iso_time, print_table
from secmeta.core.errors import ApiException, NotAStoreError
from secmeta.core.times import Point
from secmeta.core.types import RequestContext, ScramCredentialInfo, UserScramCredentialUpsertion
from secmeta.events.keyring import Keyring
from secmeta.events.redact import redacted
from secmeta.events.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)

if TYPE_CHECKING:  # the store's modules are imported when the demo runs, not when the CLI starts
    from secmeta.core.config import StoreConfig

ADMIN = RequestContext("User:admin", "10.0.0.1")
TEAMS = ("orders", "payments", "search", "ledger", "fraud", "shipping")
OPS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)


def run(args: argparse.Namespace) -> int:
    from secmeta.core.store.facade import SecurityStore

    store_dir = Path(args.dir).resolve()
    key_file = store_dir.with_name(store_dir.name + ".keys.json")
    config, keyring, point = build_store(store_dir, key_file, users=args.users, acls=args.acls)
    with SecurityStore.open(store_dir, config, keyring=keyring) as store:
        print(f"\n9. reopened: {store.log.recovery}; {store.loaded}")
        print(f"   {store!r}")
        _kafka(store, store_dir, keyring)
        serve(store)
    _tamper(store_dir, keyring)
    if not args.no_spark:
        _spark(store_dir, key_file, config, keyring, point)
    print(f"\nTry: secmeta acls --list --topic orders-1 --store {store_dir} --key-file {key_file}")
    return 0


DEMO_MARKER = ".secmeta-demo"


def build_store(store_dir: Path, key_file: Path, *, users: int, acls: int) -> tuple[StoreConfig, Keyring, Point]:
    """Steps 1-8: a fresh demo store at ``store_dir`` (its keyring at ``key_file``) whose events all lie in
    the past (DemoClock), so ``--as-of`` can query every point of its timeline; its config, keyring and
    the point step 8 shows."""
    from secmeta.core.config import StoreConfig
    from secmeta.core.store.facade import SecurityStore

    _fresh(store_dir, key_file)
    Keyring.generate_file(key_file)
    keyring = Keyring.from_file(key_file)
    clock = DemoClock()
    config = StoreConfig(token_secret=os.urandom(32), clock=clock)
    print(f"== secmeta demo: store {store_dir}\n   keyring {key_file} (key {keyring.newest_id}); super user User:admin\n")
    rng = random.Random(7)
    with SecurityStore.open(store_dir, config, keyring=keyring) as store:
        (store_dir / DEMO_MARKER).write_text("created by `secmeta demo`; the next demo run replaces this store\n")
        _users(store, users)
        _acls(store, rng, acls)
        _decisions(store)
        token = _tokens(store)
        _authenticate(store, token)
        info = store.snapshot()
        print(f"\n6. snapshot at offset {info.next_offset}: {info.size:,} bytes")
        _last_events(store)
        point = _over_time(store, clock)
    return config, keyring, point


def _fresh(store: Path, key_file: Path) -> None:
    """Remove a previous demo run; never a store the demo did not create."""
    if store.exists():
        if not (store / DEMO_MARKER).exists():
            raise NotAStoreError(f"{store} exists and was not created by the demo; the demo will not overwrite it "
                                 "(pass --dir to use another directory)")
        shutil.rmtree(store)
    key_file.unlink(missing_ok=True)


def _users(store, n: int) -> None:
    alterations = [
        UserScramCredentialUpsertion(f"svc-{i}", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), f"pw-{i}".encode())
        for i in range(n)
    ] + [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-pw")]
    start = time.perf_counter()
    results = store.alter_user_scram_credentials(alterations, context=ADMIN)
    took = time.perf_counter() - start
    ok = sum(not e for e in results.values())
    print(f"1. SCRAM: {ok} users salted and stored in one request ({ok / took:,.0f} users/s, PBKDF2 + AES-GCM sealing)")
    bad = store.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x"),
         UserScramCredentialUpsertion("", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256), b"x")], context=ADMIN)
    for user, error in bad.items():
        print(f"   rejected {user or '(empty name)'!r}: {error}")
    desc = store.describe_user_scram_credentials(["alice", "svc-1", "nobody"], context=ADMIN)
    for user, d in desc.items():
        shown = d if not hasattr(d, "scram_credential_infos") else ", ".join(
            f"{i.mechanism.mechanism_name} iterations={i.iterations}" for i in d.scram_credential_infos)
        print(f"   describe {user}: {shown}")


def _acls(store, rng: random.Random, n: int) -> None:
    bindings = []
    for i in range(n):
        team = TEAMS[i % len(TEAMS)]
        group = rng.random() < 0.1
        prefixed = rng.random() < 0.2
        bindings.append(AclBinding.of(
            ResourceType.GROUP if group else ResourceType.TOPIC,
            f"{team}-" if prefixed else f"{team}-{i % 400}",
            PatternType.PREFIXED if prefixed else PatternType.LITERAL,
            f"User:svc-{i % 300}", rng.choice(["*", "*", "10.0.0.0/8"]), rng.choice(OPS),
            AclPermissionType.DENY if rng.random() < 0.05 else AclPermissionType.ALLOW,
        ))
    bindings += [
        AclBinding.of(ResourceType.TOPIC, "payments-", PatternType.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding.of(ResourceType.TOPIC, "payments-secret", PatternType.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.DENY),
        AclBinding.of(ResourceType.USER, "User:etl", PatternType.LITERAL, "User:alice", "*", AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW),
    ]
    start = time.perf_counter()
    errors = [e for i in range(0, len(bindings), 1000) for e in store.create_acls(bindings[i:i + 1000], context=ADMIN)]
    took = time.perf_counter() - start
    print(f"\n2. ACLs: {len(store.image.acls)} distinct ACLs from {len(bindings)} requested in {took:.2f}s "
          f"({sum(bool(e) for e in errors)} rejected; duplicates are no-ops)")
    shown = store.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, "payments-secret", PatternType.MATCH), context=ADMIN)
    print(f"   ACLs that apply to topic payments-secret (MATCH filter): {len(shown)}, e.g.")
    print_table(["PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
                [[b.resource_pattern_type.name, b.name, b.principal, b.host, b.operation.name, b.permission_type.name]
                 for b in sorted(shown, key=lambda b: (b.principal != "User:alice", b.name))[:4]])
    try:
        store.create_acls(bindings[:1], context=RequestContext("User:svc-1", "10.0.0.7"))
    except ApiException as exc:
        print(f"   User:svc-1 tries to create an ACL: {exc}")


def _decisions(store) -> None:
    print("\n3. decisions (served from the index; read-your-writes):")
    cases = [
        ("User:alice", "10.1.1.1", AclOperation.READ, "payments-eu"),
        ("User:alice", "10.1.1.1", AclOperation.DESCRIBE, "payments-eu"),
        ("User:alice", "10.1.1.1", AclOperation.READ, "payments-secret"),
        ("User:alice", "10.1.1.1", AclOperation.WRITE, "payments-eu"),
    ]
    rows = []
    for principal, host, op, topic in cases:
        d = store.explain(principal, host, op, ResourceType.TOPIC, topic)
        ops = store.authorized_operations(principal, host, ResourceType.TOPIC, topic)
        rows.append([principal, op.name, f"topic {topic}", "ALLOW" if d.allowed else "DENY", d.reason, ops])
    print_table(["PRINCIPAL", "OP", "RESOURCE", "DECISION", "WHY", "KIP-430 OPS"], rows)
    removed = store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "payments-", PatternType.PREFIXED, "User:alice")], context=ADMIN)
    after = store.authorize("User:alice", "10.1.1.1", AclOperation.READ, ResourceType.TOPIC, "payments-eu")
    print(f"   deleted {len(removed[0].acls)} ACL(s) for payments-* ; the very next decision: {'ALLOW' if after else 'DENY'}")


def _tokens(store):
    alice = RequestContext("User:alice", "10.1.1.1")
    tokens = [store.create_delegation_token(context=alice, owner="User:etl", renewers=["User:bob"]) for _ in range(3)]
    t = tokens[0]
    print(f"\n4. tokens: User:alice issued {len(tokens)} tokens for owner User:etl (KIP-373), renewer User:bob")
    print(f"   first token {t.token_id}: expires {iso_time(t.expiry_timestamp_ms)}, max {iso_time(t.max_timestamp_ms)}")
    try:
        store.create_delegation_token(context=RequestContext("User:svc-2", "10.1.1.2"), owner="User:etl")
    except ApiException as exc:
        print(f"   User:svc-2 tries the same: {exc}")
    expiry = store.renew_delegation_token(t.hmac, context=RequestContext("User:bob", "10.1.1.3"))
    print(f"   User:bob renews it until {iso_time(expiry)}")
    described = store.describe_delegation_tokens(["User:etl"], context=ADMIN)
    print(f"   describe shows {len(described)} tokens, HMAC included: {any(d.hmac for d in described)}")
    return t


def _authenticate(store, token) -> None:
    try:
        from scramp import ScramClient
    except ImportError:
        print("\n5. (install scramp to see SCRAM authentication)")
        return
    print("\n5. authentication with a real SCRAM client (scramp):")
    for user, password, mech in (("alice", "alice-pw", "SCRAM-SHA-512"), ("svc-7", "pw-7", "SCRAM-SHA-256"), ("svc-7", "wrong", "SCRAM-SHA-256")):
        client, server = ScramClient([mech], user, password), store.scram_server(mech)
        try:
            client.set_server_first(server.first(client.get_client_first()))
            client.set_server_final(server.final(client.get_client_final()))
            print(f"   {user} with {mech}: authenticated as {server.principal}")
        except Exception as exc:  # noqa: BLE001 - the demo shows whatever failure a client sees
            print(f"   {user} with {mech} and a wrong password: {exc}")
    client = ScramClient(["SCRAM-SHA-256"], token.token_id, base64.b64encode(token.hmac).decode())
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare = first[3:]
    server = store.scram_server("SCRAM-SHA-256")
    client.set_server_first(server.first(first))
    client.set_server_final(server.final(client.get_client_final()))
    print(f"   token {token.token_id}: authenticated as {server.principal} (token_authenticated={server.token_authenticated})")


def _last_events(store) -> None:
    print("\n7. the log records who changed what (as `secmeta log dump` shows it, secrets redacted):")
    log = store.log
    rows = [redacted(e) for e in log.read(max(0, log.end_offset - 6))]
    print_table(["OFFSET", "TIME", "ACTOR", "HOST", "EVENT", "ENTITY"],
                [[r["offset"], iso_time(r["timestamp_ms"]), r["actor_principal"], r["actor_host"], r["event_type"], r["entity_key"]] for r in rows])


SIMULATED_HOURS = 4  # the time step 8 lets pass (_over_time's clock.advance calls)


class DemoClock:
    """Real time set back by more than the simulated time the demo lets pass, plus what it has let pass:
    every event the demo stamps lies in the past (about an hour before the demo ends at the latest), so
    ``--as-of`` can query any point of its timeline, never refused as in the future."""

    def __init__(self, hours_back: float = SIMULATED_HOURS + 1):
        self.skew = -hours_back * 3600

    def __call__(self) -> float:
        return time.time() + self.skew

    def advance(self, hours: float) -> None:
        self.skew += hours * 3600


def _over_time(store, clock: DemoClock):

    print("\n8. forensics over simulated time: who could read topic ledger-eu, and who changed that?")
    grant = AclBinding.of(ResourceType.TOPIC, "ledger-", PatternType.PREFIXED, "User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW)
    before = store.log.end_offset
    clock.advance(1)
    store.create_acls([grant], context=RequestContext("User:admin", "10.0.0.1"))
    granted = clock() * 1000
    clock.advance(2)
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "ledger-", PatternType.PREFIXED, "User:carol")],
                      context=RequestContext("User:admin", "10.6.6.6"))
    clock.advance(1)
    for label, at in (("before the grant", Point.at_offset(before)), ("an hour after the grant", Point.at_time(int(granted) + 3_600_000)),
                      ("now", None)):
        who = {g.principal for g in store.who_could(AclOperation.READ, ResourceType.TOPIC, "ledger-eu", at=at)}
        print(f"   {label}: {len(who)} principals could read it; User:carol {'among them' if 'User:carol' in who else 'not'}")
    print("   timeline of User:carol READ topic ledger-eu:")
    print_table(["FROM", "UNTIL", "OPENED BY", "CLOSED BY"],
                [[iso_time(i.start_ms), iso_time(i.end_ms) if i.end_ms else "now",
                  f"{i.opened_by.actor_principal} from {i.opened_by.actor_host} (offset {i.opened_by.offset})",
                  f"{i.closed_by.actor_principal} from {i.closed_by.actor_host} (offset {i.closed_by.offset})" if i.closed_by else "-"]
                 for i in store.access_timeline("User:carol", AclOperation.READ, ResourceType.TOPIC, "ledger-eu")])
    view = store.as_of(timestamp_ms=int(granted) + 60_000)
    allowed = view.authorize("User:carol", "10.1.1.9", AclOperation.READ, ResourceType.TOPIC, "ledger-eu")
    print(f"   as_of(grant + 1 min).authorize(carol, READ, ledger-eu) = {allowed}; today = "
          f"{store.authorize('User:carol', '10.1.1.9', AclOperation.READ, ResourceType.TOPIC, 'ledger-eu')}")
    return Point.at_time(int(granted) + 3_600_000)


def _kafka(store, store_dir: Path, keyring: Keyring) -> None:
    """Publish the log to a local mock Kafka cluster, follow it, and run the audit job on it."""
    import json
    import logging

    try:
        from confluent_kafka import Producer

        from secmeta.consumers.kafka.audit import AuditJob
        from secmeta.consumers.kafka.follower import Follower
        from secmeta.consumers.kafka.publisher import Publisher
    except ImportError:
        print("\n   (install the kafka extra to see the Kafka mirror)")
        return
    quiet = logging.getLogger("secmeta.demo.kafka")
    quiet.setLevel(logging.ERROR)
    logging.getLogger("secmeta.kafka").setLevel(logging.ERROR)
    mock = Producer({"test.mock.num.brokers": 1, "logger": quiet})
    bootstrap = mock.list_topics(timeout=10).orig_broker_name.split("/")[0]
    print(f"\n10. Kafka: a local mock cluster at {bootstrap} (librdkafka's, real protocol)")
    with tempfile.TemporaryDirectory() as tmp:
        publisher = Publisher(store_dir, keyring, bootstrap, checkpoint_path=Path(tmp) / "publisher.json")
        try:
            published = publisher.publish_available()
        finally:
            publisher.close()
        print(f"   published {published} events to secmeta.history and the compacted secmeta.state")
        follower = Follower(bootstrap, checkpoint_dir=Path(tmp) / "follower")
        try:
            follower.catch_up()
            same = follower.image.acls == store.image.acls and follower.image.scram == store.image.scram
            print(f"   follower at offset {follower.applied_offset}: {len(follower.image.acls)} ACLs, "
                  f"{len(follower.image.scram)} users; identical to the store: {same}")
        finally:
            follower.close()
        audit = AuditJob(bootstrap, history_topic="secmeta.history", audit_file=Path(tmp) / "audit.jsonl",
                         alerts_file=Path(tmp) / "alerts.jsonl")
        try:
            audit.process_available()
        finally:
            audit.close()
        alerts = [json.loads(line) for line in (Path(tmp) / "alerts.jsonl").read_text().splitlines()]
        lines = len((Path(tmp) / "audit.jsonl").read_text().splitlines())
        print(f"   audit job: {lines} audit lines, {len(alerts)} alerts; for example:")
        seen = set()
        for alert in alerts:
            if alert["rule"] not in seen:
                seen.add(alert["rule"])
                print(f"     [{alert['severity']}] {alert['rule']} @ offset {alert['offset']}: {alert['message'][:110]}")


def serve(store, number: int = 11) -> None:
    """Serve ``store`` on a SASL_SSL listener; real Kafka clients (librdkafka) change it and log in.

    A throwaway CA (secmeta.consumers.demo_ca) signs the server certificate; User:admin gets a
    SCRAM credential in-process first (as ``kafka-storage.sh format --add-scram`` does),
    then everything goes over the wire and the log shows who did it from where.
    """
    import logging
    import secrets

    try:
        from confluent_kafka import KafkaException
        from confluent_kafka import admin as ck
    except ImportError:
        print(f"\n{number}. (install the kafka extra to see secmeta serve with a real Kafka client)")
        return
    from secmeta.consumers.demo_ca import make_ca
    from secmeta.core.server.config import ServerConfig
    from secmeta.core.server.server import ServerThread

    quiet = logging.getLogger("secmeta.demo.serve")
    quiet.setLevel(logging.CRITICAL)
    passwords = {"admin": secrets.token_urlsafe(16), "dora": secrets.token_urlsafe(16)}  # never printed
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    store.alter_user_scram_credentials([UserScramCredentialUpsertion("admin", sha512, passwords["admin"].encode())],
                                       context=ADMIN)
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_ca(Path(tmp) / "tls")
        with ServerThread(store, "SASL_SSL://127.0.0.1:0", ServerConfig(ssl=ca.server_ssl())) as server:
            bootstrap = server.bootstrap("SASL_SSL")
            print(f"\n{number}. secmeta serve on SASL_SSL://{bootstrap} (a throwaway CA made with cryptography; "
                  "SCRAM-SHA-256/512)\n   User:admin got a SCRAM-SHA-512 credential in-process "
                  "(as kafka-storage.sh format --add-scram does); the rest goes over the wire:")

            def client(user: str) -> ck.AdminClient:
                return ck.AdminClient({
                    "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(ca.ca_cert), "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": user, "sasl.password": passwords[user],
                    "logger": quiet, "log.connection.close": False})

            def code(future) -> str:
                try:
                    future.result(timeout=15)
                except KafkaException as exc:
                    return exc.args[0].name()
                return "NONE"

            def shown(b: ck.AclBinding) -> str:   # in Kafka's names (librdkafka calls CLUSTER "BROKER")
                return (f"{ResourceType(b.restype.value).name} {b.name} {b.resource_pattern_type.name} "
                        f"{b.principal} {b.operation.name} {b.permission_type.name}")

            before = store.log.end_offset
            rows = []
            admin = client("admin")
            upsert = ck.UserScramCredentialUpsertion("dora", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_512, 8192),
                                                     passwords["dora"].encode())
            done = admin.alter_user_scram_credentials([upsert], request_timeout=10)
            rows.append(["admin", "AlterUserScramCredentials", "upsert dora SCRAM-SHA-512 iterations=8192",
                         code(done["dora"])])
            grants = [ck.AclBinding(ck.ResourceType.TOPIC, "payments-", ck.ResourcePatternType.PREFIXED, "User:dora", "*",
                                    ck.AclOperation.READ, ck.AclPermissionType.ALLOW),
                      ck.AclBinding(ck.ResourceType.BROKER, "kafka-cluster", ck.ResourcePatternType.LITERAL, "User:dora",
                                    "*", ck.AclOperation.DESCRIBE, ck.AclPermissionType.ALLOW)]
            for binding, future in admin.create_acls(grants, request_timeout=10).items():
                rows.append(["admin", "CreateAcls", shown(binding), code(future)])
            mine = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, "User:dora", None,
                                       ck.AclOperation.ANY, ck.AclPermissionType.ANY)
            found = admin.describe_acls(mine, request_timeout=10).result(timeout=15)
            rows.append(["admin", "DescribeAcls", "principal User:dora", f"{len(found)} ACLs"])
            dora = client("dora")   # a new connection: the password set a moment ago logs in
            cluster = dora.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=15)
            ops = ", ".join(sorted(op.name for op in cluster.authorized_operations or ())) or "none"
            rows.append(["dora", "DescribeCluster", "include_authorized_operations",
                         f"controller {cluster.controller.id}; dora may: {ops}"])
            refused = dora.create_acls([ck.AclBinding(ck.ResourceType.TOPIC, "dora-own", ck.ResourcePatternType.LITERAL,
                                                      "User:dora", "*", ck.AclOperation.ALL,
                                                      ck.AclPermissionType.ALLOW)], request_timeout=10)
            rows.append(["dora", "CreateAcls", "TOPIC dora-own LITERAL User:dora ALL ALLOW",
                         ", ".join(code(f) for f in refused.values())])
            del admin, dora   # disconnect before the server stops
        print("   requests from confluent-kafka's AdminClient (librdkafka), SCRAM-SHA-512 over TLS:")
        print_table(["LOGIN", "REQUEST", "ARGUMENTS", "RESULT"], rows)
        print("   the log entries they produced (actor and host recorded from the connection; the refused "
              "request wrote nothing):")
        entries = [redacted(e) for e in store.log.read(before)]
        print_table(["OFFSET", "ACTOR", "HOST", "REQUEST", "EVENT", "WHAT"],
                    [[r["offset"], r["actor_principal"], r["actor_host"], r["request_id"][:8], r["event_type"],
                      _what(r["payload"])] for r in entries])


def _what(payload: dict) -> str:
    """A log entry's change in one line: the ACL binding, or the SCRAM credential (secrets stay sealed)."""
    if "resource_type" in payload:
        return " ".join(str(payload[k]) for k in ("resource_type", "resource_name", "pattern_type", "principal",
                                                   "operation", "permission_type"))
    if "mechanism" in payload:
        return f"{payload['user']} {payload['mechanism']} iterations={payload.get('iterations', '-')}"
    return ", ".join(f"{k}={v}" for k, v in payload.items())


def _tamper(store_dir: Path, keyring: Keyring) -> None:
    from secmeta.core.log import verify_log

    print(f"\n12. secmeta log verify: {verify_log(store_dir, keyring=keyring)}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tampered"
        shutil.copytree(store_dir, copy, ignore=shutil.ignore_patterns("LOCK"))
        segment = sorted((copy / "log").glob("*.log"))[0]
        data = bytearray(segment.read_bytes())
        data[len(data) // 2] ^= 0x01
        segment.write_bytes(bytes(data))
        print(f"   one bit flipped in a copy's {segment.name}: {verify_log(copy, keyring=keyring)}")


def _spark(store_dir: Path, key_file: Path, config: StoreConfig, keyring: Keyring, point) -> None:
    """Compact the demo store with local Spark and ask a point-in-time question of the tables."""
    from secmeta.core.store.facade import SecurityStore

    try:
        from secmeta.consumers.spark import queries
        from secmeta.consumers.spark.compaction import compact
        from secmeta.consumers.spark.session import session
        from secmeta.consumers.spark.table_reader import TableReader
    except ImportError:
        print("\n   (install the spark extra to see the Spark compaction)")
        return
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("\n   (Spark needs a Java runtime: install one to see the Spark compaction)")
        return
    tables = store_dir.with_name(store_dir.name + ".tables")
    shutil.rmtree(tables, ignore_errors=True)
    print(f"\n13. Spark (local[2]): compacting the log into history, snapshot and interval tables in {tables}")
    started = time.monotonic()
    from pyspark.sql import SparkSession

    ours = SparkSession.getActiveSession() is None  # stop only a session this demo started
    spark = session(app="secmeta-demo")
    try:
        manifest = compact(spark, store_dir, tables, key_file=str(key_file), max_events_per_trigger=2000,
                           progress=lambda v: print(f"   log offset {v.offset}: +{v.events} events", flush=True))
        print(f"   {manifest.offset} events compacted in {time.monotonic() - started:.0f} s "
              f"(including starting Spark)")
        reader = TableReader(spark, tables)
        grants = queries.who_could_at(reader, "READ", "TOPIC", "ledger-eu", point)
        acls = queries.acls_at(reader, point)
        with SecurityStore.open(store_dir, config, keyring=keyring, read_only=True) as store:
            embedded = store.who_could("READ", "TOPIC", "ledger-eu", at=point)
            view = store.as_of(timestamp_ms=point.timestamp_ms)
            embedded_acls = view.describe_acls(AclBindingFilter.any(), context=ADMIN)
        print(f"   who could READ topic ledger-eu at {iso_time(point.timestamp_ms)}, from the Spark tables:")
        print_table(["PRINCIPAL", "HOST", "WHY"], [[g.principal, g.host, g.reason] for g in grants[:6]])
        if len(grants) > 6:
            print(f"   ... {len(grants) - 6} more")
        print(f"   equal to the embedded store's who_could: {grants == embedded}; ACLs in force then: "
              f"{len(acls)} (Spark) and {len(embedded_acls)} (store), same set: "
              f"{sorted(map(repr, (a.binding for a in acls))) == sorted(map(repr, embedded_acls))}")
        print(f"   try: secmeta spark query sql --tables {tables} "
              "\"SELECT event_type, count(*) FROM secmeta_history GROUP BY event_type\"")
    finally:
        if ours:
            spark.stop()
