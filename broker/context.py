"""Per-request context handed to handlers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import BrokerState


@dataclass(slots=True)
class RequestContext:
    broker: "BrokerState"
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    listener: str = "PLAINTEXT"
