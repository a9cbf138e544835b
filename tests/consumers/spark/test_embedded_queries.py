"""Point-in-time queries without a JVM (Polars over deltalake) on the demo's tables: the store's answers and
Spark's, and the README's SQL run as written over the raw Delta tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extras import require_extra

require_extra("polars", "spark")

from secmeta.consumers.demo_scenario import build_store  # noqa: E402
from secmeta.consumers.tables_query import queries as embedded  # noqa: E402
from secmeta.consumers.tables_query.reader import ArrowReader  # noqa: E402
from secmeta.core import AclOperation, ResourceType, SecurityStore  # noqa: E402
from secmeta.core.times import Point, format_datetime  # noqa: E402

README = Path(__file__).resolve().parents[3] / "README.md"
TOPICS = ["ledger-eu", "orders-1", "orders-17", "payments", "fraud-3"]
OPS = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE]
PRINCIPALS = ["User:admin", "User:svc-1", "User:svc-12", "User:alice"]


@dataclass
class Demo:
    store_dir: Path
    config: object
    keyring: object
    tables: Path
    end: int
    times: list[int]
    spark_answers: dict  # (question, args) -> Spark's answer, computed once

    def open(self) -> SecurityStore:
        return SecurityStore.open(self.store_dir, self.config, keyring=self.keyring, read_only=True)


def _acl_rows(found) -> list[dict]:
    return [a.to_dict() for a in found]


def _shown(rows: list[dict]) -> list[dict]:
    """History rows as the CLI prints them (times as ISO-8601 Z: Spark's are naive UTC, Polars' zoned)."""
    return [{k: format_datetime(v) if isinstance(v, datetime) else v for k, v in r.items()} for r in rows]


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory) -> Demo:
    """A small demo store compacted in several versions; Spark's answers at a few points, asked once."""
    from secmeta.consumers.spark import queries
    from secmeta.consumers.spark.compaction import compact
    from secmeta.consumers.spark.table_reader import TableReader

    root = tmp_path_factory.mktemp("demo-tables")
    store_dir, key_file, tables = root / "demo-store", root / "demo-store.keys.json", root / "tables"
    config, keyring, _point = build_store(store_dir, key_file, users=30, acls=240)
    compact(spark, store_dir, tables, key_file=str(key_file), max_events_per_trigger=150, retain_versions=3)
    with SecurityStore.open(store_dir, config, keyring=keyring, read_only=True) as store:
        end = store.log.end_offset
        times = sorted({e.timestamp_ms for e in store.history()})
    reader = TableReader(spark, tables)
    offsets = sorted({0, end, end // 3, end // 2, end - 7, *(k.offset for k in reader.version.kept)})
    answers: dict = {}
    for i, n in enumerate(offsets):
        answers["acls", n] = _acl_rows(queries.acls_at(reader, n))
        topic, op = TOPICS[i % len(TOPICS)], OPS[i % len(OPS)]
        answers["who", n, topic, op] = queries.who_could_at(reader, op, ResourceType.TOPIC, topic, n)
    mid = times[len(times) // 2]
    answers["who-time", mid] = queries.who_could_at(reader, "READ", "TOPIC", "ledger-eu", Point.at_time(mid))
    for p in ("User:admin", "User:alice"):
        answers["history", p] = [{k: v for k, v in r.asDict().items() if k != "_replaced_principals"}
                                 for r in queries.change_history(reader, principal=p,
                                                                 start=Point.at_offset(end // 4)).collect()]
    for t1, t2 in ((times[0], times[-1]), (mid, mid)):
        answers["tokens", t1, t2] = queries.tokens_alive(reader, t1, t2)
    return Demo(store_dir, config, keyring, tables, end, times, answers)


def _spark_keys(demo: Demo, question: str) -> list[tuple]:
    return [k for k in demo.spark_answers if k[0] == question]


def test_embedded_answers_equal_sparks(demo):
    """Every answer Spark gave (ACLs, who-could at offsets and a time, history, tokens), the embedded engine gives."""
    reader = ArrowReader(demo.tables)
    for key, want in demo.spark_answers.items():
        question, *args = key
        if question == "acls":
            assert _acl_rows(embedded.acls_at(reader, args[0])) == want, key
        elif question == "who":
            n, topic, op = args
            assert embedded.who_could_at(reader, op, ResourceType.TOPIC, topic, n) == want, key
        elif question == "who-time":
            assert embedded.who_could_at(reader, "READ", "TOPIC", "ledger-eu", Point.at_time(args[0])) == want
        elif question == "history":
            got = embedded.change_history(reader, principal=args[0], start=Point.at_offset(demo.end // 4))
            assert _shown(got) == _shown(want), key
            assert got, key
        else:
            assert embedded.tokens_alive(reader, *args) == want, key
    assert len(_spark_keys(demo, "acls")) >= 5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_embedded_answers_equal_the_store_at_any_point(demo, data):
    """At any offset or batch time: the ACLs in force and who could do an operation, as the store answers."""
    reader = ArrowReader(demo.tables)
    with demo.open() as store:
        if data.draw(st.booleans(), label="by time"):
            t = data.draw(st.sampled_from(demo.times), label="time") + data.draw(st.sampled_from([-1, 0, 1]))
            at, view = Point.at_time(t), store.as_of(timestamp_ms=t)
        else:
            n = data.draw(st.integers(0, demo.end), label="offset")
            at, view = n, store.as_of(offset=n)
        found = embedded.acls_at(reader, at)
        assert {a.acl_id: a.binding for a in found} == dict(iter(view.image.acls))
        topic, op = data.draw(st.sampled_from(TOPICS)), data.draw(st.sampled_from(OPS))
        point = at if isinstance(at, Point) else Point.at_offset(at)
        assert embedded.who_could_at(reader, op, "TOPIC", topic, at) == store.who_could(op, "TOPIC", topic, at=point)


def test_embedded_history_equals_the_stores(demo):
    """Principal and user histories, offset and time windows: the store's entries, by offset and action."""
    reader = ArrowReader(demo.tables)
    t1, t2 = demo.times[len(demo.times) // 4], demo.times[3 * len(demo.times) // 4]
    with demo.open() as store:
        for p in PRINCIPALS:
            for start, end, kw in ((None, None, {}), (Point.at_offset(demo.end // 3), Point.at_offset(demo.end - 5),
                                                    {"start_offset": demo.end // 3, "end_offset": demo.end - 5}),
                                   (Point.at_time(t1), Point.at_time(t2), {"start_ms": t1, "end_ms": t2})):
                want = [(e.offset, e.action) for e in store.history(principal=p, **kw)]
                got = [(r["offset"], r["action"]) for r in embedded.change_history(reader, principal=p, start=start,
                                                                                    end=end)]
                assert got == want, (p, kw)
        want = [(e.offset, e.action) for e in store.history(user="svc-1")]
        assert [(r["offset"], r["action"]) for r in embedded.change_history(reader, user="svc-1")] == want


# -- the README's SQL, as written, over the raw Delta tables -------------------------------------------


def _readme_sql() -> str:
    text = README.read_text()
    section = text[text.index("\n## Spark"):text.index("\n## Benchmarks")]
    (sql,) = re.findall(r"```sql\n(.*?)```", section, re.S)
    return sql


_LITERAL = re.compile(r"'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00)'")


def _at(sql: str, t_ms: int) -> str:
    """The README's SQL at another time (every time literal in it replaced)."""
    from secmeta.core.times import ms_to_datetime

    stamp = ms_to_datetime(t_ms).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    assert _LITERAL.search(sql), sql
    return _LITERAL.sub(f"'{stamp}'", sql)


def _held(view) -> dict[str, tuple]:
    return {acl_id: (b.principal, b.operation.name, b.name) for acl_id, b in view.image.acls}


def test_the_readmes_sql_is_right_over_the_raw_delta_tables_in_polars_and_spark(spark, demo):
    """The README's point-in-time SQL over acl_intervals, run as written by Polars on the raw Delta table
    (deltalake + pyarrow, its latest version) and by Spark SQL, lists the ACLs the store held then."""
    import polars as pl
    from deltalake import DeltaTable

    from secmeta.consumers.spark.table_reader import TableReader

    sql = _readme_sql()
    raw = pl.from_arrow(DeltaTable(demo.tables / "acl_intervals").to_pyarrow_table())
    context = pl.SQLContext(acl_intervals=raw)
    TableReader(spark, demo.tables).intervals("acl_intervals").createOrReplaceTempView("acl_intervals")
    columns = ("acl_id", "principal", "operation", "resource_name")
    with demo.open() as store:
        picks = [demo.times[0] - 1, demo.times[len(demo.times) // 3], demo.times[-2], demo.times[-1] + 1000]
        for i, t in enumerate(picks):
            want = _held(store.as_of(timestamp_ms=t)) if t >= demo.times[0] else {}
            got = context.execute(_at(sql, t), eager=True).select(columns).rows()
            assert {r[0]: r[1:] for r in got} == want and len(got) == len(want), t
            if i == 1:  # Spark SQL, once
                rows = spark.sql(_at(sql, t)).select(*columns).collect()
                assert {r[0]: tuple(r[1:]) for r in rows} == want and len(rows) == len(want), t
        held = len(dict(iter(store.image.acls)))
    # the open intervals are in the raw table: as many rows with no end as ACLs held at the tables' version
    assert raw.filter(pl.col("valid_to").is_null()).height == held


def _readme_python() -> str:
    text = README.read_text()
    section = text[text.index("\n## Spark"):text.index("\n## Benchmarks")]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return "\n".join(line.removeprefix("  ") for line in code.splitlines())


def test_the_readmes_python_reads_the_delta_tables_at_one_version(demo):
    """The Spark section's Python (deltalake + Polars at the Delta versions of the current version), run as
    written with TABLES named: its `acls` holds the ACLs the store held at that version's offset, and its
    SQLContext answers the README's SQL."""
    from secmeta.consumers.spark.tables import Tables

    namespace: dict = {}
    exec(_readme_python().replace('"TABLES', f'"{demo.tables}'), namespace)  # noqa: S102 - the README's code
    version = Tables(demo.tables).current()
    later = demo.times[-1] + 1000
    with demo.open() as store:
        held, held_later = _held(store.as_of(offset=version.offset)), _held(store.as_of(timestamp_ms=later))
    assert sorted(namespace["acls"].column("acl_id").to_pylist()) == sorted(held)
    answered = namespace["sql"].execute(_at(_readme_sql(), later), eager=True)
    assert sorted(answered["acl_id"].to_list()) == sorted(held_later)
