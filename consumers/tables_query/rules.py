"""The rules both engines apply to the interval tables, written once as SQL text.

Spark evaluates them with ``pyspark.sql.functions.expr``, Polars with ``polars.sql_expr``, DuckDB or any
SQL engine as they are: an answer cannot differ between engines by a second copy of a rule.

- ``in_force(n)``: an interval row is in the state after the first ``n`` events when it was opened by one of
  them and not closed by one of them (``valid_from_offset < n`` and not ``valid_to_offset < n``; a row's
  ``valid_to_offset`` is the offset of the event that closed it);
- ``token_alive(start, end)``: over token interval rows with their times in epoch ms (``from_ms``,
  ``to_ms``, ``expiry_timestamp_ms``, ``max_timestamp_ms``), the interval holds a token alive at some moment
  of [start, end]: at its first moment there, ``alive_from(start)`` = greatest(start, from_ms), the interval
  is still open and the token not expired (Kafka's rule: expired iff now > expiry or now > max timestamp).
"""

from __future__ import annotations

__all__ = ["alive_from", "in_force", "token_alive"]


def in_force(n: int) -> str:
    """SQL: the interval row is in the state after the first ``n`` events."""
    n = int(n)
    return f"valid_from_offset < {n} AND (valid_to_offset IS NULL OR valid_to_offset >= {n})"


def alive_from(start: int) -> str:
    """SQL: the first moment of an interval at or after ``start`` (epoch ms)."""
    return f"GREATEST({int(start)}, from_ms)"


def token_alive(start: int, end: int) -> str:
    """SQL: the token interval row holds a token alive at some moment of [``start``, ``end``] (epoch ms)."""
    t = alive_from(start)
    return (f"{t} <= {int(end)} AND (to_ms IS NULL OR to_ms > {t}) "
            f"AND {t} <= LEAST(expiry_timestamp_ms, max_timestamp_ms)")
