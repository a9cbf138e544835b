"""The image a reader must reach, as a user sees it: the ACL set, the credential descriptions, the tokens,
the client quotas, the logged settings.

``image_of`` reads it through describe (``StoreView`` over an image, with a token secret so tokens can
be described); the Spark reader builds the same value from its table rows. Secrets are not part of it:
describe never shows them, and the tables do not hold them.
"""

from __future__ import annotations

from dataclasses import dataclass

from secmeta.core import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StoreConfig,
)
from secmeta.core.store.view import StoreView
from secmeta.projections.image import SecurityImage
from tests.storekit import ADMIN, TOKEN_SECRET

__all__ = ["Image", "acl_row", "image_of", "view_of"]

AclRow = tuple[str, str, str, str, str, str, str]  # resource type, name, pattern, principal, host, operation, permission
CredentialRow = tuple[str, str, int]  # user, mechanism, iterations
TokenRow = tuple[str, str, str, tuple[str, ...], int, int, int]  # id, owner, requester, renewers, issue, expiry, max
QuotaRow = tuple[str, str, float]  # entity (canonical form), key, value

DESCRIBE_CONFIG = StoreConfig(token_secret=TOKEN_SECRET)


@dataclass(frozen=True)
class Image:
    acls: frozenset[AclRow]
    credentials: frozenset[CredentialRow]
    tokens: frozenset[TokenRow]
    quotas: frozenset[QuotaRow]
    settings: frozenset[tuple[str, str]] = frozenset()  # (name, value) of each setting the log set


def acl_row(rtype: ResourceType, name: str, pattern: PatternType, principal: str, host: str,
            operation: AclOperation, permission: AclPermissionType) -> AclRow:
    return (rtype.name, name, pattern.name, principal, host, operation.name, permission.name)


def view_of(image: SecurityImage) -> StoreView:
    """A view that can describe everything in ``image`` (tokens too)."""
    return StoreView(image, DESCRIBE_CONFIG)


def image_of(source: SecurityImage | StoreView) -> Image:
    """What describe answers the admin over ``source`` (an image, or a view such as ``as_of``'s)."""
    view = view_of(source) if isinstance(source, SecurityImage) else source
    acls = frozenset(acl_row(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal,
                             b.entry.host, b.entry.operation, b.entry.permission_type)
                     for b in view.describe_acls(AclBindingFilter.any(), context=ADMIN))
    credentials = frozenset((user, info.mechanism.name, info.iterations)
                            for user, description in view.describe_user_scram_credentials(context=ADMIN).items()
                            for info in description.scram_credential_infos)
    tokens = frozenset((t.token_id, t.owner, t.requester, tuple(sorted(t.renewers)), t.issue_timestamp_ms,
                        t.expiry_timestamp_ms, t.max_timestamp_ms)
                       for t in view.describe_delegation_tokens(context=ADMIN))
    quotas = frozenset((str(entity), key, value)
                       for entity, values in view.describe_client_quotas(context=ADMIN).items()
                       for key, value in values.items())
    settings = frozenset((row["name"], row["value"]) for row in view.describe_settings(context=ADMIN)
                         if row["source"] == "log")
    return Image(acls, credentials, tokens, quotas, settings)
