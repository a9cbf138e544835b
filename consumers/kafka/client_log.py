"""librdkafka's log, summarised: one line per problem instead of one per retry.

Our clients hand librdkafka's log to the ``secmeta.kafka.librdkafka`` logger
(confluent-kafka's ``logger`` setting).  A broker that refuses connections makes
librdkafka log the same failure every few hundred milliseconds per connection;
``ClientProblems`` prints the first occurrence of each problem as one line
(``kafka: <what>``), counts the repeats, and names the latest problem so that a
command that gives up can say why.
"""

from __future__ import annotations

import logging
import re
import sys

__all__ = ["LIBRDKAFKA_LOGGER", "ClientProblems", "side_client_logger"]

LIBRDKAFKA_LOGGER = "secmeta.kafka.librdkafka"
_OTHER_ROLE = "property and will be ignored by this"  # CONFWARN: "... is a producer property and will be ..."


def _not_about_the_other_role(record: logging.LogRecord) -> bool:
    return _OTHER_ROLE not in ClientProblems.summary(record)


def side_client_logger() -> logging.Logger:
    """The logger for a short-lived client of the other role built from a job's settings (the publisher's
    consumer that reads a topic's end, the follower's admin client): librdkafka's warnings that a setting is
    the other role's and ignored are dropped, the rest reaches LIBRDKAFKA_LOGGER's handlers."""
    log = logging.getLogger(LIBRDKAFKA_LOGGER + ".side")
    if _not_about_the_other_role not in log.filters:
        log.addFilter(_not_about_the_other_role)
    return log

_THREAD = re.compile(r"^\[thrd:[^\]]*\]:\s*")
_RETRY_DETAIL = re.compile(r"\s*\(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\)")
_NUMBER = re.compile(r"\d+")


class ClientProblems(logging.Handler):
    """A logging handler for librdkafka's records: WARNING and above, each problem once."""

    def __init__(self, stream=None):
        super().__init__(logging.WARNING)
        self.stream = stream
        self.counts: dict[str, int] = {}
        self.latest: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = self.summary(record)
        key = _NUMBER.sub("N", text)  # "2/2 brokers are down" and "1/2 brokers are down": one problem
        self.latest = text
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.counts[key] == 1:
            print(f"kafka: {text}", file=self.stream or sys.stderr, flush=True)

    @staticmethod
    def summary(record: logging.LogRecord) -> str:
        """The record's text without librdkafka's thread name and retry bookkeeping."""
        args = record.args if isinstance(record.args, tuple) else ()
        text = str(args[-1]) if len(args) == 3 else record.getMessage()  # (facility, client name, text)
        return _RETRY_DETAIL.sub("", _THREAD.sub("", text)).strip()

    def reason(self) -> str:
        """The latest problem and how often the client logged it, for an error message; '' if none."""
        if self.latest is None:
            return ""
        return f"{self.latest} (logged {self.counts[_NUMBER.sub('N', self.latest)]} times)"

    def __enter__(self) -> ClientProblems:
        log = logging.getLogger(LIBRDKAFKA_LOGGER)
        self._saved = (log.propagate, log.level)
        log.addHandler(self)
        log.propagate = False
        log.setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc) -> None:
        log = logging.getLogger(LIBRDKAFKA_LOGGER)
        log.removeHandler(self)
        log.propagate, level = self._saved
        log.setLevel(level)
