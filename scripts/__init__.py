"""Maintenance tools, benchmarks and the support code for the README commands."""
