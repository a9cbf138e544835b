"""ACL id -> index group: a ``LayeredMap`` (a dict built once, a persistent overlay of later changes).

A snapshot load or a replay from empty makes the whole id table at once; its values may be
placeholders (an ACL's position in an ``AclTable``) that become the ACL's group when first asked
for.  Every later image records only its changes in the overlay (see ``layered_map``); a batch that adds
many ACLs as a table's (``AclsDelta.apply``) records each as ``(table, position)``, whose group the table
makes when it is asked for (``get``), so the batch makes no group an authorize does not ask for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import ClassVar

from secmeta.projections.acl_index import Group
from secmeta.projections.layered_map import LayeredMap

__all__ = ["AclIds"]


class AclIds(LayeredMap):
    """An immutable mapping acl_id -> Group (weakly referable: ``acl_deferred.Deferred`` refers to its own so)."""

    __slots__ = ("__weakref__",)
    EMPTY: ClassVar[AclIds]  # type: ignore[misc]

    def get(self, key, default=None):
        value = LayeredMap.get(self, key, default)
        if value.__class__ is tuple:  # (table, position): its group, made when first asked for (the table keeps it)
            return value[0].group_at(value[1])
        return value

    def updated(self, removed: Iterable[str], groups: Iterable[Group], tables: Sequence = ()) -> AclIds:
        """The ids without ``removed`` (all held), then every id of each of ``tables`` (``AclTable``; none held once
        ``removed`` are gone) mapped to its position there, then every id of each of ``groups`` mapped to it."""
        mutation = self.mutate()
        for acl_id in removed:
            del mutation[acl_id]
        for table in tables:  # ids new to the image, or removed above (AclsDelta.apply): a level of their own
            mutation.add_new(dict(zip(table.ids, zip(repeat(table), range(len(table.ids))))))
        mutation.update({acl_id: group for group in groups for acl_id in group.acl_ids()})
        return mutation.finish()  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"AclIds(<{self._size} ids>)"


AclIds.EMPTY = AclIds({})
