"""The version record a history commit carries: what readers trust to pick every table's Delta version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.consumers.spark.tables import FORMAT, TABLE_NAMES, Kept, TablesError, Version

_versions = st.dictionaries(st.sampled_from(TABLE_NAMES), st.integers(0, 2**40), min_size=len(TABLE_NAMES))
_offset = st.integers(0, 2**62)


@st.composite
def versions(draw) -> Version:
    lo, hi = sorted((draw(_offset), draw(_offset)))
    return Version(
        draw(st.integers(0, 2**40)), lo, hi, hi - lo, draw(st.none() | st.integers(0, 2**50)),
        draw(st.integers(0, 2**50)), draw(st.text(min_size=1)), draw(_versions),
        {"super_users": draw(st.lists(st.text())), "allow_everyone_if_no_acl_found": draw(st.booleans())},
        tuple(draw(st.lists(st.builds(Kept, st.integers(0, 2**40), _offset, _versions), max_size=4))),
        draw(st.none() | st.text()), draw(st.none() | st.integers(0, 2**40)))


def _commit(version: Version, record: dict) -> dict:
    """A commit as deltalake's history() returns it: the record went through the log's JSON."""
    return {"version": version.delta_version, "timestamp": version.committed_ms, "operation": "WRITE",
            "secmeta": json.loads(json.dumps(record))}


@given(versions())
def test_a_version_record_reads_back_as_the_version(version):
    assert Version.from_commit(_commit(version, version.record()), Path("t")) == version


@given(versions(), st.sampled_from(["offsets", "tables", "storeId", "kept", "events"]))
def test_a_damaged_record_is_refused_naming_the_version(version, key):
    record = version.record()
    del record[key]
    with pytest.raises(TablesError, match=f"record of t at Delta version {version.delta_version} is damaged"):
        Version.from_commit(_commit(version, record), Path("t"))


def test_a_newer_format_and_a_commit_without_record():
    version = Version(3, 0, 5, 5, None, 0, "s", dict.fromkeys(TABLE_NAMES, 1))
    with pytest.raises(TablesError, match=f"t was written by a newer secmeta .tables format {FORMAT + 1}; this one"):
        Version.from_commit(_commit(version, {**version.record(), "format": FORMAT + 1}), Path("t"))
    assert Version.from_commit({"version": 4, "timestamp": 1, "operation": "VACUUM END"}, Path("t")) is None


@pytest.mark.parametrize(("old", "why"), [(2, "lack the open intervals"), (3, "SCRAM_SHA_256, not Kafka's")])
def test_tables_of_an_older_development_format_are_refused_naming_it(old, why):
    """Format 2 (interval tables without the open intervals) and format 3 (SCRAM mechanisms by the enum's name) are
    refused with what changed and what to do, not as damage."""
    version = Version(3, 0, 5, 5, None, 0, "s", dict.fromkeys(TABLE_NAMES, 1))
    with pytest.raises(TablesError) as refused:
        Version.from_commit(_commit(version, {**version.record(), "format": old}), Path("t"))
    message = str(refused.value)
    assert message.startswith(f"t holds tables in development format {old}, which no release wrote")
    assert why in message
    assert "compact the store into a new tables directory" in message and "damaged" not in message
