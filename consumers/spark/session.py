"""A SparkSession builder for local mode whose workers run this interpreter."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["local_session"]


def local_session(app: str = "secmeta", master: str = "local[2]") -> SparkSession:
    """Get or create a quiet SparkSession: same interpreter for workers, few shuffle partitions, no UI."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.appName(app)
        .master(master)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
