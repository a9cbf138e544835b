"""Generated workloads for the reader contract, and the writer's image after each of their requests.

A workload is a tuple of steps, plain values: SCRAM alterations (upserts and deletions, several per
request), ACL creations and deletions, token issue / renew / expire, clock ticks and token sweeps.
``generate(rng, n)`` draws one from any ``random.Random``: seeded for the expensive readers,
``workloads()`` (Hypothesis, which then shrinks a failing one) for the cheap ones.

``record`` runs a workload against a writer store and keeps the image the writer published after
every request, by offset: the contract's expected value at each offset. Each reader module checks
that its reader, rebuilding from what the writer left (log, snapshots, topics, tables), reaches that
same image at the same offset.

Boundary cases are drawn on purpose: a token's max lifetime of 60 s with clock ticks of exactly 60 s
(a sweep at the expiry instant keeps the token, Kafka's TokenInfo.isExpired is ``now > expiry``),
renew and expire periods that go past the max lifetime, negative expiry periods (immediate removal),
prefixed patterns equal to a name, wildcard principals and hosts, and deletions by filters that match
several ACLs (multi-event batches that a reader may split across its own batches).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from secmeta.core import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ApiException,
    ClientQuotaAlteration,
    ClientQuotaOp,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    SecurityStore,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from secmeta.projections.image import SecurityImage
from tests.contract.images import Image, image_of
from tests.logkit import Clock
from tests.storekit import ADMIN

__all__ = ["EXPIRY_EDGES", "QUOTA_EDGES", "SETTINGS_EDGES", "Recording", "Step", "generate", "record", "seeded", "workloads"]

USERS = ("alice", "bob", "carol", "dave")
TOPICS = ("orders", "orders-eu", "pay", "payments", "*")
MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
TICKS_S = (1, 59, 60, 61, 3600)
QUOTA_ENTITIES = ((("user", "alice"),), (("user", None),), (("user", "bob"), ("client-id", "app")), (("client-id", "app"),))
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")  # with a 60 s max lifetime: before, at and after the expiry instant


@dataclass(frozen=True)
class AlterScram:
    """One SCRAM request: (user, mechanism, iterations) upserts, iterations None deletes."""

    items: tuple[tuple[str, ScramMechanism, int | None], ...]


@dataclass(frozen=True)
class CreateAcls:
    bindings: tuple[AclBinding, ...]


@dataclass(frozen=True)
class DeleteAcls:
    filters: tuple[AclBindingFilter, ...]


@dataclass(frozen=True)
class IssueToken:
    owner: str
    renewers: tuple[str, ...]
    max_lifetime_ms: int


@dataclass(frozen=True)
class RenewToken:
    token: int  # index into the tokens issued so far (modulo their number; -1: the newest)
    period_ms: int


@dataclass(frozen=True)
class ExpireToken:
    token: int
    period_ms: int


@dataclass(frozen=True)
class Tick:
    seconds: int


@dataclass(frozen=True)
class Sweep:
    pass


@dataclass(frozen=True)
class AlterQuotas:
    """One AlterClientQuotas request: (entity, key, value) sets, value None removes."""

    items: tuple[tuple[tuple[tuple[str, str | None], ...], str, float | None], ...]


@dataclass(frozen=True)
class AlterSettings:
    """One alter_settings request: logged settings set (name, text) or returned to their defaults (None)."""

    items: tuple[tuple[str, str | None], ...]


Step = AlterSettings | AlterQuotas | AlterScram | CreateAcls | DeleteAcls | IssueToken | RenewToken | ExpireToken | Tick | Sweep


def _binding(rng: random.Random) -> AclBinding:
    rtype = rng.choice((ResourceType.TOPIC, ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER))
    if rtype is ResourceType.CLUSTER:
        name, pattern = "kafka-cluster", PatternType.LITERAL
    else:
        name = rng.choice(TOPICS)
        pattern = PatternType.LITERAL if name == "*" else rng.choice((PatternType.LITERAL, PatternType.PREFIXED))
    return AclBinding.of(rtype, name, pattern, rng.choice((*(f"User:{u}" for u in USERS), "User:*")),
                         rng.choice(("*", "10.0.0.2", "10.0.0.0/8")),
                         rng.choice((AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)),
                         rng.choice((AclPermissionType.ALLOW, AclPermissionType.DENY)))


def _filter(rng: random.Random) -> AclBindingFilter:
    kind = rng.randrange(3)
    if kind == 0:
        return AclBindingFilter.of(ResourceType.ANY, rng.choice(TOPICS))
    if kind == 1:  # MATCH: every pattern that applies to the name (literal, '*', prefixes of it)
        return AclBindingFilter.of(ResourceType.TOPIC, rng.choice(TOPICS[:4]), PatternType.MATCH)
    return AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY, f"User:{rng.choice(USERS)}", None,
                               AclOperation.ANY, AclPermissionType.ANY)


def _step(rng: random.Random) -> Step:
    kind = rng.random()
    if kind < 0.2:
        return AlterScram(tuple((rng.choice(USERS), rng.choice(MECHANISMS),
                                 None if rng.random() < 0.3 else rng.choice((4096, 8192)))
                                for _ in range(rng.randint(1, 3))))
    if kind < 0.45:
        return CreateAcls(tuple(_binding(rng) for _ in range(rng.randint(1, 4))))
    if kind < 0.55:
        return DeleteAcls(tuple(_filter(rng) for _ in range(rng.randint(1, 2))))
    if kind < 0.67:
        renewers = rng.choice((("User:admin",), ("User:admin", "User:bob"), ()))
        return IssueToken(f"User:{rng.choice(USERS)}", renewers, rng.choice((-1, 60_000, 3_600_000)))
    if kind < 0.75:
        return RenewToken(rng.randrange(8), rng.choice((-1, 30_000, 60_000, 7_200_000)))
    if kind < 0.82:
        return ExpireToken(rng.randrange(8), rng.choice((-1, 0, 30_000, 120_000)))
    if kind < 0.93:
        return Tick(rng.choice(TICKS_S))
    if kind < 0.97:
        return Sweep()
    return AlterQuotas(tuple((rng.choice(QUOTA_ENTITIES), rng.choice(QUOTA_KEYS),
                              None if rng.random() < 0.3 else float(rng.choice((1024, 2048))))
                             for _ in range(rng.randint(1, 3))))


def generate(rng: random.Random, steps: int) -> tuple[Step, ...]:
    """``steps`` steps drawn from ``rng``."""
    return tuple(_step(rng) for _ in range(steps))


# A token's expiry instant, reached exactly: issued with a 60 s max lifetime, swept at expiry (kept:
# Kafka's TokenInfo.isExpired is now > expiry), renewed there (allowed, capped at the max), swept 1 s
# later (removed); then one token expired by request with a negative period (removed at once), and one
# with a positive period (an expiry change).
EXPIRY_EDGES: tuple[Step, ...] = (
    IssueToken("User:alice", ("User:admin",), 60_000), Tick(60), Sweep(), RenewToken(-1, 30_000),
    Tick(1), Sweep(),
    IssueToken("User:bob", ("User:admin",), -1), ExpireToken(-1, -1),
    IssueToken("User:carol", ("User:admin",), -1), ExpireToken(-1, 30_000),
)
# Client quotas set, replaced and removed (a removed value ends the entity: closed_when_none).
QUOTA_EDGES: tuple[Step, ...] = (
    AlterQuotas((((("user", "alice"),), "producer_byte_rate", 1024.0), ((("user", None),), "request_percentage", 50.0))),
    AlterQuotas((((("user", "alice"),), "producer_byte_rate", 2048.0),)),
    AlterQuotas((((("user", None),), "request_percentage", None),)),
)


# Settings set and returned to their defaults (a setting back to default ends the entity: closed_when_none);
# User:admin, who makes every request, stays a super user.
SETTINGS_EDGES: tuple[Step, ...] = (
    AlterSettings((("super.users", "User:admin;User:bob"), ("allow.everyone.if.no.acl.found", "true"))),
    AlterSettings((("allow.everyone.if.no.acl.found", None), ("super.users", "User:admin"))),
)


def seeded(seed: int, steps: int) -> tuple[Step, ...]:
    """``steps`` steps drawn with ``seed``, then ``EXPIRY_EDGES``, ``QUOTA_EDGES`` and ``SETTINGS_EDGES``."""
    return generate(random.Random(seed), steps) + EXPIRY_EDGES + QUOTA_EDGES + SETTINGS_EDGES


def workloads(max_steps: int = 25) -> st.SearchStrategy[tuple[Step, ...]]:
    """Hypothesis workloads: ``generate`` driven by a Hypothesis random (so failures shrink)."""
    return st.builds(generate, st.randoms(use_true_random=False), st.integers(1, max_steps))


@dataclass(frozen=True)
class Recording:
    """The writer's published image after each request, by offset (0: the empty store).

    ``images`` as describe shows them (what readers are compared on); ``states`` the images
    themselves (what a snapshot of the writer holds).
    """

    images: dict[int, Image]
    states: dict[int, SecurityImage]
    end: int

    @property
    def offsets(self) -> list[int]:
        """Every offset the writer published an image at, ascending."""
        return sorted(self.images)

    def sample(self, count: int) -> list[int]:
        """About ``count`` published offsets spread over the workload, always with the end."""
        offsets = self.offsets
        step = max(1, len(offsets) // count)
        return sorted({*offsets[step - 1::step], self.end})


def _apply(store: SecurityStore, clock: Clock, step: Step, issued: list) -> None:
    match step:
        case AlterScram(items):
            store.alter_user_scram_credentials(
                [UserScramCredentialDeletion(user, mech) if iterations is None else
                 UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations), b"pw-" + user.encode())
                 for user, mech, iterations in items], context=ADMIN)
        case CreateAcls(bindings):
            store.create_acls(bindings, context=ADMIN)
        case DeleteAcls(filters):
            store.delete_acls(filters, context=ADMIN)
        case IssueToken(owner, renewers, max_lifetime_ms):
            issued.append(store.create_delegation_token(context=ADMIN, owner=owner, renewers=renewers,
                                                        max_lifetime_ms=max_lifetime_ms))
        case RenewToken(index, period_ms) if issued:
            _refusable(lambda: store.renew_delegation_token(issued[index % len(issued)].hmac, period_ms,
                                                            context=ADMIN))
        case ExpireToken(index, period_ms) if issued:
            _refusable(lambda: store.expire_delegation_token(issued[index % len(issued)].hmac, period_ms,
                                                             context=ADMIN))
        case AlterQuotas(items):
            by_entity: dict = {}
            for entity, key, value in items:
                by_entity.setdefault(entity, []).append(ClientQuotaOp(key, value))
            store.alter_client_quotas([ClientQuotaAlteration(dict(entity), tuple(ops))
                                       for entity, ops in by_entity.items()], context=ADMIN)
        case AlterSettings(items):
            store.alter_settings({n: v for n, v in items if v is not None},
                                 [n for n, v in items if v is None], context=ADMIN)
        case Tick(seconds):
            clock.t += seconds
        case Sweep():
            store.sweep_expired_tokens()


def _refusable(call: Callable[[], int]) -> None:
    """A token request Kafka may refuse (expired, removed, not a renewer): the refusal writes nothing."""
    try:
        call()
    except ApiException:
        pass


def record(store: SecurityStore, clock: Clock, steps: tuple[Step, ...],
           after: Callable[[SecurityStore], None] | None = None) -> Recording:
    """Run ``steps`` against ``store`` (whose config uses ``clock``); ``after(store)`` follows each step."""
    states = {store.image.next_offset: store.image}
    issued: list = []
    for step in steps:
        before = store.log.end_offset
        _apply(store, clock, step, issued)
        if store.log.end_offset != before:
            states[store.log.end_offset] = store.image
        if after is not None:
            after(store)
    return Recording({n: image_of(state) for n, state in states.items()}, states, store.log.end_offset)
