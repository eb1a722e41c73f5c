"""One client connection: read frames, dispatch in order, write responses in request order.

Requests on one connection are handled one at a time (as Kafka does), so responses can never be
reordered; other connections run concurrently on the event loop.
"""
from __future__ import annotations

import asyncio
import logging
import struct

from kafka.protocol.metadata import ApiVersionsResponse

from ..protocol.codec import decode_body
from ..protocol.headers import (
    API_VERSIONS_KEY,
    HeaderError,
    body_offset,
    encode_response_frame,
    encode_response_prefix,
    peek_header,
)
from .context import RequestContext
from .registry import HANDLERS
from .state import BrokerState

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_WRITE_HIGH_WATER = 4 * 1024 * 1024
UNSUPPORTED_VERSION = 35


class CloseConnection(Exception):
    """The peer sent something that cannot be answered; close this connection only."""


def api_versions_list() -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(HANDLERS.values(), key=lambda s: s.api_key)]


def unsupported_api_versions_frame(correlation_id: int) -> bytes:
    """The v0-shaped ApiVersions answer for a version we do not know: error + our version list."""
    body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=api_versions_list()).encode(version=0)
    return encode_response_frame(correlation_id, body, flexible_header=False)


class Connection:
    def __init__(self, state: BrokerState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 listener: str = "PLAINTEXT") -> None:
        self.state = state
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.max_request = state.config.socket_request_max_bytes

    async def run(self) -> None:
        try:
            while True:
                try:
                    size_bytes = await self.reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = _SIZE.unpack(size_bytes)
                if size < 0 or size > self.max_request:
                    raise CloseConnection(f"frame size {size} outside [0, {self.max_request}] "
                                          "(socket.request.max.bytes)")
                try:
                    frame = await self.reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    log.info("connection %s closed mid-frame", self.peer)
                    return
                response = await self.dispatch(frame)
                if response is not None:
                    self.writer.writelines(response)
                    if self.writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                        await self.writer.drain()
        except CloseConnection as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            pass  # broker shutdown: close quietly, like Kafka (an in-flight request gets no answer)
        finally:
            self.writer.close()

    async def dispatch(self, frame: bytes) -> tuple[bytes | bytearray, ...] | None:
        """The response frame as buffers to write in order, or None when no response is due."""
        try:
            header = peek_header(frame)
        except HeaderError as exc:
            raise CloseConnection(f"bad request header: {exc}") from None
        spec = HANDLERS.get(header.api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        version = header.api_version
        if not spec.min_version <= version <= spec.max_version:
            if header.api_key == API_VERSIONS_KEY:
                return (unsupported_api_versions_frame(header.correlation_id),)
            raise CloseConnection(f"unsupported version {version} of API key {header.api_key}")
        flexible = spec.flexible(version)
        try:
            start = body_offset(frame, flexible)
            request = decode_body(spec.request_class, memoryview(frame)[start:], version)
        except Exception as exc:  # any decode failure of untrusted bytes
            raise CloseConnection(f"undecodable {spec.request_class.__name__} v{version}: {exc!r}") from None
        ctx = RequestContext(self.state, version, header.correlation_id, header.client_id, self.peer, self.listener)
        try:
            response = await spec.handler(ctx, request)
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for API key %d failed", header.api_key)
            raise CloseConnection(f"internal error: {exc!r}") from None
        if response is None:
            return None
        body = response.encode(version=version)
        # prefix and body go out as two buffers: a large Fetch body is not copied again
        return (encode_response_prefix(header.correlation_id, len(body),
                                       flexible and header.api_key != API_VERSIONS_KEY), body)
