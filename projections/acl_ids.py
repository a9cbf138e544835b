"""ACL id -> index group: a ``LayeredMap`` (a dict built once, a persistent overlay of later changes).

A snapshot load or a replay from empty makes the whole id table at once; its values may be
placeholders (an ACL's position in an ``AclTable``) that become the ACL's group when first asked
for.  Every later image records only its changes in the overlay (see ``layered_map``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from secmeta.projections.acl_index import Group
from secmeta.projections.layered_map import LayeredMap

__all__ = ["AclIds"]


class AclIds(LayeredMap):
    """An immutable mapping acl_id -> Group."""

    __slots__ = ()
    EMPTY: ClassVar[AclIds]  # type: ignore[misc]

    def updated(self, removed: Iterable[str], groups: Iterable[Group]) -> AclIds:
        """The ids without ``removed`` (all held), then every id of each of ``groups`` mapped to it."""
        mutation = self.mutate()
        for acl_id in removed:
            del mutation[acl_id]
        mutation.update({acl_id: group for group in groups for acl_id in group.acl_ids()})
        return mutation.finish()  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"AclIds(<{self._size} ids>)"


AclIds.EMPTY = AclIds({})
