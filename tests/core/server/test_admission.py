"""The before-login class of connections (secmeta.core.server.admission): its caps hold whatever arrives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from secmeta.core.server.admission import Admission

HOSTS = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"])
#: ("open", host) | ("login" | "fail" | "close", index of an open connection)
STEPS = st.lists(st.one_of(st.tuples(st.just("open"), HOSTS),
                           st.tuples(st.sampled_from(["login", "fail", "close"]), st.integers(0, 60))), max_size=80)


@given(STEPS)
def test_caps_hold_and_logged_in_connections_are_never_evicted(steps):
    """Whatever opens, logs in, fails its login (held until answered) and closes: at most 6 before login (3 per
    address), at most 10 in all (4 per address), no logged-in connection and no held failure is ever evicted,
    and a new connection is refused only when its address's or the server's places are all taken by logged-in
    or held ones."""
    table = Admission(max_connections=10, max_connections_per_ip=4, max_before_login=6, max_before_login_per_ip=3)
    open_: dict[int, str] = {}
    logged_in: set[int] = set()
    held: set[int] = set()
    for n, (action, arg) in enumerate(steps):
        if action == "open":
            admitted = table.admit(n, arg)
            for victim, why in admitted.evicted:
                assert victim not in logged_in | held and "evicted before login" in why
                del open_[victim]
            if admitted.refused:
                mine = [c for c, h in open_.items() if h == arg]
                kept = logged_in | held
                assert len(mine) >= 4 and set(mine) <= kept or len(open_) >= 10 and set(open_) <= kept
                continue
            open_[n] = arg
        elif open_:
            connection = sorted(open_)[arg % len(open_)]
            if action == "fail" and connection not in logged_in:
                table.hold(connection)
                held.add(connection)
            elif action == "login" and connection not in logged_in | held:
                if table.establish(connection) is None:
                    logged_in.add(connection)
                else:                                   # no room for another logged-in connection: closed
                    table.forget(connection)
                    del open_[connection]
            elif action == "close":
                table.forget(connection)
                open_.pop(connection)
                logged_in.discard(connection)
                held.discard(connection)
        waiting = [c for c in open_ if c not in logged_in | held]
        assert table.before_login == len(waiting) <= 6 and table.held == len(held)
        assert len(table) == len(open_) <= 10 and len(logged_in) <= 10 - 6
        for host in {h for h in open_.values()}:
            assert sum(1 for c in waiting if open_[c] == host) <= 3
            assert sum(1 for h in open_.values() if h == host) <= 4


def test_the_flooding_address_loses_its_own_connections_first():
    """Over the overall cap, the oldest connection of the address holding the most is evicted, not a bystander's."""
    table = Admission(max_connections=100, max_connections_per_ip=50, max_before_login=4, max_before_login_per_ip=4)
    table.admit("bystander", "10.0.0.9")
    for i in range(3):
        table.admit(f"flood-{i}", "10.0.0.1")
    assert [victim for victim, _ in table.admit("flood-3", "10.0.0.1").evicted] == ["flood-0"]
    assert [victim for victim, _ in table.admit("flood-4", "10.0.0.2").evicted] == ["flood-1"]
