"""Spark readers and jobs of a secmeta store: Python data sources, compaction, queries, audit.

Importing this package does not import pyspark; import ``secmeta.consumers.spark.log_source``
(or call ``register``) when Spark is installed (the ``spark`` extra).
"""

from __future__ import annotations

__all__ = ["local_session", "register"]


def local_session(app: str = "secmeta", master: str = "local[2]", driver_memory: str | None = None):
    """A SparkSession for local use; see ``secmeta.consumers.spark.session.local_session``."""
    from secmeta.consumers.spark.session import local_session as _local_session

    return _local_session(app=app, master=master, driver_memory=driver_memory)


def register(spark) -> None:
    """Register the ``secmeta`` (log) and ``secmeta-kafka`` (history topic) data sources with ``spark``."""
    from secmeta.consumers.spark.kafka_source import SecmetaKafkaDataSource
    from secmeta.consumers.spark.log_source import SecmetaLogDataSource

    spark.dataSource.register(SecmetaLogDataSource)
    spark.dataSource.register(SecmetaKafkaDataSource)
