"""How authorize() latency grows with the number of ACLs, in two shapes side by side.

Issue 15's target: p50 growth < x2 from 10k to 1M ACLs and p99 <= 20 us, in its shape:

- ``issue15``: topics named ``foo-N-bar``, 10 LITERAL ACLs each (a random principal of
  1,000, a random host ``10.0.a.b``, one of six operations, 20% DENY); a request names an
  existing topic (90%) or an unknown ``foo-N-bar`` (10%); half of those on a topic take
  the principal and host of one of its ACLs, the rest a random principal and host;
- ``issue15-deltas``: the same ACLs and requests, the image built as a store taking
  ``create_acls`` batches builds it (one delta of 10k ACLs after another) instead of in
  bulk (a snapshot load or replay): its nodes lie scattered over more memory;
- ``kafka``: Kafka's AuthorizerBenchmark shape as ``authz_core`` builds it (10% groups,
  20% prefixed, 20% DENY, host '*'), with its request mix (``current`` in ``scripts.bench.shapes``);
- ``jmh`` and ``diverse``: ``scripts.bench.shapes``' ``kafka`` (the jmh AuthorizerBenchmark's
  10 principals per resource) and ``diverse`` (issue 24: ~10 address-restricted ACLs per resource).

    python -m scripts.bench.authz_growth [--sizes 10000 100000 1000000] [--shapes issue15 issue15-deltas kafka]

Method.  Every request is drawn from a seeded RNG before timing, with its strings copied
(new objects, as decoded off the wire, not the image's own).  All sizes of a shape are
built first, collected and frozen (``gc.freeze``, as the store does after a load); the
collector stays enabled while timing, as in a server.  One untimed pass per size warms
up; then ``--rounds`` rounds each time every size in turn (the order rotating), so load
from other processes on this shared machine falls on all sizes alike.  p50 is the median
of per-call means over batches of 100 calls (``perf_counter_ns`` around each batch);
p99 is over single calls each timed alone (two clock reads, about 0.1 us, included);
CPU/call is ``process_time_ns`` over every batch divided by the calls.  "view" is the same
p50 through ``StoreView.authorize`` (what ``SecurityStore.authorize`` calls: argument checks
and the store's settings around the same decision).
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scripts.bench import authz_core, shapes
from scripts.bench.report import latencies_ns, percentiles, print_table, write_json
from secmeta.core.config import StoreConfig
from secmeta.core.store.view import StoreView
from secmeta.events.types import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from secmeta.projections.acls import AclsImage
from secmeta.projections.authorizer import authorize
from secmeta.projections.image import SecurityImage

SHAPES = ("issue15", "issue15-deltas", "kafka", "jmh", "diverse")
FROM_SHAPES = {"jmh": "kafka", "diverse": "diverse"}  # scripts.bench.shapes by name
DELTA_ACLS = 10_000  # ACLs per delta in the issue15-deltas shape (scripts.bench.rebuild's create_acls batch)
ACLS_PER_TOPIC = 10
PRINCIPALS = 1000
OPERATIONS = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.DESCRIBE,
    AclOperation.ALTER,
    AclOperation.DELETE,
    AclOperation.CREATE,
)
REQUEST_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
BATCH = 100
TARGET_GROWTH = 2.0  # p50 at a size / p50 at the smallest size, strictly below
TARGET_P99_US = 20.0

Request = tuple[str, str, AclOperation, ResourceType, str]


def _host(rng: random.Random) -> str:
    return f"10.0.{rng.randrange(256)}.{rng.randrange(256)}"


def _principal(rng: random.Random) -> str:
    return f"User:user-{rng.randrange(PRINCIPALS)}"


def issue15_bindings(n: int, seed: int = 0) -> list[tuple[str, AclBinding]]:
    """n (acl_id, binding) pairs: topics foo-N-bar with 10 ACLs each, 20% DENY, hosts 10.0.a.b."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        permission = AclPermissionType.DENY if rng.random() < 0.2 else AclPermissionType.ALLOW
        binding = AclBinding.of(
            ResourceType.TOPIC, f"foo-{i // ACLS_PER_TOPIC}-bar", PatternType.LITERAL,
            _principal(rng), _host(rng), rng.choice(OPERATIONS), permission,
        )
        pairs.append((str(uuid.UUID(int=rng.getrandbits(128), version=4)), binding))
    return pairs


def issue15_requests(pairs: Sequence[tuple[str, AclBinding]], count: int, seed: int = 0) -> list[Request]:
    """Requests against ``issue15_bindings``: 10% unknown topics, else half with an ACL's principal and host."""
    rng = random.Random(seed + 1)
    topics = max(1, len(pairs) // ACLS_PER_TOPIC)
    out = []
    for _ in range(count):
        operation = rng.choice(REQUEST_OPERATIONS)
        if rng.random() < 0.1:
            name = f"foo-{topics + rng.randrange(topics)}-bar"
            out.append((_principal(rng), _host(rng), operation, ResourceType.TOPIC, name))
            continue
        binding = pairs[rng.randrange(len(pairs))][1]
        if rng.random() < 0.5:
            principal, host = binding.entry.principal, binding.entry.host
        else:
            principal, host = _principal(rng), _host(rng)
        out.append((principal, host, operation, ResourceType.TOPIC, binding.pattern.name))
    return out


def _copied(request: Request) -> Request:
    """The request with new string objects, as a server decodes them off the wire."""
    principal, host, operation, resource_type, name = request
    return principal.encode().decode(), host.encode().decode(), operation, resource_type, name.encode().decode()


def _in_deltas(pairs: Sequence[tuple[str, AclBinding]]) -> AclsImage:
    """The image of the pairs applied one delta of ``DELTA_ACLS`` after another."""
    image = AclsImage.EMPTY
    for start in range(0, len(pairs), DELTA_ACLS):
        image = authz_core.image_of(pairs[start:start + DELTA_ACLS], image)
    return image


def shape_of(shape: str, n: int, requests: int, seed: int = 0) -> tuple[AclsImage, list[Request]]:
    """An image of n ACLs in the shape, and ``requests`` requests against it."""
    if shape in FROM_SHAPES:
        name = FROM_SHAPES[shape]
        image, drawn = AclsImage.of(shapes.final_pairs(name, n, seed)), shapes.SHAPES[name].requests(n, requests, seed)
    elif shape == "kafka":
        image, drawn = AclsImage.of(authz_core.bindings(n, seed)), authz_core.random_requests(n, requests, seed)
    else:
        pairs = issue15_bindings(n, seed)
        image = _in_deltas(pairs) if shape == "issue15-deltas" else AclsImage.of(pairs)
        drawn = issue15_requests(pairs, requests, seed)
    return image, [_copied(request) for request in drawn]


def batch_means_ns(fn: Callable[..., object], requests: Sequence[Request], batch: int = BATCH) -> tuple[list[float], int]:
    """Per-call mean wall ns of each batch of ``batch`` consecutive calls, and the CPU ns of them all."""
    clock = time.perf_counter_ns
    means = []
    cpu_start = time.process_time_ns()
    for start in range(0, len(requests) - batch + 1, batch):
        chunk = requests[start:start + batch]
        begin = clock()
        for request in chunk:
            fn(*request)
        means.append((clock() - begin) / batch)
    return means, time.process_time_ns() - cpu_start


@dataclass
class _Subject:
    """One size of a shape under measurement: authorize() on the image, and through a StoreView."""

    n: int
    image: AclsImage
    requests: list[Request]
    means: list[float] = field(default_factory=list)
    singles: list[int] = field(default_factory=list)
    view_means: list[float] = field(default_factory=list)
    cpu_ns: int = 0

    def call(self, *request) -> bool:
        return authorize(self.image, *request)

    def view(self) -> StoreView:
        """The view a store answers ``authorize`` through, over an image holding these ACLs."""
        empty = SecurityImage.EMPTY
        return StoreView(SecurityImage(empty.scram, self.image, empty.tokens, self.n), StoreConfig())


def measure_shape(shape: str, sizes: Sequence[int], *, requests: int = 200_000, rounds: int = 3,
                  seed: int = 0) -> list[dict]:
    """One row per size: authorize() over an image of that many ACLs in the shape, timed in turns."""
    subjects = [_Subject(n, *shape_of(shape, n, requests, seed)) for n in sizes]
    gc.collect()
    gc.freeze()
    try:
        views = [subject.view() for subject in subjects]
        for subject, view in zip(subjects, views, strict=True):
            latencies_ns(subject.call, subject.requests)  # warm-up
            latencies_ns(view.authorize, subject.requests)
        for turn in range(rounds):
            start = turn % len(subjects)
            for subject, view in zip(subjects[start:] + subjects[:start], views[start:] + views[:start], strict=True):
                means, cpu_ns = batch_means_ns(subject.call, subject.requests)
                subject.means += means
                subject.cpu_ns += cpu_ns
                subject.singles += latencies_ns(subject.call, subject.requests[turn::rounds])
                subject.view_means += batch_means_ns(view.authorize, subject.requests)[0]
        rows = [_row(shape, subject) for subject in subjects]
    finally:
        gc.unfreeze()
    return with_growth(rows)


def _row(shape: str, subject: _Subject) -> dict:
    batch = percentiles(subject.means, (50, 99))
    single = percentiles(subject.singles, (50, 99, 99.9))
    allowed = sum(subject.call(*request) for request in subject.requests)
    return {
        "shape": shape,
        "acls": subject.n,
        "requests": len(subject.requests),
        "allowed_share": allowed / len(subject.requests),
        "p50_us": batch["p50"] / 1000,
        "batch_p99_us": batch["p99"] / 1000,
        "single_p50_us": single["p50"] / 1000,
        "p99_us": single["p99"] / 1000,
        "p99_9_us": single["p99.9"] / 1000,
        "cpu_us_per_call": subject.cpu_ns / (len(subject.means) * BATCH) / 1000,
        "view_p50_us": percentiles(subject.view_means, (50,))["p50"] / 1000,
    }


def with_growth(rows: list[dict]) -> list[dict]:
    """The rows, each with its p50 and CPU/call over those of the smallest size of its shape."""
    smallest: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: r["acls"]):
        base = smallest.setdefault(row["shape"], row)
        row["p50_growth"] = row["p50_us"] / base["p50_us"]
        row["cpu_growth"] = row["cpu_us_per_call"] / base["cpu_us_per_call"]
        row["view_p50_growth"] = row["view_p50_us"] / base["view_p50_us"]
    return rows


def print_rows(rows: list[dict]) -> None:
    print_table(
        f"authorize growth (us; p50 over batches of {BATCH} calls, p99 over single calls; "
        f"targets: growth < x{TARGET_GROWTH:g} over the smallest size, p99 <= {TARGET_P99_US:g} us)",
        ["shape", "ACLs", "p50", "p50 growth", "CPU/call", "CPU growth", "p99", "p99.9", "view p50", "view growth",
         "allowed"],
        [[r["shape"], r["acls"], r["p50_us"], f"x{r['p50_growth']:.2f} (< x{TARGET_GROWTH:g})",
          r["cpu_us_per_call"], f"x{r['cpu_growth']:.2f}", f"{r['p99_us']:.2f} (<= {TARGET_P99_US:g})",
          r["p99_9_us"], r["view_p50_us"], f"x{r['view_p50_growth']:.2f}", f"{r['allowed_share']:.0%}"]
         for r in rows],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes:
        print(f"measuring authorize, {shape} shape, {', '.join(f'{n:,}' for n in args.sizes)} ACLs ...", flush=True)
        rows += measure_shape(shape, args.sizes, requests=args.requests, rounds=args.rounds, seed=args.seed)
        gc.collect()
    print_rows(rows)
    print(f"wrote {write_json('authz_growth', rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
