"""One connection's authentication, as Kafka's SaslServerAuthenticator does it.

On a SASL listener the client may send one ApiVersions (an unsupported version or an
invalid one may be retried; a second answered one closes the connection) and a
SaslHandshake (v0 or v1), then SaslAuthenticate requests carrying the SCRAM messages to
``store.scram_server()``.  Before the handshake any other request closes the connection;
during the exchange any other request is answered with its own error response carrying
ILLEGAL_SASL_STATE, then the connection closes.  After a SaslHandshake v0 the SCRAM
messages come as raw size-prefixed tokens without a Kafka header (Kafka's legacy
framing), and are answered the same way.

A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's one message for bad
credentials, whatever went wrong (an unknown user and a wrong password look the same);
the connection then closes after a delay (``secmeta.core.server.auth_failures``).  Every
exchange is evaluated: nothing is answered as failed without its credentials being checked.
``claimed_user`` is the name the client-first message claimed (for counting failures), and
``exchange_pending`` says the client was given server-first and has not finished: a client
that leaves then has abandoned the exchange, which counts as a failure too.

On PLAINTEXT and SSL listeners the connection is authenticated from the start
(User:ANONYMOUS, or the client certificate's DN); SaslHandshake and SaslAuthenticate are
then answered ILLEGAL_SASL_STATE, as KafkaApis answers them after authentication.
Nothing here logs or keeps SCRAM messages.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from secmeta.core.auth.scram_server import ScramServer
from secmeta.core.errors import ApiException, ErrorCode, InvalidValueError
from secmeta.core.server.listeners import SecurityProtocol
from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import ApiKey, RequestFrame
from secmeta.core.wire.sasl_responses import sasl_authenticate_response, sasl_handshake_response
from secmeta.events.types import ScramMechanism

__all__ = ["AFTER_AUTHENTICATION", "Authenticator", "Evaluated", "Refusal", "Step", "claimed_name", "failure_message"]

#: KafkaApis.handleSaslAuthenticateRequest's answer on an authenticated connection.
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def failure_message(mechanism: str) -> str:
    """Kafka's answer to any failed SASL exchange (SaslServerAuthenticator.handleSaslToken)."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


@dataclass(frozen=True, slots=True)
class Step:
    """What the connection does after an authentication request."""

    response: Any = None          # a response to send (a kio entity or an EncodedResponse)
    raw: bytes | None = None      # or a raw token to send (after SaslHandshake v0)
    close: str | None = None      # then close, for this reason (for the log)
    failed: bool = False          # the close is a failed authentication (counted, delayed)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request that may not be served now: close the connection for ``reason``; if ``message``
    is set, first answer the request with ILLEGAL_SASL_STATE and this message (Kafka's text)."""

    reason: str
    message: str | None = None


class _State(Enum):
    VERSIONS_OR_HANDSHAKE = "awaiting ApiVersions or SaslHandshake"
    HANDSHAKE = "awaiting SaslHandshake"
    AUTHENTICATE = "awaiting SaslAuthenticate"
    RAW = "awaiting a raw SASL token"
    COMPLETE = "authenticated"
    FAILED = "failed"


#: A SCRAM step's outcome: (reply, None), or ("", the failure's exception type name).
Evaluated = tuple[str, str | None]

_EXCHANGING = (_State.AUTHENTICATE, _State.RAW)


class Authenticator:
    """The authentication state of one connection and its RequestContext once authenticated."""

    def __init__(self, store: Any, protocol: SecurityProtocol, mechanisms: tuple[ScramMechanism, ...],
                 context: RequestContext):
        self._store = store
        self._mechanisms = tuple(m.mechanism_name for m in mechanisms)
        self._state = _State.VERSIONS_OR_HANDSHAKE if protocol.sasl else _State.COMPLETE
        # on a SASL listener nothing is authenticated before login (a context built so is taken as it is)
        self._context = dataclasses.replace(context, authenticated=False) if protocol.sasl and context.authenticated \
            else context
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None
        self._first_done = False
        self.claimed_user: str | None = None   # the name client-first claimed (escaped form), once accepted

    def __repr__(self) -> str:
        return f"Authenticator({self._state.value}, {self._mechanism or '-'})"

    @property
    def complete(self) -> bool:
        """True once the connection is authenticated (from the start on PLAINTEXT and SSL)."""
        return self._state is _State.COMPLETE

    @property
    def exchange_pending(self) -> bool:
        """True between server-first and the client's final message: leaving now abandons the exchange."""
        return self._first_done and self._state in _EXCHANGING

    @property
    def expects_raw_token(self) -> bool:
        """True after a SaslHandshake v0: the next frame is a SASL token, not a Kafka request."""
        return self._state is _State.RAW

    @property
    def context(self) -> RequestContext:
        return self._context

    def refusal(self, api_key: int) -> Refusal | None:
        """Why a request of ``api_key`` may not be served now (None: it may), from its header alone."""
        state = self._state
        if state is _State.COMPLETE:
            return None
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        if state is _State.VERSIONS_OR_HANDSHAKE and api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            return None
        if state is _State.HANDSHAKE and api_key == ApiKey.SASL_HANDSHAKE:
            return None
        if state is _State.HANDSHAKE and api_key == ApiKey.API_VERSIONS:
            return Refusal("ILLEGAL_SASL_STATE: a second ApiVersions request before SASL authentication")
        if state is _State.AUTHENTICATE:
            if api_key == ApiKey.SASL_AUTHENTICATE:
                return None
            return Refusal(f"ILLEGAL_SASL_STATE: unexpected {name} request during SASL authentication",
                           f"Unexpected Kafka request of type {name} during SASL authentication.")
        if state is _State.FAILED:
            return Refusal(f"ILLEGAL_SASL_STATE: {name} request after a failed authentication")
        return Refusal(f"ILLEGAL_SASL_STATE: unexpected {name} request before SASL authentication")

    def api_versions_answered(self, error_code: int) -> None:
        """An ApiVersions answer was sent: a successful one ends the versions step (Kafka's
        handleApiVersionsRequest moves to HANDSHAKE_REQUEST only then)."""
        if self._state is _State.VERSIONS_OR_HANDSHAKE and error_code == 0:
            self._state = _State.HANDSHAKE

    def blocking_step(self, message: bytes) -> Callable[[], Evaluated] | None:
        """The SCRAM step for ``message`` as a function to run on a worker thread, if it may run PBKDF2 (a
        delegation-token login derives the token's credential; user logins are a few HMACs), else None.  The
        function touches the exchange only, never this Authenticator: pass its result to ``handle`` or
        ``handle_raw`` on the event loop, which alone changes the connection's state."""
        scram = self._scram
        if scram is None or self._first_done or b"tokenauth" not in message or self._state not in _EXCHANGING:
            return None
        return functools.partial(_scram_step, scram, True, bytes(message))

    # -- requests ----------------------------------------------------------------

    def handle(self, frame: RequestFrame, evaluated: Evaluated | None = None) -> Step:
        """Answer a SaslHandshake or SaslAuthenticate request (``evaluated``: its SCRAM step, from
        ``blocking_step``'s function)."""
        if frame.api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(frame)
        if frame.api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(frame, evaluated)
        raise InvalidValueError(f"not an authentication request: {frame.name}")

    def handle_raw(self, token: bytes, evaluated: Evaluated | None = None) -> Step:
        """A raw SCRAM message after SaslHandshake v0: answered raw; a failure just closes (Kafka's legacy framing)."""
        reply, error = self._evaluate(token, evaluated)
        if error is not None:
            return Step(close=error, failed=True)
        return Step(raw=reply)

    def refused_handshake(self, frame: RequestFrame) -> Any:
        """SaslHandshakeRequest.getErrorResponse(ILLEGAL_SASL_STATE): no mechanisms."""
        return sasl_handshake_response(frame.api_version, ErrorCode.ILLEGAL_SASL_STATE, ())

    def _handshake(self, frame: RequestFrame) -> Step:
        if self._state not in (_State.VERSIONS_OR_HANDSHAKE, _State.HANDSHAKE):
            return Step(self.refused_handshake(frame))
        version, mechanism = frame.api_version, frame.request.mechanism
        if mechanism not in self._mechanisms:
            self._state = _State.FAILED
            response = sasl_handshake_response(version, ErrorCode.UNSUPPORTED_SASL_MECHANISM, self._mechanisms)
            return Step(response, close="UNSUPPORTED_SASL_MECHANISM: the client asked for a mechanism not enabled",
                        failed=True)
        self._mechanism = mechanism
        self._scram = self._store.scram_server(mechanism)
        self._state = _State.RAW if version == 0 else _State.AUTHENTICATE
        return Step(sasl_handshake_response(version, ErrorCode.NONE, self._mechanisms))

    def _authenticate(self, frame: RequestFrame, evaluated: Evaluated | None) -> Step:
        version = frame.api_version
        if self._state is not _State.AUTHENTICATE:
            return Step(sasl_authenticate_response(version, ErrorCode.ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION, b""))
        reply, error = self._evaluate(frame.request.auth_bytes, evaluated)
        if error is not None:
            assert self._mechanism is not None
            response = sasl_authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                  failure_message(self._mechanism), b"")
            return Step(response, close=error, failed=True)
        return Step(sasl_authenticate_response(version, ErrorCode.NONE, None, reply))

    def _evaluate(self, message: bytes, evaluated: Evaluated | None) -> tuple[bytes, str | None]:
        """(reply, None) for the next SCRAM step, or (b"", reason) when the exchange failed; ``evaluated``:
        the step already run on a worker (None: run it here)."""
        scram = self._scram
        assert scram is not None and self._mechanism is not None
        first = not self._first_done
        reply, failure = evaluated if evaluated is not None else _scram_step(scram, first, bytes(message))
        if failure is not None:
            self._fail()
            # The exception's type only: its text may quote the client's message.
            return b"", f"authentication failed with {self._mechanism}: {failure}"
        if first:
            self._first_done = True
            self.claimed_user = claimed_name(bytes(message))
        else:
            self._complete(scram)
        return reply.encode("utf-8"), None

    def _fail(self) -> None:
        self._state = _State.FAILED
        self._scram = None

    def _complete(self, scram: ScramServer) -> None:
        self._context = dataclasses.replace(self._context, principal=scram.principal,
                                            token_authenticated=scram.token_authenticated, authenticated=True)
        self._state = _State.COMPLETE
        self._scram = None


def _scram_step(scram: ScramServer, first: bool, message: bytes) -> Evaluated:
    """One SCRAM step on ``scram`` alone (thread-safe for the connection: it writes no connection state)."""
    try:
        return (scram.first(message) if first else scram.final(message)), None
    except (ApiException, ValueError, TypeError) as exc:
        return "", type(exc).__name__


def claimed_name(client_first: bytes) -> str | None:
    """The user name (or token id) a client-first message the ScramServer accepted claims, in its
    escaped form (RFC 5802's escaping is canonical, so it names one user): ``gs2-header,n=NAME,r=...``."""
    parts = client_first.decode("utf-8", "replace").split(",", 3)
    return parts[2][2:] if len(parts) > 3 and parts[2].startswith("n=") else None
