"""What a request handler gets and returns: the contract between the connection loop and the APIs.

A handler (``secmeta.core.server.handling.Handler``) turns a ``Call`` into a kio response entity of
the response class for ``call.frame.api_key`` / ``call.frame.api_version``
(``secmeta.core.wire.codec.response_class``).  The connection runs it in a worker thread unless the
handler says the request is a bounded read, so it may block on the store (fsync, PBKDF2);
the store serialises writes itself.  A handler never raises for a per-item problem: Kafka's
per-item error codes go into the response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from secmeta.core.server.image_answers import ImageAnswers
from secmeta.core.types import RequestContext
from secmeta.core.wire.codec import RequestFrame


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """This one-node cluster as Metadata and DescribeCluster describe it to a client."""

    node_id: int           # the broker id, also the controller id
    cluster_id: str        # the store's id
    host: str              # advertised host of the listener the client connected to
    port: int              # advertised port of that listener
    rack: str | None = None


class Call(NamedTuple):
    """One decoded request on an authenticated connection (a named tuple: one is made per request)."""

    store: Any             # secmeta.core.store.facade.SecurityStore (Any: handlers must not need more than its public API)
    context: RequestContext  # principal, peer host, tls, token_authenticated of the connection
    frame: RequestFrame    # api key, version, correlation id, client id and the kio request
    broker: BrokerInfo
    answers: ImageAnswers | None = None   # the server's answers kept per published image (None: keep none)
    cluster: Any = None    # secmeta.core.server.controllership.Controllership in replicated mode, else None

    @property
    def request(self) -> Any:
        return self.frame.request

    @property
    def version(self) -> int:
        return self.frame.api_version

