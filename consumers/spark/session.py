"""The SparkSession secmeta's jobs run in: local mode by default, any cluster with a master URL.

Workers must run the driver's interpreter (the same secmeta and pyarrow), so
``spark.pyspark.python`` is set to ``sys.executable`` unless PYSPARK_PYTHON
names another one (on a cluster, an interpreter path that exists on the workers).
Under ``spark-submit`` the master comes from spark-submit unless one is given.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from secmeta.consumers.spark.py4j_fork import keep_connections_in_forked_children

__all__ = ["DEFAULT_MASTER", "local_session", "session"]

DEFAULT_MASTER = "local[2]"
_LOG4J2 = Path(__file__).with_name("log4j2.properties")  # errors only: a quiet console in local mode


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(app: str = "secmeta", master: str | None = None, driver_memory: str | None = None) -> SparkSession:
    """Get or create a quiet SparkSession (UTC, no UI, few shuffle partitions in local mode).

    ``driver_memory`` (e.g. "4g") applies only when this call starts Spark.
    """
    keep_connections_in_forked_children()  # before the gateway's first connection is made
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master is None and not _under_spark_submit():
        master = DEFAULT_MASTER
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    builder = (builder.config("spark.pyspark.python", python)
               .config("spark.sql.session.timeZone", "UTC")
               # partitioned writes (history by date) without sorting each task's rows first
               .config("spark.sql.maxConcurrentOutputFileWriters", "16")
               .config("spark.ui.showConsoleProgress", "false"))
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: no "resolves to a loopback" warning
        builder = (builder.config("spark.pyspark.driver.python", sys.executable)
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.default.parallelism", "2")
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG4J2.as_uri()}"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def local_session(app: str = "secmeta", master: str = DEFAULT_MASTER, driver_memory: str | None = None) -> SparkSession:
    """A local-mode session whose workers run this interpreter (tests, the demo, benchmarks)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return session(app, master, driver_memory)
