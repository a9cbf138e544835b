"""The tests' shared SparkSession: a JVM with the options of tests/jvm.py."""

from __future__ import annotations

import os
import threading
import weakref

from secmeta.core.snapshots.forked import call_forked
from tests.jvm import TEST_JVM_OPTIONS


def test_the_sessions_jvm_runs_with_the_test_options(spark):
    """The options reach the session's JVM through Spark's launcher (SPARK_SUBMIT_OPTS)."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(TEST_JVM_OPTIONS) <= set(arguments), arguments
    # the system property among them is the session's static conf: no call site captured per Column call
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"


def test_a_child_forked_from_another_thread_leaves_the_drivers_connection_open(spark):
    """A store forks its snapshot and checkpoint children from background threads (core/snapshots/forked.py), and
    such a child runs every other thread's thread-local finalizers: Py4J's shut down the main thread's socket, which
    the parent shares, so the driver's next call failed ("Connection reset by peer", the Spark tests' flake) or was
    sent again on a new connection. The main thread holds its connection only as Py4J does (no local here keeps it
    alive), and the same connection answers the next call."""
    client = spark.sparkContext._gateway._gateway_client
    assert spark.range(3).count() == 3
    made = weakref.ref(client.get_thread_connection())
    forked: list[int] = []
    thread = threading.Thread(target=lambda: forked.append(call_forked(os.getpid, timeout=60)))
    thread.start()
    thread.join()
    assert forked and forked[0] != os.getpid()  # the call did run in a child
    assert spark.range(4).count() == 4
    assert client.get_thread_connection() is made() is not None
