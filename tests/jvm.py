"""The options of every JVM the tests start: the shared SparkSession's, and a ``secmeta spark`` command's in a
subprocess (tests/conftest.py puts them in SPARK_SUBMIT_OPTS, which Spark's launcher adds to the JVM's options
without printing anything).

C1 only, and a one-thread garbage collector: a test session's JVM lives minutes, mostly warming up, and C2's
compiler threads and G1's took the CPU the tests wait on (on 2 shared cores, a fresh ``spark compact``: 60 -> 40 s
of CPU; a compaction and the queries' warm-up in one session: 208 -> 170 s). Plans, generated code and results
are Spark's, as in production.

Also, as a system property Spark reads into every session's conf: no DataFrame call sites in error messages
(``spark.python.sql.dataFrameDebugging.enabled``, a static conf). With it on, PySpark wraps every Column and
DataFrame call in more round trips to the JVM (the active session, the conf, the origin class, set, clear) and a walk of the
Python stack: 300 Column calls, 750 -> 290 ms of wall and 230 -> 64 ms of Python CPU (2 cores, loaded). Errors
keep their message and the JVM's stack; only the Python call site of the failing DataFrame call is left out.
"""

from __future__ import annotations

import os

__all__ = ["TEST_JVM_OPTIONS", "use_test_jvm_options"]

TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dspark.python.sql.dataFrameDebugging.enabled=false")


def use_test_jvm_options() -> None:
    """Add TEST_JVM_OPTIONS to this process's SPARK_SUBMIT_OPTS (once: xdist's workers inherit the controller's)."""
    given = os.environ.get("SPARK_SUBMIT_OPTS", "").split()
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join([*given, *(o for o in TEST_JVM_OPTIONS if o not in given)])
