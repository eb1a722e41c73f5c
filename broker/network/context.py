"""Per-request context handed to handlers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minikafka.broker.security.sasl.authenticator import SaslAuthenticator
    from minikafka.broker.state import BrokerState


@dataclass(slots=True)
class RequestContext:
    broker: "BrokerState"
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    listener: str = "PLAINTEXT"
    # Kafka's KafkaPrincipal as "Type:name": User:ANONYMOUS on PLAINTEXT, the mapped certificate
    # name on SSL, the authenticated user on SASL listeners
    principal: str = "User:ANONYMOUS"
    security_protocol: str = "PLAINTEXT"
    # the connection's SASL state machine on SASL listeners (SaslHandshake/SaslAuthenticate use it), else None
    sasl: "SaslAuthenticator | None" = None
    # a client's request forwarded by a broker inside an Envelope (principal and address are the client's;
    # listener and security protocol are the forwarding hop's)
    forwarded: bool = False
