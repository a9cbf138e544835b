"""The commit gate seam: replicated mode's commit point before the local append, and a replica's byte-for-byte
append of batches another copy of the log committed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secmeta.core import AclBindingFilter, ResourceType, SecurityStore, StoreConfig
from secmeta.core.errors import NotAStoreError
from secmeta.core.log import DivergedError
from secmeta.core.log.errors import LogFailedError
from secmeta.core.log.format import decode_frame
from secmeta.core.store.commit_gate import CommitGateError, PendingBatch, WritesStoppedError
from secmeta.core.store.replica import create_replica
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert


class Recording:
    """A gate that commits everything and remembers it, or refuses when told to."""

    def __init__(self):
        self.batches: list[PendingBatch] = []
        self.refuse: str | None = None
        self.append_failures: list[tuple[PendingBatch, BaseException]] = []

    def commit(self, batch: PendingBatch) -> None:
        if self.refuse:
            raise CommitGateError(self.refuse)
        self.batches.append(batch)

    def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
        self.append_failures.append((batch, error))


def _segment_bytes(store: SecurityStore) -> bytes:
    return b"".join((store.log.store.log_dir / seg.name).read_bytes() for seg in store.log.segments())


def _store_with(gate, path, keyring):
    return SecurityStore.open(path, StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring, commit_gate=gate)


@pytest.fixture
def gated(tmp_path, keyring):
    gate = Recording()
    with _store_with(gate, tmp_path / "a", keyring) as store:
        yield store, gate


def test_the_gate_sees_each_batch_as_the_local_log_stores_it(gated):
    """Every batch reaches the gate before the local append, with the frame's bytes the segment then holds."""
    store, gate = gated
    store.create_acls([acl("a")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("alice")], context=ADMIN)
    assert [(b.base_offset, b.next_offset) for b in gate.batches] == [(0, 1), (1, 2)]
    assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)
    assert gate.batches[1].prev_link == gate.batches[0].link == store.log.link_at(1)


def test_a_refusing_gate_fails_the_write_appends_nothing_and_stops_writes(gated):
    """Fail closed: the refused batch is not appended, and no later write is acknowledged until a new gate."""
    store, gate = gated
    store.create_acls([acl("a")], context=ADMIN)
    before = _segment_bytes(store)
    gate.refuse = "fenced by a newer writer"
    with pytest.raises(CommitGateError, match="fenced"):
        store.create_acls([acl("b")], context=ADMIN)
    gate.refuse = None
    with pytest.raises(WritesStoppedError, match="commit gate failed at offset 1.*fenced"):
        store.create_acls([acl("c")], context=ADMIN)
    assert _segment_bytes(store) == before and store.log.end_offset == 1
    assert [b.pattern.name for b in store.describe_acls(AclBindingFilter(), context=ADMIN)] == ["a"]
    store.set_commit_gate(gate)
    store.create_acls([acl("d")], context=ADMIN)
    assert store.log.end_offset == 2


def test_a_replica_appends_the_batches_byte_for_byte(gated, tmp_path, keyring):
    """A replica made with the store's identity takes its batches as they are: the same bytes, offsets and image."""
    store, gate = gated
    store.create_acls([acl("a"), acl("b")], context=ADMIN)
    store.alter_user_scram_credentials([upsert("alice")], context=ADMIN)
    create_replica(tmp_path / "b", store.log.store.store_id, store.log.store.created_ms, keyring)
    with SecurityStore.open(tmp_path / "b", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as replica:
        for batch in gate.batches:
            assert replica.append_replicated(batch.frame) == batch.next_offset
        assert _segment_bytes(replica) == _segment_bytes(store)
        assert replica.describe_acls(AclBindingFilter(), context=ADMIN) == store.describe_acls(AclBindingFilter(), context=ADMIN)
        assert replica.describe_user_scram_credentials(context=ADMIN).keys() == {"alice"}


def test_a_batch_that_does_not_extend_the_replica_is_refused_naming_the_offset(gated, tmp_path, keyring):
    """A gap, a repeat or a batch chained over another history is refused, and the replica's log is unchanged."""
    store, gate = gated
    for name in ("a", "b", "c"):
        store.create_acls([acl(name)], context=ADMIN)
    create_replica(tmp_path / "b", store.log.store.store_id, store.log.store.created_ms, keyring)
    with SecurityStore.open(tmp_path / "b", StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as replica:
        replica.append_replicated(gate.batches[0].frame)
        with pytest.raises(DivergedError, match="offset 2 does not extend the local log, which ends at offset 1") as gap:
            replica.append_replicated(gate.batches[2].frame)
        assert gap.value.offset == 1
        with pytest.raises(DivergedError, match="already holds that offset"):
            replica.append_replicated(gate.batches[0].frame)
        other = tmp_path / "other"  # the same store id, another first batch: another history
        create_replica(other, store.log.store.store_id, store.log.store.created_ms, keyring)
        with SecurityStore.open(other, StoreConfig(token_secret=TOKEN_SECRET), keyring=keyring) as forged:
            forged.create_acls([acl("x")], context=ADMIN)
            forged.create_acls([acl("y")], context=ADMIN)
            second = decode_frame(_segment_bytes(forged), 0)
            frame = _segment_bytes(forged)[second.size:]
        with pytest.raises(DivergedError, match="offset 1 does not chain from the local log's last link") as fork:
            replica.append_replicated(frame)
        assert fork.value.offset == 1 and replica.log.end_offset == 1
        assert replica.log.last_link.hex()[:16] in str(fork.value)


def test_a_replica_of_a_store_is_made_only_in_a_new_directory(gated, keyring):
    """create_replica never turns an existing store into another one's replica."""
    store, _ = gated
    with pytest.raises(NotAStoreError, match="already a secmeta store"):
        create_replica(store.log.store.path, "another-id", 0, keyring)


def test_a_batch_the_gate_refuses_itself_fails_alone(gated):
    """A gate's InvalidValueError (the batch refused before anything was sent, e.g. too large) fails that
    write only: nothing is appended and later writes go on."""
    from secmeta.core.errors import InvalidValueError

    store, gate = gated

    def too_large(batch: PendingBatch) -> None:
        raise InvalidValueError("a batch of 9 bytes exceeds the limit; split the request")

    gate.commit = too_large  # type: ignore[method-assign]
    with pytest.raises(InvalidValueError, match="split the request"):
        store.create_acls([acl("big")], context=ADMIN)
    assert store.log.end_offset == 0 and store.writes_stopped is None
    del gate.commit
    store.create_acls([acl("small")], context=ADMIN)
    assert store.log.end_offset == 1


OPS = st.lists(st.tuples(st.sampled_from(["acl", "unacl", "scram"]), st.sampled_from(["a", "b", "c"])),
               min_size=1, max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, data=st.data())
def test_any_history_replicates_byte_for_byte_and_only_in_order(tmp_path_factory, ops, data):
    """Whatever the writes, the gate's frames are the local log's bytes, a replica fed them in order holds the
    same log and image, and a replica fed any batch out of its place refuses it and appends nothing."""
    from tests.logkit import make_keyring

    tmp = tmp_path_factory.mktemp("replicate")
    keyring = make_keyring(tmp)
    gate = Recording()
    config = StoreConfig(token_secret=TOKEN_SECRET)
    with SecurityStore.open(tmp / "a", config, keyring=keyring, commit_gate=gate) as store:
        for kind, name in ops:
            if kind == "acl":
                store.create_acls([acl(name)], context=ADMIN)
            elif kind == "unacl":
                store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, name)], context=ADMIN)
            else:
                store.alter_user_scram_credentials([upsert(name)], context=ADMIN)
        assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)
        identity = (store.log.store.store_id, store.log.store.created_ms)
        described = store.describe_acls(AclBindingFilter(), context=ADMIN)
        log_bytes = _segment_bytes(store)
    batches = gate.batches
    if not batches:
        return
    create_replica(tmp / "b", *identity, keyring)
    with SecurityStore.open(tmp / "b", config, keyring=keyring) as replica:
        if len(batches) > 1:  # any batch but the first is out of place in an empty replica
            wrong = data.draw(st.integers(1, len(batches) - 1), label="out of place")
            with pytest.raises(DivergedError):
                replica.append_replicated(batches[wrong].frame)
            assert replica.log.end_offset == 0
        for batch in batches:
            replica.append_replicated(batch.frame)
        assert _segment_bytes(replica) == log_bytes
        assert replica.describe_acls(AclBindingFilter(), context=ADMIN) == described


def test_a_local_append_failing_after_the_commit_stops_writes_and_tells_the_gate(gated, monkeypatch):
    """The gate committed the batch, then the local fsync fails: the write fails, the gate is told which batch
    it committed that this log lacks (so it gives the writer's role up), and no later write is acknowledged."""
    import errno

    from secmeta.core.log import segment

    store, gate = gated
    store.create_acls([acl("a")], context=ADMIN)

    def failing_sync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment, "_datasync", failing_sync)
    with pytest.raises(LogFailedError, match="Input/output error"):
        store.create_acls([acl("b")], context=ADMIN)
    ((batch, error),) = gate.append_failures
    assert (batch.base_offset, batch.next_offset) == (1, 2) and batch is gate.batches[-1]
    assert isinstance(error, LogFailedError)
    monkeypatch.undo()
    with pytest.raises(WritesStoppedError, match="Input/output error"):
        store.create_acls([acl("c")], context=ADMIN)
    assert len(gate.batches) == 2


class Grouping(Recording):
    """A gate that commits groups of batches (replicated mode's Kafka gate does, one transaction each); it refuses
    a batch alone when its frame holds ``too_big`` (as the Kafka gate refuses one over the topic's record limit)."""

    max_group_batches = 1000
    max_group_bytes = 1 << 20

    def __init__(self):
        super().__init__()
        self.groups: list[list[PendingBatch]] = []
        self.too_big: bytes | None = None

    def check(self, batch: PendingBatch) -> None:
        from secmeta.core.errors import InvalidValueError

        if self.too_big is not None and self.too_big in batch.frame:
            raise InvalidValueError("a batch over the record limit")

    def commit_group(self, batches) -> None:
        if self.refuse:
            raise CommitGateError(self.refuse)
        self.groups.append(list(batches))
        self.batches.extend(batches)


@pytest.fixture
def grouping(tmp_path, keyring):
    gate = Grouping()
    with _store_with(gate, tmp_path / "g", keyring) as store:
        yield store, gate


def _queued_while_locked(store: SecurityStore, writes) -> list:
    """Run each write in its own thread while this thread holds the store's write lock (a commit under way), so all
    queue; then let them go: what each returned or raised."""
    import threading
    import time

    outcomes: list = [None] * len(writes)

    def run(n, write):
        try:
            outcomes[n] = write()
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[n] = exc

    threads = [threading.Thread(target=run, args=(n, w)) for n, w in enumerate(writes)]
    with store._write_lock:
        for thread in threads:
            thread.start()
        while len(store._queue) < len(writes):
            time.sleep(0.001)
    for thread in threads:
        thread.join(30)
    return outcomes


def test_writes_queued_behind_a_commit_are_committed_together_each_answered_after_it(grouping):
    """Four writes that queued while a commit held the lock go to the gate as one group (one Kafka transaction), in
    the order they are logged: the local log holds exactly those frames, and every write's effect is readable."""
    store, gate = grouping
    store.create_acls([acl("first")], context=ADMIN)
    outcomes = _queued_while_locked(store, [lambda n=n: store.create_acls([acl(f"t{n}")], context=ADMIN)
                                            for n in range(4)])
    assert not any(isinstance(o, Exception) for o in outcomes)
    assert [len(group) for group in gate.groups] == [1, 4]
    assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)
    assert [b.base_offset for b in gate.groups[1]] == [1, 2, 3, 4] and store.log.end_offset == 5
    names = {binding.pattern.name for _id, binding in store.image.acls}
    assert names == {"first", "t0", "t1", "t2", "t3"}


def test_in_a_group_a_refused_decision_or_batch_fails_alone_and_the_others_commit(grouping):
    """A write its control function refuses, and one whose batch the gate refuses before sending anything, fail
    with their own errors; the rest of the group is committed and nothing of the refused ones is logged."""
    from secmeta.core.errors import InvalidValueError

    store, gate = grouping
    gate.too_big = b"too-big"
    outcomes = _queued_while_locked(store, [
        lambda: store.create_acls([acl("kept-1")], context=ADMIN),
        lambda: store.alter_settings({"no.such.setting": "x"}, context=ADMIN),
        lambda: store.create_acls([acl("too-big")], context=ADMIN),
        lambda: store.create_acls([acl("kept-2")], context=ADMIN),
    ])
    assert "unknown setting 'no.such.setting'" in str(outcomes[1])
    assert isinstance(outcomes[2], InvalidValueError) and "record limit" in str(outcomes[2])
    assert not isinstance(outcomes[0], Exception) and not isinstance(outcomes[3], Exception)
    assert [[b.base_offset for b in group] for group in gate.groups] == [[0, 1]]
    assert {binding.pattern.name for _id, binding in store.image.acls} == {"kept-1", "kept-2"}
    assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)


def test_a_group_whose_commit_fails_fails_every_write_in_it_appends_nothing_and_stops_writes(grouping):
    store, gate = grouping
    gate.refuse = "fenced by a newer writer"
    outcomes = _queued_while_locked(store, [lambda n=n: store.create_acls([acl(f"t{n}")], context=ADMIN)
                                            for n in range(3)])
    assert all(isinstance(o, CommitGateError) and "fenced" in str(o) for o in outcomes)
    assert store.log.end_offset == 0 and len(store.image.acls) == 0
    gate.refuse = None
    with pytest.raises(WritesStoppedError, match="fenced"):
        store.create_acls([acl("after")], context=ADMIN)


def test_in_a_group_a_write_whose_batch_cannot_be_replayed_fails_alone(grouping):
    """A batch the image refuses to replay (a bug surfaced: deleting a credential that does not exist) fails its own
    write; the writes before and after it in the group are committed."""
    from secmeta.core.control import ControlResult
    from secmeta.events.records import ScramCredentialDeleted
    from secmeta.events.types import ScramMechanism

    store, gate = grouping
    ghost = ScramCredentialDeleted("ghost", ScramMechanism.SCRAM_SHA_256)
    outcomes = _queued_while_locked(store, [
        lambda: store.create_acls([acl("kept-1")], context=ADMIN),
        lambda: store._write(ADMIN, lambda image, now, _, _hmacs: ControlResult([ghost], None)),
        lambda: store.create_acls([acl("kept-2")], context=ADMIN),
    ])
    assert "does not exist" in str(outcomes[1])
    assert not isinstance(outcomes[0], Exception) and not isinstance(outcomes[2], Exception)
    assert [[b.base_offset for b in group] for group in gate.groups] == [[0, 1]]
    assert {binding.pattern.name for _id, binding in store.image.acls} == {"kept-1", "kept-2"}
    assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)


def test_a_write_refused_on_the_groups_unconfirmed_writes_gets_the_commit_error_when_the_commit_fails(grouping):
    """W1 removes a token, W2 renews it: W2 is refused on the image W1 would leave. W1's commit then fails, so the
    token was never removed: W2 must not say "no such token" but that nothing of the group was committed."""
    store, gate = grouping
    token = store.create_delegation_token(context=ADMIN)
    gate.refuse = "fenced by a newer writer"
    outcomes = _queued_while_locked(store, [
        lambda: store.expire_delegation_token(token.hmac, -1, context=ADMIN),
        lambda: store.renew_delegation_token(token.hmac, context=ADMIN),
    ])
    assert all(isinstance(o, CommitGateError) and "fenced" in str(o) for o in outcomes), outcomes
    assert len(store.image.tokens) == 1


def test_a_write_decided_on_the_published_image_keeps_its_own_error_when_the_groups_commit_fails(grouping):
    store, gate = grouping
    gate.refuse = "fenced by a newer writer"
    outcomes = _queued_while_locked(store, [
        lambda: store.renew_delegation_token(b"no-such-hmac", context=ADMIN),
        lambda: store.create_acls([acl("a")], context=ADMIN),
    ])
    assert "No delegation token has this HMAC" in str(outcomes[0])
    assert isinstance(outcomes[1], CommitGateError)


def test_a_token_issued_earlier_in_a_group_is_found_by_its_hmac_later_in_it(grouping, monkeypatch):
    """Renew and expire look a token up in the HMAC index of the image they are decided on, the group's too."""
    from secmeta.core.store import facade

    store, gate = grouping
    monkeypatch.setattr(facade, "_new_token_id", lambda: "token-of-the-group")
    hmac = store.token_hmac("token-of-the-group")
    outcomes = _queued_while_locked(store, [
        lambda: store.create_delegation_token(context=ADMIN),
        lambda: store.renew_delegation_token(hmac, 60_000, context=ADMIN),
        lambda: store.expire_delegation_token(hmac, -1, context=ADMIN),
    ])
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    assert [len(group) for group in gate.groups] == [3] and len(store.image.tokens) == 0


def test_a_group_takes_at_most_its_gates_count_and_bytes_and_the_rest_commit_in_the_next_groups(grouping):
    """A long queue is not one transaction: each group stops at the gate's batch count, or once its batches reach the
    gate's byte budget; the writes left over are committed in order in later groups, every one answered."""
    store, gate = grouping
    gate.max_group_batches = 3
    outcomes = _queued_while_locked(store, [lambda n=n: store.create_acls([acl(f"c{n}")], context=ADMIN)
                                            for n in range(7)])
    assert not any(isinstance(o, Exception) for o in outcomes)
    assert [len(group) for group in gate.groups] == [3, 3, 1]
    gate.max_group_batches, gate.max_group_bytes = 1000, 1
    outcomes = _queued_while_locked(store, [lambda n=n: store.create_acls([acl(f"b{n}")], context=ADMIN)
                                            for n in range(4)])
    assert not any(isinstance(o, Exception) for o in outcomes)
    assert [len(group) for group in gate.groups] == [3, 3, 1, 1, 1, 1, 1]
    assert [b.base_offset for b in gate.batches] == list(range(11)) and store.log.end_offset == 11
    assert b"".join(b.frame for b in gate.batches) == _segment_bytes(store)


def test_a_grouping_gate_commits_a_batch_alone_as_a_group_of_one():
    """A gate that names GroupingGate as its base has its ``commit`` (the Kafka gates do): the batch is checked,
    then committed as a group of one; a batch its check refuses is not sent."""
    from secmeta.core.errors import InvalidValueError
    from secmeta.core.store.commit_gate import GroupingGate

    class Gate(GroupingGate):
        max_group_batches, max_group_bytes = 10, 1 << 20

        def __init__(self):
            self.sent: list[list[PendingBatch]] = []

        def check(self, batch: PendingBatch) -> None:
            if batch.frame == b"too big":
                raise InvalidValueError("a batch over the record limit")

        def commit_group(self, batches) -> None:
            self.sent.append(list(batches))

        def append_failed(self, batch: PendingBatch, error: BaseException) -> None:
            raise AssertionError("not called here")

    gate = Gate()
    fits, too_big = (PendingBatch(0, 1, 0, frame, b"p", b"l") for frame in (b"fits", b"too big"))
    gate.commit(fits)
    with pytest.raises(InvalidValueError):
        gate.commit(too_big)
    assert gate.sent == [[fits]] and isinstance(gate, GroupingGate)
