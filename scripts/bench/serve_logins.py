"""Connection + SCRAM login + Metadata against `secmeta serve --processes N`, N side by side (issue 24, item 3).

    python -m scripts.bench.serve_logins [--processes 1 2] [--concurrency 1 10 50] [--seconds 4]
                                         [--repeats 3] [--protocol SASL_PLAINTEXT] [--client-processes 2]
                                         [--before-python /work/main/.venv/bin/python]

One store with a user per concurrent client (SCRAM-SHA-256, 4096 iterations).  For each ``--processes``
value, ``secmeta serve --processes N`` runs in a subprocess (N = 1: one process, as before), and for each
``--concurrency`` C, C clients in closed loops each open a new connection, log in (TCP, ApiVersions,
SaslHandshake, two SaslAuthenticate; the client's PBKDF2 included), send one Metadata and close, for
``--seconds``: a lean client (fixed frames, scramp for SCRAM), its threads spread over ``--client-processes``
processes so that one client GIL is not the bound.  Each cell runs ``--repeats`` times: the median and
the spread (min-max).
With ``--before-python``, the server of another tree (its interpreter: the code before a change) runs beside this
tree's on its own copy of the store, each of its runs right before the same run of this tree's, the same clients
against both.  A warm-up run (not measured) precedes each server's cells.  Server CPU is the whole server (the writer and its serving processes, from /proc); client CPU is the
client processes'.  Clients and server share this machine's cores, so a login's total CPU (client +
server) bounds the rate at (cores / CPU per login), printed beside it, as is the client's PBKDF2 alone, and
by Little's law a closed loop of C clients then waits at least C / that rate per login on average: the floor
printed beside the p99 (no tail included).

The clients run scramp's SCRAM as any scramp user does: PBKDF2 on every login.  RFC 5802 (section 5.1) lets a
client keep ClientKey and ServerKey per salt and iteration count, which would take the PBKDF2 out of the client's
CPU, but scramp 1.5's public API has no way to give its client those keys (``ScramClient.get_client_final`` always
derives them from the password), so the bench does not offer it: that would take a hand-rolled SCRAM client.

Targets (issue 24): p99 <= 50 ms at 50 concurrent; logins/s at 10 concurrent >= 2x issue 24's 356/s.
Writes bench-results/serve_logins.json.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import resource
import shutil
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scramp import ScramClient

from scripts.bench.report import percentiles, print_table, spread, write_json
from scripts.bench.serve import ServerProcess, build_store
from secmeta.consumers.demo_ca import make_ca
from secmeta.core import ScramMechanism
from secmeta.core.wire.codec import build, decode_response, encode_request, request_class
from secmeta.events.keyring import Keyring

#: Issue 24's figures for one process (the bench's "today"): logins/s and p99 ms at 1 / 10 / 50 concurrent.
TODAY = {1: (244, 20), 10: (356, 89), 50: (470, 222)}
TARGET_P99_MS_AT_50 = 50.0
TARGET_RATE_AT_10 = 2 * TODAY[10][0]
MECHANISM = "SCRAM-SHA-256"


def _metadata(version: int) -> Any:
    return build(request_class(3, version), topics=None, allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False, include_cluster_authorized_operations=False)


class LeanLogin:
    """A lean client (fixed frames, kio's for SaslAuthenticate, scramp for SCRAM): connect, ApiVersions,
    SaslHandshake, two SaslAuthenticate, Metadata, close; so the client's own Python costs little beyond its
    PBKDF2, which any SCRAM client pays."""

    API_VERSIONS = encode_request(1, "bench", build(request_class(18, 3), client_software_name="bench",
                                                    client_software_version="1"))
    HANDSHAKE = encode_request(2, "bench", build(request_class(17, 1), mechanism=MECHANISM))
    METADATA = encode_request(5, "bench", _metadata(12))

    def __init__(self, bootstrap: str, tls: ssl.SSLContext | None):
        host, port = bootstrap.rsplit(":", 1)
        self.address, self.tls = (host, int(port)), tls

    def __call__(self, user: str, password: str) -> None:
        sock = socket.create_connection(self.address, timeout=30)
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname=self.address[0])
        try:
            sock.sendall(self.API_VERSIONS)
            _frame(sock)
            sock.sendall(self.HANDSHAKE)
            _frame(sock)
            client = ScramClient([MECHANISM], user, password)
            first = _authenticate(sock, 3, client.get_client_first())
            client.set_server_first(first)
            client.set_server_final(_authenticate(sock, 4, client.get_client_final()))
            sock.sendall(self.METADATA)
            _frame(sock)
        finally:
            sock.close()


def _authenticate(sock: socket.socket, correlation_id: int, message: str) -> str:
    """One SaslAuthenticate v2 round trip (kio's frames): the server's SCRAM message."""
    sock.sendall(encode_request(correlation_id, "bench", build(request_class(36, 2), auth_bytes=message.encode())))
    _, response = decode_response(36, 2, _frame(sock))
    if response.error_code != 0:
        raise ConnectionError(f"login failed: {response.error_code}")
    return bytes(response.auth_bytes).decode()


def _frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return data


def _client_process(bootstrap: str, protocol: str, ca: str | None, users: list[int], seconds: float,
                    barrier: Any, out: Any) -> None:
    """Closed loops, one thread per user: connect + log in + Metadata + close; sends (latencies ns, errors, CPU s)."""
    tls = None
    if protocol == "SASL_SSL":
        tls = ssl.create_default_context(cafile=ca)
    login = LeanLogin(bootstrap, tls)
    samples: list[list[int]] = [[] for _ in users]
    errors = [0] * len(users)
    start = threading.Barrier(len(users) + 1)

    def loop(slot: int, user: int) -> None:
        start.wait()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            began = time.perf_counter_ns()
            try:
                login(f"login-{user}", f"pw-{user}")
            except Exception:  # noqa: BLE001 - counted
                errors[slot] += 1
                continue
            samples[slot].append(time.perf_counter_ns() - began)

    threads = [threading.Thread(target=loop, args=(slot, user), daemon=True) for slot, user in enumerate(users)]
    for t in threads:
        t.start()
    barrier.wait()                 # every client process is ready: go
    cpu = _own_cpu()
    start.wait()
    for t in threads:
        t.join()
    out.send(([s for per in samples for s in per], sum(errors), _own_cpu() - cpu))
    out.close()


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_cell(server: ServerProcess, protocol: str, ca: str | None, concurrency: int, seconds: float,
             client_processes: int) -> dict[str, Any]:
    """One closed-loop run at ``concurrency``: rate, latencies, server and client CPU."""
    context = multiprocessing.get_context("spawn")
    groups = [list(range(concurrency))[i::client_processes] for i in range(client_processes)]
    groups = [g for g in groups if g]
    barrier = context.Barrier(len(groups) + 1)
    pipes, procs = [], []
    for users in groups:
        ours, theirs = context.Pipe(duplex=False)
        proc = context.Process(target=_client_process,
                               args=(server.bootstrap, protocol, ca, users, seconds, barrier, theirs))
        proc.start()
        pipes.append(ours)
        procs.append(proc)
    barrier.wait()
    before = server.cpu_by_process()
    results = [pipe.recv() for pipe in pipes]
    after = server.cpu_by_process()
    used = {pid: cpu - before.get(pid, 0.0) for pid, cpu in after.items()}
    server_cpu = sum(used.values())
    writer_cpu = used.get(server.pid, 0.0)
    for proc in procs:
        proc.join()
    samples = [s for r in results for s in r[0]]
    errors = sum(r[1] for r in results)
    client_cpu = sum(r[2] for r in results)
    p = percentiles([s / 1e6 for s in samples]) if samples else {"p50": float("nan"), "p99": float("nan")}
    n = max(1, len(samples))
    return {"logins": len(samples), "errors": errors, "per_s": len(samples) / seconds, "p50_ms": p["p50"],
            "p99_ms": p["p99"], "server_cpu_ms_per_login": 1000 * server_cpu / n,
            "writer_cpu_ms_per_login": 1000 * writer_cpu / n, "serving_cpu_ms_per_login": 1000 * (server_cpu - writer_cpu) / n,
            "client_cpu_ms_per_login": 1000 * client_cpu / n}


def pbkdf2_ms(iterations: int = 4096, n: int = 200) -> float:
    """CPU ms of one client-side SCRAM-SHA-256 salted password (PBKDF2-HMAC-SHA-256)."""
    cpu = time.process_time()
    for i in range(n):
        hashlib.pbkdf2_hmac("sha256", b"pw-%d" % i, b"0123456789abcdef0123456789abcdef", iterations)
    return 1000 * (time.process_time() - cpu) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="serve --processes values compared")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 50], help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell (median and spread shown)")
    parser.add_argument("--protocol", default="SASL_PLAINTEXT", choices=["SASL_PLAINTEXT", "SASL_SSL"])
    parser.add_argument("--client-processes", type=int, default=2, help="processes the client threads are spread over")
    parser.add_argument("--before-python", help="also serve from another tree's interpreter (its .venv/bin/python: "
                        "the code before a change), each run of it right before the same run of this tree's, the "
                        "same clients against both")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    trees = [("before", args.before_python), ("this tree", sys.executable)] if args.before_python else \
        [("this tree", sys.executable)]
    cells: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key_file = work / "keys.json"
        Keyring.generate_file(key_file)
        ca = make_ca(work / "tls")
        print(f"building a store with {max(args.concurrency)} login users ...", flush=True)
        build_store(work / "store", Keyring.from_file(key_file), 1000, max(args.concurrency),
                    ScramMechanism.SCRAM_SHA_256)
        for processes in args.processes:
            servers: dict[str, ServerProcess] = {}
            try:
                for label, python in trees:     # each its own copy of the store: a store has one writer
                    store = work / f"store-{len(servers)}"
                    shutil.copytree(work / "store", store)
                    servers[label] = ServerProcess(store, key_file, args.protocol, ca, MECHANISM, python=python,
                                                   options=["--processes", str(processes)])
                    # warm-up, not measured: every serving process's first logins import and build what they use
                    run_cell(servers[label], args.protocol, str(ca.ca_cert), 10, 2.0, args.client_processes)
                for concurrency in args.concurrency:
                    for r in range(args.repeats):
                        for label, server in servers.items():
                            cell = run_cell(server, args.protocol, str(ca.ca_cert), concurrency, args.seconds,
                                            args.client_processes)
                            cells.setdefault((label, processes, concurrency), []).append(cell)
                            print(f"  {label}: --processes {processes}, {concurrency} concurrent, run {r + 1}: "
                                  f"{cell['per_s']:,.0f}/s p99 {cell['p99_ms']:.1f} ms, server CPU "
                                  f"{cell['server_cpu_ms_per_login']:.2f} ms/login", flush=True)
            finally:
                for server in servers.values():
                    server.stop()
                for i in range(len(trees)):
                    shutil.rmtree(work / f"store-{i}", ignore_errors=True)
    pbkdf2 = pbkdf2_ms()
    report(cells, args, cores, pbkdf2)
    return 0


def report(cells: dict[tuple[str, int, int], list[dict[str, Any]]], args: argparse.Namespace, cores: int,
           pbkdf2: float) -> None:
    rows, results = [], []
    for (label, processes, concurrency), runs in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][1])):
        rate = [r["per_s"] for r in runs]
        p99 = [r["p99_ms"] for r in runs]
        server = [r["server_cpu_ms_per_login"] for r in runs]
        split = (f"{statistics.median(r['writer_cpu_ms_per_login'] for r in runs):.2f} + "
                 f"{statistics.median(r['serving_cpu_ms_per_login'] for r in runs):.2f}") if processes > 1 else "-"
        client = [r["client_cpu_ms_per_login"] for r in runs]
        bound = cores * 1000 / (statistics.median(server) + statistics.median(client))
        floor_ms = concurrency * 1000 / bound       # Little's law: the mean latency of C clients at that rate
        today_rate, today_p99 = TODAY.get(concurrency, ("-", "-"))
        target = {10: f">= {TARGET_RATE_AT_10}/s", 50: f"p99 <= {TARGET_P99_MS_AT_50:g} ms"}.get(concurrency, "-")
        rows.append([concurrency, processes, label, spread(rate, ",.0f"), spread(p99, ".1f"), f"{floor_ms:.1f}",
                     f"{today_rate} / {today_p99}", target, spread(server, ".2f"), split,
                     spread(client, ".2f"), f"{bound:,.0f}", sum(r["errors"] for r in runs)])
        results.append({"server": label, "processes": processes, "concurrency": concurrency, "runs": runs,
                        "cpu_bound_per_s": bound, "littles_law_mean_floor_ms": floor_ms})
    print()
    print_table(f"connection + {MECHANISM} login + Metadata over {args.protocol}, lean clients in closed loops "
                f"({args.client_processes} client processes), {args.seconds:g} s x {args.repeats} runs; "
                f"median (min-max); machine shared by other work",
                ["concurrent", "--processes", "server", "logins/s", "p99 ms", "mean floor ms (Little)",
                 "issue 24: /s / p99", "target",
                 "server CPU ms/login", "writer + serving processes", "client CPU ms/login",
                 f"CPU bound /s ({cores} cores)", "errors"], rows)
    print(f"client PBKDF2-HMAC-SHA-256 (4096 iterations) alone: {pbkdf2:.2f} ms CPU per login")
    print("--processes N > 1: the writer's share is its admission table, asked over the channel for every connection\n"
          "(admit and establish: two round trips; forget: one message); each serving process pays those messages, the\n"
          "wake-ups their replies cost, and a wake-up per connection the other processes accept (one shared listener).")
    bounds = [r["cpu_bound_per_s"] for r in results]
    if bounds:
        print(f"what bounds it: a login costs the server and its client together the CPU above, so {cores} cores "
              f"give at most {min(bounds):,.0f}-{max(bounds):,.0f} logins/s whatever the server does; in a closed "
              f"loop of C clients the mean latency is C / rate (Little's law), so p99 <= "
              f"{TARGET_P99_MS_AT_50:g} ms at 50 needs more than {50 * 1000 / TARGET_P99_MS_AT_50:,.0f} logins/s")
        lean = [cores * 1000 / max(1e-9, statistics.median(r["server_cpu_ms_per_login"] for r in res["runs"]) +
                                   statistics.median(r["client_cpu_ms_per_login"] for r in res["runs"]) - pbkdf2)
                for res in results]
        print(f"arithmetic, not measured: without the client's PBKDF2 ({pbkdf2:.2f} ms, what RFC 5802's client key "
              f"cache would save; scramp's client cannot keep keys) the same CPU would bound the rate at "
              f"{min(lean):,.0f}-{max(lean):,.0f} logins/s, a mean floor at 50 concurrent of "
              f"{50 * 1000 / max(lean):.1f}-{50 * 1000 / min(lean):.1f} ms")
    for label, processes, concurrency in sorted(cells):
        runs = cells[(label, processes, concurrency)]
        if concurrency == 10:
            rate = statistics.median(r["per_s"] for r in runs)
            print(f"target {label}, --processes {processes}: logins/s at 10 concurrent >= {TARGET_RATE_AT_10}: "
                  f"{rate:,.0f} -> {'met' if rate >= TARGET_RATE_AT_10 else 'NOT met'}")
        if concurrency == 50:
            p99 = statistics.median(r["p99_ms"] for r in runs)
            print(f"target {label}, --processes {processes}: p99 at 50 concurrent <= {TARGET_P99_MS_AT_50:g} ms: "
                  f"{p99:.1f} ms -> {'met' if p99 <= TARGET_P99_MS_AT_50 else 'NOT met'}")
    print(f"wrote {write_json('serve_logins', {'cells': results, 'pbkdf2_ms': pbkdf2, 'cores': cores})}")


if __name__ == "__main__":
    raise SystemExit(main())
