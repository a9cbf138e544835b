"""Property: any sequence of appends, reopens and reads returns exactly the appended events."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from secmeta.core.log import Log, LogConfig, verify_log
from tests.logkit import acl_created, make_keyring

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="secmeta-prop-"))
        self.keyring = make_keyring(self.dir)
        self.store = self.dir / "store"
        self.log = Log.open(self.store, keyring=self.keyring, config=CONFIG)
        self.model: list = []

    @rule(n=st.integers(1, 12), ts=st.integers(0, 10_000))
    def append(self, n, ts):
        start = len(self.model)
        envs = [acl_created(start + i, ts=ts) for i in range(n)]
        result = self.log.append(envs)
        assert result.base_offset == start
        self.model.extend(e.event for e in envs)

    @rule()
    def reopen(self):
        self.log.close()
        self.log = Log.open(self.store, keyring=self.keyring, config=CONFIG)
        assert not self.log.recovery

    @rule(data=st.data())
    def read_range(self, data):
        end = len(self.model)
        start = data.draw(st.integers(0, end))
        stop = data.draw(st.integers(start, end))
        got = list(self.log.read(start, stop))
        assert [e.offset for e in got] == list(range(start, stop))
        assert [e.event for e in got] == self.model[start:stop]

    @invariant()
    def end_matches(self):
        assert self.log.end_offset == len(self.model)

    def teardown(self):
        self.log.close()
        assert verify_log(self.store, keyring=self.keyring).ok
        shutil.rmtree(self.dir, ignore_errors=True)


LogMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
TestLogMachine = LogMachine.TestCase
