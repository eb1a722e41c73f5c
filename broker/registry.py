"""The dispatch table: API key -> handler, filled by the @handles decorator.

ApiVersions is answered from this same table, so advertised versions cannot drift from the code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from .context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    request_class: type
    response_class: type
    min_version: int
    max_version: int
    handler: Handler

    def flexible(self, version: int) -> bool:
        return self.request_class.flexible_version_q(version)


HANDLERS: dict[int, HandlerSpec] = {}


def handles(request_class: type, response_class: type, min_version: int, max_version: int):
    """Register `fn` for request_class.API_KEY in [min_version, max_version]."""
    assert request_class.API_KEY == response_class.API_KEY
    assert 0 <= min_version <= max_version <= request_class.max_version

    def register(fn: Handler) -> Handler:
        key = request_class.API_KEY
        if key in HANDLERS:
            raise RuntimeError(f"API key {key} registered twice")
        HANDLERS[key] = HandlerSpec(key, request_class, response_class, min_version, max_version, fn)
        return fn
    return register
