"""The tables' Delta logs as ``commits`` writes them (deltalake) and the readers find them, without a JVM (but
for Spark's own reader): a tables directory anywhere on disk, and a batch committed exactly once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.extras import require_extra

require_extra("polars", "spark")

from secmeta.consumers.spark.commits import BatchCommit, create  # noqa: E402
from secmeta.consumers.spark.schemas import schema  # noqa: E402
from secmeta.consumers.spark.tables import HISTORY, Tables, local_files  # noqa: E402
from secmeta.consumers.tables_query.reader import ArrowReader  # noqa: E402


def _history_file(path) -> None:
    """A history data file with no rows, in the history table's schema (as Spark's writer would leave it)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema(HISTORY), timezone="UTC")
    pq.write_table(arrow.remove(arrow.get_field_index("event_date")).empty_table(), path)


@pytest.mark.parametrize("directory", ["secmeta tables", "tables-100%", "tables"])
def test_a_version_whose_files_are_all_there_is_read_wherever_the_directory_is(tmp_path, directory):
    """A version just committed, its data files all present, is read; it is not reported deleted by retention
    because the directory's name holds a character that file URIs percent-encode."""
    tables = Tables(tmp_path / directory)
    create(tables, "store-1", {"super_users": [], "allow_everyone_if_no_acl_found": False})
    staged = tmp_path / "staged.parquet"
    _history_file(staged)
    version = BatchCommit(tables, "stream-1", 1).commit(
        {HISTORY: [(staged, "event_date=2027-01-15/part-00000.parquet")]}, (0, 0), None, keep=10)
    files = tables.files(HISTORY, version)          # TablesError "no longer kept" when it mistakes its own files
    assert len(files) == 1
    assert ArrowReader(tables.path).history().height == 0


@pytest.mark.parametrize("directory", ["secmeta tables", "tables-100%", "tables"])
def test_spark_reads_a_version_wherever_the_directory_is(spark, tmp_path, directory):
    """Spark's TableReader reads the history (partitioned: its files and their base path) and a state table of a
    version in a directory whose name file URIs percent-encode."""
    from secmeta.consumers.spark.table_reader import TableReader

    tables = Tables(tmp_path / directory)
    create(tables, "store-1", {"super_users": [], "allow_everyone_if_no_acl_found": False})
    staged = tmp_path / "staged.parquet"
    _history_file(staged)
    BatchCommit(tables, "stream-1", 1).commit({HISTORY: [(staged, "event_date=2027-01-15/part-00000.parquet")]},
                                              (0, 0), None, keep=10)
    reader = TableReader(spark, tables.path)
    assert reader.history().count() == 0
    assert reader.snapshot("acls").count() == 0


# names deltalake can write: it reads "%" and two hex digits in a directory name as an escape and fails
_NAME = st.text(st.sampled_from("xyz %#?&+=~é"), min_size=1, max_size=8).filter(lambda n: n.strip(" .") == n)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(directory=_NAME, values=st.lists(_NAME, min_size=1, max_size=3, unique=True))
def test_the_files_of_a_delta_table_are_its_files_on_disk_whatever_the_names(tmp_path_factory, directory, values):
    """``local_files`` names exactly the data files on disk, whatever characters the table's directory and its
    partition values hold (the directory is percent-encoded in deltalake's URIs; a partition directory's own
    escapes are its name on disk and stay)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path_factory.mktemp("t") / directory / "table"
    write_deltalake(str(path), pa.table({"x": list(range(len(values))), "d": values}), partition_by=["d"])
    on_disk = {str(f) for f in path.rglob("*.parquet")}
    assert len(on_disk) == len(values)
    assert sorted(local_files(DeltaTable(str(path)))) == sorted(on_disk)


class _Crash(Exception):
    pass


@pytest.mark.parametrize("batch", [0, 1, 7])
def test_a_batch_is_committed_once_whatever_its_id_even_when_replayed(tmp_path, batch):
    """Spark numbers micro-batches from 0. A batch committed in full is a replay when it comes again (``done``);
    one that stopped after its first table keeps that table's commit when replayed (the module's exactly-once
    rule), for batch 0 as for any other."""
    from secmeta.consumers.spark.tables import TABLE_NAMES

    tables = Tables(tmp_path / "tables")
    create(tables, "store-1", {"super_users": [], "allow_everyone_if_no_acl_found": False})
    first = TABLE_NAMES[0]

    def crash_after_first(name: str) -> None:
        if name == first:
            raise _Crash(name)

    def files() -> dict:
        staged = tmp_path / f"staged-{len(list(tmp_path.iterdir()))}.parquet"
        _history_file(staged)
        return {HISTORY: [(staged, f"event_date=2027-01-15/part-{staged.stem}.parquet")]}

    with pytest.raises(_Crash):
        BatchCommit(tables, "stream-1", batch).commit(files(), (0, 0), None, keep=10, after_table=crash_after_first)
    committed = tables.delta(first).version()
    replay = BatchCommit(tables, "stream-1", batch)
    assert not replay.done
    version = replay.commit(files(), (0, 0), None, keep=10)
    assert tables.delta(first).version() == committed, (
        f"replaying batch {batch} committed {first} again (Delta version {committed} -> "
        f"{tables.delta(first).version()}) instead of keeping the commit that already holds the batch")
    assert version.tables[first] == committed
    assert BatchCommit(tables, "stream-1", batch).done, f"batch {batch}, committed in full, is not seen as done"
