"""Snapshot codec for a delta checkpoint: the net change from the image at one offset (its base) to another.

A delta checkpoint file (``secmeta.core.forensics.checkpoints``) is a snapshot (``projections.snapshot``: format 6,
CRC, HMAC, the chain link of the batch that ends at its offset) of kind ``security-delta`` whose state is a
``DeltaState``: the base's offset, its own offset and the ``NetChanges`` a replay of the events between them makes to
the base image (``SecurityDelta.net``), so that the image at its offset is the base's plus one ``apply`` of them
(``SecurityDelta.of_net``) instead of a replay of every event between (issue 24: a change so loaded costs a third of
an event replayed: no decode, no record, the ACLs gathered by id once).

Rows (an Avro union, one branch a row; no binary section):

    DeltaMetaRow       the base's offset and the delta's (the first row)
    AclChangesRow      the ACL changes as columns, in the order recorded: every changed id, a byte per change (1: its
                       row follows, 0: the base's ACL removed), a byte per change (1: the base holds the id; a reader
                       that checked the HMAC looks up no other id in the base's hash table), per id the base holds
                       where the base file's ACL table holds it (its position and its group's, u32 little-endian; a
                       reader checks both against the table before it uses them instead of a lookup, and looks the id
                       up when they do not fit: ``MappedAclTable.located``; empty when the base was not read from its
                       file, and absent from files written before them), and per added row its resource type, pattern
                       type, operation and permission (a byte each) and its name, principal and host as positions in
                       the row's distinct names, principals and hosts (u32 little-endian); one row per ``_CHUNK``
                       changes
    ScramRow           a credential upserted (as the image snapshot's: its secret stays sealed)
    ScramDeletedRow    a credential deleted
    TokenRow           a token as it stands (issued, renewed or expired)
    TokenRemovedRow    a token removed
    QuotaRow           an entity's quotas as they stand (an empty map: none left)
    SettingChangeRow   a setting's value as it stands (null: back to its default)
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from itertools import compress
from typing import cast

from secmeta.events.keyring import SealedSecret
from secmeta.events.records import AclRow
from secmeta.events.types import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from secmeta.projections.image import NetChanges
from secmeta.projections.image_snapshot import SCRAM_ROW_FIELDS, TOKEN_ROW_FIELDS
from secmeta.projections.scram import ScramEntry
from secmeta.projections.snapshot import CorruptSnapshotError
from secmeta.projections.tokens import TokenInfo

__all__ = ["DeltaState", "SecurityDeltaSnapshot"]

_CHUNK = 1 << 16  # ACL changes per AclChangesRow


@dataclass(frozen=True, slots=True)
class DeltaState:
    """What a delta checkpoint file holds: the net change from the image at ``base_offset`` to ``next_offset``."""

    base_offset: int
    next_offset: int
    net: NetChanges


def _field(name: str, avro_type, doc: str) -> dict:
    return {"name": name, "type": avro_type, "doc": doc}


def _record(name: str, doc: str, *fields: dict) -> dict:
    return {"type": "record", "name": name, "doc": doc, "fields": list(fields)}


_STRINGS = {"type": "array", "items": "string"}
_META = _record("DeltaMetaRow", "Which images the delta lies between (the first row).",
                _field("base_offset", "long", "The offset of the full checkpoint whose image the changes apply to."),
                _field("next_offset", "long", "The offset of the first event not in the image the changes give."))
_ACLS = _record(
    "AclChangesRow", "ACL changes as columns, in the order recorded.",
    _field("acl_ids", _STRINGS, "Per change: the ACL id."),
    _field("added", "bytes", "Per change: 1 when the id's row follows (added or replaced), 0 when the base's is removed."),
    _field("held", "bytes", "Per change: 1 when the base image holds the id (the others need no lookup in it)."),
    _field("held_positions", "bytes", "Per change the base holds, in order: the id's position in the base file's "
           "ACL table (u32 little-endian); empty when not recorded (a base not read from its file)."),
    _field("held_groups", "bytes", "Per change the base holds, in order: the position of the group holding it in the "
           "base file's ACL table (u32 little-endian); empty when not recorded."),
    _field("resource_types", "bytes", "Per added row: its ResourceType code."),
    _field("pattern_types", "bytes", "Per added row: its PatternType code."),
    _field("names", _STRINGS, "The distinct resource names of the added rows."),
    _field("name_at", "bytes", "Per added row: its name's position in names (u32 little-endian)."),
    _field("principals", _STRINGS, "The distinct principals of the added rows."),
    _field("principal_at", "bytes", "Per added row: its principal's position in principals (u32 little-endian)."),
    _field("hosts", _STRINGS, "The distinct hosts of the added rows."),
    _field("host_at", "bytes", "Per added row: its host's position in hosts (u32 little-endian)."),
    _field("operations", "bytes", "Per added row: its AclOperation code."),
    _field("permission_types", "bytes", "Per added row: its AclPermissionType code."),
)
_SCRAM = _record("ScramRow", "A SCRAM credential as it stands; salt and keys stay sealed.", *SCRAM_ROW_FIELDS)
_SCRAM_DELETED = _record("ScramDeletedRow", "A SCRAM credential deleted.",
                         _field("deleted_user", "string", "The user whose credential is deleted."),
                         _field("deleted_mechanism", "int", "ScramMechanism code."))
_TOKEN = _record("TokenRow", "A delegation token as it stands (no HMAC).", *TOKEN_ROW_FIELDS)
_TOKEN_REMOVED = _record("TokenRemovedRow", "A delegation token removed.",
                         _field("removed_token_id", "string", "The token's id."))
_QUOTA = _record("QuotaRow", "An entity's client quotas as they stand.",
                 _field("quota_entity", "string", "The entity in its canonical form (ClientQuotaAltered.entity)."),
                 _field("quota_values", {"type": "map", "values": "double"}, "Quota key -> value (empty: none)."))
_SETTING = _record("SettingChangeRow", "A logged setting as it stands.",
                   _field("setting_name", "string", "The setting's name, e.g. super.users."),
                   _field("setting_value", ["null", "string"], "Its value in text form (null: its default)."))
_BRANCHES = (_META, _ACLS, _SCRAM, _SCRAM_DELETED, _TOKEN, _TOKEN_REMOVED, _QUOTA, _SETTING)
SCHEMA = {
    "type": "record",
    "name": "SecurityDeltaRow",
    "namespace": "secmeta.delta",
    "doc": "One part of a delta checkpoint: the net change from a full checkpoint's image to a later offset.",
    "fields": [_field("row", list(_BRANCHES), "The part.")],
}
(_META_NAME, _ACLS_NAME, _SCRAM_NAME, _SCRAM_DELETED_NAME, _TOKEN_NAME, _TOKEN_REMOVED_NAME, _QUOTA_NAME,
 _SETTING_NAME) = (f"secmeta.delta.{branch['name']}" for branch in _BRANCHES)
_U32 = next(code for code in "IL" if array(code).itemsize == 4)


def _enums(kind) -> list:
    """Code -> member of an int enum, as a list indexed by code (None where no member has the code)."""
    members = [None] * 256
    for member in kind:
        members[int(member)] = member
    return members


_RESOURCE_TYPES, _PATTERN_TYPES = _enums(ResourceType), _enums(PatternType)
_OPERATIONS, _PERMISSIONS = _enums(AclOperation), _enums(AclPermissionType)


class SecurityDeltaSnapshot:
    """SnapshotCodec for ``DeltaState`` (rows only; a file is checked as any snapshot before a row is read)."""

    kind = "security-delta"
    schema = SCHEMA

    def rows(self, state: DeltaState) -> Iterator[dict]:
        net = state.net
        yield {"row": (_META_NAME, {"base_offset": state.base_offset, "next_offset": state.next_offset})}
        changes = list(net.acls.items())
        for at in range(0, len(changes), _CHUNK):
            yield {"row": (_ACLS_NAME, _acl_columns(changes[at:at + _CHUNK], net.acls_held))}
        for user, by_mechanism in net.scram.items():
            for mechanism, entry in by_mechanism.items():
                if entry is None:
                    yield {"row": (_SCRAM_DELETED_NAME, {"deleted_user": user, "deleted_mechanism": int(mechanism)})}
                    continue
                secret = entry.secret
                yield {"row": (_SCRAM_NAME, {"user": user, "mechanism": int(entry.mechanism),
                                             "iterations": entry.iterations, "key_id": secret.key_id,
                                             "nonce": secret.nonce, "ciphertext": secret.ciphertext})}
        for token_id, token in net.tokens.items():
            if token is None:
                yield {"row": (_TOKEN_REMOVED_NAME, {"removed_token_id": token_id})}
            else:
                yield {"row": (_TOKEN_NAME, {"token_id": token.token_id, "owner": token.owner,
                                             "requester": token.requester, "renewers": list(token.renewers),
                                             "issue_timestamp_ms": token.issue_timestamp_ms,
                                             "expiry_timestamp_ms": token.expiry_timestamp_ms,
                                             "max_timestamp_ms": token.max_timestamp_ms})}
        for entity, values in net.quotas.items():
            yield {"row": (_QUOTA_NAME, {"quota_entity": entity, "quota_values": dict(values)})}
        for name, value in net.settings.items():
            yield {"row": (_SETTING_NAME, {"setting_name": name, "setting_value": value})}

    def build(self, rows: Iterable[dict], section: memoryview | None = None, *, vouched: bool = True) -> DeltaState:
        """The delta of a file's rows (CorruptSnapshotError when they do not hold one)."""
        if section is not None:
            raise CorruptSnapshotError("a delta checkpoint has no binary section")
        acls: dict[str, AclRow | None] = {}
        held: set[str] = set()
        where: dict[str, tuple[int, int]] = {}  # where the base file's table holds them, when recorded for every one
        scram: dict[str, dict[ScramMechanism, ScramEntry | None]] = {}
        tokens: dict[str, TokenInfo | None] = {}
        quotas: dict[str, dict[str, float]] = {}
        settings: dict[str, str | None] = {}
        offsets: tuple[int, int] | None = None
        try:
            for wrapped in rows:
                row = wrapped["row"]
                if "base_offset" in row:
                    offsets = (row["base_offset"], row["next_offset"])
                elif "added" in row:
                    acls.update(_acl_changes(row))
                    ids_held = _held(row)
                    held.update(ids_held)
                    where.update(_where(row, ids_held))
                elif "user" in row:
                    mechanism = ScramMechanism(row["mechanism"])
                    scram.setdefault(row["user"], {})[mechanism] = ScramEntry(
                        mechanism, row["iterations"], SealedSecret(row["key_id"], row["nonce"], row["ciphertext"]))
                elif "deleted_user" in row:
                    scram.setdefault(row["deleted_user"], {})[ScramMechanism(row["deleted_mechanism"])] = None
                elif "token_id" in row:
                    tokens[row["token_id"]] = TokenInfo.of(row)
                elif "removed_token_id" in row:
                    tokens[row["removed_token_id"]] = None
                elif "quota_entity" in row:
                    quotas[row["quota_entity"]] = dict(row["quota_values"])
                else:
                    settings[row["setting_name"]] = row["setting_value"]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise CorruptSnapshotError(f"its rows do not hold a delta: {exc!r}") from None
        if offsets is None or not 0 <= offsets[0] < offsets[1]:
            raise CorruptSnapshotError(f"its rows do not name a base before the delta's offset: {offsets}")
        located = where if held and len(where) == len(held) else held
        return DeltaState(offsets[0], offsets[1], NetChanges(acls, scram, tokens, quotas, settings, located))


def _acl_columns(changes: list[tuple[str, AclRow | None]], held: Container[str] | None) -> dict:
    """An AclChangesRow of ``changes`` (id, row or None), ``held`` the ids the base holds (None: unknown, so
    every id is marked held and looked up)."""
    rows = [row for _, row in changes if row is not None]
    names: dict[str, int] = {}
    principals: dict[str, int] = {}
    hosts: dict[str, int] = {}

    def positions(strings: dict[str, int], column: int) -> bytes:
        return _u32_bytes(strings.setdefault(row[column], len(strings)) for row in rows)  # type: ignore[arg-type]

    held_flags = bytes(held is None or acl_id in held for acl_id, _ in changes)
    where = cast(dict[str, tuple[int, int]], held) if type(held) is dict else {}
    located = [where.get(acl_id) for acl_id in compress((acl_id for acl_id, _ in changes), held_flags)]
    if None in located:
        located = []
    return {
        "acl_ids": [acl_id for acl_id, _ in changes],
        "added": bytes(row is not None for _, row in changes),
        "held": held_flags,
        "held_positions": _u32_bytes(at[0] for at in located),  # type: ignore[index]  # no None left
        "held_groups": _u32_bytes(at[1] for at in located),  # type: ignore[index]
        "resource_types": bytes(row[1] for row in rows),
        "pattern_types": bytes(row[3] for row in rows),
        "name_at": positions(names, 2), "names": list(names),
        "principal_at": positions(principals, 4), "principals": list(principals),
        "host_at": positions(hosts, 5), "hosts": list(hosts),
        "operations": bytes(row[6] for row in rows),
        "permission_types": bytes(row[7] for row in rows),
    }


def _u32_bytes(values: Iterable[int]) -> bytes:
    """A column of u32s, little-endian."""
    at = array(_U32, values)
    if sys.byteorder == "big":
        at.byteswap()
    return at.tobytes()


def _u32s(blob: bytes, count: int) -> array:
    values = array(_U32)
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    if len(values) != count:
        raise ValueError(f"a position column holds {len(values)} entries, not {count}")
    return values


def _members(codes: bytes, members: list, count: int) -> list:
    """The enum members of a code column (ValueError for a code no member has, or a column of another length)."""
    found = list(map(members.__getitem__, codes))
    if len(found) != count or None in found:
        raise ValueError("a code column holds an unknown code or disagrees in length")
    return found


def _held(row: dict) -> list[str]:
    """The ids of an AclChangesRow the base holds."""
    ids, held = row["acl_ids"], row["held"]
    if len(held) != len(ids) or not set(held) <= {0, 1}:
        raise ValueError("the held column disagrees with the ids")
    return list(compress(ids, held))


def _where(row: dict, held: list[str]) -> Iterator[tuple[str, tuple[int, int]]]:
    """(id, (position, group)) of an AclChangesRow's ids the base holds, where its file's table holds them (none when
    not recorded: a file written before the columns were, or against a base not read from its file)."""
    positions, groups = row.get("held_positions") or b"", row.get("held_groups") or b""
    if not positions and not groups:
        return iter(())
    return zip(held, zip(_u32s(positions, len(held)), _u32s(groups, len(held))))


def _acl_changes(row: dict) -> Iterator[tuple[str, AclRow | None]]:
    """The (id, row or None) of an AclChangesRow, in order, each row a tuple as replay records it (enums as the
    log's decoder gives them); a few C-level passes per column."""
    ids, added = row["acl_ids"], row["added"]
    if len(added) != len(ids) or not set(added) <= {0, 1}:
        raise ValueError("the added column disagrees with the ids")
    added_ids = list(compress(ids, added))
    count = len(added_ids)
    names, principals, hosts = row["names"], row["principals"], row["hosts"]
    rows = iter(zip(
        added_ids,
        _members(row["resource_types"], _RESOURCE_TYPES, count),
        map(names.__getitem__, _u32s(row["name_at"], count)),
        _members(row["pattern_types"], _PATTERN_TYPES, count),
        map(principals.__getitem__, _u32s(row["principal_at"], count)),
        map(hosts.__getitem__, _u32s(row["host_at"], count)),
        _members(row["operations"], _OPERATIONS, count),
        _members(row["permission_types"], _PERMISSIONS, count),
    ))
    return zip(ids, [next(rows) if flag else None for flag in added])
