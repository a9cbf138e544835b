"""Forensics over the log: time travel and its checkpoints, history and its index, forensic queries."""
