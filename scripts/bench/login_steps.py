"""The server's Python of one SCRAM login without its I/O (issue 24, item 3), beside another tree's.

    python -m scripts.bench.login_steps [--logins 2000] [--repeats 3] [--before-python /work/main/.venv/bin/python]

What ``Connection._serve`` runs for a login's five requests, on a store of 50 login users (SCRAM-SHA-256, 4096
iterations): ApiVersions, SaslHandshake, the two SaslAuthenticate (the server's SCRAM steps) and Metadata, each
request's header checked, decoded, answered and encoded, the Authenticator and its context made per login.  No
socket, event loop or task: that is ``scripts.bench.serve_logins``'s whole login.  Only the server's calls are timed
(CPU, ``time.process_time``); the client's proof is made between them, its PBKDF2 once per user.  Each repeat runs
in a fresh process; with ``--before-python`` another tree's interpreter runs the same steps with its own code, each
of its repeats right before this tree's, and the table shows both and their ratio.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts.bench.report import print_table, spread

_USERS = 50
_WARM_UP = 200


def measure(logins: int) -> float:
    """CPU us of the server's calls per login, in this process, with the code this interpreter imports."""
    from scripts.bench.serve import build_store
    from secmeta.core import ScramMechanism
    from secmeta.core.config import StoreConfig
    from secmeta.core.server.apis import HANDLERS
    from secmeta.core.server.call import BrokerInfo, Call
    from secmeta.core.server.image_answers import ImageAnswers
    from secmeta.core.server.listeners import SecurityProtocol
    from secmeta.core.server.sasl import Authenticator
    from secmeta.core.store.facade import SecurityStore
    from secmeta.core.types import RequestContext
    from secmeta.core.wire.codec import (
        build,
        decode_request,
        decode_response,
        encode_request,
        encode_response,
        peek_header,
        request_class,
    )
    from secmeta.events.keyring import Keyring

    def request(correlation_id: int, api_key: int, version: int, **fields: object) -> bytes:
        return encode_request(correlation_id, "bench", build(request_class(api_key, version), **fields))[4:]

    api_versions = request(1, 18, 3, client_software_name="bench", client_software_version="1")
    handshake = request(2, 17, 1, mechanism="SCRAM-SHA-256")
    metadata = request(5, 3, 12, topics=None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False, include_cluster_authorized_operations=False)
    work = Path(tempfile.mkdtemp())
    key_file = work / "keys.json"
    Keyring.generate_file(key_file)
    build_store(work / "store", Keyring.from_file(key_file), 1000, _USERS, ScramMechanism.SCRAM_SHA_256)
    store = SecurityStore.open(work / "store", StoreConfig(), keyring=Keyring.from_file(key_file))
    broker, answers = BrokerInfo(1, "cluster", "127.0.0.1", 9092), ImageAnswers()
    handlers = {int(k): h for k, h in HANDLERS.items()}
    salted: dict[tuple[str, str], bytes] = {}

    def serve(auth: Authenticator, data: bytes) -> bytes:
        api_key, _, correlation_id = peek_header(data)
        assert auth.refusal(api_key) is None
        frame = decode_request(data, trailing_ok=True)
        if api_key in (17, 36):
            step = auth.handle(frame)
            assert not step.failed
            return encode_response(correlation_id, step.response)
        response = handlers[api_key](Call(store, auth.context, frame, broker, answers, None))
        if api_key == 18:
            auth.api_versions_answered(int(getattr(response, "error_code", 0)))
        return encode_response(correlation_id, response)

    total = 0.0
    for i in range(logins + _WARM_UP):
        user, password = f"login-{i % _USERS}", f"pw-{i % _USERS}".encode()
        bare = f"n={user},r={base64.b64encode(os.urandom(18)).decode()}"
        first = request(3, 36, 2, auth_bytes=f"n,,{bare}".encode())
        began = time.process_time()
        context = RequestContext(principal="User:ANONYMOUS", host="127.0.0.1", tls=False, authenticated=False,
                                 asserted=False)
        auth = Authenticator(store, SecurityProtocol.SASL_PLAINTEXT, (ScramMechanism.SCRAM_SHA_256,), context)
        serve(auth, api_versions)
        serve(auth, handshake)
        answer = serve(auth, first)
        middle = time.process_time()
        server_first = bytes(decode_response(36, 2, answer[4:])[1].auth_bytes).decode()
        attrs = dict(attr.split("=", 1) for attr in server_first.split(","))
        key = (user, attrs["s"])
        if key not in salted:
            salted[key] = hashlib.pbkdf2_hmac("sha256", password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted[key], b"Client Key", "sha256")
        without_proof = f"c=biws,r={attrs['r']}"
        signature = hmac.digest(hashlib.sha256(client_key).digest(),
                                f"{bare},{server_first},{without_proof}".encode(), "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        final = request(4, 36, 2, auth_bytes=f"{without_proof},p={proof}".encode())
        resumed = time.process_time()
        serve(auth, final)
        assert auth.complete
        serve(auth, metadata)
        ended = time.process_time()
        if i >= _WARM_UP:
            total += (middle - began) + (ended - resumed)
    store.close()
    return 1e6 * total / logins


def _run(python: str, logins: int) -> float:
    """One repeat in a fresh process of ``python``, in its tree (the tree whose .venv holds it)."""
    tree = Path(__file__).resolve().parents[2] if python == sys.executable else Path(python).parent.parent.parent
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import login_steps; print(login_steps.measure({logins}))")
    out = subprocess.run([python, "-c", code], cwd=tree, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logins", type=int, default=2000, help="logins timed per repeat (after 200 not timed)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (a fresh process each)")
    parser.add_argument("--before-python", help="another tree's interpreter (the code before a change), run beside")
    args = parser.parse_args(argv)
    trees = [("before", args.before_python)] if args.before_python else []
    trees.append(("this tree", sys.executable))
    figures: dict[str, list[float]] = {label: [] for label, _ in trees}
    for r in range(args.repeats):
        for label, python in trees:
            figures[label].append(_run(python, args.logins))
            print(f"  {label}, repeat {r + 1}: {figures[label][-1]:.1f} us CPU a login", flush=True)
    rows = [[label, spread(values, ".1f")] for label, values in figures.items()]
    if args.before_python:
        ratios = [ours / theirs for theirs, ours in zip(figures["before"], figures["this tree"], strict=True)]
        rows.append(["this tree / before, pair by pair", spread(ratios, ".2f")])
    print()
    print_table(f"the server's Python of one SCRAM-SHA-256 login without I/O (ApiVersions, SaslHandshake, two "
                f"SaslAuthenticate, Metadata), {args.logins} logins x {args.repeats} repeats; median (min-max)",
                ["server", "CPU us a login"], rows)
    print(f"median this tree: {statistics.median(figures['this tree']):.1f} us (the whole login over TCP, event loop "
          "included, is scripts.bench.serve_logins)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
