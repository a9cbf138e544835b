"""Point-in-time questions over the compacted Delta tables without Spark: Polars over deltalake's Arrow data.

    reader = ArrowReader(TABLES)                     # one consistent version (deltalake, no JVM)
    queries.acls_at(reader, 120)                     # the same answers as secmeta.consumers.spark.queries
    queries.who_could_at(reader, "READ", "TOPIC", "payments", "2027-01-15T08:00:00Z")

Both engines share what makes an answer: the points (``points``), the interval rules written once as SQL
text (``rules``: Spark runs them with ``F.expr``, Polars with ``pl.sql_expr``), the answer types
(``answers``) and the store's own deciders (``who_could``, the history rule, ``token_accesses``). Spark stays
for compaction and for tables too large for one machine; this engine answers in about a second on tables
of thousands of rows (``secmeta spark query --engine polars``, the default).

Importing this package imports neither Polars nor deltalake nor pyspark; ``reader`` and ``queries`` import
Polars and deltalake (the spark extra).
"""
