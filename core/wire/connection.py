"""One synchronous, authenticated connection to a Kafka broker, requests encoded by kio.

``Connection.open(config)`` connects to the first reachable bootstrap server (TCP, then
TLS for SSL / SASL_SSL with the CA, an optional client certificate and a host-name check),
sends ApiVersions, and for SASL_PLAINTEXT / SASL_SSL logs in with SaslHandshake v1 and
SaslAuthenticate carrying a SCRAM exchange (secmeta.core.wire.scram_client), verifying the
server's signature.  This is the order of Kafka's SaslClientAuthenticator
(SEND_APIVERSIONS_REQUEST, SEND_HANDSHAKE_REQUEST, then the SASL tokens).

``call(api_key, make_request)`` picks the highest version both sides speak (Kafka's
NodeApiVersions.latestUsableVersion) and fails with UNSUPPORTED_VERSION when there is
none; ``make_request(version)`` builds the kio request for that version.  One request is
in flight at a time, answered in order.  Every failure names the broker and the reason;
none quotes a password.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from importlib import metadata
from typing import Any

from kio.serial.readers import read_int16

from secmeta.core.errors import (
    ApiError,
    ApiException,
    ErrorCode,
    SaslAuthenticationException,
    SecmetaError,
    UnsupportedSaslMechanismException,
    UnsupportedVersionException,
)
from secmeta.core.wire.client_config import ClientConfig, ClientConfigError, split_address
from secmeta.core.wire.codec import (
    ApiKey,
    FrameError,
    api_name,
    build,
    decode_response,
    encode_request,
    frame_size,
    request_class,
)
from secmeta.core.wire.scram_client import ScramClient, token_login

__all__ = ["CLIENT_VERSIONS", "MAX_RESPONSE_BYTES", "BrokerConnectionError", "Connection"]

#: API key -> (min, max) versions this client speaks: those secmeta serves, whose kio classes
#: the client builds with codec.build (SaslHandshake from v1: v0 sends raw SASL tokens).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    **{int(api): api.versions for api in ApiKey},
    ApiKey.SASL_HANDSHAKE: (1, 1),
}

#: A response larger than this is refused (Kafka's socket.request.max.bytes default).
MAX_RESPONSE_BYTES = 100 * 1024 * 1024


class BrokerConnectionError(SecmetaError):
    """The broker could not be reached, the TLS handshake failed, or the connection broke."""


def _software_version() -> str:
    try:
        return metadata.version("secmeta")
    except metadata.PackageNotFoundError:
        return "0"


class Connection:
    """An open connection to one broker; a context manager.  One request at a time: not thread-safe."""

    def __init__(self, sock: socket.socket, broker: str, config: ClientConfig):
        self._sock = sock
        self.broker = broker
        self._config = config
        self._correlation_id = 0
        self.broker_versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"Connection({self.broker}, {self._config.security_protocol})"

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(cls, config: ClientConfig) -> Connection:
        """Connect to the first reachable bootstrap server and log in."""
        failures = []
        for address in config.bootstrap_servers:
            try:
                sock = _connect(address, config)
            except BrokerConnectionError as exc:
                failures.append(exc)
                continue
            conn = cls(sock, address, config)
            try:
                conn._handshake()
            except BaseException:
                conn.close()
                raise
            return conn
        if len(failures) == 1:
            raise failures[0]
        raise BrokerConnectionError("; ".join(str(f) for f in failures))

    def _handshake(self) -> None:
        self.broker_versions = self._api_versions()
        if self._config.uses_sasl:
            self._authenticate()

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions at our newest version; on UNSUPPORTED_VERSION (answered with a v0 body)
        retry at the broker's newest, as ApiVersionsResponse.parse and NetworkClient do."""
        version = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        for _ in range(2):
            request = build(request_class(ApiKey.API_VERSIONS, version), client_software_name="secmeta",
                            client_software_version=_software_version())
            frame = self._roundtrip(request)
            if _error_code_after_v0_header(frame) == ErrorCode.UNSUPPORTED_VERSION:
                _, fallback = self._decode(ApiKey.API_VERSIONS, 0, frame)
                theirs = {int(k.api_key): int(k.max_version) for k in fallback.api_keys}.get(ApiKey.API_VERSIONS)
                low = CLIENT_VERSIONS[ApiKey.API_VERSIONS][0]
                if theirs is None or theirs < low or theirs >= version:
                    break
                version = min(theirs, version)
                continue
            _, response = self._decode(ApiKey.API_VERSIONS, version, frame)
            if int(response.error_code) != ErrorCode.NONE:
                raise self._api_exception(int(response.error_code), None, "ApiVersions")
            return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        raise UnsupportedVersionException(f"broker {self.broker} serves no ApiVersions version this client speaks")

    def _authenticate(self) -> None:
        config = self._config
        mechanism = config.sasl_mechanism
        if mechanism is None or not config.sasl_username or config.sasl_password is None:
            raise ClientConfigError(f"{config.security_protocol} needs sasl.mechanism, sasl.username and sasl.password")
        handshake = self.call(ApiKey.SASL_HANDSHAKE,
                              lambda v: build(request_class(ApiKey.SASL_HANDSHAKE, v), mechanism=mechanism))
        if int(handshake.error_code) != ErrorCode.NONE:
            enabled = ", ".join(handshake.mechanisms) or "none"
            raise UnsupportedSaslMechanismException(
                f"broker {self.broker} does not enable SASL mechanism {mechanism} (enabled: {enabled})")
        if config.token_auth:
            scram = token_login(mechanism, config.sasl_username, config.sasl_password)
        else:
            scram = ScramClient(mechanism, config.sasl_username, config.sasl_password)
        server_first = self._sasl_step(scram.first().encode("utf-8"))
        server_final = self._sasl_step(self._scram(lambda: scram.final(server_first)).encode("utf-8"))
        self._scram(lambda: scram.verify(server_final))

    def _scram(self, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except SaslAuthenticationException as exc:
            raise SaslAuthenticationException(f"{exc.error.message} (broker {self.broker})") from None

    def _sasl_step(self, token: bytes) -> bytes:
        response = self.call(ApiKey.SASL_AUTHENTICATE,
                             lambda v: build(request_class(ApiKey.SASL_AUTHENTICATE, v), auth_bytes=token))
        code = int(response.error_code)
        if code != ErrorCode.NONE:
            raise self._api_exception(code, response.error_message, "SaslAuthenticate")
        return bytes(response.auth_bytes)

    # -- requests ---------------------------------------------------------------------

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both this client and the broker speak."""
        name = api_name(api_key)
        ours = CLIENT_VERSIONS.get(api_key)
        theirs = self.broker_versions.get(api_key)
        if ours is None:
            raise UnsupportedVersionException(f"this client does not speak {name}")
        if theirs is None:
            raise UnsupportedVersionException(f"broker {self.broker} does not serve {name}")
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if low > high:
            raise UnsupportedVersionException(
                f"broker {self.broker} serves {name} v{theirs[0]}-v{theirs[1]}, this client speaks v{ours[0]}-v{ours[1]}")
        return high

    def call(self, api_key: int, make_request: Callable[[int], Any]) -> Any:
        """Send ``make_request(version)`` at the negotiated version; the decoded kio response."""
        version = self.version_for(api_key)
        request = make_request(version)
        _, response = self._decode(api_key, version, self._roundtrip(request))
        return response

    def _roundtrip(self, request: Any) -> bytes:
        self._correlation_id += 1
        correlation_id = self._correlation_id
        name = f"{api_name(int(request.__api_key__))} v{int(request.__version__)}"
        self._send(encode_request(correlation_id, self._config.client_id, request), name)
        frame = self._receive(name)
        if len(frame) < 4:
            raise BrokerConnectionError(f"broker {self.broker} sent a truncated {name} response")
        answered = int.from_bytes(frame[:4], "big", signed=True)
        if answered != correlation_id:
            raise BrokerConnectionError(f"broker {self.broker} answered {name} with correlation id "
                                        f"{answered}, expected {correlation_id}")
        return frame

    def _decode(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        try:
            return decode_response(api_key, version, frame)
        except FrameError as exc:
            raise BrokerConnectionError(f"broker {self.broker}: {exc}") from None

    def _send(self, data: bytes, name: str) -> None:
        try:
            self._sock.settimeout(self._config.request_timeout_s)
            self._sock.sendall(data)
        except TimeoutError:
            raise BrokerConnectionError(f"broker {self.broker} did not take {name} within "
                                        f"{self._config.request_timeout_s:g} s") from None
        except OSError as exc:
            raise BrokerConnectionError(f"connection to broker {self.broker} broke sending {name}: {_reason(exc)}") from None

    def _receive(self, name: str) -> bytes:
        size = frame_size(self._read_exactly(4, name))
        if size < 0 or size > MAX_RESPONSE_BYTES:
            raise BrokerConnectionError(f"broker {self.broker} announced a {size}-byte {name} response "
                                        f"(limit {MAX_RESPONSE_BYTES})")
        return self._read_exactly(size, name)

    def _read_exactly(self, n: int, name: str) -> bytes:
        chunks, got = [], 0
        try:
            while got < n:
                chunk = self._sock.recv(min(n - got, 1 << 20))
                if not chunk:
                    raise BrokerConnectionError(f"broker {self.broker} closed the connection before answering {name}")
                chunks.append(chunk)
                got += len(chunk)
        except TimeoutError:
            raise BrokerConnectionError(f"broker {self.broker} did not answer {name} within "
                                        f"{self._config.request_timeout_s:g} s") from None
        except OSError as exc:
            raise BrokerConnectionError(f"connection to broker {self.broker} broke awaiting {name}: {_reason(exc)}") from None
        return b"".join(chunks)

    def _api_exception(self, code: int, message: str | None, what: str) -> ApiException:
        try:
            error_code = ErrorCode(code)
        except ValueError:
            error_code = ErrorCode.UNKNOWN_SERVER_ERROR
            message = f"{what} failed with error code {code}" + (f": {message}" if message else "")
        text = f"{message} (broker {self.broker})" if message else f"{what} failed (broker {self.broker})"
        return ApiException.from_error(ApiError(error_code, text))


def _error_code_after_v0_header(frame: bytes) -> int | None:
    try:
        return int(read_int16(frame, 4)[0])
    except Exception:
        return None


def _reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    return exc.strerror or type(exc).__name__


def _connect(address: str, config: ClientConfig) -> socket.socket:
    host, port = split_address(address)
    context = _tls_context(config) if config.uses_tls else None
    try:
        sock = socket.create_connection((host, port), timeout=config.connect_timeout_s)
    except TimeoutError:
        raise BrokerConnectionError(f"cannot connect to broker {address}: timed out after "
                                    f"{config.connect_timeout_s:g} s") from None
    except socket.gaierror as exc:
        raise BrokerConnectionError(f"cannot connect to broker {address}: cannot resolve {host!r} ({exc.strerror})") from None
    except OSError as exc:
        raise BrokerConnectionError(f"cannot connect to broker {address}: {_reason(exc)}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if context is None:
        return sock
    try:
        tls = context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise BrokerConnectionError(f"TLS handshake with broker {address} failed: certificate verify failed: "
                                    f"{exc.verify_message or exc.reason}") from None
    except ssl.SSLError as exc:
        sock.close()
        raise BrokerConnectionError(f"TLS handshake with broker {address} failed: {exc.reason or exc}") from None
    except TimeoutError:
        sock.close()
        raise BrokerConnectionError(f"TLS handshake with broker {address} timed out after "
                                    f"{config.connect_timeout_s:g} s") from None
    except OSError as exc:
        sock.close()
        raise BrokerConnectionError(f"TLS handshake with broker {address} failed: {_reason(exc)}") from None
    return tls


def _tls_context(config: ClientConfig) -> ssl.SSLContext:
    """Verify the broker against ssl.ca.location (or the system CAs), its host name unless disabled."""
    try:
        context = ssl.create_default_context(cafile=config.ssl_ca_location)
    except (OSError, ssl.SSLError) as exc:
        raise BrokerConnectionError(f"cannot load ssl.ca.location {config.ssl_ca_location!r}: "
                                    f"{getattr(exc, 'strerror', None) or exc}") from None
    context.check_hostname = config.ssl_check_hostname
    if config.ssl_certificate_location or config.ssl_key_location:
        if not config.ssl_certificate_location:
            raise BrokerConnectionError("ssl.key.location needs ssl.certificate.location")
        try:
            context.load_cert_chain(config.ssl_certificate_location, config.ssl_key_location,
                                    password=config.ssl_key_password)
        except (OSError, ssl.SSLError):
            raise BrokerConnectionError(
                f"cannot load the client certificate {config.ssl_certificate_location!r} and its key "
                f"{config.ssl_key_location!r} (missing file, bad format or wrong ssl.key.password)") from None
    return context
