"""Process-crash safety: a writer killed with SIGKILL at random moments never loses an acknowledged batch.

SIGKILL leaves the page cache intact, so this proves recovery and the append
protocol across process death, not fsync against power loss (which a test on
one machine cannot cause); fsync placement is covered by the group-commit test.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from secmeta.core.log import Log, verify_log
from tests.logkit import acl_created, make_keyring

REPO = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent(
    """
    import os, random, sys
    from secmeta.core.log import Log
    from secmeta.events.keyring import Keyring
    from tests.logkit import acl_created

    store, keys, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    log = Log.open(store, keyring=Keyring.from_file(keys))
    os.write(1, f"OPEN {log.end_offset}\\n".encode())  # one write: a kill cannot split the line
    while True:
        start = log.end_offset
        n = rng.choice([1, 7, 300, 1500])
        result = log.append([acl_created(start + i, ts=start + i) for i in range(n)])
        os.write(1, f"ACK {result.next_offset}\\n".encode())
    """
)


@pytest.mark.slow  # 50 writer processes started and killed
def test_sigkill_never_loses_acknowledged_batches(tmp_path):
    """50 writers killed mid-stream: every acked batch survives, nothing corrupt is served, verify passes."""
    keyring = make_keyring(tmp_path)
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(20261121)
    acked = 0
    for trial in range(50):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), str(tmp_path / "keys.json"), str(trial)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, cwd=REPO,
        )
        opened = child.stdout.readline().split()
        assert opened and opened[0] == "OPEN", child.stderr.read()
        assert int(opened[1]) >= acked, f"trial {trial}: reopened at {opened[1]} below acked {acked}"
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        for line in out.splitlines(keepends=True):
            if line.startswith("ACK ") and line.endswith("\n"):  # only complete acknowledgements count
                acked = max(acked, int(line.split()[1]))
    with Log.open(store, keyring=keyring) as log:
        assert log.end_offset >= acked
        events = list(log.read())
        assert [e.offset for e in events] == list(range(log.end_offset))
        assert all(e.event == acl_created(e.offset).event for e in events)
    assert acked > 0
    assert verify_log(store, keyring=keyring).ok
