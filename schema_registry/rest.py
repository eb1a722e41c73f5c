"""The REST API of Confluent Schema Registry over aiohttp (routes with path parameters, keep-alive, TLS when
given a context), on the broker's event loop: each route reads its parameters, calls the registry
(registry.py) and answers its JSON; a RegistryError is Confluent's error body with its HTTP status.

Bounds: at most MAX_CONNECTIONS open connections, request bodies up to MAX_BODY_BYTES (413 past it; a schema
is parsed and checked on the event loop, so its size bounds that work), idle keep-alive connections closed
after KEEPALIVE_TIMEOUT_S; a handler's unexpected exception is a logged 500 (a 50001 body), never a broken
broker.

On a cluster (a `forwarder` given) a write this node may not make (NotLeader: it does not lead `_schemas`) is
forwarded to the leader's listener (forwarding.py) and answered with the leader's answer once this node applied
it; a write made here answers the `_schemas` offset its state reached in OFFSET_HEADER.
"""
from __future__ import annotations

import asyncio
import json
import logging
import ssl
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import web

from minikafka.schema_registry import errors
from minikafka.schema_registry.forwarding import FORWARDED_HEADER, OFFSET_HEADER, Forwarder
from minikafka.schema_registry.registry import SchemaRegistry

if TYPE_CHECKING:
    from minikafka.schema_registry.metrics import RegistryMetrics
    from minikafka.schema_registry.rest_security import Security

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 2 << 20
KEEPALIVE_TIMEOUT_S = 75.0
MAX_CONNECTIONS = 256  # open connections at once; more are closed unanswered
SHUTDOWN_TIMEOUT_S = 3.0  # at broker stop: requests in flight get this long, then their connections close

REGISTRY: web.AppKey[SchemaRegistry] = web.AppKey("registry", SchemaRegistry)
FORWARDER: web.AppKey[Forwarder] = web.AppKey("forwarder", Forwarder)


def _answer(value: object, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(value), content_type=CONTENT_TYPE)


def _error(status: int, code: int, message: str) -> web.Response:
    return _answer({"error_code": code, "message": message}, status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else None
    except ValueError as exc:
        raise errors.RegistryError(400, 400, f"Unexpected character in the request body: {exc}") from None
    except RecursionError:  # nested past the decoder's depth: a bad request, not a 500
        raise errors.RegistryError(400, 400, "The request body nests too deeply") from None


def _format(request: web.Request) -> str:
    """`?format=`: the output format of a schema (Protobuf's `serialized`: its base64 FileDescriptorProto)."""
    return request.query.get("format", "")


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.schema_id_not_found(request.match_info["id"]) from None  # type: ignore[arg-type]


# the writes, as (method, route) -> (what Confluent's forwarding error names, its timeout message)
WRITES = {
    ("POST", "/subjects/{subject}/versions"): ("register schema", "Register operation timed out"),
    ("DELETE", "/subjects/{subject}"): ("delete subject", "Delete Subject operation timed out"),
    ("DELETE", "/subjects/{subject}/versions/{version}"): ("delete schema version",
                                                           "Delete Schema Version operation timed out"),
    ("PUT", "/config"): ("update config", "Update config operation timed out"),
    ("PUT", "/config/{subject}"): ("update config", "Update config operation timed out"),
    ("DELETE", "/config"): ("delete config", "Delete config operation timed out"),
    ("DELETE", "/config/{subject}"): ("delete config", "Delete config operation timed out"),
    ("PUT", "/mode"): ("update mode", "Update mode operation timed out"),
    ("PUT", "/mode/{subject}"): ("update mode", "Update mode operation timed out"),
    ("DELETE", "/mode"): ("delete mode", "Delete mode operation timed out"),
    ("DELETE", "/mode/{subject}"): ("delete mode", "Delete mode operation timed out"),
}
READY_WAIT_S = 5.0  # a request during a cluster node's start-up waits this long for `_schemas` to be replayed
READ_YOUR_WRITES_S = 5.0  # after a forwarded write: how long this node waits to have applied it
MISS_WAIT_S = 1.0  # a read that found nothing waits this long for what the local replica holds to be committed


def _write_op(request: web.Request) -> tuple[str, str] | None:
    resource = request.match_info.route.resource
    return None if resource is None else WRITES.get((request.method, resource.canonical))


async def _forwarded(request: web.Request, not_leader: errors.RegistryError, op: tuple[str, str] | None
                     ) -> web.StreamResponse:
    """A write this node may not make: the leader's answer (forwarding.py), once this node applied the write."""
    forwarder = request.app.get(FORWARDER)
    if forwarder is None or op is None or FORWARDED_HEADER in request.headers:
        return _answer(not_leader.body(), not_leader.status)  # one hop: the forwarding node asks again
    answer = await forwarder.forward(request.method, request.raw_path, await request.read(), dict(request.headers),
                                     op[0])
    registry = request.app[REGISTRY]
    if answer.offset is not None and 200 <= answer.status < 300 \
            and not await registry.store.wait_applied(registry.state, answer.offset, READ_YOUR_WRITES_S):
        log.warning("schema registry: %s %s: the leader's write (offset %d) not replicated here within %.0f s",
                    request.method, request.path, answer.offset, READ_YOUR_WRITES_S)
    return web.Response(status=answer.status, body=answer.body, headers={"Content-Type": answer.content_type})


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    op = _write_op(request)
    try:
        registry = request.app[REGISTRY]
        await registry.store.wait_ready(READY_WAIT_S)
        registry.refresh()
        try:
            try:
                response = await handler(request)
            except errors.RegistryError as exc:
                # a read that finds nothing: the local replica may hold committed records its high watermark does
                # not show yet (a follower learns it on its next fetch); caught up with them, it asks again
                applied = registry.state.next_offset
                if exc.status != 404 or op is not None or registry.store.local_end() <= applied:
                    raise
                await registry.store.wait_applied(registry.state, registry.store.local_end(), MISS_WAIT_S)
                if registry.state.next_offset == applied:
                    raise
                response = await handler(request)
        except errors.NotLeader as exc:
            return await _forwarded(request, exc, op)
        if op is not None:  # what a forwarding node catches up to before it answers
            response.headers[OFFSET_HEADER] = str(registry.state.next_offset)
        return response
    except errors.RegistryError as exc:
        if exc.error_code == 50002 and op is not None:
            return _error(exc.status, exc.error_code, op[1])
        return _answer(exc.body(), exc.status)
    except web.HTTPRequestEntityTooLarge:
        return _error(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    except web.HTTPException as exc:  # no such route, or a method it does not take
        return _error(exc.status, exc.status, f"HTTP {exc.status} {exc.reason}")
    except Exception as exc:
        log.exception("schema registry: %s %s failed", request.method, request.path)
        return _error(500, 50001, f"Error in the backend data store - {type(exc).__name__}")


# ==================================================================== routes

ROUTES = web.RouteTableDef()


@ROUTES.get("/")
async def root(_request: web.Request) -> web.Response:
    return _answer({})


@ROUTES.get("/schemas")
async def schemas(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].schemas(request.query.get("subjectPrefix", ""), _flag(request, "deleted"),
                                                 _flag(request, "latestOnly")))


@ROUTES.get("/schemas/types")
async def schema_types(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].schema_types())


@ROUTES.get("/schemas/ids/{id}")
async def schema_by_id(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].schema_by_id(_schema_id(request), _format(request)))


@ROUTES.get("/schemas/ids/{id}/schema")
async def schema_text_by_id(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].schema_text_by_id(_schema_id(request), _format(request)))


@ROUTES.get("/schemas/ids/{id}/versions")
async def id_versions(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].id_versions(_schema_id(request), _flag(request, "deleted")))


@ROUTES.get("/schemas/ids/{id}/subjects")
async def id_subjects(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].id_subjects(_schema_id(request), _flag(request, "deleted")))


@ROUTES.get("/subjects")
async def subjects(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].subjects(_flag(request, "deleted"), request.query.get("subjectPrefix", "")))


@ROUTES.get("/subjects/{subject}/versions")
async def versions(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].versions(request.match_info["subject"], _flag(request, "deleted")))


@ROUTES.post("/subjects/{subject}/versions")
async def register(request: web.Request) -> web.Response:
    body = await _body(request)
    return _answer(await request.app[REGISTRY].register(request.match_info["subject"], body,
                                                         _flag(request, "normalize")))


@ROUTES.post("/subjects/{subject}")
async def lookup(request: web.Request) -> web.Response:
    body = await _body(request)
    return _answer(request.app[REGISTRY].lookup(request.match_info["subject"], body, _flag(request, "normalize"),
                                                _flag(request, "deleted"), _format(request)))


@ROUTES.delete("/subjects/{subject}")
async def delete_subject(request: web.Request) -> web.Response:
    return _answer(await request.app[REGISTRY].delete_subject(request.match_info["subject"],
                                                              _flag(request, "permanent")))


@ROUTES.get("/subjects/{subject}/versions/{version}")
async def version(request: web.Request) -> web.Response:
    m = request.match_info
    return _answer(request.app[REGISTRY].version(m["subject"], m["version"], _flag(request, "deleted"),
                                                 _format(request)))


@ROUTES.get("/subjects/{subject}/versions/{version}/schema")
async def version_schema(request: web.Request) -> web.Response:
    m = request.match_info
    return _answer(request.app[REGISTRY].version_schema(m["subject"], m["version"], _flag(request, "deleted"),
                                                        _format(request)))


@ROUTES.get("/subjects/{subject}/versions/{version}/referencedby")
async def referenced_by(request: web.Request) -> web.Response:
    m = request.match_info
    return _answer(request.app[REGISTRY].referenced_by(m["subject"], m["version"]))


@ROUTES.delete("/subjects/{subject}/versions/{version}")
async def delete_version(request: web.Request) -> web.Response:
    m = request.match_info
    return _answer(await request.app[REGISTRY].delete_version(m["subject"], m["version"],
                                                              _flag(request, "permanent")))


@ROUTES.post("/compatibility/subjects/{subject}/versions/{version}")
async def compatibility_version(request: web.Request) -> web.Response:
    body = await _body(request)
    m = request.match_info
    return _answer(request.app[REGISTRY].check_compatibility(m["subject"], m["version"], body,
                                                             _flag(request, "verbose"), _flag(request, "normalize")))


@ROUTES.post("/compatibility/subjects/{subject}/versions")
async def compatibility_all(request: web.Request) -> web.Response:
    body = await _body(request)
    return _answer(request.app[REGISTRY].check_compatibility(request.match_info["subject"], None, body,
                                                             _flag(request, "verbose"), _flag(request, "normalize")))


def _subject(request: web.Request) -> str | None:
    return request.match_info.get("subject")


@ROUTES.get("/config")
@ROUTES.get("/config/{subject}")
async def get_config(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].get_config(_subject(request), _flag(request, "defaultToGlobal")))


@ROUTES.put("/config")
@ROUTES.put("/config/{subject}")
async def set_config(request: web.Request) -> web.Response:
    body = await _body(request)
    return _answer(await request.app[REGISTRY].set_config(_subject(request), body))


@ROUTES.delete("/config")
@ROUTES.delete("/config/{subject}")
async def delete_config(request: web.Request) -> web.Response:
    return _answer(await request.app[REGISTRY].delete_config(_subject(request)))


@ROUTES.get("/mode")
@ROUTES.get("/mode/{subject}")
async def get_mode(request: web.Request) -> web.Response:
    return _answer(request.app[REGISTRY].get_mode(_subject(request), _flag(request, "defaultToGlobal")))


@ROUTES.put("/mode")
@ROUTES.put("/mode/{subject}")
async def set_mode(request: web.Request) -> web.Response:
    body = await _body(request)
    return _answer(await request.app[REGISTRY].set_mode(_subject(request), body, _flag(request, "force")))


@ROUTES.delete("/mode")
@ROUTES.delete("/mode/{subject}")
async def delete_mode(request: web.Request) -> web.Response:
    return _answer(await request.app[REGISTRY].delete_mode(_subject(request)))


# ==================================================================== the listener

def build_app(registry: SchemaRegistry, forwarder: Forwarder | None = None, security: "Security | None" = None,
              metrics: "RegistryMetrics | None" = None) -> web.Application:
    """`security` (authentication, ACLs) and `metrics` add rest_security.py's middlewares before `_errors`."""
    from minikafka.schema_registry.rest_security import middlewares
    app = web.Application(middlewares=[*middlewares(security, metrics), _errors], client_max_size=MAX_BODY_BYTES)
    app[REGISTRY] = registry
    if forwarder is not None:
        app[FORWARDER] = forwarder
    app.add_routes(ROUTES)
    return app


class _Refused(asyncio.Protocol):
    """A connection over MAX_CONNECTIONS: closed at once, unanswered (as the admin listener does)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()


class RestServer:
    """The registry's HTTP listener: `start` binds (OSError if it cannot) and answers the bound port.

    The listening socket is this class's own asyncio server, whose protocol factory is the aiohttp app's (the
    runner's `web.Server`) behind a count: past MAX_CONNECTIONS open connections a new one is closed
    unanswered. aiohttp does the rest: parsing, keep-alive, TLS (`ssl_context`), routing."""

    def __init__(self, registry: SchemaRegistry, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                 forwarder: Forwarder | None = None, security: "Security | None" = None) -> None:
        from minikafka.schema_registry.metrics import RegistryMetrics
        self.security = security  # rest_security.Security: authentication and ACLs; None: open
        self.metrics = RegistryMetrics(registry)  # counters, read by the broker's /metrics
        self.registry = registry
        self.forwarder = forwarder  # a cluster node's: writes it may not make go to the leader (forwarding.py)
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        app = build_app(self.registry, self.forwarder, self.security, self.metrics)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, keepalive_timeout=KEEPALIVE_TIMEOUT_S,
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        handlers = runner.server
        assert handlers is not None

        def connection() -> asyncio.BaseProtocol:
            if len(handlers.connections) >= MAX_CONNECTIONS:
                return _Refused()
            return handlers()

        try:
            self._server = await asyncio.get_running_loop().create_server(
                connection, self.host, self.port, ssl=self.ssl_context, reuse_address=True, backlog=128)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()  # no new connections; the runner closes the open ones
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.forwarder is not None:
            await self.forwarder.close()
