"""StoreView: the read methods over one image, shared by the live store and its past views."""

from __future__ import annotations

import inspect

import pytest

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    ApiException,
    ErrorCode,
    RequestContext,
    ResourceType,
)
from secmeta.core.store import view as view_module
from secmeta.core.store.view import StoreView
from secmeta.projections.image import SecurityImage
from tests.storekit import ADMIN, acl

AUDITOR = RequestContext("User:auditor", "10.0.0.2")


def test_store_reads_answer_through_a_view_of_the_published_image(open_store):
    """The store's live view holds exactly the image the store publishes."""
    store = open_store()
    store.create_acls([acl("t")], context=ADMIN)
    assert store.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert store._live_view().image is store.image


def test_view_of_an_empty_image_denies_and_describes_nothing(open_store):
    """A view of the empty image answers as an empty store does."""
    store = open_store()
    view = StoreView(SecurityImage.EMPTY, store.config)
    assert view.offset == 0
    assert view.describe_acls(AclBindingFilter.any(), context=ADMIN) == []
    assert not view.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")


def test_view_answers_from_its_image_after_the_store_moves_on(open_store):
    """A view keeps answering from its own image when later commits change the store."""
    store = open_store()
    store.create_acls([acl("t")], context=ADMIN)
    view = store._live_view()
    store.delete_acls([AclBindingFilter.of(ResourceType.TOPIC, "t")], context=ADMIN)
    assert view.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert not store.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")


def test_view_authorized_operations_matches_the_store(open_store):
    """authorized_operations from a view of the live image equals the store's answer."""
    store = open_store()
    store.create_acls([acl("t"), acl("t", op=AclOperation.WRITE)], context=ADMIN)
    view = StoreView(store.image, store.config)
    args = ("User:alice", "h", ResourceType.TOPIC, "t")
    assert view.authorized_operations(*args) == store.authorized_operations(*args) != 0


def test_view_explain_names_the_deciding_acl(open_store):
    """explain from a view returns the ACL that allowed the request."""
    store = open_store()
    store.create_acls([acl("t")], context=ADMIN)
    decision = StoreView(store.image, store.config).explain("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert decision.allowed and [b for _, b in decision.acls] == [acl("t")]


def test_view_describe_tokens_has_no_hmac_by_default(open_store):
    """Token descriptions from a view carry no HMAC unless configured."""
    store = open_store()
    store.create_delegation_token(context=ADMIN, owner="User:etl")
    view = StoreView(store.image, store.config)
    assert [t.hmac for t in view.describe_delegation_tokens(context=ADMIN)] == [None]


def test_view_describe_tokens_includes_hmac_when_configured(open_store):
    """With describe_tokens_include_hmac the live store's descriptions carry the token HMAC."""
    store = open_store(describe_tokens_include_hmac=True)
    token = store.create_delegation_token(context=ADMIN, owner="User:etl")
    assert [t.hmac for t in store.describe_delegation_tokens(context=ADMIN)] == [token.hmac]


def test_past_view_checks_the_requester_against_current_acls(open_store):
    """A principal whose DESCRIBE right was revoked cannot read past state through as_of."""
    store = open_store()
    grant = acl("kafka-cluster", "User:auditor", AclOperation.DESCRIBE, rtype=ResourceType.CLUSTER)
    store.create_acls([grant], context=ADMIN)
    past = store.as_of(offset=1)
    assert past.describe_acls(AclBindingFilter.any(), context=AUDITOR) == [grant]
    store.delete_acls([AclBindingFilter.of(ResourceType.CLUSTER)], context=ADMIN)
    with pytest.raises(ApiException) as info:
        store.as_of(offset=1).describe_acls(AclBindingFilter.any(), context=AUDITOR)
    assert info.value.error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


FORENSIC_QUERIES = ("history", "diff", "who_could", "access_timeline", "token_access")


def test_forensic_queries_are_documented_as_operator_level_and_take_no_requester(open_store):
    """Review 28, finding 2: the gate above covers describe questions only. The forensic queries answer for the
    whole store to whoever calls them (the revoked auditor's past ACL is in diff), and their help says so: a
    trusted operator's queries, to be gated by any application exposing them. The module's promise names only
    the describe questions."""
    store = open_store()
    grant = acl("kafka-cluster", "User:auditor", AclOperation.DESCRIBE, rtype=ResourceType.CLUSTER)
    store.create_acls([grant], context=ADMIN)
    store.delete_acls([AclBindingFilter.of(ResourceType.CLUSTER)], context=ADMIN)
    assert "User:auditor" in str(store.diff(0, 1))  # no requester to refuse
    for name in FORENSIC_QUERIES:
        method = getattr(type(store), name)
        assert "context" not in inspect.signature(method).parameters, name
        doc = " ".join((method.__doc__ or "").split())
        assert "Operator-level: takes no requester and checks nothing" in doc, name
        assert "must gate it itself" in doc, name
    module_doc = " ".join((view_module.__doc__ or "").split())
    assert "That gate covers a view's describe questions only" in module_doc
    assert all(f"``{name}``" in module_doc for name in FORENSIC_QUERIES)


def test_describe_tokens_on_a_store_without_token_secret_is_auth_disabled_live_but_not_in_the_past(open_store):
    """A store with tokens disabled answers a live describe with DELEGATION_TOKEN_AUTH_DISABLED; as_of shows the
    past's tokens (no HMACs) without a secret: an investigator needs none (issue 21).

    Kafka: KafkaApis.handleDescribeTokensRequest answers DELEGATION_TOKEN_AUTH_DISABLED when token auth is off
    (DelegationTokenRequestsWithDisableTokenFeatureTest).
    """
    with_tokens = open_store(token_secret=b"s" * 32)
    with_tokens.create_delegation_token(context=ADMIN)
    with_tokens.close()
    store = open_store(token_secret=None)
    with pytest.raises(ApiException) as info:
        store.describe_delegation_tokens(context=ADMIN)
    assert info.value.error.code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    [token] = store.as_of(offset=store.image.next_offset).describe_delegation_tokens(context=ADMIN)
    assert token.owner == "User:admin" and token.hmac is None
