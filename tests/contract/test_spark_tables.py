"""The Spark tables: the compaction job (consumers/spark/compaction.py) and the queries over its tables.

One compaction of the seeded workload in micro-batches of 30 events (so requests are split across
batches), in the session-wide SparkSession. At a sample of published offsets the ACLs come from the
``acls_at`` query, credentials and tokens from the interval tables (in force at N as tables.py
documents them: ``valid_from_offset < N`` and not closed before N), quotas too (the quota kind's tables
come from its declaration alone); at the end, from the snapshot tables.
"""

from __future__ import annotations

import pytest

from tests.contract.images import Image, acl_row
from tests.contract.suite import ReaderContract
from tests.extras import require_extra

require_extra("pyspark", "spark")

from secmeta.consumers.spark.compaction import compact  # noqa: E402
from secmeta.consumers.spark.queries import acls_at  # noqa: E402
from secmeta.consumers.spark.queries.tokens import token_columns  # noqa: E402
from secmeta.consumers.spark.table_reader import TableReader  # noqa: E402
from secmeta.events.types import ScramMechanism, from_output_name  # noqa: E402
from secmeta.projections.tokens import TokenInfo  # noqa: E402


def _in_force(rows, n: int) -> list:
    return [r for r in rows if r.valid_from_offset < n and (r.valid_to_offset is None or r.valid_to_offset >= n)]


def _credentials(rows) -> frozenset:
    # The tables name a mechanism as Kafka does (SCRAM-SHA-256); the recorded images by its enum member.
    return frozenset((r.user, from_output_name(ScramMechanism, r.mechanism).name, r.iterations) for r in rows)


def _quotas(rows) -> frozenset:
    return frozenset((r.entity, r.key, r.value) for r in rows)


def _settings(rows) -> frozenset:
    return frozenset((r.setting_name, r.setting_value) for r in rows)


def _tokens(rows) -> frozenset:
    tokens = (TokenInfo.of(r.asDict()) for r in rows)
    return frozenset((t.token_id, t.owner, t.requester, tuple(sorted(t.renewers)), t.issue_timestamp_ms,
                      t.expiry_timestamp_ms, t.max_timestamp_ms) for t in tokens)


class TestSparkTables(ReaderContract):
    every_offset = False
    spark = None

    @pytest.fixture(autouse=True)
    def _session(self, spark):
        self.spark = spark

    def images(self, written, offsets):
        tables = written.store_dir.parent / "tables"
        manifest = compact(self.spark, written.store_dir, tables, key_file=str(written.key_file),
                           max_events_per_trigger=30)
        end = written.recording.end
        assert manifest.offset == end and manifest.delta_version > 1
        reader = TableReader(self.spark, tables)
        credentials = reader.intervals("credential_intervals").collect()
        quotas = reader.intervals("quota_intervals").collect()
        settings = reader.intervals("setting_intervals").collect()
        tokens = reader.intervals("token_intervals").select(*token_columns(), "valid_from_offset",
                                                             "valid_to_offset").collect()
        images = {}
        for n in offsets:
            acls = frozenset(acl_row(a.binding.restype, a.binding.name, a.binding.resource_pattern_type,
                                     a.binding.principal, a.binding.host, a.binding.operation,
                                     a.binding.permission_type) for a in acls_at(reader, n))
            images[n] = Image(acls, _credentials(_in_force(credentials, n)), _tokens(_in_force(tokens, n)),
                              _quotas(_in_force(quotas, n)), _settings(_in_force(settings, n)))
        now = Image(
            frozenset(tuple(r) for r in reader.snapshot("acls").select(
                "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                "permission_type").collect()),
            _credentials(reader.snapshot("scram_users").collect()),
            _tokens(reader.snapshot("tokens").select(*token_columns()).collect()),
            _quotas(reader.snapshot("quotas").collect()),
            _settings(reader.snapshot("settings").collect()))
        assert now == written.recording.images[end], "the snapshot tables hold the end image"
        return images


def test_who_could_uses_the_settings_in_force_at_the_point(spark, written):
    """Spark's who-could at a point where User:bob was a super user lists him, as the store does, and not after
    super.users was altered back (before issue 21 both used the current config for every point)."""
    from secmeta.consumers.spark.queries import who_could_at
    from secmeta.core import SecurityStore

    tables = written.store_dir.parent / "tables"
    compact(spark, written.store_dir, tables, key_file=str(written.key_file), max_events_per_trigger=30)
    reader = TableReader(spark, tables)
    with SecurityStore.open(written.store_dir, written.config, keyring=written.keyring, read_only=True) as store:
        changes = list(store.history(event_types=["SecuritySettingAltered"]))
        granted = next(e for e in changes if e.payload["setting_value"] == "User:admin;User:bob")
        after_grant = max(e.offset for e in changes if e.request_id == granted.request_id) + 1
        for n in (granted.offset, after_grant, written.recording.end):
            expected = store.who_could("ALTER", "TOPIC", "payments", at=n)
            assert who_could_at(reader, "ALTER", "TOPIC", "payments", n) == expected, n
            assert ("User:bob" in {g.principal for g in expected}) == (n == after_grant), n
