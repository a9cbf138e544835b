"""A transport floor for the large DescribeAcls answer: the least a Python server on the same event loop can cost.

    python -m scripts.bench.serve_floor RESOURCES.json     (started by scripts.bench.serve_side)

A minimal asyncio server (a bare ``asyncio.Protocol``, on the loop ``secmeta serve`` would pick:
``secmeta.core.server.event_loop``) on one PLAINTEXT port.  It answers ApiVersions and Metadata
(what a confluent-kafka AdminClient asks before its first DescribeAcls) with kio entities built per
request, and every DescribeAcls, whatever its filter, with the same answer: the resources in
RESOURCES.json (``secmeta.core.wire.convert.resources_fields`` of the ACLs the store returns),
encoded by kio once per version asked and kept.  A DescribeAcls is then read by its header alone and
written as ``secmeta serve`` writes a kept answer (``codec.response_frame_parts``, ``writelines``): its
CPU per request is what reading a frame, waking the loop and writing the answer's bytes costs, with no
request reading, checking or selection at all.  Any other request closes the connection.  It prints
``listening on HOST:PORT`` when ready and serves until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

from secmeta.core.server import event_loop
from secmeta.core.wire.codec import (
    ApiKey,
    EncodedResponse,
    build,
    decode_request,
    encode_response,
    encoded,
    peek_header,
    response_class,
    response_frame_parts,
)

__all__ = ["FloorProtocol", "main"]

#: The APIs the floor serves, with kio's version ranges (as ``secmeta serve`` advertises them).
SERVED = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.DESCRIBE_ACLS)


class FloorProtocol(asyncio.Protocol):
    """One connection: frames in, answers out in order."""

    def __init__(self, answers: dict[int, EncodedResponse], resources: list[dict[str, Any]], port: int):
        self._answers, self._resources, self._port = answers, resources, port
        self._buffer = b""
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        pos = 0
        while len(buffer) - pos >= 4:
            end = pos + 4 + int.from_bytes(buffer[pos:pos + 4], "big")
            if end > len(buffer):
                break
            self._answer(buffer[pos + 4:end])
            pos = end
        self._buffer = buffer[pos:]

    def _answer(self, frame: bytes) -> None:
        api_key, version, correlation_id = peek_header(frame)
        if api_key == ApiKey.DESCRIBE_ACLS:
            answer = self._answers.get(version)
            if answer is None:      # the first request at this version: kio encodes the answer, kept
                answer = self._answers[version] = encoded(build(
                    response_class(ApiKey.DESCRIBE_ACLS, version), throttle_time=0, error_code=0, error_message=None,
                    resources=self._resources))
            self._transport.writelines(response_frame_parts(correlation_id, answer))
            return
        request = decode_request(frame, trailing_ok=True)
        if api_key == ApiKey.API_VERSIONS:
            response = build(response_class(api_key, version), throttle_time=0, error_code=0, api_keys=[
                {"api_key": key, "min_version": key.versions[0], "max_version": key.versions[1]} for key in SERVED])
        elif api_key == ApiKey.METADATA:
            response = build(response_class(api_key, version), throttle_time=0, error_code=0, cluster_id="floor",
                             controller_id=1, topics=[], cluster_authorized_operations=-2147483648,
                             brokers=[{"node_id": 1, "host": "127.0.0.1", "port": self._port, "rack": None}])
        else:
            self._transport.close()
            return
        self._transport.write(encode_response(request.correlation_id, response))


async def serve(resources: list[dict[str, Any]]) -> None:
    loop = asyncio.get_running_loop()
    answers: dict[int, EncodedResponse] = {}
    ports: list[int] = []
    server = await loop.create_server(lambda: FloorProtocol(answers, resources, ports[0]), "127.0.0.1", 0)
    ports.append(server.sockets[0].getsockname()[1])
    print(f"listening on 127.0.0.1:{ports[0]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    (path,) = argv if argv is not None else sys.argv[1:]
    with open(path) as f:
        resources = json.load(f)
    event_loop.run(serve(resources), event_loop.choice(()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
