"""One local SparkSession for every Spark test of the run, with the secmeta sources registered."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    from consumers.spark import register
    from consumers.spark.session import local_session

    session = local_session(app="secmeta-tests", master="local[2]")
    register(session)
    yield session
    session.stop()
