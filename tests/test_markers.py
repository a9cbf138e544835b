"""The markers a developer selects by (tests/conftest.py): what ``-m "not spark and not kafka and not server"``
keeps and leaves out, seen through pytest's own collection in a fresh process (one, to keep this quick)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PUBLISHER = "tests/consumers/test_publisher.py"
SPARK_ROWS = "tests/consumers/spark/test_rows.py"
CLIENT_WIRE = "tests/core/wire/test_client_wire.py"
CLI_ERRORS = "tests/core/cli/test_cli_errors.py"


def selected(expression: str) -> set[str]:
    """The test ids ``pytest --collect-only -m EXPRESSION`` keeps from four files."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-m", expression,
         PUBLISHER, SPARK_ROWS, CLIENT_WIRE, CLI_ERRORS],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {line.split("[")[0] for line in result.stdout.splitlines() if "::" in line}


def test_a_loop_without_spark_kafka_and_servers_keeps_just_the_tests_that_need_none_of_them():
    kept = selected("not spark and not kafka and not server")
    assert f"{PUBLISHER}::test_history_holds_every_event_in_log_order" not in kept  # uses the mock cluster
    assert f"{PUBLISHER}::test_unreachable_broker_is_logged" in kept  # a Kafka consumer test without a cluster
    assert not any(test.startswith(SPARK_ROWS) for test in kept)  # the Spark folder, whatever its fixtures
    assert f"{CLIENT_WIRE}::test_scram_login_and_describe" not in kept  # the module's shared server
    assert f"{CLIENT_WIRE}::test_acls_round_trip_and_the_log_names_the_connection" not in kept  # serve(...)
    assert f"{CLI_ERRORS}::test_a_question_about_two_resources_is_refused_naming_the_options" in kept
