"""What server-first shows for a name without a credential: nothing tells it from a real user's.

Issue 22: an unknown user always got ``i=4096`` while a user created with 8192 showed 8192 (an
enumeration oracle).  Unknown names are now shown the shapes (count, salt length, salt alphabet) of
the store's real credentials, in their proportions, keyed per name and stable across restarts.
"""

from __future__ import annotations

import base64
import os
import string
from collections import Counter

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from secmeta.core.auth.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramServer,
    credential_from_salted_password,
)
from secmeta.core.auth.stand_in import CredentialShape, Population, SaltAlphabet, shape_of
from secmeta.core.types import ScramCredentialInfo, UserScramCredentialUpsertion
from secmeta.events.types import ScramMechanism
from tests.storekit import ADMIN, upsert

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
KEY = b"stand-in key for tests"
CLIENT_NONCE = "clientnonce"
NONCE_CHARSET = set(string.ascii_letters + string.digits + "-_")


def server_first(server: ScramServer, name: str) -> dict[str, str]:
    return dict(a.split("=", 1) for a in server.first(f"n,,n={name},r={CLIENT_NONCE}").split(","))


def shown(fields: dict[str, str]) -> tuple[int, int, SaltAlphabet]:
    """The shape server-first shows: iterations, salt length, salt alphabet."""
    shape = shape_of(int(fields["i"]), base64.b64decode(fields["s"]))
    return shape.iterations, shape.salt_length, shape.salt_alphabet


def java_salt(seed: int) -> bytes:
    """A salt as Kafka's Java AdminClient makes one: new BigInteger(130, random).toString(36)."""
    number = (seed * 0x9E3779B97F4A7C15F39CC0605CEDC835) % (1 << 130) or 1
    digits = ""
    while number:
        number, d = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return digits.encode()


# -- the distribution, over ScramServer -----------------------------------------------------------

shapes = st.builds(
    CredentialShape,
    st.sampled_from([MIN_ITERATIONS, 8192, 12288, MAX_ITERATIONS]),
    st.sampled_from([16, 26, 32, 64]),
    st.sampled_from(list(SaltAlphabet)),
).filter(lambda s: s.salt_alphabet is not SaltAlphabet.JAVA_BASE36 or s.salt_length <= 26)


@settings(max_examples=15, deadline=None)
@given(st.dictionaries(shapes, st.integers(1, 6), min_size=1, max_size=5), st.sampled_from([SHA256, SHA512]))
def test_unknown_names_follow_the_real_distribution_of_shapes(counts, mechanism):
    """Over 1,000 unknown names, each shape (count, salt length, alphabet) is shown in its share of the real
    credentials (within 0.07, over four standard deviations), and no shape is shown that no user has."""
    population = Population.of(shape for shape, n in counts.items() for _ in range(n))
    server = lambda: ScramServer(mechanism, {}.get, fake_salt_key=KEY, population=population)  # noqa: E731
    seen = Counter(shown(server_first(server(), f"probe-{i}")) for i in range(1000))
    total = sum(counts.values())
    real = {(s.iterations, s.salt_length, s.salt_alphabet): n / total for s, n in counts.items()}
    assert set(seen) <= set(real)
    for shape, share in real.items():
        assert abs(seen[shape] / 1000 - share) < 0.07, (shape, seen, real)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([MIN_ITERATIONS, 8192, MAX_ITERATIONS]),
                          st.sampled_from([b"", b"java"])), min_size=1, max_size=4),
       st.text(st.characters(codec="utf-8", exclude_characters=",=\x00"), min_size=1, max_size=12))
def test_every_field_has_the_shape_a_real_users_has(users, unknown):
    """A known user's and an unknown name's server-first are alike field by field: the server nonce has the
    same length and characters, and the unknown name's count, salt length and salt alphabet are a real user's."""
    credentials = {f"user{i}": credential_from_salted_password(SHA256, java_salt(i) if kind else os.urandom(32),
                                                               os.urandom(32), its)
                   for i, (its, kind) in enumerate(users)}
    population = Population.of(shape_of(c.iterations, c.salt) for c in credentials.values())
    assume(unknown not in credentials)
    fields = {name: server_first(ScramServer(SHA256, credentials.get, fake_salt_key=KEY, population=population),
                                 name) for name in ("user0", unknown)}
    known, stranger = fields["user0"], fields[unknown]
    for f in (known, stranger):
        assert f["r"].startswith(CLIENT_NONCE) and set(f["r"][len(CLIENT_NONCE):]) <= NONCE_CHARSET
    assert len(known["r"]) == len(stranger["r"])
    assert shown(stranger) in {shown({"i": str(c.iterations), "s": base64.b64encode(c.salt).decode()})
                               for c in credentials.values()}


def test_a_java_salt_is_shown_as_java_makes_them():
    """Beside users created by Kafka's Java tools (base-36 salts), an unknown name's salt is a base-36 number of a
    length those salts have, below 2^130, without a leading zero."""
    population = Population.of(shape_of(4096, java_salt(i)) for i in range(1, 4))
    salts = [base64.b64decode(server_first(ScramServer(SHA256, {}.get, fake_salt_key=KEY, population=population),
                                           f"n{i}")["s"]) for i in range(50)]
    assert all(s[:1] != b"0" and int(s, 36) < 1 << 130 for s in salts)
    assert {len(s) for s in salts} <= {len(java_salt(i)) for i in range(1, 4)}


def test_adding_a_user_moves_few_unknown_names():
    """An unknown name's shape moves only when the population shifts towards another shape, and then only in
    proportion: one more user at 8192 beside nine at 4096 moves about a tenth of the names, never back."""
    before = Population.of([CredentialShape(4096, 32)] * 9)
    after = Population.of([CredentialShape(4096, 32)] * 9 + [CredentialShape(8192, 32)])
    names = [f"n{i}" for i in range(1000)]
    counts = {p: [server_first(ScramServer(SHA256, {}.get, fake_salt_key=KEY, population=p), n)["i"] for n in names]
              for p in (before, after)}
    moved = sum(a != b for a, b in zip(counts[before], counts[after], strict=True))
    assert set(counts[before]) == {"4096"} and 50 < moved < 150


# -- over a store: the shapes of its credentials, stable across restarts --------------------------

def _first(store, name: str, mechanism=SHA256) -> dict[str, str]:
    return server_first(store.scram_server(mechanism), name)


def test_an_unknown_name_is_not_told_by_its_count(open_store):
    """Reproduces issue 22: with alice created at 8192, an unknown name showed i=4096; now every name shows 8192."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", iterations=8192)], context=ADMIN)
    assert _first(store, "alice")["i"] == "8192"
    assert {_first(store, f"nosuchuser{i}")["i"] for i in range(20)} == {"8192"}


def test_a_user_without_the_mechanism_asked_looks_like_one_with_it(open_store):
    """bob has only SCRAM-SHA-512; asked for SCRAM-SHA-256 he is shown a SHA-256 user's count, not the default."""
    store = open_store()
    store.alter_user_scram_credentials([upsert("alice", iterations=12288), upsert("bob", mech=SHA512)],
                                       context=ADMIN)
    assert _first(store, "bob")["i"] == "12288"


def test_the_same_unknown_name_is_shown_the_same_salt_and_count_after_a_reopen(open_store):
    """Two attempts, and an attempt after the store was closed and reopened, see one salt and one count."""
    store = open_store()
    pre_salted = UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 16384), b"pw", salt=java_salt(7))
    store.alter_user_scram_credentials([upsert("alice", iterations=8192), pre_salted], context=ADMIN)
    names = [f"ghost{i}" for i in range(30)]
    first = [_first(store, n) for n in names]
    again = [_first(store, n) for n in names]
    store.close()
    store = open_store()
    reopened = [_first(store, n) for n in names]
    assert [(f["s"], f["i"]) for f in first] == [(f["s"], f["i"]) for f in again] == \
           [(f["s"], f["i"]) for f in reopened]
    assert {f["i"] for f in first} == {"8192", "16384"}  # both shapes appear among thirty names
    # as carol's (made as Java's tools make salts), the 16384 names' salts are base-36 numbers of her salt's length
    assert {shown(f)[1:] for f in first if f["i"] == "16384"} == {(len(java_salt(7)), SaltAlphabet.JAVA_BASE36)}
    assert {shown(f)[1:] for f in first if f["i"] == "8192"} == {(32, SaltAlphabet.BYTES)}


def test_a_name_moved_to_another_shape_gets_another_salt():
    """When the population moves an unknown name to another count its salt changes too, as a real user's
    does (a new count comes with a reset password and a fresh salt); a kept salt under a new count would
    mark the name as unknown."""
    before = Population.of([CredentialShape(4096, 32)] * 9)
    after = Population.of([CredentialShape(4096, 32)] * 9 + [CredentialShape(8192, 32)])
    names = [f"n{i}" for i in range(300)]
    shown_by = {p: [server_first(ScramServer(SHA256, {}.get, fake_salt_key=KEY, population=p), n) for n in names]
                for p in (before, after)}
    pairs = list(zip(shown_by[before], shown_by[after], strict=True))
    moved = [(b, a) for b, a in pairs if b["i"] != a["i"]]
    kept = [(b, a) for b, a in pairs if b["i"] == a["i"]]
    assert moved and all(b["s"] != a["s"] for b, a in moved)
    assert all(b["s"] == a["s"] for b, a in kept)  # a name whose shape stays keeps its salt
