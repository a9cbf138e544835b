"""The ``secmeta-kafka`` Spark data source: the history topic, published from a real store, as rows."""

from __future__ import annotations

import base64
import json
from datetime import datetime

import pytest

from secmeta.consumers.kafka.publisher import Publisher
from secmeta.consumers.spark.kafka_source import (
    EARLIEST,
    LATEST,
    KafkaRange,
    SecmetaKafkaSourceError,
    allot,
    parse_offsets,
    plan_kafka_ranges,
)
from secmeta.consumers.spark.rows import SCHEMA, event_row
from secmeta.core import SecurityStore, StoreConfig
from secmeta.core.log import Log, LogConfig
from secmeta.events.keyring import Keyring
from secmeta.events.records import ScramCredentialUpserted
from tests.consumers.conftest import produce_raw, read_topic, unique_topic, unused_port
from tests.consumers.spark.sparkkit import ADMIN, SALT, topic_acl, write_small_workload
from tests.logkit import Clock


class Workspace:
    """A store with tiny segments, its key file, and its history topic published by the real publisher."""

    def __init__(self, root, bootstrap: str):
        self.root = root
        self.bootstrap = bootstrap
        self.key_file = root / "keys.json"
        Keyring.generate_file(self.key_file)
        self.keyring = Keyring.from_file(self.key_file)
        self.config = StoreConfig(token_secret=b"token-secret-for-tests, 32 bytes or more", clock=Clock(),
                                  log=LogConfig(segment_bytes=2048))
        self.store_dir = root / "store"
        self.history, self.state = unique_topic("spark-history"), unique_topic("spark-state")

    def write(self, work) -> None:
        with SecurityStore.open(self.store_dir, self.config, keyring=self.keyring) as store:
            work(store)

    def publish(self) -> int:
        with Publisher(self.store_dir, self.keyring, self.bootstrap, history_topic=self.history,
                       state_topic=self.state) as publisher:
            return publisher.publish_available(timeout=60)

    def envelopes(self):
        with Log.open(self.store_dir, keyring=self.keyring, read_only=True) as log:
            return list(log.read())

    def kafka(self, spark, topic: str | None = None, stream: bool = False):
        reader = spark.readStream if stream else spark.read
        return (reader.format("secmeta-kafka").option("kafka.bootstrap.servers", self.bootstrap)
                .option("topic", topic or self.history))

    def log(self, spark):
        return (spark.read.format("secmeta").option("path", str(self.store_dir))
                .option("keyFile", str(self.key_file)))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, kafka_bootstrap):
    ws = Workspace(tmp_path_factory.mktemp("spark-kafka"), kafka_bootstrap)
    ws.write(write_small_workload)
    assert ws.publish() == len(ws.envelopes())
    return ws


def _naive(row: tuple) -> tuple:
    """A row as collect() returns it: timestamps as naive datetimes in the session time zone (UTC)."""
    return tuple(v.replace(tzinfo=None) if isinstance(v, datetime) else v for v in row)


def _rows(df) -> list[tuple]:
    return [tuple(r) for r in df.orderBy("offset").collect()]


# -- planning helpers (no Spark) -------------------------------------------------------------


def test_plan_kafka_ranges_splits_long_ranges():
    assert plan_kafka_ranges(0, 5, 25, max_messages=10) == [
        KafkaRange(0, 5, 15), KafkaRange(0, 15, 25)]
    assert plan_kafka_ranges(3, 7, 7) == []


def test_allot_shares_the_budget_fairly():
    assert allot(10, {0: 100, 1: 0, 2: 3}) == {0: 7, 1: 0, 2: 3}
    assert allot(5, {0: 2, 1: 2}) == {0: 2, 1: 2}
    assert sum(allot(3, {0: 5, 1: 5, 2: 5, 3: 5}).values()) == 3


def test_parse_offsets_forms():
    assert parse_offsets(None, "startingOffsets", "h", default=EARLIEST) == EARLIEST
    assert parse_offsets("Latest", "startingOffsets", "h", default=EARLIEST) == LATEST
    assert parse_offsets('{"0": 12, "2": -2}', "startingOffsets", "h", default=EARLIEST) == {0: 12, 2: EARLIEST}
    assert parse_offsets('{"h": {"1": 4}}', "startingOffsets", "h", default=EARLIEST) == {1: 4}
    for bad, message in [("first", "earliest / latest or JSON"), ('{"x": 1}', "not a partition number"),
                         ('{"0": -5}', "integer >= 0"), ('{"0": "3"}', "integer >= 0"),
                         ('{"other": {"0": 1}}', "names topic"), ("[1]", "JSON object")]:
        with pytest.raises(SecmetaKafkaSourceError, match=message):
            parse_offsets(bad, "startingOffsets", "h", default=EARLIEST)
    with pytest.raises(SecmetaKafkaSourceError, match="endingOffsets must be latest"):
        parse_offsets("earliest", "endingOffsets", "h", default=LATEST, allow_earliest=False)


# -- batch reads ------------------------------------------------------------------------------


def test_batch_read_equals_the_log_source(spark, workspace):
    """The topic read as rows is exactly the log read as rows: same schema, same rows, log offsets."""
    df = workspace.kafka(spark).load()
    assert df.schema == SCHEMA
    rows = _rows(df)
    assert rows == _rows(workspace.log(spark).load())
    assert rows == [_naive(event_row(e)) for e in workspace.envelopes()]


def test_batch_read_in_small_pieces(spark, workspace):
    """maxEventsPerPartition splits the read into several tasks without changing the rows."""
    df = workspace.kafka(spark).option("maxEventsPerPartition", 7).load()
    n = len(workspace.envelopes())
    assert df.rdd.getNumPartitions() == -(-n // 7)
    assert _rows(df) == _rows(workspace.log(spark).load())


def test_starting_and_ending_offsets(spark, workspace):
    """JSON offsets bound a batch read per partition (here Kafka offset k holds log offset k - 1: Kafka offset 0
    holds the format marker)."""
    def offsets(**options):
        reader = workspace.kafka(spark)
        for key, value in options.items():
            reader = reader.option(key, value)
        return [r.offset for r in reader.load().select("offset").orderBy("offset").collect()]

    n = len(workspace.envelopes())
    assert offsets(startingOffsets='{"0": 12}') == list(range(11, n))
    assert offsets(startingOffsets='{"0": 12}', endingOffsets='{"0": 20}') == list(range(11, 19))
    assert offsets(startingOffsets=json.dumps({workspace.history: {"0": 30}})) == list(range(29, n))
    assert offsets(startingOffsets="latest") == []
    assert offsets(endingOffsets='{"0": 3}') == [0, 1]


def test_batch_read_carries_no_secret(spark, workspace):
    """Neither the sealed ciphertext nor the salt appears in any row, in any encoding."""
    sealed = [e.event.secret for e in workspace.envelopes() if isinstance(e.event, ScramCredentialUpserted)]
    assert sealed
    needles = [SALT]
    for s in sealed:
        needles += [s.ciphertext, s.nonce]
    forms = set()
    for n in needles:
        forms |= {n.hex(), base64.b64encode(n).decode(), n.decode("latin-1"), repr(n)}
    rows = workspace.kafka(spark).load().collect()
    assert any(r.event_type == "ScramCredentialUpserted" for r in rows)
    for row in rows:
        text = repr(tuple(row))
        for form in forms:
            assert form not in text


def test_duplicates_and_foreign_messages_are_skipped(spark, workspace, kafka_bootstrap):
    """A publisher's re-send and messages that are not ours leave the rows as the log has them.

    The copy of the history re-sends a run of events (as a publisher that crashed
    before checkpointing does) and holds foreign messages; tasks of 4 messages
    see duplicates whose first copy lies in an earlier task.
    """
    messages = [(k, v, h) for _, k, v, h in read_topic(kafka_bootstrap, workspace.history)]
    n = len(messages)
    topic = unique_topic("spark-dups")
    copy = messages[:20] + [(b"k", b"not an event", [])] + messages[14:20] + messages[20:]
    copy += [(None, None, messages[-1][2])]  # a tombstone carrying our headers: not an event either
    produce_raw(kafka_bootstrap, topic, copy)
    expected = _rows(workspace.log(spark).load())
    for pieces in (4, 1000):
        df = workspace.kafka(spark, topic).option("maxEventsPerPartition", pieces).load()
        assert _rows(df) == expected, pieces
    # Without a lookback a task cannot know what earlier tasks read: duplicates come through.
    df = workspace.kafka(spark, topic).option("maxEventsPerPartition", 4).option("duplicateLookback", 0).load()
    assert df.count() > n
    with pytest.raises(Exception, match="notOurMessages=fail"):
        workspace.kafka(spark, topic).option("notOurMessages", "fail").load().collect()


def _source(workspace, **options):
    from pyspark.sql.datasource import CaseInsensitiveDict

    from secmeta.consumers.spark.kafka_source import SecmetaKafkaDataSource

    return SecmetaKafkaDataSource(CaseInsensitiveDict(_options(workspace, options))).source


def test_a_range_past_the_partition_end_stops_there(workspace):
    """A task whose range reaches beyond the high watermark stops at the partition's end, not at a timeout."""
    import time

    source = _source(workspace, pollTimeoutMs="20000")
    n = len(workspace.envelopes())
    began = time.monotonic()
    batches = list(source.batches(KafkaRange(0, n - 2, n + 50)))  # Kafka offset k holds log offset k - 1
    assert time.monotonic() - began < 10
    assert [r["offset"] for b in batches for r in b.to_pylist()] == [n - 3, n - 2, n - 1]
    assert list(source.batches(KafkaRange(1, 0, 5))) == []  # an empty partition


def test_a_silent_cluster_fails_the_task_after_the_poll_timeout(workspace):
    """No message and no end-of-partition event for pollTimeoutMs: a clear error, never a hang."""
    from dataclasses import replace

    source = replace(_source(workspace, pollTimeoutMs="500"),
                     settings={"bootstrap.servers": f"127.0.0.1:{unused_port()}"})
    with pytest.raises(SecmetaKafkaSourceError, match=r"\[0\], reading Kafka offsets \[0, 10\) at offset 0: "
                                                      r"no message for 0.5 s \(option pollTimeoutMs\)"):
        list(source.batches(KafkaRange(0, 0, 10)))


# -- streaming --------------------------------------------------------------------------------


def test_stream_available_now_resumes_from_checkpoint(spark, tmp_path, kafka_bootstrap):
    """availableNow with maxEventsPerTrigger reads every event once; a second run reads only new ones."""
    ws = Workspace(tmp_path, kafka_bootstrap)
    ws.write(write_small_workload)
    ws.publish()
    seen: list[list[int]] = []

    def collect(batch_df, batch_id):
        seen.append(sorted(r.offset for r in batch_df.select("offset").collect()))

    def run():
        query = (ws.kafka(spark, stream=True).option("maxEventsPerTrigger", 15).load()
                 .writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return query

    envelopes = ws.envelopes()
    query = run()
    assert [o for b in seen for o in b] == [e.offset for e in envelopes]
    assert all(len(b) <= 15 for b in seen) and len([b for b in seen if b]) > 1
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end["0"] == len(envelopes) + 1  # Kafka offsets per partition (the format marker too); the others are empty

    ws.write(lambda store: store.create_acls([topic_acl("late-1"), topic_acl("late-2")], context=ADMIN))
    assert ws.publish() == 2
    seen.clear()
    run()
    after = ws.envelopes()
    assert len(after) == len(envelopes) + 2
    assert [o for b in seen for o in b] == [e.offset for e in after[len(envelopes):]]


def test_stream_starting_offsets(spark, workspace, tmp_path):
    """startingOffsets JSON sets where a new streaming query begins."""
    query = (workspace.kafka(spark, stream=True).option("startingOffsets", '{"0": 25}').load()
             .select("offset").writeStream.format("memory").queryName("kafka_from_25")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = sorted(r.offset for r in spark.sql("SELECT offset FROM kafka_from_25").collect())
    assert got == list(range(24, len(workspace.envelopes())))  # Kafka offset 0 holds the format marker


# -- errors at definition ---------------------------------------------------------------------


BAD_OPTIONS = [
    ({"topic": None}, "needs .option\\(\"topic\""),
    ({"kafka.bootstrap.servers": None}, "needs .option\\(\"kafka.bootstrap.servers\""),
    ({"bootstrap.servers": "elsewhere:9092"}, "kafka.bootstrap.servers .* and bootstrap.servers .* disagree"),
    ({"startingOffsets": "soonest"}, "option startingOffsets must be earliest / latest or JSON"),
    ({"startingOffsets": '{"7": 0}'}, "option startingOffsets names partition\\(s\\) 7"),
    ({"endingOffsets": "earliest"}, "option endingOffsets must be latest"),
    ({"maxEventsPerTrigger": "many"}, "option maxEventsPerTrigger must be an integer"),
    ({"maxEventsPerTrigger": "0"}, "option maxEventsPerTrigger must be >= 1"),
    ({"maxEventsPerPartition": "-3"}, "option maxEventsPerPartition must be >= 1"),
    ({"duplicateLookback": "-1"}, "option duplicateLookback must be >= 0"),
    ({"notOurMessages": "ignore"}, "option notOurMessages must be skip or fail"),
    ({"kafka.group.id": "mine"}, "option kafka.group.id is not allowed"),
    ({"kafka.enable.auto.commit": "true"}, "option kafka.enable.auto.commit is not allowed"),
    ({"kafka.no.such.setting": "1"}, "No such configuration property: \"no.such.setting\""),
    ({"kafka.security.protocol": "carrier-pigeon"}, "security.protocol"),
    ({"allowGaps": "sometimes"}, "option allowGaps must be true or false"),
]


def _options(workspace, extra: dict) -> dict:
    merged = {"kafka.bootstrap.servers": workspace.bootstrap, "topic": workspace.history} | extra
    return {key: value for key, value in merged.items() if value is not None}


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_options_are_refused(workspace, options, message):
    """The source refuses each bad option as it is built, naming the option (no Spark involved)."""
    from pyspark.sql.datasource import CaseInsensitiveDict

    from secmeta.consumers.spark.kafka_source import SecmetaKafkaDataSource

    with pytest.raises(SecmetaKafkaSourceError, match=message):
        SecmetaKafkaDataSource(CaseInsensitiveDict(_options(workspace, options)))


@pytest.mark.parametrize("index", [3, 6, 13])
def test_bad_options_fail_when_the_dataframe_is_defined(spark, workspace, index):
    """Through Spark, batch and streaming alike, the error comes at load(), before any job."""
    options, message = BAD_OPTIONS[index]
    for reader in (spark.read, spark.readStream):
        reader = reader.format("secmeta-kafka")
        for key, value in _options(workspace, options).items():
            reader = reader.option(key, value)
        with pytest.raises(Exception, match=message):
            reader.load()


def test_missing_topic_fails_at_definition(spark, workspace):
    """A topic that does not exist is refused at definition, and asking did not create it."""
    from confluent_kafka import Consumer

    name = unique_topic("never-created")
    with pytest.raises(Exception, match=f"topic '{name}' \\(option topic\\) does not exist"):
        workspace.kafka(spark, name).load()
    with pytest.raises(Exception, match=f"topic '{name}' \\(option topic\\) does not exist"):
        workspace.kafka(spark, name, stream=True).load()
    consumer = Consumer({"bootstrap.servers": workspace.bootstrap, "group.id": "never-joined"})
    try:
        assert name not in consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()


def test_unreachable_cluster_fails_at_definition(spark, workspace):
    address = f"127.0.0.1:{unused_port()}"
    with pytest.raises(Exception, match=f"cannot reach the Kafka cluster at {address}"):
        (spark.read.format("secmeta-kafka").option("bootstrap.servers", address)
         .option("topic", workspace.history).option("metadataTimeoutMs", 500).load())


def test_ending_offsets_are_refused_for_a_stream(spark, workspace, tmp_path):
    with pytest.raises(Exception, match="endingOffsets is for batch reads only"):
        query = (workspace.kafka(spark, stream=True).option("endingOffsets", "latest").load()
                 .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(60)
        raise AssertionError(str(query.exception()))


def test_client_settings_stay_out_of_reprs():
    """Kafka client settings may carry a SASL password: the picklable topic handle never shows them."""
    from secmeta.consumers.spark.kafka_source import _Topic

    topic = _Topic("secmeta.history", {"bootstrap.servers": "b:9092", "sasl.password": "hunter2-secret"})
    assert "hunter2-secret" not in repr(topic) and "secmeta.history" in repr(topic)


# -- gaps in the log offsets (review finding 4) -------------------------------------------------


def _gapped_copy(workspace, kafka_bootstrap, keep) -> tuple[str, list[int]]:
    """A copy of the history topic holding only the events ``keep`` picks (by index = log offset), as retention
    or a publisher elsewhere leaves it; the topic and the log offsets it holds."""
    messages = [(k, v, h) for _, k, v, h in read_topic(kafka_bootstrap, workspace.history)]
    kept = [i for i in range(len(messages)) if keep(i)]
    topic = unique_topic("spark-gap")
    produce_raw(kafka_bootstrap, topic, [messages[i] for i in kept])
    return topic, kept


def _offsets_read(source, end: int, pieces: int) -> list[int]:
    return [r["offset"] for start in range(0, end, pieces)
            for b in source.batches(KafkaRange(0, start, min(end, start + pieces))) for r in b.to_pylist()]


def test_a_gap_in_the_log_offsets_fails_the_read_naming_the_missing_range(workspace, kafka_bootstrap):
    """Events 9..13 missing from the topic: a read of the whole range, and a task starting at the gap (which knows
    the event before it from its lookback), fail naming the topic, both log offsets and the missing range;
    allowGaps=true reads the rest."""
    topic, kept = _gapped_copy(workspace, kafka_bootstrap, lambda i: not 9 <= i <= 13)
    message = rf"{topic}\[0\].*jumps from log offset 8 to 14 at Kafka offset 9: events 9..13 are missing.*allowGaps"
    for pieces in (len(kept), 9, 4):
        with pytest.raises(SecmetaKafkaSourceError, match=message):
            _offsets_read(_source(workspace, topic=topic), len(kept), pieces)
    allowed = _source(workspace, topic=topic, allowGaps="true")
    assert _offsets_read(allowed, len(kept), 4) == kept


def test_a_history_whose_first_events_are_gone_fails_the_read(workspace, kafka_bootstrap):
    """A topic whose first events were deleted (retention) starts past log offset 0: the read fails naming 0..4."""
    topic, kept = _gapped_copy(workspace, kafka_bootstrap, lambda i: i >= 5)
    with pytest.raises(SecmetaKafkaSourceError, match=rf"{topic}\[0\].*starts at log offset 5 \(Kafka offset 0\): "
                                                      r"events 0..4 are missing"):
        _offsets_read(_source(workspace, topic=topic), len(kept), len(kept))
    # without a lookback, a task in mid-topic knows nothing before it: it checks from its first event on
    blind = _source(workspace, topic=topic, duplicateLookback="0")
    assert [r["offset"] for b in blind.batches(KafkaRange(0, 3, len(kept))) for r in b.to_pylist()] == kept[3:]


def test_a_spark_query_over_a_gapped_topic_fails_unless_gaps_are_allowed(spark, workspace, kafka_bootstrap):
    """What a Spark user sees: the query fails naming the missing range; with allowGaps=true it gives the rows the
    topic holds."""
    topic, kept = _gapped_copy(workspace, kafka_bootstrap, lambda i: not 9 <= i <= 13)
    with pytest.raises(Exception, match="events 9..13 are missing"):
        workspace.kafka(spark, topic).load().collect()
    rows = workspace.kafka(spark, topic).option("allowGaps", "true").load().select("offset").collect()
    assert [r["offset"] for r in rows] == kept



def test_a_stream_whose_position_was_deleted_before_it_read_it_fails(workspace, kafka_bootstrap, monkeypatch):
    """A stream whose next Kafka offset (2) lies below the partition's earliest one (6: retention deleted [2, 6)
    between two micro-batches; the broker's watermarks say so, stubbed here as the mock cluster cannot delete
    records) fails naming the Kafka offsets it never read; allowGaps=true reads on from the earliest offset."""
    from pyspark.sql.datasource import CaseInsensitiveDict

    from secmeta.consumers.spark import kafka_source

    topic, kept = _gapped_copy(workspace, kafka_bootstrap, lambda i: True)
    monkeypatch.setattr(kafka_source._Topic, "watermarks", lambda self: {0: (6, len(kept))})

    def stream(**extra):
        options = CaseInsensitiveDict(_options(workspace, {"topic": topic, **extra}))
        return kafka_source.SecmetaKafkaDataSource(options).streamReader(SCHEMA)

    with pytest.raises(SecmetaKafkaSourceError, match=rf"{topic}\[0\]: Kafka offsets \[2, 6\) were deleted"):
        stream().partitions({"0": 2}, {"0": len(kept)})
    ranges = stream(allowGaps="true").partitions({"0": 2}, {"0": len(kept)})
    assert [(r.start, r.end) for r in ranges] == [(6, len(kept))]
