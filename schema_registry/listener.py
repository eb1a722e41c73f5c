"""`schema.registry.listener`: http://HOST:PORT, or https://HOST:PORT with the TLS settings of a listener named
SCHEMA_REGISTRY (`listener.name.schema_registry.ssl.*`, else the broker-wide `ssl.*`, as Kafka's per-listener
keys). Checked with the broker's config, before anything opens; imports no HTTP library."""
from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit

KEY = "schema.registry.listener"
LISTENER_NAME = "SCHEMA_REGISTRY"  # the listener name its ssl.* keys are prefixed with


class ListenerError(ValueError):
    """A `schema.registry.listener` value that is not http(s)://HOST:PORT."""


class Listener(NamedTuple):
    host: str
    port: int
    tls: bool


def parse_listener(url: str) -> Listener:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ListenerError(f"{KEY}: bad port in {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.path not in ("", "/") \
            or parts.query or parts.fragment:
        raise ListenerError(f"{KEY} must be http://HOST:PORT or https://HOST:PORT, got {url!r}")
    return Listener(parts.hostname, port, parts.scheme == "https")
