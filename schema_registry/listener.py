"""`schema.registry.listener`: http://HOST:PORT (checked with the broker's config, before anything opens;
imports no HTTP library)."""
from __future__ import annotations

from urllib.parse import urlsplit

KEY = "schema.registry.listener"


class ListenerError(ValueError):
    """A `schema.registry.listener` value that is not http://HOST:PORT."""


def parse_listener(url: str) -> tuple[str, int]:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ListenerError(f"{KEY}: bad port in {url!r}") from None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/") \
            or parts.query or parts.fragment:
        raise ListenerError(f"{KEY} must be http://HOST:PORT, got {url!r}")
    return parts.hostname, port
