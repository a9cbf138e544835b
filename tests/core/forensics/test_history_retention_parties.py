"""History by principal after retention deleted the log's first segments, with no image at the log's start.

Retention deletes the segments a snapshot covers: the log then starts at the base offset of the
segment holding the snapshot, before the snapshot, where no image can be built.  A token issued
before that start and renewed after it is still the owner's history (its renewal names only the
token id): the index built then and a scan of the log both take the token's parties from the
first image after the start (TimeTravel.image_at_or_after).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import RequestContext
from secmeta.core.errors import PointInTimeError
from secmeta.core.forensics.timetravel import TimeTravel
from secmeta.projections.image import SecurityProjection
from tests.core.forensics.history_contract import RETAINED, scanned
from tests.logkit import Clock
from tests.storekit import ADMIN, acl, store_at, upsert

OPS = RequestContext("User:ops", "10.0.0.2")  # the tokens' renewer: Kafka lets only the owner or a renewer renew


@contextmanager
def _retained(keyring, fillers: int, removed_before_snapshot: bool, tail: int = 0):
    """A store whose log starts past 0 before its only snapshot, reopened with its history index rebuilt."""
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        with store_at(path, keyring, clock=clock, **RETAINED) as store:
            kept = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:ops"])
            gone = store.create_delegation_token(context=ADMIN, owner="User:etl", renewers=["User:ops"])
            for i in range(fillers):
                store.create_acls([acl(f"topic-{i}", "User:etl")], context=ADMIN)
                store.alter_user_scram_credentials([upsert(f"user-{i}")], context=ADMIN)
            if removed_before_snapshot:
                store.expire_delegation_token(gone.hmac, -1, context=OPS)
            store.snapshot()  # deletes the segments before the one holding it
            store.renew_delegation_token(kept.hmac, context=OPS)
            store.alter_user_scram_credentials([upsert("etl")], context=ADMIN)
            store.create_acls([acl("orders", "User:etl")], context=ADMIN)
            if not removed_before_snapshot:
                store.expire_delegation_token(gone.hmac, -1, context=OPS)
            for i in range(tail):
                store.create_acls([acl(f"later-{i}", "User:etl")], context=ADMIN)
        shutil.rmtree(path / "history")  # rebuilt from log.start_offset at the next open
        with store_at(path, keyring, clock=clock, **RETAINED) as store:
            yield store


def test_index_builds_after_retention_with_no_image_at_the_log_start(keyring):
    with _retained(keyring, fillers=12, removed_before_snapshot=False) as store:
        start = store.log.start_offset
        assert start > 0
        with pytest.raises(PointInTimeError):  # the case at hand: nothing to build the log's start from
            store.timetravel.image_at(start)
        scan = scanned(store, lambda: list(store.history(principal="User:etl")))  # raised PointInTimeError
        assert store.timetravel.index.wait(10)
        assert store.timetravel.index.first_offset == start
        indexed = list(store.history(principal="User:etl"))
        assert indexed == scan
        token_events = [e.event_type for e in indexed if e.event_type.startswith("DelegationToken")]
        # the renewal and the expiries of tokens issued before the log's start, as the owner's history
        assert token_events == ["DelegationTokenRenewed", "DelegationTokenRemoved"]
        assert [e.payload["user"] for e in indexed if e.event_type == "ScramCredentialUpserted"][-1] == "etl"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=15,
          deadline=None)
@given(fillers=st.integers(min_value=4, max_value=20), removed_before_snapshot=st.booleans(),
       start_offset=st.integers(min_value=0, max_value=60))
def test_history_by_principal_after_retention_index_equals_scan(keyring, fillers, removed_before_snapshot,
                                                              start_offset):
    """The index builds, and it and a scan (from any offset) agree and never refuse a point before the snapshot."""
    with _retained(keyring, fillers, removed_before_snapshot) as store:
        assert store.log.start_offset > 0
        assert store.timetravel.index.wait(10)
        for principal in ("User:etl", "User:ops"):
            indexed = list(store.history(principal=principal, start_offset=start_offset))
            assert indexed == scanned(
                store, lambda p=principal: list(store.history(principal=p, start_offset=start_offset)))



def test_the_background_fill_covers_the_log_after_retention(keyring):
    """With no image at the log's start, time travel's background fill starts at the first image past it
    (before: it logged 'checkpoints not filled' and held nothing), and each image it holds, replayed on
    to the log's end, is the store's live image."""
    with _retained(keyring, fillers=12, removed_before_snapshot=False, tail=30) as store:
        log, live = store.log, store.image
        travel = TimeTravel(log, interval=5, fill=True, live=lambda: live)
        first = travel.image_at_or_after(log.start_offset).next_offset  # a built answer starts the fill
        travel.wait()
        filled = [offset for offset in travel.checkpoints if first < offset < log.end_offset]
        assert len(filled) >= 2, f"the fill held {travel.checkpoints} between {first} and {log.end_offset}"
        for offset in filled:
            onward = SecurityProjection().apply(travel.image_at(offset), list(log.read(offset, log.end_offset)))
            assert sorted(onward.acls) == sorted(live.acls)
            assert sorted(user for user, _ in onward.scram) == sorted(user for user, _ in live.scram)
        travel.close()
