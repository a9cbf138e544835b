"""ACLs at a point, and who could do an operation on a resource there, from the ACL interval tables.

``acls_at`` lists the ACLs in force at a point with who created them.
``who_could_at`` selects in Spark only the ACLs that can bear on one resource
(in force at the point, of its type, with a pattern that applies to its name:
``on_resource``, the one rule written in SQL, tested against
``secmeta.projections.acl_match.covers``), collects that small set into an authorizer
image and asks ``secmeta.core.forensics.queries.who_could``: the decision is the store's, by
the same code.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from secmeta.consumers.spark.queries.tokens import token_access_at
from secmeta.consumers.spark.rows import column_of
from secmeta.consumers.spark.table_reader import TableReader
from secmeta.consumers.tables_query import rules
from secmeta.consumers.tables_query.answers import AclInForce, acl_binding
from secmeta.consumers.tables_query.points import PointArg, check_point, offset_of, settings
from secmeta.core.forensics.queries import Grant, resource_question, who_could
from secmeta.core.settings import with_values
from secmeta.events.entities import ACLS, SETTINGS
from secmeta.events.types import (
    AclOperation,
    PatternType,
    ResourceType,
    output_name,
)
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage

__all__ = ["AclInForce", "acls_at", "acls_in_force", "covering", "on_resource", "who_could_at"]

_BINDING = tuple(map(column_of, ACLS.attributes))  # an ACL binding's seven columns


def acls_in_force(reader: TableReader, n: int) -> DataFrame:
    """The ACL intervals in force at offset ``n`` (already validated): one row per ACL.

    At the offset of the reader's version or of a kept one, the snapshot table at
    that version's Delta version is read as is (only its open intervals); any
    other offset filters the interval table.
    """
    if n == reader.offset or n in {k.offset for k in reader.version.kept}:
        return reader.snapshot("acls", n)
    return reader.intervals("acl_intervals").where(_in_force(n))


def settings_at(reader: TableReader, n: int):
    """The settings in force at offset ``n``: the version record's, with the logged settings open there."""
    name, value = column_of(SETTINGS.key[0]), column_of(SETTINGS.attributes[0])
    rows = reader.intervals(SETTINGS.intervals_table).where(_in_force(n)).select(name, value).collect()
    return with_values(settings(reader), {row[0]: row[1] for row in rows})  # a closed interval: the record's


def _in_force(n: int) -> Column:
    return F.expr(rules.in_force(n))


def acls_at(reader: TableReader, at: PointArg = None) -> list[AclInForce]:
    """Every ACL in force at the point (default: the tables' version), sorted by ACL id.

    The same ACLs ``store.as_of(...).describe_acls(AclBindingFilter.any())`` lists.
    Raises PointInTimeError for a bad point before any Spark job.
    """
    point = check_point(reader, at)
    n = offset_of(reader, point)
    rows = (acls_in_force(reader, n)
            .select("acl_id", *_BINDING, "valid_from_offset",
                    F.unix_millis("valid_from").alias("created_ms"), "opened_by", "opened_by_host",
                    "opened_request_id")
            .collect())
    found = [AclInForce(r.acl_id, acl_binding(r), r.valid_from_offset, r.created_ms, r.opened_by, r.opened_by_host,
                        r.opened_request_id) for r in rows]
    return sorted(found, key=lambda a: a.acl_id)


def on_resource(acls: DataFrame, resource_type: ResourceType, name: str) -> DataFrame:
    """The rows of ``acls`` whose pattern applies to ``resource_type``:``name`` (``covering``)."""
    return acls.where(covering(resource_type, name))


def covering(resource_type: ResourceType, name: str) -> Column:
    """Whether a row's ACL pattern applies to ``resource_type``:``name``: the same type, LITERAL with that name
    or '*', PREFIXED with a name that is a prefix of it (``secmeta.projections.acl_match.covers``, written in
    SQL so that Spark selects the few ACLs before Python decides)."""
    literal = (F.col("pattern_type") == output_name(PatternType.LITERAL)) & F.col("resource_name").isin(name, "*")
    prefixed = (F.col("pattern_type") == output_name(PatternType.PREFIXED)) & F.lit(name).startswith(
        F.col("resource_name"))
    return (F.col("resource_type") == output_name(resource_type)) & (literal | prefixed)


def who_could_at(
    reader: TableReader,
    operation: AclOperation | str | int,
    resource_type: ResourceType | str | int,
    resource_name: str,
    at: PointArg = None,
) -> list[Grant]:
    """Every grant by which some principal could perform ``operation`` on the resource at the point.

    Exactly ``store.who_could(operation, resource_type, resource_name, at=...)``:
    super users and allow.everyone.if.no.acl.found are the logged settings in force at the
    point (the setting intervals), over the version record's (the store's config.json, which
    decides what the log never set); the holders of tokens live then are listed under their
    owners' grants (``token_access_at``; with no point, at the time of the version's last
    event). Raises QueryError / PointInTimeError for bad arguments before any Spark job.
    """
    op, rt, resource_name = resource_question(operation, resource_type, resource_name)
    point = check_point(reader, at)
    n = offset_of(reader, point)
    config = settings_at(reader, n)
    rows = on_resource(acls_in_force(reader, n), rt, resource_name).select("acl_id", *_BINDING).collect()
    pairs = [(r.acl_id, acl_binding(r)) for r in rows]
    image = SecurityImage(acls=AclsImage.of(pairs), next_offset=n)
    tokens = token_access_at(reader, n, None if point is None else point.timestamp_ms)
    return who_could(image, config, op, rt, resource_name, tokens)
