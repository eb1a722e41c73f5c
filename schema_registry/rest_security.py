"""The REST listener's outer aiohttp middlewares (rest.py puts them before its error middleware):

- observe: counts every answer (schema_registry/metrics.py), outermost, so that 401s and 403s count too;
- secure: authenticates (auth.py; 401 with Confluent's body and a Basic challenge) and authorizes (access.py;
  403 with error code 40301) before the route runs, then drops from list answers the subjects the
  principal may not see. An unmatched route (404/405) needs authentication only.
"""
from __future__ import annotations

import json
from typing import Awaitable, Callable, NamedTuple

from aiohttp import web

from minikafka.schema_registry.access import LISTS, Access
from minikafka.schema_registry.auth import ANONYMOUS, CHALLENGE, Authenticator
from minikafka.schema_registry.metrics import RegistryMetrics

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DENIED = 40301
REGISTER_ROUTE = "/subjects/{subject}/versions"
COMPATIBILITY_PREFIX = "/compatibility/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Security(NamedTuple):
    """None parts are off: no authenticator, every request is User:ANONYMOUS; no access, all allowed."""
    authenticator: Authenticator | None
    access: Access | None


def _answer(value: object, status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(value), content_type=CONTENT_TYPE, headers=headers)


def _route(request: web.Request) -> str | None:
    """The canonical path of the matched route (e.g. /subjects/{subject}), None if no route matched."""
    route = request.match_info.route
    if route.resource is None or getattr(request.match_info, "http_exception", None) is not None:
        return None
    return route.resource.canonical


def middlewares(security: Security | None, metrics: RegistryMetrics | None) -> list:
    out = []
    if metrics is not None:
        out.append(_observe(metrics))
    if security is not None and (security.authenticator is not None or security.access is not None):
        out.append(_secure(security, metrics))
    return out


def _observe(metrics: RegistryMetrics) -> Callable:
    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        route = _route(request)
        registering = request.method == "POST" and route == REGISTER_ROUTE
        before: set[int] = set()
        if registering:
            before = {v.schema_id for v in metrics.registry.state.versions(request.match_info["subject"])}
        try:
            response = await handler(request)
        except BaseException:
            metrics.request(request.path, 500)
            raise
        metrics.request(request.path, response.status)
        if registering and response.status == 200 and isinstance(response, web.Response):
            if _json(response).get("id") not in before:
                metrics.schemas_registered += 1
        elif registering and response.status == 409:
            metrics.compatibility_rejections["register"] += 1
        elif route is not None and route.startswith(COMPATIBILITY_PREFIX) and response.status == 200 \
                and isinstance(response, web.Response) and _json(response).get("is_compatible") is False:
            metrics.compatibility_rejections["check"] += 1
        return response
    return observe


def _json(response: web.Response) -> dict:
    try:
        value = json.loads(response.text or "null")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _secure(security: Security, metrics: RegistryMetrics | None) -> Callable:
    authenticator, access = security

    @web.middleware
    async def secure(request: web.Request, handler: Handler) -> web.StreamResponse:
        principal = ANONYMOUS
        if authenticator is not None:
            found = await authenticator.authenticate(request.headers.get("Authorization"))
            if found is None:
                if metrics is not None:
                    metrics.authentication_failures += 1
                return _answer({"error_code": 401, "message": "Unauthorized"}, 401, {"WWW-Authenticate": CHALLENGE})
            principal = found
        route = _route(request)
        if access is None or route is None:
            return await handler(request)
        host = request.remote or ""
        denial = access.denial(principal, host, request.method, route, request.match_info)
        if denial is not None:
            if metrics is not None:
                metrics.authorization_denials += 1
            return _answer({"error_code": DENIED, "message": denial}, 403)
        response = await handler(request)
        if route in LISTS and response.status == 200 and isinstance(response, web.Response):
            try:
                body = json.loads(response.text or "null")
            except ValueError:
                return response
            kept = access.filtered(principal, host, route, body)
            if kept is not body:
                return _answer(kept, 200)
        return response
    return secure
