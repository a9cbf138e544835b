"""A store opened read-only beside its writer follows it: ``catch_up`` publishes what the writer committed since.

This is what each serving process of ``secmeta serve --processes N`` does with the writer's log; the
answers a follower gives after catching up are the writer's, for every kind of write, whatever the
points at which it catches up.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scramp import ScramClient

from secmeta.core import AclBindingFilter, SecmetaError, SecurityStore, StoreConfig
from secmeta.core.log.config import LogConfig
from secmeta.core.log.errors import OffsetOutOfRangeError
from tests.core.store.test_store_write_path import OPS, _write
from tests.logkit import make_keyring
from tests.storekit import ADMIN, TOKEN_SECRET, acl, upsert

ANY_ACL = AclBindingFilter.any()


def _answers(store: SecurityStore) -> tuple:
    """What a reader of ``store`` sees: its offset and every describe answer."""
    return (store.image.next_offset,
            sorted(map(repr, store.describe_acls(ANY_ACL, context=ADMIN))),
            repr(sorted(store.describe_user_scram_credentials(context=ADMIN).items())),
            sorted(map(repr, store.describe_delegation_tokens(context=ADMIN))),
            repr(sorted(store.describe_client_quotas(context=ADMIN).items(), key=repr)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(OPS, st.booleans()), min_size=1, max_size=10))
def test_a_follower_answers_as_the_writer_after_each_catch_up(tmp_path_factory, steps):
    """Whatever was written and wherever the follower catches up, it then answers exactly as the writer."""
    tmp = tmp_path_factory.mktemp("follow")
    keyring = make_keyring(tmp)
    config = StoreConfig(token_secret=TOKEN_SECRET)
    hmacs: list[bytes] = []
    with SecurityStore.open(tmp / "store", config, keyring=keyring) as writer, \
            SecurityStore.open(tmp / "store", config, keyring=keyring, read_only=True) as follower:
        for op, catch_up_now in steps:
            try:
                _write(writer, op, ADMIN, hmacs)
            except Exception:  # noqa: BLE001 - a refused write writes nothing; the follower must still agree
                pass
            if catch_up_now:
                assert follower.catch_up() == writer.image.next_offset
                assert _answers(follower) == _answers(writer)
        follower.catch_up()
        assert _answers(follower) == _answers(writer)


def test_a_password_set_on_the_writer_logs_in_on_the_follower_once_caught_up(tmp_path):
    """Logins are served from the followed image: a new user logs in there after catch_up, not before."""
    keyring = make_keyring(tmp_path)
    with SecurityStore.open(tmp_path / "store", StoreConfig(), keyring=keyring) as writer, \
            SecurityStore.open(tmp_path / "store", StoreConfig(), keyring=keyring, read_only=True) as follower:
        writer.alter_user_scram_credentials([upsert("carol", b"carol-pw")], context=ADMIN)
        assert not _logs_in(follower, "carol", "carol-pw")
        follower.catch_up()
        assert _logs_in(follower, "carol", "carol-pw")
        assert not _logs_in(follower, "carol", "wrong")


def _logs_in(store: SecurityStore, user: str, password: str) -> bool:
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    server = store.scram_server("SCRAM-SHA-256")
    try:
        client.set_server_first(server.first(client.get_client_first().encode()))
        client.set_server_final(server.final(client.get_client_final().encode()))
    except Exception:  # noqa: BLE001 - any refusal is "does not log in"
        return False
    return True


def test_a_follower_behind_retention_refuses_rather_than_skip(tmp_path):
    """Batches the writer's retention deleted before the follower read them: catch_up raises, naming the offsets."""
    keyring = make_keyring(tmp_path)
    config = StoreConfig(delete_covered_segments=True, log=LogConfig(segment_bytes=1024))
    with SecurityStore.open(tmp_path / "store", config, keyring=keyring) as writer, \
            SecurityStore.open(tmp_path / "store", config, keyring=keyring, read_only=True) as follower:
        for i in range(60):
            writer.create_acls([acl(f"t{i}")], context=ADMIN)
        writer.snapshot()
        writer.create_acls([acl("after")], context=ADMIN)
        if writer.log.start_offset == 0:
            pytest.skip("retention deleted nothing at this segment size")
        with pytest.raises(OffsetOutOfRangeError, match="retention deleted"):
            follower.catch_up()


def test_the_writer_has_nothing_to_follow(tmp_path):
    """catch_up on the writer itself is refused with a clear error (its writes publish as they commit)."""
    with SecurityStore.open(tmp_path / "store", StoreConfig(), keyring=make_keyring(tmp_path)) as writer:
        with pytest.raises(SecmetaError, match="read-only"):
            writer.catch_up()
