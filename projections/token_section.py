"""Delegation tokens as a binary section of a snapshot (format 6): each token made when first asked for.

Issue 24: a snapshot listed each token as an Avro row, decoded and issued one by one at open, about
9 us a token (2.6 s for the 300k tokens of the 10M-event mixed log).  This section lists them as
columns (``section_arrays``): per token its id (a blob), owner and requester (positions in the
distinct principals), where its renewers start (positions in the distinct principals) and its three
times (int64).  A load decodes the ids with one ``split`` and maps each to its position; the image's
``LayeredMap`` makes a token's ``TokenInfo`` from the columns when it is first asked for, and later
images record only their changes over it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from secmeta.projections.layered_map import LayeredMap
from secmeta.projections.section_arrays import (
    SectionError,
    Strings,
    ascending,
    blob,
    narrow,
    pack,
    separator_code,
    separator_named,
    separator_of,
    unpack,
)
from secmeta.projections.tokens import TokenInfo, TokensImage

__all__ = ["MAGIC", "encode_tokens", "read_tokens"]

MAGIC = b"SMTOK\x00\x00\x06"
_NAMES = ("ids", "id_offsets", "principals", "principal_offsets", "owners", "requesters", "renewer_start",
          "renewers", "issued", "expiries", "maxima")
_COUNTS = 3  # tokens, distinct principals, separator code point + 1 (0: none)


def encode_tokens(tokens: Iterable[TokenInfo]) -> list[bytes]:
    """The section of these tokens, as byte strings to write in order."""
    listed = list(tokens)
    principals: dict[str, int] = {}

    def position(principal: str) -> int:
        return principals.setdefault(principal, len(principals))

    owners = [position(t.owner) for t in listed]
    requesters = [position(t.requester) for t in listed]
    renewers = [position(r) for t in listed for r in t.renewers]
    renewer_start, at = [0], 0
    for t in listed:
        at += len(t.renewers)
        renewer_start.append(at)
    ids = [t.token_id for t in listed]
    names = list(principals)
    separator = separator_of((ids, names))
    id_blob, id_offsets, _ = blob(ids, separator)
    principal_blob, principal_offsets, _ = blob(names, separator)
    times = [array("q", (getattr(t, name) for t in listed))
             for name in ("issue_timestamp_ms", "expiry_timestamp_ms", "max_timestamp_ms")]
    return pack(MAGIC, (len(listed), len(names), separator_code(separator)),
                [id_blob, id_offsets, principal_blob, principal_offsets, narrow(owners), narrow(requesters),
                 narrow(renewer_start), narrow(renewers), *times])


def read_tokens(section: memoryview) -> TokensImage:
    """The tokens of a section, each made when first asked for; SectionError when it holds no tokens.

    Every column is checked here, in C-level passes (counts, lengths, starts and offsets running from 0 to their
    column's end without decreasing, positions within the principals, ids distinct), so a damaged section is
    refused at open and making a token later never fails."""
    (count, n_principals, separator), arrays = unpack(section, MAGIC, _COUNTS, _NAMES)
    separator_text = separator_named(separator)
    columns = [Strings(arrays[name], arrays[f"{name[:-1]}_offsets"], separator_text) for name in ("ids", "principals")]
    for column in columns:
        column.check()  # every offset, though a column split by its separator reads only the first and last
    ids, principals = (column.all() for column in columns)
    for name, expected in (("owners", count), ("requesters", count), ("renewer_start", count + 1),
                           ("issued", count), ("expiries", count), ("maxima", count)):
        if len(arrays[name]) != expected:
            raise SectionError(f"token column {name} holds {len(arrays[name])} values, not {expected}")
    if len(ids) != count or len(principals) != n_principals:
        raise SectionError("the token ids or principals disagree with the section's counts")
    renewer_start, renewers = arrays["renewer_start"], arrays["renewers"]
    ascending(renewer_start, len(renewers), "the token renewers' starts")
    for name in ("owners", "requesters", "renewers"):
        if arrays[name].format not in "BHIQ" or max(arrays[name], default=-1) >= n_principals:  # none below 0
            raise SectionError(f"token column {name} names a principal the section does not list")
    positions = dict(zip(ids, range(count), strict=True))
    if len(positions) != count:
        raise SectionError("the section lists a token id twice")
    owners, requesters = arrays["owners"], arrays["requesters"]
    issued, expiries, maxima = arrays["issued"], arrays["expiries"], arrays["maxima"]

    def token(i: int) -> TokenInfo:  # every column checked above: it cannot fail (it may run during a login)
        a, b = renewer_start[i], renewer_start[i + 1]
        return TokenInfo(ids[i], principals[owners[i]], principals[requesters[i]],
                         tuple(principals[r] for r in renewers[a:b]), issued[i], expiries[i], maxima[i])

    return TokensImage(LayeredMap(positions, token)) if count else TokensImage.EMPTY
