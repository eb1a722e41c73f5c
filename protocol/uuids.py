"""Kafka's random Uuids (org.apache.kafka.common.Uuid.randomUuid): never the reserved ZERO or
METADATA_TOPIC_ID, and never one whose url-safe base64 text starts with "-" (such an id would be taken
for an option by command-line tools)."""
from __future__ import annotations

import base64
import uuid

_RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))


def uuid_text(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): url-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def random_uuid() -> uuid.UUID:
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED and not uuid_text(value).startswith("-"):
            return value
