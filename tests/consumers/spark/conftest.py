"""The Spark tests need pyspark (the spark extra): skipped without it, a failure in CI.

Their one local SparkSession is the ``spark`` fixture of tests/conftest.py.
"""

from tests.extras import require_extra

require_extra("pyspark", "spark")
