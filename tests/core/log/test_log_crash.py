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

# One process imports secmeta once and forks a writer per trial (a fresh interpreter per trial spent
# most of the test's time importing); the writer is a plain child process, killed by the test itself.
# The forker also compiles the event codec once (EventCodec.fresh copies it in each writer's Log.open):
# compiled in every writer it was half of an open's CPU, and opens were two thirds of the test's time
# (wall 33 -> 16 s for the 50 trials at load 13), with the same recovery and appends in each writer.
FORKER = textwrap.dedent(
    """
    import os, random, sys
    from secmeta.core.log import Log
    from secmeta.events.codec import EventCodec
    from secmeta.events.keyring import Keyring
    from tests.logkit import acl_created

    store, keys = sys.argv[1], sys.argv[2]
    keyring = Keyring.from_file(keys)
    EventCodec.fresh()  # compiles the codec each writer's open then copies
    for line in sys.stdin:  # one seed a line: fork a writer, say its pid, reap it once the test killed it
        pid = os.fork()
        if pid == 0:
            rng = random.Random(int(line))
            log = Log.open(store, keyring=keyring)
            os.write(1, f"OPEN {log.end_offset}\\n".encode())  # one write: a kill cannot split the line
            while True:
                start = log.end_offset
                n = rng.choice([1, 7, 300, 1500])
                result = log.append([acl_created(start + i, ts=start + i) for i in range(n)])
                os.write(1, f"ACK {result.next_offset}\\n".encode())
        os.write(1, f"PID {pid}\\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"END {status}\\n".encode())
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
    forker = subprocess.Popen([sys.executable, "-c", FORKER, str(store), str(tmp_path / "keys.json")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO, bufsize=0)
    try:
        for trial in range(50):
            forker.stdin.write(f"{trial}\n".encode())
            pid = opened = None
            while pid is None or opened is None:  # the writer's OPEN and the forker's PID, in either order
                line = forker.stdout.readline().decode()
                assert line, f"trial {trial}: the forker ended: {forker.wait()}"
                if line.startswith("PID "):
                    pid = int(line.split()[1])
                elif line.startswith("OPEN "):
                    opened = int(line.split()[1])
                else:
                    assert not line.startswith("END "), f"trial {trial}: the writer died before its kill: {line}"
            assert opened >= acked, f"trial {trial}: reopened at {opened} below acked {acked}"
            time.sleep(rng.uniform(0.0, 0.25))
            os.kill(pid, signal.SIGKILL)
            while not (line := forker.stdout.readline().decode()).startswith("END "):
                assert line, f"trial {trial}: the forker ended: {forker.wait()}"
                if line.startswith("ACK ") and line.endswith("\n"):  # only complete acknowledgements count
                    acked = max(acked, int(line.split()[1]))
            assert int(line.split()[1]) == signal.SIGKILL, f"trial {trial}: the writer ended otherwise: {line}"
    finally:
        forker.kill()
        forker.wait()
    with Log.open(store, keyring=keyring) as log:
        assert log.end_offset >= acked
        events = list(log.read())
        assert [e.offset for e in events] == list(range(log.end_offset))
        assert all(e.event == acl_created(e.offset).event for e in events)
    assert acked > 0
    assert verify_log(store, keyring=keyring).ok
