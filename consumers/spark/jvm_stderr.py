"""The Spark JVM's stderr, without the start-up lines nobody acts on.

PySpark starts the JVM with the driver's stderr.  Spark 4's launcher adds
``--add-modules=jdk.incubator.vector``, for which the JVM itself prints
"WARNING: Using incubator modules: jdk.incubator.vector" before any logging
is configured, so no log4j setting can silence it; and since PySpark runs as
a shell, Spark's Logging.initializeLogging prints its "Setting default log
level" banner to System.err whatever the log4j configuration.  While Spark starts,
``startup_lines_dropped`` points file descriptor 2 at a pipe that the JVM
inherits; a daemon thread forwards every line the JVM ever writes there to the
real stderr, except those start-up lines.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading

__all__ = ["STARTUP_LINES", "startup_lines_dropped"]

STARTUP_LINES = re.compile(rb"^(WARNING: Using incubator modules: |Setting default log level to \"|"
                           rb"To adjust logging level use sc\.setLogLevel\()")


@contextlib.contextmanager
def startup_lines_dropped():
    """Start Spark inside this block: its JVM writes to a filter for as long as it lives."""
    real = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)
    threading.Thread(target=_forward, args=(read, real), name="spark-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        os.dup2(real, 2)  # ours again; a JVM started in the block keeps the pipe


def _forward(read: int, real: int) -> None:
    with os.fdopen(read, "rb", buffering=0) as pipe, os.fdopen(real, "wb", buffering=0) as out:
        for line in iter(pipe.readline, b""):
            if not STARTUP_LINES.match(line):
                out.write(line)
