"""The HTTP admin listener: `/metrics` (Prometheus), `/health/live`, `/health/ready`, and a route table
other modules extend.

Off unless `minikafka.metrics.listener` (or `minikafka serve --metrics-listener URL`) names
`http://HOST:PORT`. It runs on the broker's event loop and trusts no client:
- one request per connection (`Connection: close`), at most MAX_CONNECTIONS at once (more are closed
  unanswered), the request head at most MAX_HEAD_BYTES and the body at most MAX_BODY_BYTES, each to be
  read within READ_TIMEOUT_S; anything that is not an HTTP/1.x request gets 400 and the connection
  closes. A handler's exception is a 500, logged, never a broken broker.
- handlers are `async (HttpRequest, AdminContext) -> HttpResponse`, and must not block the loop.

Extending it (e.g. fault injection's `/faults`) needs no change here: at import time a module calls
    admin_http.add_route("POST", "/faults", handle_faults)
(`ROUTES` is the process-wide table, keyed by (method, path); an exact path match, no patterns). The
broker imports that module before it starts the listener.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
MAX_BODY_BYTES = 1 << 20
MAX_CONNECTIONS = 64
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0

_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            413: "Payload Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}


class ListenerError(ValueError):
    """A `minikafka.metrics.listener` value that is not http://HOST:PORT."""


@dataclass
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, status: int, text: str) -> "HttpResponse":
        return cls(status, text.encode())

    @classmethod
    def json(cls, status: int, value: object) -> "HttpResponse":
        return cls(status, (json.dumps(value) + "\n").encode(), "application/json")


@dataclass
class AdminContext:
    """What handlers see: the broker's state and whether it is ready."""
    state: "BrokerState"
    ready: Callable[[], bool]
    registry: object = None  # prometheus_client CollectorRegistry, built on first scrape


Handler = Callable[[HttpRequest, AdminContext], Awaitable[HttpResponse]]
ROUTES: dict[tuple[str, str], Handler] = {}


def add_route(method: str, path: str, handler: Handler) -> None:
    """Register `handler` for `method path` (replacing an earlier one for the same pair)."""
    ROUTES[(method.upper(), path)] = handler


def parse_listener(url: str) -> tuple[str, int]:
    """`http://HOST:PORT` -> (host, port); port 0 binds a free port."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        raise ListenerError(f"minikafka.metrics.listener: bad port in {url!r}") from None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ListenerError(f"minikafka.metrics.listener must be http://HOST:PORT, got {url!r}")
    return parts.hostname, port


# -- the built-in routes -------------------------------------------------------------------------
async def _live(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    return HttpResponse.text(200, "live\n")


async def _ready(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    return HttpResponse.text(200, "ready\n") if ctx.ready() else HttpResponse.text(503, "not ready\n")


async def _metrics(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
    if ctx.registry is None:
        from minikafka.broker.ops.metrics_collector import make_registry
        ctx.registry = make_registry(ctx.state, ctx.ready)
    # on the loop thread on purpose: it reads broker state (O(partitions + group offsets) per scrape)
    return HttpResponse(200, generate_latest(ctx.registry), CONTENT_TYPE_LATEST)


add_route("GET", "/health/live", _live)
add_route("GET", "/health/ready", _ready)
add_route("GET", "/metrics", _metrics)


# -- the server ------------------------------------------------------------------------------------
class AdminHttpServer:
    def __init__(self, ctx: AdminContext, host: str, port: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._active: set[asyncio.Task] = set()

    async def start(self) -> int:
        """Bind; raises OSError when the address cannot be bound. Returns the bound port."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                  limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._active):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._active) >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        assert task is not None
        self._active.add(task)
        try:
            response = await self._answer(reader)
            if response is not None:
                writer.write(_encode(response))
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        finally:
            self._active.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> HttpResponse | None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except asyncio.TimeoutError:
            return HttpResponse.text(408, "request timeout\n")
        except asyncio.LimitOverrunError:
            return HttpResponse.text(413, "request head too large\n")
        except asyncio.IncompleteReadError as exc:
            return HttpResponse.text(400, "bad request\n") if exc.partial.strip() else None
        request = _parse_head(head)
        if request is None:
            return HttpResponse.text(400, "bad request\n")
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or "transfer-encoding" in request.headers:
            return HttpResponse.text(400, "bad request: only Content-Length bodies\n")
        if int(length) > MAX_BODY_BYTES:
            return HttpResponse.text(413, "body too large\n")
        if int(length):
            try:
                request.body = await asyncio.wait_for(reader.readexactly(int(length)), READ_TIMEOUT_S)
            except asyncio.TimeoutError:
                return HttpResponse.text(408, "request timeout\n")
            except asyncio.IncompleteReadError:
                return None
        handler = ROUTES.get((request.method, request.path))
        if handler is None:
            if any(path == request.path for _m, path in ROUTES):
                return HttpResponse.text(405, "method not allowed\n")
            return HttpResponse.text(404, "not found\n")
        try:
            return await handler(request, self.ctx)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("admin HTTP handler for %s %s failed", request.method, request.path)
            return HttpResponse.text(500, "internal error\n")


def _parse_head(head: bytes) -> HttpRequest | None:
    """The request line and headers, or None if this is not an HTTP/1.x request."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[0].isupper() or not parts[1].startswith("/"):
        return None
    if parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    url = urlsplit(parts[1])
    return HttpRequest(parts[0], url.path, parse_qs(url.query), headers, b"")


def _encode(response: HttpResponse) -> bytes:
    reason = _REASONS.get(response.status, "")
    lines = [f"HTTP/1.1 {response.status} {reason}", f"Content-Type: {response.content_type}",
             f"Content-Length: {len(response.body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in response.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body
