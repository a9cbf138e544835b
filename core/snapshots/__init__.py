"""Snapshots and checkpoint files written in a forked child, so the writer never pauses for them."""
