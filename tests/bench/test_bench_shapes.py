"""The benchmarks' workload shapes (scripts/bench/shapes.py): what they log is what the public API logs."""

from __future__ import annotations

import pytest

from scripts.bench import shapes
from secmeta.events.records import AclCreated
from secmeta.events.types import AclBindingFilter
from tests.storekit import ADMIN, store_at

N = 2500


def _held(store) -> set:
    return {binding for _, binding in store.image.acls}


@pytest.mark.parametrize("shape", shapes.NAMES)
def test_the_bulk_log_of_a_shape_holds_what_the_same_requests_through_the_api_hold(tmp_path, keyring, shape):
    """A store opened on the shape's bulk-written log holds exactly the ACLs its requests leave through
    create_acls / delete_acls (exact filters), n of them, each created request by request without an error."""
    shapes.write_log(tmp_path / "bulk", keyring, shape, N)
    with store_at(tmp_path / "bulk", keyring) as bulk:
        bulk_acls = _held(bulk)
    with store_at(tmp_path / "api", keyring) as api:
        for request in shapes.shape_events(shape, N):
            if type(request[0]) is AclCreated:
                assert not any(api.create_acls([e.binding for e in request], context=ADMIN))
            else:
                results = api.delete_acls([AclBindingFilter.of(*_fields(e.binding)) for e in request], context=ADMIN)
                assert [r.acls for r in results] == [(e.binding,) for e in request]
        api_acls = _held(api)
    assert bulk_acls == api_acls == {b for _, b in shapes.final_pairs(shape, N)}
    assert len(api_acls) == N


def _fields(binding):
    p, e = binding.pattern, binding.entry
    return p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission_type


def test_the_diverse_shape_is_the_one_issue_24_observed():
    """About ten principals per resource, mostly one client address, mixed patterns, ~7% more events than ACLs."""
    d = shapes.describe("diverse", 20_000)
    assert d["acls"] == 20_000 and 8 <= d["principals_per_resource"] <= 12
    assert 0.7 <= d["host_restricted"] <= 0.9 and 0.2 <= d["prefixed"] <= 0.4
    assert 1.05 <= d["events"] / d["acls"] <= 1.09


def test_requests_name_resources_of_the_shape():
    """Most authorize calls of every shape are allowed or denied by some ACL, not all answered 'no ACL'."""
    from secmeta.projections.acls import AclsImage
    from secmeta.projections.authorizer import authorize

    for shape in shapes.NAMES:
        image = AclsImage.of(shapes.final_pairs(shape, N))
        calls = shapes.requests(shape, N, 400)
        allowed = sum(authorize(image, *call) for call in calls)
        assert 0.05 < allowed / len(calls) < 0.95, shape
