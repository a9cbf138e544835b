"""secmeta.core.control.authz: the decider over an image and the cluster permission check."""

import pytest

from secmeta.core.config import StoreConfig
from secmeta.core.control.authz import decider_for, require_cluster
from secmeta.core.errors import ClusterAuthorizationException, ErrorCode
from secmeta.core.types import RequestContext
from secmeta.events.records import AclCreated
from secmeta.events.types import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.image import SecurityDelta, SecurityImage

Op = AclOperation
CLUSTER = ResourceType.CLUSTER
BOB = "User:bob"


def replayed(*events):
    delta = SecurityDelta(SecurityImage.EMPTY)
    for event in events:
        delta.replay(event)
    return delta.apply()


def cluster_acl(principal=BOB, op=Op.ALTER, perm=AclPermissionType.ALLOW):
    binding = AclBinding.of(CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal, "*", op, perm)
    return AclCreated("a1", binding)


def test_decider_allows_super_user_without_acls():
    """A configured super user is allowed with no ACL at all."""
    decide = decider_for(SecurityImage.EMPTY, StoreConfig(super_users={"User:root"}))
    assert decide("User:root", "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_decider_denies_other_principal_without_acls():
    """Without ACLs and allow_everyone off, a plain principal is denied."""
    decide = decider_for(SecurityImage.EMPTY, StoreConfig())
    assert not decide(BOB, "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_decider_honours_allow_everyone_if_no_acl_found():
    """allow_everyone_if_no_acl_found allows a resource with no ACL."""
    decide = decider_for(SecurityImage.EMPTY, StoreConfig(allow_everyone_if_no_acl_found=True))
    assert decide(BOB, "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_decider_reads_acls_of_the_image():
    """An ALLOW ALTER on the cluster in the image allows that principal."""
    decide = decider_for(replayed(cluster_acl()), StoreConfig())
    assert decide(BOB, "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_decider_applies_deny_acls():
    """A DENY in the image beats allow_everyone_if_no_acl_found."""
    image = replayed(cluster_acl(perm=AclPermissionType.DENY))
    decide = decider_for(image, StoreConfig(allow_everyone_if_no_acl_found=True))
    assert not decide(BOB, "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_decider_accepts_a_bare_acls_image():
    """decider_for also takes an AclsImage directly."""
    decide = decider_for(replayed(cluster_acl()).acls, StoreConfig())
    assert decide(BOB, "h", Op.ALTER, CLUSTER, CLUSTER_NAME)


def test_require_cluster_raises_naming_principal_and_operation():
    """A refused cluster operation raises ClusterAuthorizationException naming both."""
    with pytest.raises(ClusterAuthorizationException) as info:
        require_cluster(lambda *a: False, RequestContext(principal=BOB), Op.DESCRIBE)
    assert info.value.error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert BOB in str(info.value) and "DESCRIBE" in str(info.value)


def test_require_cluster_asks_about_the_cluster_resource():
    """require_cluster asks for (principal, host, op, CLUSTER, kafka-cluster)."""
    calls = []
    require_cluster(lambda *a: calls.append(a) or True, RequestContext(principal=BOB, host="h1"), Op.ALTER)
    assert calls == [(BOB, "h1", Op.ALTER, CLUSTER, CLUSTER_NAME)]


def test_a_decider_keeps_cluster_decisions_per_question_and_a_new_image_decides_anew():
    """The cluster decisions a decider keeps answer each (principal, host, operation) as the image does, past the
    number it keeps too; the decider of the image after a change decides by the change."""
    from secmeta.core.control.authz import CLUSTER_DECISIONS_KEPT

    denied_host = AclBinding.of(CLUSTER, CLUSTER_NAME, PatternType.LITERAL, BOB, "10.0.0.9", Op.DESCRIBE,
                                AclPermissionType.DENY)
    image = replayed(cluster_acl(op=Op.DESCRIBE), AclCreated("a2", denied_host))
    decide = decider_for(image, StoreConfig(super_users=()))
    hosts = [f"10.0.{i // 250}.{i % 250}" for i in range(CLUSTER_DECISIONS_KEPT + 10)] + ["10.0.0.9"]
    for _ in range(2):
        assert [decide(BOB, h, Op.DESCRIBE, CLUSTER, CLUSTER_NAME) for h in hosts] == [h != "10.0.0.9" for h in hosts]
        assert not decide(BOB, "10.0.0.1", Op.ALTER, CLUSTER, CLUSTER_NAME)
        assert not decide("User:carol", "10.0.0.1", Op.DESCRIBE, CLUSTER, CLUSTER_NAME)
    delta = SecurityDelta(image)
    delta.replay(AclCreated("a3", AclBinding.of(CLUSTER, CLUSTER_NAME, PatternType.LITERAL, BOB, "*", Op.DESCRIBE,
                                                AclPermissionType.DENY)))
    after = decider_for(delta.apply(), StoreConfig(super_users=()))
    assert not after(BOB, "10.0.0.1", Op.DESCRIBE, CLUSTER, CLUSTER_NAME)
    assert decide(BOB, "10.0.0.1", Op.DESCRIBE, CLUSTER, CLUSTER_NAME)     # the older image's decider: its own image
