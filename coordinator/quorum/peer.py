"""A small asyncio Kafka-protocol client for one peer controller: one persistent connection, one
request in flight, kafka.protocol for encoding. Any failure (refused, reset, timeout, a response that
does not decode or answers another correlation id) closes the connection and raises PeerError; the
next request reconnects, but not before a backoff that doubles per consecutive failure (from
`retry_backoff_s` up to `max_backoff_s`) has passed since the last failure — waited inside the
request's timeout but for at most half of it, so a request sent right after a failure can still succeed.

A pooled connection the peer has closed (it restarted, or dropped an idle connection) is not a failure
of the request: one already at EOF is replaced before sending, and one that ends before the first byte
of the answer is retried once on a fresh connection (the old peer never answered, so it was not there
to act on the request).
"""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 64 << 20


class PeerError(Exception):
    """The request got no usable answer (the message counts as lost)."""


class PeerClient:
    def __init__(self, node_id: int, host: str, port: int, client_id: str, request_timeout_s: float,
                 retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0) -> None:
        self.node_id, self.host, self.port = node_id, host, port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s, self.max_backoff_s = retry_backoff_s, max_backoff_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._failures = 0
        self._failed_at = 0.0
        self._lock = asyncio.Lock()

    async def request(self, req: Any, version: int, response_class: type) -> Any:
        async with self._lock:
            try:
                resp = await asyncio.wait_for(self._roundtrip(req, version, response_class), self.request_timeout_s)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, PeerError) as exc:
                self._fail()
                raise PeerError(f"node {self.node_id} ({self.host}:{self.port}): {exc!r}") from None
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Python 3.11's wait_for returns the result when the inner call finishes as the task is
                # cancelled, and the cancellation is lost (gh-86296): deliver it here
                raise asyncio.CancelledError()
            return resp

    async def _roundtrip(self, req: Any, version: int, response_class: type) -> Any:
        reused = self._writer is not None
        if reused and (self._writer.is_closing() or self._reader.at_eof()):  # type: ignore[union-attr]
            self.close()
            reused = False
        try:
            return await self._exchange(req, version, response_class)
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
            if not reused or (isinstance(exc, asyncio.IncompleteReadError) and exc.partial):
                raise
        self.close()  # the peer closed the pooled connection before answering: once more, freshly
        return await self._exchange(req, version, response_class)

    async def _exchange(self, req: Any, version: int, response_class: type) -> Any:
        if self._writer is None:
            # at most half the request timeout: a backoff that had grown to the whole timeout failed
            # every request to a peer that is back (each timeout restarting the backoff), so a
            # follower's fetches to a restarted leader never got through (issue 16)
            wait = min(self._backoff_left(), self.request_timeout_s / 2)
            if wait > 0:
                await asyncio.sleep(wait)
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None and self._writer is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        req.with_header(correlation_id=self._correlation, client_id=self.client_id)
        self._writer.write(bytes(req.encode(version=version, header=True, framed=True)))
        await self._writer.drain()
        size, = _SIZE.unpack(await self._reader.readexactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise PeerError(f"response frame of {size} bytes")
        frame = await self._reader.readexactly(size)
        resp = response_class.decode(frame, version=version, header=True)
        if resp.header.correlation_id != self._correlation:
            raise PeerError(f"correlation id {resp.header.correlation_id}, expected {self._correlation}")
        self._failures = 0
        return resp

    def _backoff_left(self) -> float:
        if not self._failures:
            return 0.0
        backoff = min(self.max_backoff_s, self.retry_backoff_s * 2 ** (self._failures - 1))
        return self._failed_at + backoff - time.monotonic()

    def _fail(self) -> None:
        self._failures += 1
        self._failed_at = time.monotonic()
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._reader = self._writer = None
