"""The tests' shared SparkSession: a JVM with the options of tests/jvm.py."""

from __future__ import annotations

from tests.jvm import TEST_JVM_OPTIONS


def test_the_sessions_jvm_runs_with_the_test_options(spark):
    """The options reach the session's JVM through Spark's launcher (SPARK_SUBMIT_OPTS)."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(TEST_JVM_OPTIONS) <= set(arguments), arguments
