"""What a canonical UUID text is: one rule (``section_arrays.uuid_of``), asked of one id (a hash table's probe) and of
a snapshot's whole id column (``uuid_bytes``), checked against the ``uuid`` module's spelling."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from secmeta.events.records import AclCreated
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.section_arrays import Uuids, uuid_bytes, uuid_of
from tests.projections.test_shape_properties import snapshot_loaded


def _is_canonical(text: str) -> bool:
    """What ``uuid.UUID`` reads and ``str`` gives back unchanged (it also reads braces, ``urn:uuid:``, capitals and
    texts without dashes, none of which it gives back)."""
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _near(text: str) -> st.SearchStrategy[str]:
    """Texts a character or a convention away from the canonical ``text``."""
    plain = text.replace("-", "")
    return st.one_of(
        st.just(text),
        st.just(text.upper()),
        st.just("{" + text + "}"),
        st.just("urn:uuid:" + text),
        st.just(plain),
        st.integers(0, 35).map(lambda at: text[:at] + text[at + 1:]),  # one character short (a dash or a digit)
        st.tuples(st.integers(0, 36), st.sampled_from("0af-gG é\x00")).map(
            lambda cut: text[:cut[0]] + cut[1] + text[cut[0]:]),  # one character too many
        st.tuples(st.integers(0, 35), st.sampled_from("0af-gAF é\x00")).map(
            lambda cut: text[:cut[0]] + cut[1] + text[cut[0] + 1:]),  # one character changed
        st.integers(1, 4).map(lambda n: text[:8] + text[8:].replace("-", "", n)),  # dashes missing
        st.sampled_from([" " + text[1:], text[:-1] + "\n", plain[:8] + "-" + plain[8:12] + "-" + plain[12:] + "-0"]),
    )


_texts = st.uuids().map(str).flatmap(_near)


@given(_texts)
def test_one_id_is_a_canonical_uuid_exactly_when_the_uuid_module_spells_it_so(text):
    raw = uuid_of(text.encode())
    assert (raw is not None) == _is_canonical(text)
    if raw is not None:
        assert raw == uuid.UUID(text).bytes
        assert Uuids(memoryview(raw))[0] == text


@st.composite
def _cut_elsewhere(draw) -> list[str]:
    """Canonical texts laid end to end and cut again at other places (as many pieces): joined, they still read as
    UUIDs, but a 35 and a 37 are not two of them."""
    joined = "".join(map(str, draw(st.lists(st.uuids(), min_size=2, max_size=4))))
    count = len(joined) // 36
    cuts = sorted(draw(st.lists(st.integers(0, len(joined)), min_size=count - 1, max_size=count - 1)))
    return [joined[a:b] for a, b in zip([0, *cuts], [*cuts, len(joined)])]


@settings(max_examples=300)
@given(st.one_of(st.lists(_texts, max_size=5), _cut_elsewhere()))
def test_a_column_of_ids_agrees_with_each_id_alone(texts):
    """``uuid_bytes`` of a column (a snapshot's ids) is each id's 16 bytes when every one is canonical, else None,
    whatever its neighbours and wherever its texts are cut."""
    alone = [uuid_of(text.encode()) for text in texts]
    expected = None if None in alone else b"".join(alone)  # type: ignore[arg-type]
    assert uuid_bytes(texts) == expected
    if expected is not None:
        assert Uuids(memoryview(expected))[:] == texts


@settings(max_examples=20, deadline=None)
@given(_cut_elsewhere())
def test_ids_that_join_into_uuids_come_back_from_a_snapshot_as_written(ids):
    """A snapshot keeps a column of ids as 16 bytes each only when each is a canonical UUID: ids cut elsewhere
    (joined, they spell UUIDs) come back as they were written (with the old rule, as other, canonical ids)."""

    ids = list(dict.fromkeys(ids))  # an id is held once
    delta = SecurityDelta(SecurityImage.EMPTY)
    for i, acl_id in enumerate(ids):
        delta.replay(AclCreated(acl_id, AclBinding.of(ResourceType.TOPIC, f"t{i}", PatternType.LITERAL, "User:a",
                                                      "*", AclOperation.READ, AclPermissionType.ALLOW)))
    image = delta.apply(len(ids))
    assert sorted(acl_id for acl_id, _ in snapshot_loaded(image).acls) == sorted(ids)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.uuids().map(str), min_size=1, max_size=40, unique=True), st.booleans(),
       st.lists(st.one_of(st.integers(0, 39), _texts), max_size=60))
def test_a_loaded_table_finds_each_id_it_holds_at_its_position_however_often_asked(held, texts, asked):
    """A table read from a signed snapshot (``MappedAclTable.position``: its hash table, the ids it found kept) finds
    each id it holds at the position its id column lists, every time it is asked and after ``forget_made``, and no
    other id: a UUID's neighbours, texts a convention away, ids that are no UUID.  ``texts``: the ids written as other
    texts (a column kept as text, probed through its ``find``)."""
    from secmeta.projections.acl_deferred import deferred_of

    ids = [f"{acl_id}-x" for acl_id in held] if texts else held
    delta = SecurityDelta(SecurityImage.EMPTY)
    for i, acl_id in enumerate(ids):
        delta.replay(AclCreated(acl_id, AclBinding.of(ResourceType.TOPIC, f"t{i % 7}", PatternType.LITERAL,
                                                      f"User:u{i % 3}", "*", AclOperation.READ,
                                                      AclPermissionType.ALLOW)))
    image = snapshot_loaded(delta.apply(len(ids)), signed=True)
    table = deferred_of(image.acls.acls, image.acls.index).table  # type: ignore[union-attr]
    listed = table.section_ids.all()
    assert sorted(listed) == sorted(ids)
    for round_ in range(3):
        for item in asked:
            acl_id = ids[item % len(ids)] if isinstance(item, int) else item
            assert table.position(acl_id) == (listed.index(acl_id) if acl_id in listed else -1)
        if round_ == 1:
            table.forget_made()
