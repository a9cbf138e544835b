"""secmeta.core.control.scram: alter/describe SCRAM credentials, one rule per test."""

import base64

import pytest

from secmeta.core.auth.scram import credential_from_password, derive_keys
from secmeta.core.config import PasswordPolicy, StoreConfig
from secmeta.core.control.scram import alter_scram_credentials, describe_scram_credentials
from secmeta.core.errors import ApiError, ClusterAuthorizationException, ErrorCode
from secmeta.core.types import (
    RequestContext,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from secmeta.events.keyring import Keyring, open_scram
from secmeta.events.records import ScramCredentialDeleted, ScramCredentialUpserted
from secmeta.events.types import CLUSTER_NAME, AclOperation, ResourceType, ScramMechanism
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.core.control.controlkit import unpacked
from tests.storekit import ADMIN

SHA256, SHA512, UNKNOWN = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512, ScramMechanism.UNKNOWN
KEYRING = Keyring.generate()
CONFIG = StoreConfig()
PASSWORD = b"hunter2-Sup3rSecret"
SALT = b"salt-0123456789-salt"
SALTED = bytes(range(32))
NONE = ApiError()


def allow(*_):
    return True


def deny(*_):
    return False


def up(user="alice", mech=SHA256, iterations=4096, password=PASSWORD, **kw):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations), password=password, **kw)


def salted(user="alice", mech=SHA256, iterations=4096, salt=SALT, salted_password=SALTED):
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mech, iterations), salt=salt, salted_password=salted_password
    )


def delete(user="alice", mech=SHA256):
    return UserScramCredentialDeletion(user, mech)


def alter(*items, image=SecurityImage.EMPTY, context=ADMIN, config=CONFIG, decider=allow):
    """(events, per-user results) of one alter request."""
    return unpacked(alter_scram_credentials(image, items, context, config=config, keyring=KEYRING, decider=decider))


def image_with(*items):
    events, results = alter(*items)
    assert not any(results.values())
    delta = SecurityDelta(SecurityImage.EMPTY)
    for event in events:
        delta.replay(event)
    return delta.apply()


def code(item, **kw):
    events, results = alter(item, **kw)
    return results[item.user].code


# -- request level ----------------------------------------------------------------


def test_alter_without_cluster_alter_raises():
    """A requester without ALTER on CLUSTER gets ClusterAuthorizationException."""
    with pytest.raises(ClusterAuthorizationException):
        alter(up(), decider=deny)


def test_alter_asks_for_alter_on_the_cluster():
    """alter asks the decider for ALTER on the kafka-cluster resource."""
    calls = []
    alter(up(), decider=lambda *a: calls.append(a) or True)
    assert calls == [("User:admin", "10.0.0.1", AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)]


def test_alter_refused_does_not_consume_items():
    """A refused request is rejected before any item is looked at (no event, no salting)."""
    consumed = []

    def items():
        consumed.append(1)
        yield up()

    with pytest.raises(ClusterAuthorizationException):
        alter_scram_credentials(SecurityImage.EMPTY, items(), ADMIN, config=CONFIG, keyring=KEYRING,
                                decider=deny)
    assert consumed == []


# -- successful upsertions and deletions --------------------------------------------


def test_upsert_emits_one_event_and_success():
    """A valid upsertion yields one ScramCredentialUpserted and NONE for the user."""
    events, results = alter(up())
    assert results == {"alice": NONE}
    assert [(type(e), e.user, e.mechanism, e.iterations) for e in events] == [
        (ScramCredentialUpserted, "alice", SHA256, 4096)
    ]


def test_upsert_seals_keys_derived_from_the_password():
    """The sealed secret opens to the StoredKey/ServerKey of the password and its salt."""
    (event,), _ = alter(up())
    secret = open_scram(KEYRING, event)
    expected = credential_from_password(SHA256, PASSWORD, 4096, salt=secret.salt)
    assert (secret.stored_key, secret.server_key) == (expected.stored_key, expected.server_key)


def test_upsert_salts_each_password_freshly():
    """Two upsertions of the same password get different salts."""
    (first,), _ = alter(up())
    (second,), _ = alter(up())
    assert open_scram(KEYRING, first).salt != open_scram(KEYRING, second).salt


def test_presalted_upsert_derives_keys_from_the_salted_password():
    """The pre-salted form stores the given salt and keys derived from the salted password."""
    (event,), results = alter(salted())
    secret = open_scram(KEYRING, event)
    assert results == {"alice": NONE}
    assert secret.salt == SALT
    assert (secret.stored_key, secret.server_key) == derive_keys(SHA256, SALTED)


def test_presalted_sha512_needs_64_bytes():
    """A 64-byte salted password is accepted for SCRAM-SHA-512."""
    assert code(salted(mech=SHA512, salted_password=bytes(64))) == ErrorCode.NONE


def test_delete_existing_credential_emits_deleted():
    """Deleting an existing (user, mechanism) yields ScramCredentialDeleted."""
    events, results = alter(delete(), image=image_with(up()))
    assert results == {"alice": NONE}
    assert events == [ScramCredentialDeleted("alice", SHA256)]


def test_iterations_default_from_config():
    """Iterations -1 takes the store's default for the mechanism."""
    config = StoreConfig(default_iterations={SHA256: 8192, SHA512: 4096})
    (event,), _ = alter(up(iterations=-1), config=config)
    assert event.iterations == 8192


def test_presalted_form_needs_its_real_iteration_count():
    """Iterations -1 cannot stand in for the count a salted password was made with."""
    events, results = alter(salted(iterations=-1))
    assert events == [] and results["alice"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert "Too few iterations" in results["alice"].message


@pytest.mark.parametrize("iterations", [4096, 16384])
def test_iteration_bounds_are_inclusive(iterations):
    """4096 and 16384 iterations are both accepted."""
    assert code(up(iterations=iterations)) == ErrorCode.NONE


# -- precedence and per-item errors ------------------------------------------------


def test_second_valid_item_of_a_user_is_duplicate_resource():
    """A user's second valid item: DUPLICATE_RESOURCE with Kafka's message, and neither item applies.

    Kafka: ScramControlManager.alterCredentials; AlterUserScramCredentialsRequestTest.testAlterSameThingTwice.
    """
    events, results = alter(up(), up(mech=SHA512))
    assert results == {"alice": ApiError(ErrorCode.DUPLICATE_RESOURCE,
                                         "A user credential cannot be altered twice in the same request")}
    assert events == []


def test_deletion_and_upsertion_of_one_user_are_duplicates():
    """A valid deletion and an upsertion of the same user: DUPLICATE_RESOURCE, nothing applies.

    Kafka: AlterUserScramCredentialsRequestTest.testAlterSameThingTwice (deletions d1, d2 with upsertions u1, u2).
    """
    image = image_with(up(user="user1"), up(user="user2"))
    events, results = alter(delete("user1"), delete("user2"), up("user1"), up("user2"), image=image)
    assert {user: r.code for user, r in results.items()} == {
        "user1": ErrorCode.DUPLICATE_RESOURCE, "user2": ErrorCode.DUPLICATE_RESOURCE}
    assert events == []


def test_first_failing_item_decides_over_a_later_valid_one():
    """An unknown mechanism followed by a valid item of the same user answers UNSUPPORTED_SASL_MECHANISM.

    Kafka: ScramControlManager.alterCredentials stops at a user's first error;
    AlterUserScramCredentialsRequestTest.testAlterUnknownMechanism (upsertionUnknown4, upsertionValid4).
    """
    events, results = alter(up(mech=UNKNOWN), up())
    assert results["alice"].code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert results["alice"].message.startswith("Unknown SCRAM mechanism")
    assert events == []


def test_two_deletions_of_a_missing_credential_are_resource_not_found():
    """Deleting a missing credential twice answers RESOURCE_NOT_FOUND, not DUPLICATE_RESOURCE.

    Kafka: ScramControlManager.alterCredentials (the first deletion's error stops the user).
    """
    _, results = alter(delete(), delete())
    assert results["alice"].code == ErrorCode.RESOURCE_NOT_FOUND


def test_empty_user_named_three_times_is_unacceptable_once():
    """Empty user names in two deletions and an upsertion: one UNACCEPTABLE_CREDENTIAL result.

    Kafka: AlterUserScramCredentialsRequestTest.testAlterEmptyUser.
    """
    _, results = alter(delete(user=""), delete(user=""), up(user=""))
    assert results == {"": ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}


def test_deletions_are_looked_at_before_upsertions():
    """An invalid upsertion listed before a valid deletion of the same user answers DUPLICATE_RESOURCE:
    the deletion is looked at first, so the upsertion is the user's second item.

    Kafka: ScramControlManager.alterCredentials walks request.deletions() before request.upsertions().
    """
    image = image_with(up())
    _, results = alter(up(iterations=1), delete(), image=image)
    assert results["alice"].code == ErrorCode.DUPLICATE_RESOURCE


def test_empty_user_is_unacceptable():
    """An empty user name gets UNACCEPTABLE_CREDENTIAL 'Username must not be empty'."""
    _, results = alter(up(user=""))
    assert results[""] == ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")


def test_empty_user_beats_unknown_mechanism():
    """An empty user with an unknown mechanism gets UNACCEPTABLE_CREDENTIAL."""
    assert code(up(user="", mech=UNKNOWN)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_empty_user_in_deletion_is_unacceptable():
    """Deleting for an empty user name gets UNACCEPTABLE_CREDENTIAL."""
    assert code(delete(user="")) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_unknown_mechanism_is_unsupported():
    """Mechanism UNKNOWN gets UNSUPPORTED_SASL_MECHANISM."""
    assert code(up(mech=UNKNOWN)) == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_unknown_mechanism_beats_too_few_iterations():
    """Unknown mechanism and too few iterations: UNSUPPORTED_SASL_MECHANISM."""
    assert code(up(mech=UNKNOWN, iterations=1)) == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_unknown_mechanism_code_reads_as_unknown():
    """An unrecognised mechanism byte (e.g. 7) is treated as UNKNOWN."""
    assert code(up(mech=7)) == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_disabled_mechanism_is_unsupported_and_named():
    """A mechanism not in enabled_mechanisms gets UNSUPPORTED_SASL_MECHANISM naming it."""
    config = StoreConfig(enabled_mechanisms={SHA256})
    _, results = alter(up(mech=SHA512), config=config)
    assert results["alice"].code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "SCRAM-SHA-512" in results["alice"].message


def test_disabled_mechanism_can_still_be_deleted():
    """Deleting a credential of a since-disabled mechanism is allowed."""
    image = image_with(up(mech=SHA512))
    events, results = alter(delete(mech=SHA512), image=image, config=StoreConfig(enabled_mechanisms={SHA256}))
    assert results == {"alice": NONE} and len(events) == 1


def test_too_few_iterations():
    """Fewer than 4096 iterations: UNACCEPTABLE_CREDENTIAL 'Too few iterations' naming the count."""
    _, results = alter(up(iterations=4095))
    assert results["alice"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert results["alice"].message.startswith("Too few iterations") and "4095" in results["alice"].message


def test_too_many_iterations():
    """More than 16384 iterations: UNACCEPTABLE_CREDENTIAL 'Too many iterations'."""
    _, results = alter(up(iterations=16385))
    assert results["alice"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert results["alice"].message.startswith("Too many iterations")


def test_other_negative_iterations_are_too_few():
    """Only -1 means the default; -2 is too few iterations."""
    _, results = alter(up(iterations=-2))
    assert results["alice"].message.startswith("Too few iterations")


def test_too_few_iterations_beats_transport_check():
    """Bad iterations are reported before the TLS check on the password."""
    _, results = alter(up(iterations=10), context=RequestContext(tls=False))
    assert results["alice"].message.startswith("Too few iterations")


def test_delete_missing_credential_is_resource_not_found():
    """Deleting a credential that does not exist gets RESOURCE_NOT_FOUND, its message starting as Kafka's.

    Kafka: ScramControlManager.validateDeletion; AlterUserScramCredentialsRequestTest.testDeleteSomethingThatDoesNotExist.
    """
    _, results = alter(delete())
    assert results["alice"].code == ErrorCode.RESOURCE_NOT_FOUND
    assert results["alice"].message.startswith("Attempt to delete a user credential that does not exist")


def test_delete_other_mechanism_is_resource_not_found():
    """Deleting SHA-512 when only SHA-256 exists gets RESOURCE_NOT_FOUND."""
    assert code(delete(mech=SHA512), image=image_with(up())) == ErrorCode.RESOURCE_NOT_FOUND


def test_delete_unknown_mechanism_beats_not_found():
    """Deleting with mechanism UNKNOWN gets UNSUPPORTED_SASL_MECHANISM, not RESOURCE_NOT_FOUND."""
    assert code(delete(mech=UNKNOWN)) == ErrorCode.UNSUPPORTED_SASL_MECHANISM


# -- password form (KIP-506) ------------------------------------------------------


def test_password_over_plaintext_is_refused():
    """A password on a non-TLS connection gets UNACCEPTABLE_CREDENTIAL mentioning TLS."""
    events, results = alter(up(), context=RequestContext(tls=False))
    assert results["alice"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert "TLS" in results["alice"].message
    assert events == []


def test_password_over_plaintext_allowed_by_config():
    """allow_plaintext_passwords accepts a password on a non-TLS connection."""
    config = StoreConfig(allow_plaintext_passwords=True)
    assert code(up(), context=RequestContext(tls=False), config=config) == ErrorCode.NONE


def test_presalted_form_needs_tls_too():
    """A salted password is password-equivalent, so it is refused over plaintext like a password."""
    assert code(salted(), context=RequestContext(tls=False)) == ErrorCode.UNACCEPTABLE_CREDENTIAL
    allowed = StoreConfig(allow_plaintext_passwords=True)
    assert code(salted(), context=RequestContext(tls=False), config=allowed) == ErrorCode.NONE


def test_password_of_the_wrong_type_is_refused():
    """An int password would silently become zero bytes; it is refused instead."""
    assert code(up(password=8)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_password_policy_rejection_names_the_policy():
    """A password the policy rejects gets UNACCEPTABLE_CREDENTIAL with the policy's description."""
    config = StoreConfig(password_policy=PasswordPolicy.min_length(40))
    _, results = alter(up(), config=config)
    assert results["alice"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert "at least 40 bytes" in results["alice"].message


def test_password_policy_acceptance():
    """A password the policy accepts is stored."""
    config = StoreConfig(password_policy=PasswordPolicy.min_length(8))
    assert code(up(), config=config) == ErrorCode.NONE


def test_password_policy_sees_the_password_bytes():
    """The policy is called with the password as bytes."""
    seen = []
    policy = PasswordPolicy(lambda p: seen.append(p) or True, "anything")
    alter(up(), config=StoreConfig(password_policy=policy))
    assert seen == [PASSWORD]


def test_empty_password_is_unacceptable():
    """An empty password gets UNACCEPTABLE_CREDENTIAL."""
    assert code(up(password=b"")) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_password_with_salt_uses_that_salt():
    """A password with a salt is salted with it, as confluent_kafka's upsertion means."""
    events, results = alter(up(salt=SALT))
    assert results["alice"].code == ErrorCode.NONE
    secret = open_scram(KEYRING, events[0])
    expected = credential_from_password(ScramMechanism.SCRAM_SHA_256, PASSWORD, 4096, salt=SALT)
    assert (secret.salt, secret.stored_key) == (SALT, expected.stored_key)


def test_password_with_salted_password_is_unacceptable():
    """A password combined with a salted password gets UNACCEPTABLE_CREDENTIAL."""
    assert code(up(salt=SALT, salted_password=SALTED)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_no_secret_at_all_is_unacceptable():
    """An upsertion with neither password nor salted password gets UNACCEPTABLE_CREDENTIAL."""
    assert code(up(password=None)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


@pytest.mark.parametrize("salt", [None, b""])
def test_presalted_needs_a_salt(salt):
    """A salted password without a (non-empty) salt gets UNACCEPTABLE_CREDENTIAL."""
    assert code(salted(salt=salt)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


@pytest.mark.parametrize("salted_password", [None, b""])
def test_presalted_needs_a_salted_password(salted_password):
    """A salt without a (non-empty) salted password gets UNACCEPTABLE_CREDENTIAL."""
    assert code(salted(salted_password=salted_password)) == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_salted_password_of_any_length_derives_the_keys():
    """A salted password that is not the hash length is taken as it is, its keys derived from those bytes.

    Kafka: ScramControlManager.finishUpsertion (no length check); AlterUserScramCredentialsRequestTest
    upserts the 14 bytes "saltedPassword".
    """
    (event,), results = alter(salted(salted_password=b"saltedPassword"))
    assert results == {"alice": NONE}
    secret = open_scram(KEYRING, event)
    assert (secret.stored_key, secret.server_key) == derive_keys(SHA256, b"saltedPassword")


# -- per user results --------------------------------------------------------------


def test_valid_users_apply_despite_invalid_ones():
    """One user's error does not stop another user's valid item."""
    events, results = alter(up(user="bad", iterations=1), up(user="good"))
    assert results["good"] == NONE and results["bad"].code == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert [e.user for e in events] == ["good"]


def test_one_result_per_user_in_request_order():
    """The result has exactly one entry per distinct user, in first-appearance order."""
    _, results = alter(up(user="b"), up(user="a"), up(user="b", mech=SHA512), delete(user="c"))
    assert list(results) == ["b", "a", "c"]


def test_events_are_deletions_then_upsertions_in_request_order():
    """Events come as Kafka's records do: the deletions, then the upsertions, each in request order."""
    image = image_with(up(user="z"))
    events, _ = alter(up(user="y"), delete(user="z"), up(user="x"), image=image)
    assert [(type(e).__name__, e.user) for e in events] == [
        ("ScramCredentialDeleted", "z"), ("ScramCredentialUpserted", "y"), ("ScramCredentialUpserted", "x")
    ]


def test_alter_leaves_the_image_unchanged():
    """alter returns events but never changes the image it was given."""
    image = image_with(up(user="bob"))
    alter(delete(user="bob"), up(user="carol"), image=image)
    assert image.scram.get("bob", SHA256) is not None and image.scram.get("carol", SHA256) is None


def test_no_secret_appears_in_any_error_message():
    """No error message contains the password, salt or salted password, raw or base64."""
    items = [
        up(user="u1", iterations=1), up(user="u2", salt=SALT), up(user="u3", mech=UNKNOWN),
        salted(user="u4", salted_password=SALTED[:31], iterations=1), salted(user="u5", salt=b""),
        up(user="u6", password=PASSWORD + b"x" * 3),
    ]
    policy = PasswordPolicy(lambda p: False, "never")
    _, results = alter(*items, context=RequestContext(tls=True), config=StoreConfig(password_policy=policy))
    _, plain = alter(up(user="u7"), context=RequestContext(tls=False))
    texts = [str(e) for e in [*results.values(), *plain.values()]]
    assert all(err for err in [*results.values(), *plain.values()])
    for secret in (PASSWORD, SALT, SALTED[:31], PASSWORD + b"xxx"):
        for form in (secret.decode("latin-1"), base64.b64encode(secret).decode(), repr(secret), secret.hex()):
            assert not any(form in text for text in texts)


# -- describe ----------------------------------------------------------------------


def describe(users, image, decider=allow):
    return describe_scram_credentials(image, users, ADMIN, decider=decider)


def test_describe_without_cluster_describe_raises():
    """describe without DESCRIBE on CLUSTER raises ClusterAuthorizationException."""
    with pytest.raises(ClusterAuthorizationException):
        describe(None, SecurityImage.EMPTY, decider=deny)


def test_describe_asks_for_describe_on_the_cluster():
    """describe asks the decider for DESCRIBE on the cluster."""
    calls = []
    describe(None, SecurityImage.EMPTY, decider=lambda *a: calls.append(a) or True)
    assert [c[2] for c in calls] == [AclOperation.DESCRIBE]


@pytest.mark.parametrize("users", [None, []])
def test_describe_all_users(users):
    """users None or empty describes every user that has a credential."""
    image = image_with(up(user="a"), up(user="b", mech=SHA512, iterations=8192))
    assert describe(users, image) == {
        "a": UserScramCredentialsDescription("a", (ScramCredentialInfo(SHA256, 4096),)),
        "b": UserScramCredentialsDescription("b", (ScramCredentialInfo(SHA512, 8192),)),
    }


def test_describe_lists_every_mechanism_of_a_user():
    """A user with two mechanisms is described with both (mechanism, iterations)."""
    image = image_with(up(user="a"))
    image2_events, _ = alter(up(user="a", mech=SHA512, iterations=5000))
    delta = SecurityDelta(image)
    delta.replay(image2_events[0])
    result = describe(["a"], delta.apply())["a"]
    assert result.scram_credential_infos == (ScramCredentialInfo(SHA256, 4096), ScramCredentialInfo(SHA512, 5000))


def test_describe_missing_user_is_resource_not_found():
    """A user without credentials gets RESOURCE_NOT_FOUND with Kafka's message.

    Kafka: ScramImage.describe; DescribeUserScramCredentialsRequestTest.testUnknownUser.
    """
    assert describe(["nobody"], image_with(up()))["nobody"] == ApiError(
        ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody")


def test_describe_duplicate_name_gets_one_duplicate_result():
    """A name given twice gets a single DUPLICATE_RESOURCE result with Kafka's message.

    Kafka: ScramImage.describe; DescribeUserScramCredentialsRequestTest.testDescribeSameUserTwice.
    """
    result = describe(["alice", "alice"], image_with(up()))
    assert result == {"alice": ApiError(
        ErrorCode.DUPLICATE_RESOURCE,
        "Cannot describe SCRAM credentials for the same user twice in a single request: alice")}


def test_describe_per_user_results_are_independent():
    """A missing user does not affect another user's description."""
    result = describe(["nobody", "alice"], image_with(up()))
    assert isinstance(result["alice"], UserScramCredentialsDescription)
    assert result["nobody"].code == ErrorCode.RESOURCE_NOT_FOUND
