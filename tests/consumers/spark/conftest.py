"""The Spark tests need pyspark (the spark extra): skipped without it, a failure in CI.

Their one local SparkSession is the ``spark`` fixture of tests/conftest.py; ``compacted`` is one
compaction shared by the modules that only read its tables (or copies of them).
"""

import pytest

from tests.extras import require_extra

require_extra("pyspark", "spark")


@pytest.fixture(scope="session")
def compacted(spark, tmp_path_factory):
    """A store of 80 random requests compacted in batches of 25 events, 3 versions kept, no vacuum delay."""
    from secmeta.consumers.spark.compaction import compact
    from tests.consumers.spark.sparkkit import make_workspace

    root = tmp_path_factory.mktemp("compaction")
    space = make_workspace(root, seed=7, steps=80)
    tables = root / "tables"
    version = compact(spark, space.store_dir, tables, key_file=str(space.key_file), max_events_per_trigger=25,
                      retain_versions=3, retain_hours=0)
    return space, tables, version
