"""Progress of long commands as the user sees it on stderr: plain periodic lines, or one live line."""

from __future__ import annotations

import io

from secmeta.core.cli.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_every_period_and_one_at_the_end():
    clock, out = Clock(), io.StringIO()
    with Progress("publish", every=10.0, stream=out, clock=clock, terminal=False) as progress:
        progress.update(0, 30_000)
        clock.now += 4
        progress.update(4_000)  # before the first period: nothing yet
        assert out.getvalue() == ""
        clock.now += 6
        progress.update(10_000)
        clock.now += 5
        progress.update(15_000)  # half a period since the last line: nothing
        clock.now += 5
        progress.update(20_000)
        clock.now += 10
        progress.update(30_000)
        clock.now += 1
    assert out.getvalue().splitlines() == [
        "publish: 10,000/30,000 events (33%), 1,000 events/s, about 20 s left",
        "publish: 20,000/30,000 events (66%), 1,000 events/s, about 10 s left",
        "publish: 30,000/30,000 events (100%), 1,000 events/s",
    ]


def test_the_rate_counts_from_where_the_job_began():
    """A publisher resuming at offset 1,000,000 reports what it did, not the offset over the time."""
    clock, out = Clock(), io.StringIO()
    with Progress("publish", every=1.0, stream=out, clock=clock, terminal=False) as progress:
        progress.update(1_000_000, 1_000_600)
        clock.now += 2
        progress.update(1_000_100)
    assert out.getvalue().splitlines()[0] == \
        "publish: 1,000,100/1,000,600 events (99%), 50 events/s, about 10 s left"


def test_a_job_that_did_nothing_prints_nothing_and_notes_are_lines_of_their_own():
    clock, out = Clock(), io.StringIO()
    with Progress("spark", stream=out, clock=clock, terminal=False) as progress:
        progress.note("starting Spark (local[2])...")
        progress.update(0, 0)
    assert out.getvalue() == "spark: starting Spark (local[2])...\n"


def test_unknown_totals_and_long_durations():
    clock, out = Clock(), io.StringIO()
    progress = Progress("dump", unit="events", every=1.0, stream=out, clock=clock, terminal=False)
    progress.update(0)
    clock.now += 1
    progress.update(5)
    assert progress.line(clock.now) == "dump: 5 events, 5 events/s"
    progress.update(5, 5 + 5 * 3_700)
    assert progress.line(clock.now).endswith("about 1 h 1 min left")


def test_on_a_terminal_one_line_updates_in_place():
    """On a terminal the line is redrawn (carriage returns / cursor moves), not repeated."""
    clock, out = Clock(), io.StringIO()
    with Progress("follow", unit="messages", stream=out, clock=clock, terminal=True) as progress:
        progress.update(0, 200)
        clock.now += 2
        progress.update(100)
        progress._live.refresh()
    text = out.getvalue()
    assert "follow" in text and "100/200" in text and "50 messages/s" in text
    assert "\x1b[" in text or "\r" in text  # drawn in place
    assert text.count("\n") <= 2
