"""Snapshot codec for SecurityImage: a meta row, credentials, tokens, client quotas, settings, and the ACL index.

Since format 6 the snapshot's binary section holds the ACL index (``acl_section``: its columns read in
place from the file's bytes, no work per ACL at open, each node made when first used) and the
delegation tokens (``token_section``: each token made when first asked for), after a header giving
each part's size; the rows hold one branch of a union each: a meta row (the image's next_offset,
written first), a SCRAM credential (its secret stays sealed), an entity's client quotas or a setting.
Format 5's section was the ACL index alone, and its tokens were rows (``TokenRow``): both still load.
Formats 3 and 4 listed the ACL index as rows too (``AclNodesRow``): whole index nodes in index
order, as columns: per node its pattern and how many principals' groups it holds, per group its
principal (a position in the chunk's distinct principals) and how many ACLs, per ACL its id, host (a
position in the chunk's distinct hosts, since format 4; format 3: a host per ACL), operation and
permission, strings of a column joined by a separator none of them holds (or, in a chunk that holds
every character, each written as its length, ':' and itself, flagged by an empty separator).  Both
still load: their chunks are appended to one ``AclTable`` with a few bulk operations per column.
Rows are written with explicit branch names; the reader tells the branches apart by their fields."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import cast

from secmeta.events.keyring import SealedSecret
from secmeta.events.types import (
    PatternType,
    ScramMechanism,
)
from secmeta.projections.acl_deferred import Deferred
from secmeta.projections.acl_index import AclIndex, Group, Lazy, Node, Patched
from secmeta.projections.acl_section import encode_section, read_section
from secmeta.projections.acl_table import AclTable, TableError
from secmeta.projections.acls import AclsImage
from secmeta.projections.image import SecurityImage
from secmeta.projections.quotas import QuotasDelta, QuotasImage
from secmeta.projections.scram import ScramDelta, ScramImage
from secmeta.projections.section_arrays import SectionError, aligned
from secmeta.projections.settings import SettingsDelta, SettingsImage
from secmeta.projections.snapshot import CorruptSnapshotError
from secmeta.projections.token_section import encode_tokens, read_tokens
from secmeta.projections.tokens import TokenInfo, TokensDelta, TokensImage

__all__ = ["SecurityImageSnapshot"]


def _field(name: str, avro_type, doc: str) -> dict:
    return {"name": name, "type": avro_type, "doc": doc}



#: A SCRAM credential's and a token's row fields, as full snapshots and delta checkpoint files both write them.
SCRAM_ROW_FIELDS = [
    _field("user", "string", "The user the credential belongs to."),
    _field("mechanism", "int", "ScramMechanism code (1 SHA-256, 2 SHA-512)."),
    _field("iterations", "int", "PBKDF2 iteration count."),
    _field("key_id", "string", "Keyring key id the secret is sealed under."),
    _field("nonce", "bytes", "AES-GCM nonce of the sealed secret."),
    _field("ciphertext", "bytes", "AES-GCM ciphertext and tag of the sealed secret."),
]
TOKEN_ROW_FIELDS = [
    _field("token_id", "string", "The token's id."),
    _field("owner", "string", "Owner principal."),
    _field("requester", "string", "Principal that requested the token."),
    _field("renewers", {"type": "array", "items": "string"}, "Renewer principals."),
    _field("issue_timestamp_ms", "long", "Issue time, epoch ms."),
    _field("expiry_timestamp_ms", "long", "Expiry time, epoch ms."),
    _field("max_timestamp_ms", "long", "Maximum lifetime end, epoch ms."),
]

_META = {
    "type": "record",
    "name": "MetaRow",
    "doc": "Where the image stands in the log (the first row).",
    "fields": [_field("next_offset", "long", "The offset of the first event not in the image.")],
}
_SCRAM = {
    "type": "record",
    "name": "ScramRow",
    "doc": "One SCRAM credential; salt and keys stay sealed.",
    "fields": SCRAM_ROW_FIELDS,
}
_ACL_NODES = {
    "type": "record",
    "name": "AclNodesRow",
    "doc": "Whole ACL index nodes in index order: per node its groups, per group its ACLs.",
    "fields": [
        _field("separator", "string", "One character no string of this row holds; joins each string column. "
               "Empty when the row holds every character: each string is then its length in decimal, ':' and itself."),
        _field("resource_types", "bytes", "Per node: its ResourceType code."),
        _field("pattern_types", "bytes", "Per node: its PatternType code (3 LITERAL, 4 PREFIXED)."),
        _field("names", "string", "Per node: its resource name or prefix (joined by the separator)."),
        _field("group_counts", "bytes", "Per node: how many principals' groups it holds (uint32 little-endian)."),
        _field("principals", "string", "The row's distinct principals, Type:Name (joined)."),
        _field("group_principals", "bytes", "Per group, nodes in order: its principal's position in principals (uint32 little-endian)."),
        _field("acl_counts", "bytes", "Per group: how many ACLs it holds (uint32 little-endian)."),
        _field("acl_ids", "string", "Per ACL, groups in order: its id (joined)."),
        _field("hosts", "string", "The row's distinct ACL hosts, * for any (joined); in format 3, per ACL its host."),
        _field("acl_hosts", "bytes", "Per ACL: its host's position in hosts (uint32 little-endian; since format 4)."),
        _field("operations", "bytes", "Per ACL: its AclOperation code."),
        _field("permission_types", "bytes", "Per ACL: its AclPermissionType code."),
    ],
}
_TOKEN = {
    "type": "record",
    "name": "TokenRow",
    "doc": "One delegation token (no HMAC); formats 3 to 5 (since format 6 tokens are in the section).",
    "fields": TOKEN_ROW_FIELDS,
}

_QUOTA = {
    "type": "record",
    "name": "QuotaRow",
    "doc": "The client quotas of one entity.",
    "fields": [
        _field("quota_entity", "string", "The entity in its canonical form (ClientQuotaAltered.entity)."),
        _field("quota_values", {"type": "map", "values": "double"}, "Quota key -> value."),
    ],
}

_SETTING = {
    "type": "record",
    "name": "SettingRow",
    "doc": "One logged setting (SecuritySettingAltered) as it stands.",
    "fields": [
        _field("setting_name", "string", "The setting's name, e.g. super.users."),
        _field("setting_value", "string", "Its value in text form."),
    ],
}

SCHEMA = {
    "type": "record",
    "name": "SecurityImageRow",
    "namespace": "secmeta.snapshot",
    "doc": "One part of a SecurityImage snapshot.",
    "fields": [
        _field(
            "row",
            [_ACL_NODES, _SCRAM, _TOKEN, _META, _QUOTA, _SETTING],
            "The part: a chunk of ACLs, a credential, a token, the meta row, an entity's client quotas or a setting.",
        )
    ],
}


_META_NAME, _SCRAM_NAME, _ACL_NODES_NAME, _TOKEN_NAME, _QUOTA_NAME, _SETTING_NAME = (
    f"secmeta.snapshot.{r['name']}" for r in (_META, _SCRAM, _ACL_NODES, _TOKEN, _QUOTA, _SETTING)
)
_U32 = next(code for code in "IL" if array(code).itemsize == 4)
_PARTS = struct.Struct("<8sQQ")  # IMAGE_MAGIC, the ACL section's size, the token section's size (format 6)
IMAGE_MAGIC = b"SMIMG\x00\x00\x06"


class SecurityImageSnapshot:
    """SnapshotCodec for SecurityImage; ``build`` restores next_offset from the meta row.

    A snapshot read without a keyring (``build``'s ``vouched=False``: nothing but a CRC, which anyone can compute,
    vouches for it) has its ACL section checked whole at open (``MappedAclTable._check_whole``)."""

    kind = "security-image"
    schema = SCHEMA

    def __init__(self, *, principals_when_read: bool = False):
        """``principals_when_read``: a signed snapshot's ACL index lists each node's groups' principals when the node
        is first read (time travel's checkpoint files: a point reads a few nodes), not all at load (a store or a
        follower serving authorize: its first pass would pay it node by node); ``MappedAclTable``."""
        self.principals_when_read = principals_when_read

    def rows(self, image: SecurityImage) -> Iterator[dict]:
        yield {"row": (_META_NAME, {"next_offset": image.next_offset})}
        for user, entry in image.scram:
            secret = entry.secret
            yield {
                "row": (
                    _SCRAM_NAME,
                    {
                        "user": user,
                        "mechanism": int(entry.mechanism),
                        "iterations": entry.iterations,
                        "key_id": secret.key_id,
                        "nonce": secret.nonce,
                        "ciphertext": secret.ciphertext,
                    },
                )
            }
        for entity, values in image.quotas:
            yield {"row": (_QUOTA_NAME, {"quota_entity": entity, "quota_values": dict(values)})}
        for name, value in image.settings:
            yield {"row": (_SETTING_NAME, {"setting_name": name, "setting_value": value})}

    def section(self, image: SecurityImage) -> list[bytes]:
        """The ACL index (``acl_section``) and the tokens (``token_section``) as the binary section."""
        return image_section(_NodesRow.of(image.acls.index).section(), encode_tokens(image.tokens))

    def build(self, rows: Iterable[dict], section: memoryview | None = None, *, vouched: bool = True
              ) -> SecurityImage:
        """The image of a snapshot's rows and (format 5) its ACL section."""
        scram = ScramDelta(ScramImage.EMPTY)
        tokens = TokensDelta(TokensImage.EMPTY)
        quotas = QuotasDelta(QuotasImage.EMPTY)
        settings = SettingsDelta(SettingsImage.EMPTY)
        acls = _AclLoader()
        next_offset = 0
        for wrapped in rows:
            row = wrapped["row"]
            if "group_counts" in row:
                acls.add_nodes(row)
            elif "user" in row:
                scram.upsert(
                    row["user"],
                    ScramMechanism(row["mechanism"]),
                    row["iterations"],
                    SealedSecret(row["key_id"], row["nonce"], row["ciphertext"]),
                )
            elif "token_id" in row:
                tokens.issue(TokenInfo.of(row))
            elif "quota_entity" in row:
                for key, value in row["quota_values"].items():
                    quotas.set(row["quota_entity"], key, value)
            elif "setting_name" in row:
                settings.set(row["setting_name"], row["setting_value"])
            else:
                next_offset = row["next_offset"]
        if section is None:  # format 3 or 4
            acl_image, token_image = acls.image(), tokens.apply()
        else:
            acl_image, token_image = _sectioned(section, tokens.apply(), vouched, self.principals_when_read)
        return SecurityImage(scram.apply(), acl_image, token_image, next_offset, quotas.apply(), settings.apply())


def image_section(acls: list[bytes], tokens: list[bytes]) -> list[bytes]:
    """Format 6's section of an ACL section and a token section: their sizes, then each (8-byte aligned)."""
    acl_size, token_size = (sum(map(len, part)) for part in (acls, tokens))
    return [_PARTS.pack(IMAGE_MAGIC, acl_size, token_size), *acls, bytes(aligned(acl_size) - acl_size), *tokens]


def _sectioned(section: memoryview, token_rows: TokensImage, vouched: bool, principals_when_read: bool = False
               ) -> tuple[AclsImage, TokensImage]:
    """The ACLs and tokens of a section: format 6's parts, or format 5's ACL index (its tokens were rows)."""
    if section[:len(IMAGE_MAGIC)] != IMAGE_MAGIC:
        return _mapped_acls(section, vouched, principals_when_read), token_rows
    if len(section) < _PARTS.size:
        raise CorruptSnapshotError("the image section is truncated")
    _, acl_size, token_size = _PARTS.unpack_from(section)
    token_at = _PARTS.size + aligned(acl_size)
    if token_at + token_size > len(section) or token_rows:
        raise CorruptSnapshotError("the image section's parts run past it, or its tokens are rows too")
    try:
        tokens = read_tokens(section[token_at:token_at + token_size])
    except SectionError as exc:
        raise CorruptSnapshotError(f"the token section does not hold tokens: {exc}") from None
    return _mapped_acls(section[_PARTS.size:_PARTS.size + acl_size], vouched, principals_when_read), tokens


def _mapped_acls(section: memoryview, vouched: bool, principals_when_read: bool = False) -> AclsImage:
    """The ACL image of a format-5 section: its ids and nodes read in place (checked whole unless ``vouched``)."""
    try:
        table = read_section(section, vouched=vouched, principals_when_read=principals_when_read)
        if not table.ids:
            return AclsImage.EMPTY
        deferred = Deferred.of(table)
        return AclsImage(deferred.acls, deferred.index)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise _corrupt(exc) from None


def _nodes(index: AclIndex) -> Iterator[tuple[int, int, str, Node | int, AclTable | None]]:
    """Every node of the index in index order: (resource type, pattern type, name, node or the placeholder of
    one not made yet, the table that would make it)."""
    for resource_type, t in enumerate(index.types):
        for pattern_type, nodes in ((PatternType.LITERAL, t.literal), (PatternType.PREFIXED, t.prefixed)):
            source = nodes.source
            deferred = getattr(source, "__self__", None)
            for name, node in nodes.raw_items():
                if type(node) is Lazy and type(node.source) is not Patched:
                    # a view of a table's node (a batch's, or a loaded one): copied from its columns
                    yield resource_type, pattern_type, name, node.at, node.source
                    continue
                if type(node) is not int:
                    yield resource_type, pattern_type, name, node, None
                    continue
                columns = deferred.columns_of(node) if isinstance(deferred, Deferred) else cast(AclTable, source)
                if columns is None:  # a node a deferred image changed: made
                    yield resource_type, pattern_type, name, source(node), None
                else:
                    yield resource_type, pattern_type, name, node, columns


class _NodesRow:
    """The columns of one AclNodesRow as they are gathered."""

    def __init__(self) -> None:
        self.resource_types, self.pattern_types, self.names = bytearray(), bytearray(), []
        self.group_counts, self.group_principals, self.acl_counts = array(_U32), array(_U32), array(_U32)
        self.principals: dict[str, int] = {}
        self.hosts: dict[str, int] = {}
        self.ids, self.acl_hosts, self.operations, self.permissions = [], array(_U32), bytearray(), bytearray()

    @classmethod
    def of(cls, index: AclIndex) -> _NodesRow:
        """Every node of ``index``."""
        row = cls()
        for resource_type, pattern_type, name, node, source in _nodes(index):
            row.add_node(resource_type, pattern_type, name, node, source)
        return row

    def add_node(self, resource_type: int, pattern_type: int, name: str, node: Node | int,
                 source: AclTable | None) -> None:
        """A node, or (a placeholder) node ``node`` of table ``source``, copied from its columns."""
        if source is not None:
            self.add_columns(resource_type, pattern_type, name, source, cast(int, node))
        elif type(node) is Lazy:  # a view of a table's node with some groups replaced (``Patched``)
            self.add_patched(resource_type, pattern_type, name, node)
        else:
            self.add(resource_type, pattern_type, name, cast(Node, node))

    def section(self) -> list[bytes]:
        """The gathered nodes as a format-5 ACL section."""
        return encode_section(bytes(self.resource_types), bytes(self.pattern_types), self.names, self.group_counts,
                              list(self.principals), self.group_principals, self.acl_counts, self.ids,
                              list(self.hosts), self.acl_hosts, bytes(self.operations), bytes(self.permissions))

    def add(self, resource_type: int, pattern_type: int, name: str, node: Node) -> None:
        self.resource_types.append(resource_type)
        self.pattern_types.append(pattern_type)
        self.names.append(name)
        groups = list(node.groups())
        self.group_counts.append(len(groups))
        for group in groups:
            self._add_group(group)

    def _add_group(self, group: Group) -> None:
        """A group's ACLs, as its members list them."""
        members = group.fields()
        principals, hosts = self.principals, self.hosts
        self.group_principals.append(principals.setdefault(group.principal, len(principals)))
        self.acl_counts.append(len(members))
        for acl_id, host, operation, permission in members:
            self.ids.append(acl_id)
            self.acl_hosts.append(hosts.setdefault(host, len(hosts)))
            self.operations.append(operation)
            self.permissions.append(permission)

    def add_columns(self, resource_type: int, pattern_type: int, name: str, table: AclTable, i: int) -> None:
        """Node ``i`` of a table, as its columns list it."""
        self.resource_types.append(resource_type)
        self.pattern_types.append(pattern_type)
        self.names.append(name)
        first, end = table.group_start[i], table.group_start[i + 1]
        self.group_counts.append(end - first)
        for g, principal in zip(range(first, end), table.group_principals(i), strict=True):
            self._add_columns_group(table, g, principal)

    def _add_columns_group(self, table: AclTable, g: int, principal: str) -> None:
        """The ACLs of group ``g`` of a table (of ``principal``), as its columns list them."""
        a, b = table.acl_start[g], table.acl_start[g + 1]
        principals, hosts = self.principals, self.hosts
        self.group_principals.append(principals.setdefault(principal, len(principals)))
        self.acl_counts.append(b - a)
        self.ids += table.ids[a:b]
        self.acl_hosts.extend([hosts.setdefault(host, len(hosts)) for host in table.hosts[a:b]])
        self.operations += table.operations[a:b]
        self.permissions += table.permissions[a:b]

    def add_patched(self, resource_type: int, pattern_type: int, name: str, node: Lazy) -> None:
        """A view of a table's node with some groups replaced (``Patched``): those groups as ``add`` copies them, the
        others from the table's columns as ``add_columns`` does (no group made: a follower's checkpoint holds tens of
        thousands of such nodes on the diverse shape)."""
        source = cast(Patched, node.source)
        self.resource_types.append(resource_type)
        self.pattern_types.append(pattern_type)
        self.names.append(name)
        principals = list(node.principals)
        self.group_counts.append(len(principals))
        made, at, table = source.made, source.at, source.table
        for k, principal in enumerate(principals):
            group = made.get(k)
            if group is not None:
                self._add_group(group)
            else:
                self._add_columns_group(table, at[k], principal)

def _split(text: str, separator: str) -> list[str]:
    """The strings of a column joined by ``separator``, or each written as its length, ':' and itself when it is
    empty (format 4's chunks; ``tests/projections/older_snapshots.py`` writes them)."""
    if separator:
        return text.split(separator)
    strings, at = [], 0
    while at < len(text):
        colon = text.find(":", at)
        if colon < 0 or not text[at:colon].isdecimal():
            raise ValueError(f"a length-prefixed string column has no length at character {at}")
        end = colon + 1 + int(text[at:colon])
        if end > len(text):
            raise ValueError("a length-prefixed string runs past its column")
        strings.append(text[colon + 1:end])
        at = end
    return strings


def _u32_array(blob: bytes) -> array:
    values = array(_U32)
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values


class _AclLoader:
    """Gathers a snapshot's ACL index chunks into the columns of one ``AclTable``.

    A chunk's columns are split and appended as they are read (a few bulk operations each, no
    object per ACL); the table checks them and the image makes each node when it is first used.
    """

    def __init__(self) -> None:
        self.resource_types, self.pattern_types, self.names = bytearray(), bytearray(), []
        self.group_counts, self.acl_counts = array(_U32), array(_U32)
        self.principals: list[str] = []
        self.ids: list[str] = []
        self.hosts: list[str] = []
        self.operations, self.permissions = bytearray(), bytearray()

    def add_nodes(self, row: dict) -> None:
        """An ``AclNodesRow``."""
        try:
            self._add_nodes(row)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _corrupt(exc) from None

    def _add_nodes(self, row: dict) -> None:
        separator = row["separator"]
        names, principals, ids, hosts = (
            _split(row[column], separator) for column in ("names", "principals", "acl_ids", "hosts")
        )
        # A chunk lists each principal (and, since format 4, each host) once: its strings are shared as they are.
        group_principals = _u32_array(row["group_principals"])
        group_counts, acl_counts = _u32_array(row["group_counts"]), _u32_array(row["acl_counts"])
        if "acl_hosts" in row:  # format 4: a table of distinct hosts
            acl_hosts = list(map(hosts.__getitem__, _u32_array(row["acl_hosts"])))
        else:  # format 3: a host per ACL
            acl_hosts = list(map(sys.intern, hosts))
        operations, permissions = row["operations"], row["permission_types"]
        if not (
            len(names) == len(row["resource_types"]) == len(row["pattern_types"]) == len(group_counts)
            and sum(group_counts) == len(group_principals) == len(acl_counts)
            and sum(acl_counts) == len(ids) == len(acl_hosts) == len(operations) == len(permissions)
        ):
            raise ValueError("column lengths disagree")
        self.resource_types += row["resource_types"]
        self.pattern_types += row["pattern_types"]
        self.names += names
        self.group_counts += group_counts
        self.principals += map(principals.__getitem__, group_principals)
        self.acl_counts += acl_counts
        self.ids += ids
        self.hosts += acl_hosts
        self.operations += operations
        self.permissions += permissions

    def image(self) -> AclsImage:
        try:
            table = AclTable(bytes(self.resource_types), bytes(self.pattern_types), self.names, self.group_counts,
                             self.principals, self.acl_counts, self.ids, self.hosts, bytes(self.operations),
                             bytes(self.permissions))
            return AclsImage.of_table(table)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _corrupt(exc) from None


def _corrupt(exc: Exception) -> CorruptSnapshotError:
    problem = str(exc) if type(exc) in (ValueError, TableError, SectionError) else repr(exc)
    return CorruptSnapshotError(f"an ACL index chunk does not hold an index: {problem}")
