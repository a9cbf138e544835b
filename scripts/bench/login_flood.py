"""An admin's SCRAM login while half-open connections flood `secmeta serve` (issue 22).

    python -m scripts.bench.login_flood [--connections 2000] [--sources 40] [--attackers 4]
                                        [--trials 30] [--seconds 20] [--flood-listener SASL_PLAINTEXT]

``secmeta serve`` runs in a SUBPROCESS (its own GIL) with its default limits on a PLAINTEXT
and a SASL_PLAINTEXT listener.  The attacker (tests/floodkit.HalfOpenFlood, in ``--attackers`` processes of its own)
keeps ``--connections`` PLAINTEXT connections open from ``--sources`` loopback addresses
(127.0.0.10 on; each within the per-address caps), each having sent two bytes of a 100-byte
frame, and reopens each one as soon as the server closes it, for the whole run.  Meanwhile
``--trials`` (and more, for ``--seconds``) confluent-kafka AdminClients log in one after another as admin with
SCRAM-SHA-256 over SASL_PLAINTEXT, each timed from its creation to its first answer
(describe_cluster).  The same logins are timed before the flood for comparison.  The
server's RSS is read from /proc before and (its maximum) during the flood.  Targets
(issue 22): every login during the flood succeeds within 1 s; memory stays bounded.
Nothing is asserted; see bench-results/login_flood.json.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from scripts.bench.report import percentiles, print_table, write_json
from scripts.bench.serve import ADMIN_PASSWORD, ServerProcess, build_store
from secmeta.core.server.config import ServerConfig
from secmeta.events.keyring import Keyring
from secmeta.events.types import ScramMechanism
from tests.floodkit import HalfOpenFlood, loopback_sources

TARGET_S = 1.0
QUIET = logging.getLogger("bench.login_flood.librdkafka")
QUIET.setLevel(logging.CRITICAL)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def admin_login(bootstrap: str) -> float | None:
    """Seconds from a new AdminClient to its first answer as admin (None: the login failed)."""
    config = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
              "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD, "socket.timeout.ms": 10000,
              "logger": QUIET}
    start = time.perf_counter()
    admin = AdminClient(config)     # held until the answer: a dropped client is destroyed at once
    try:
        admin.describe_cluster(request_timeout=10).result(timeout=15)
    except (KafkaException, TimeoutError):
        return None
    return time.perf_counter() - start


def trials(bootstrap: str, n: int, sample, seconds: float = 0.0) -> list[float | None]:
    """At least ``n`` logins one after another, and more until ``seconds`` have passed."""
    out, until = [], time.perf_counter() + seconds
    while len(out) < n or time.perf_counter() < until:
        out.append(admin_login(bootstrap))
        sample()
    return out


def summary(times: list[float | None]) -> dict[str, float | int]:
    ok = [t for t in times if t is not None]
    pct = percentiles(ok, (50, 99)) if ok else {"p50": float("nan"), "p99": float("nan")}
    return {"trials": len(times), "failed": len(times) - len(ok), "p50_ms": pct["p50"] * 1000,
            "p99_ms": pct["p99"] * 1000, "max_ms": max(ok, default=float("nan")) * 1000,
            "within_target": sum(1 for t in ok if t <= TARGET_S)}


def _attack(address: tuple[str, int], sources: list[str], per_source: int, ready, stop, opened) -> None:
    """One attacker process (its own GIL, so it does not slow the timed client): flood until ``stop``."""
    flood = HalfOpenFlood(address, sources, per_source)
    flood.start()
    flood.ready.wait(120)
    opened.value = flood.opened
    ready.set()
    while not stop.wait(0.2):
        opened.value = flood.opened
    opened.value = flood.opened
    flood.stop()


class Attackers:
    """``count`` attacker processes sharing ``sources``."""

    def __init__(self, address: tuple[str, int], sources: list[str], per_source: int, count: int):
        context = multiprocessing.get_context("fork")
        self._stop = context.Event()
        self._procs, self._ready, self._opened = [], [], []
        for i in range(count):
            ready, opened = context.Event(), context.Value("q", 0)
            proc = context.Process(target=_attack, args=(address, sources[i::count], per_source, ready,
                                                         self._stop, opened), daemon=True)
            self._procs.append(proc)
            self._ready.append(ready)
            self._opened.append(opened)

    def start(self) -> None:
        for proc in self._procs:
            proc.start()
        for ready in self._ready:
            ready.wait(120)

    @property
    def opened(self) -> int:
        return sum(opened.value for opened in self._opened)

    def stop(self) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--sources", type=int, default=40)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20, help="keep logging in during the flood this long")
    parser.add_argument("--flood-listener", choices=["PLAINTEXT", "SASL_PLAINTEXT"], default="PLAINTEXT",
                        help="the listener flooded (SASL_PLAINTEXT: the one the admin logs in on)")
    parser.add_argument("--attackers", type=int, default=4, help="attacker processes, each with its share of sources")
    args = parser.parse_args(argv)
    limits = ServerConfig()
    with tempfile.TemporaryDirectory(prefix="bench-login-flood-") as tmp:
        work = Path(tmp)
        key_file = work / "keys.json"
        Keyring.generate_file(key_file)
        build_store(work / "store", Keyring.from_file(key_file), 0, 0, ScramMechanism.SCRAM_SHA_256)
        server = ServerProcess(work / "store", key_file, "SASL_PLAINTEXT", None, "SCRAM-SHA-256", also=("PLAINTEXT",))
        try:
            admin_login(server.bootstrap)    # warm-up
            rss_before = rss_mib(server.pid)
            before = trials(server.bootstrap, min(10, args.trials), lambda: None)
            host, port = server.bootstraps[args.flood_listener].rsplit(":", 1)
            attackers = Attackers((host, int(port)), loopback_sources(args.sources),
                                  max(1, args.connections // args.sources), args.attackers)
            started = time.perf_counter()
            attackers.start()
            ready = time.perf_counter() - started
            opened_at_ready = attackers.opened
            rss_peak = [rss_mib(server.pid)]
            cpu_start = server.cpu_seconds()

            def sample() -> None:
                rss_peak.append(rss_mib(server.pid))

            during = trials(server.bootstrap, args.trials, sample, args.seconds)
            seconds = time.perf_counter() - started - ready
            server_cpu = server.cpu_seconds() - cpu_start
            opened = attackers.opened - opened_at_ready
            attackers.stop()
            rss_after = rss_mib(server.pid)
        finally:
            server.stop()
    base, flooded = summary(before), summary(during)
    target = f"<= {TARGET_S * 1000:.0f}"
    print_table(f"admin SCRAM login (confluent-kafka, SASL_PLAINTEXT) during a flood of {args.connections} half-open "
                f"{args.flood_listener} connections from {args.sources} addresses by {args.attackers} processes "
                f"(set up in {ready:.1f} s; "
                f"then {opened} reconnections in the {seconds:.1f} s of the trials)",
                ["measure", "no flood", "during the flood", "target"],
                [["logins ok / trials", f"{base['trials'] - base['failed']}/{base['trials']}",
                  f"{flooded['trials'] - flooded['failed']}/{flooded['trials']}", "all"],
                 ["login p50 (ms)", base["p50_ms"], flooded["p50_ms"], target],
                 ["login p99 (ms)", base["p99_ms"], flooded["p99_ms"], target],
                 ["login max (ms)", base["max_ms"], flooded["max_ms"], target],
                 ["logins within 1 s", base["within_target"], flooded["within_target"], "all"],
                 ["server RSS (MiB)", rss_before, max(rss_peak), "bounded (flat)"],
                 ["server RSS after (MiB)", "", rss_after, ""],
                 ["server CPU during the trials (% of a core)", "", 100 * server_cpu / seconds, ""]])
    chosen = {name: getattr(limits, name) for name in (
        "max_connections", "max_connections_per_ip", "max_connections_before_login",
        "max_connections_before_login_per_ip", "login_timeout_ms", "failed_authentication_delay_ms",
        "failed_authentications_burst", "failed_authentications_per_second", "failed_authentications_max_pending")}
    print_table("limits (the server's defaults)", ["setting", "value"], sorted(chosen.items()))
    write_json("login_flood", {"connections": args.connections, "flood_listener": args.flood_listener,
                               "sources": args.sources, "attackers": args.attackers,
                               "setup_seconds": ready, "reconnections": opened, "seconds": seconds,
                               "before": base, "during": flooded, "rss_mib_before": rss_before,
                               "rss_mib_peak": max(rss_peak), "rss_mib_after": rss_after, "server_cpu_s": server_cpu,
                               "limits": chosen})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
