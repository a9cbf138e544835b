"""On random logs of every benchmark shape, a snapshot-loaded image, a replayed image and an image built write by
write answer every authorize and describe alike (issue 24: the index is made node by node on first use).

The logs are the benchmark's own shapes (scripts/bench/shapes.py: issue 15's, Kafka's AuthorizerBenchmark, the
diverse one with address-restricted ACLs and deletions) at small sizes and random seeds; the calls are the
shape's request mix plus random principals and hosts, asked in a random order, so nodes are made in any order
and some never are.  The brute-force reading of the rules (test_authorizer_properties) is the reference.
"""

import random
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench import shapes
from secmeta.events.keyring import Keyring
from secmeta.events.records import Envelope
from secmeta.events.types import AclBindingFilter, AclOperation, PatternType, ResourceType
from secmeta.projections.acls import AclsImage
from secmeta.projections.authorizer import authorize, authorized_operations
from secmeta.projections.image import SecurityDelta, SecurityImage
from secmeta.projections.image_snapshot import SecurityImageSnapshot
from secmeta.projections.snapshot import read_snapshot, write_snapshot
from tests.projections.test_authorizer_properties import brute_authorize

CODEC = SecurityImageSnapshot()
logs = st.tuples(st.sampled_from(shapes.NAMES), st.integers(1, 400), st.integers(0, 2**16))


def replayed(requests, base: SecurityImage = SecurityImage.EMPTY, *, per_request: bool = False) -> SecurityImage:
    """The image after the requests' events: one delta for all (a replay), or one per request (writes)."""
    image, offset = base, base.next_offset
    delta = SecurityDelta(image)
    for request in requests:
        delta.replay_all([Envelope(offset + i, 0, "User:admin", "*", "r", event) for i, event in enumerate(request)])
        offset += len(request)
        if per_request:
            image = delta.apply(offset)
            delta = SecurityDelta(image)
    return delta.apply(offset)


KEYRING = Keyring.generate()


def snapshot_loaded(image: SecurityImage, *, signed: bool = False, principals_when_read: bool = False
                    ) -> SecurityImage:
    """The image as a snapshot of it loads: unsigned (read with no keyring: its section checked whole at open), or
    signed and read as a store's open reads it (its HMAC vouching for the section, each type's maps made when
    first read), or with ``principals_when_read`` as time travel reads a checkpoint file (each node's principals
    listed when the node is first read)."""
    keyring = KEYRING if signed else None
    with tempfile.TemporaryDirectory() as directory:
        info = write_snapshot(directory, CODEC, image, next_offset=image.next_offset, link=b"\0" * 32,
                              timestamp_ms=0, keyring=keyring)
        return read_snapshot(info.path, SecurityImageSnapshot(principals_when_read=principals_when_read),
                             keyring)[1]


def calls(shape: str, n: int, seed: int, held: list) -> list[tuple]:
    """The shape's request mix, plus calls by the principals and from the hosts of held ACLs, shuffled."""
    rng = random.Random(seed)
    out = list(shapes.requests(shape, n, 60, seed))
    for _ in range(60):
        b = rng.choice(held)
        host = b.entry.host if b.entry.host != "*" and "/" not in b.entry.host else f"10.0.0.{rng.randrange(9)}"
        name = b.pattern.name + ("x" if b.pattern.pattern_type == PatternType.PREFIXED else "")
        out.append((b.entry.principal, host, rng.choice(list(AclOperation)[3:]), b.pattern.resource_type, name))
    rng.shuffle(out)
    return out


def answers(acls: AclsImage, asked: list[tuple]) -> list:
    """authorize, authorized_operations and describe of each request.  Each describe is also asked as bindings
    (``bindings``, what describe_acls answers, read without ids), all of them first (no node made whole by a
    describe yet), and must give the bindings of the pairs describe gives."""
    filters = [[AclBindingFilter.of(resource_type, name, PatternType.MATCH),
                AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY, principal),
                AclBindingFilter.of(resource_type, name, PatternType.MATCH, host=host)]
               for principal, host, _, resource_type, name in asked]
    bindings = [sorted(acls.bindings(f), key=repr) for fs in filters for f in fs]
    out = []
    for (principal, host, operation, resource_type, name), fs in zip(asked, filters, strict=True):
        out.append(authorize(acls, principal, host, operation, resource_type, name))
        out.append(authorized_operations(acls, principal, host, resource_type, name))
        out.extend(sorted(acls.describe(f), key=repr) for f in fs)
    described = [sorted((binding for _, binding in pairs), key=repr) for k, pairs in enumerate(out) if k % 5 > 1]
    assert bindings == described
    return out


@settings(max_examples=30, deadline=None)
@given(logs, st.integers(0, 2**16), st.booleans(), st.booleans())
def test_a_snapshot_loaded_image_answers_as_the_replayed_and_the_written_ones(log, order, signed, when_read):
    """Snapshot-loaded (signed or not; each node's principals listed at load or when the node is first read),
    replayed (one delta) and written (a delta per request) images of one shape's log give the same authorize,
    authorized_operations and describe answers, which are the rules' brute-force answers, and the same binding for
    every id (review 27: an id lookup on a loaded image raised AttributeError)."""
    shape, n, seed = log
    requests = shapes.shape_events(shape, n, seed)
    replay = replayed(requests)
    written = replayed(requests, per_request=True)
    loaded = snapshot_loaded(replay, signed=signed, principals_when_read=when_read)
    held = [b for _, b in shapes.final_pairs(shape, n, seed)]
    asked = calls(shape, n, order, held)
    expected = answers(replay.acls, asked)
    assert answers(loaded.acls, asked) == expected == answers(written.acls, asked)
    assert [expected[5 * i] for i in range(len(asked))] == [
        brute_authorize(held, *call, supers=set(), allow_if_no_acl=False) for call in asked]
    assert loaded == replay == written and sorted(loaded.acls) == sorted(replay.acls)
    assert all(loaded.acls.get(acl_id) == binding for acl_id, binding in replay.acls) and len(loaded.acls) == len(replay.acls)
    assert loaded.acls.get("00000000-0000-0000-0000-000000000000") is None


@settings(max_examples=20, deadline=None)
@given(logs, st.integers(1, 100))
def test_writes_after_a_snapshot_load_give_the_replayed_image(log, cut):
    """Loading a snapshot of the first requests, asking it a few things (some nodes made, most not), snapshotting
    it again and loading that, then writing the rest request by request gives the image a replay of all of them
    gives."""
    shape, n, seed = log
    requests = shapes.shape_events(shape, n, seed)
    cut = min(cut, len(requests))
    loaded = snapshot_loaded(replayed(requests[:cut]), signed=True)
    held = [b for _, b in shapes.final_pairs(shape, n, seed)]
    answers(loaded.acls, calls(shape, n, seed, held)[:5])
    again = snapshot_loaded(loaded)
    assert again == loaded == replayed(requests[:cut])
    assert replayed(requests[cut:], again, per_request=True) == replayed(requests)


def test_threads_making_the_same_nodes_at_once_answer_alike():
    """Four threads asking a freshly loaded image the same calls at once (each node made by whichever thread
    reaches it first, maybe twice) all get the answers a replayed image gives."""
    from concurrent.futures import ThreadPoolExecutor

    requests = shapes.shape_events("diverse", 3000, 7)
    replay = replayed(requests)
    loaded = snapshot_loaded(replay, signed=True)  # each type's maps made by whichever thread reads it first, too
    asked = calls("diverse", 3000, 7, [b for _, b in shapes.final_pairs("diverse", 3000, 7)]) * 3
    expected = answers(replay.acls, asked)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: answers(loaded.acls, asked), range(4)))
    assert got == [expected] * 4 and loaded == replay
