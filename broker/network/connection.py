"""Client connections: frames read straight into preallocated buffers, one request in flight.

`Connection` is an `asyncio.BufferedProtocol`: it reads the 4-byte size, takes the frame's size from
the request memory pool (broker/network/memory_pool.py), then reads the frame directly into a bytearray of
that size (get_buffer/buffer_updated). As Kafka does, a connection has **one request in flight**:
once a whole frame has arrived the connection is muted until the response has been handed to the
transport and the transport's write buffer has drained (pause_writing/resume_writing); then it is
unmuted. Muting is lazy: if the client sends more while a request is in flight, at most the next
4-byte size is read and then the socket is paused (pause_reading); a client that waits for its
answers costs no pause/resume per request. So responses stay in request order, no memory is taken
for a second frame, and a pipelining client cannot starve others.

Bounds (`ConnectionRegistry`, broker/network/connection_registry.py): `max.connections` / `max.connections.per.ip` (a new connection over
the limit is closed at once; one log line per 10 s), `connections.max.idle.ms` (nothing in flight and
no bytes for that long), `minikafka.request.read.timeout.ms` (a frame not complete that long after
its first byte; the time spent waiting for pool memory does not count), and a response the client
does not read for `connections.max.idle.ms` (write buffer stuck).

Responses are the buffers `Connection.dispatch` returns: bytes-like parts, or an `EncodedBody`
(broker/network/response.py) whose `FileSlice` parts are sent with os.sendfile when the transport's buffer is
empty, else in bounded pread chunks while waiting for the transport to drain.

TLS (SSL and SASL_SSL listeners, broker/security/tls.py): the listener's protocol is the event loop's TLS
protocol around a Connection; it admits the connection at TCP accept (`tcp_accepted`: handshakes
count against max.connections, as in Kafka), runs the handshake bounded by
`minikafka.ssl.handshake.timeout.ms`, and calls `connection_made` with the TLS transport after it,
where the principal is taken from the client certificate (broker/security/ssl_principal.py). A failed or
timed-out handshake is one INFO line (`tls_failed`) and a closed socket. Over TLS, file parts of a response go out in pread chunks
(no sendfile through TLS), each chunk encrypted by the transport, waiting for it to drain.

Errors: a peer that resets or disconnects at any point is closed quietly (DEBUG); a request that
cannot be answered or a failing handler logs one line (no traceback unless DEBUG) and closes that
connection only.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
from time import perf_counter
from typing import TYPE_CHECKING, Any, Iterable

from kafka.protocol.metadata import ApiVersionsResponse

from minikafka.protocol.codec import decode_body
from minikafka.protocol.headers import (
    API_VERSIONS_KEY,
    HeaderError,
    body_offset,
    encode_response_frame,
    encode_response_prefix,
    peek_header,
)
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.memory_pool import Grant
from minikafka.broker.ops.metrics import HANDLER_FAILED, response_error
from minikafka.broker.network.registry import advertised_versions, spec_for
from minikafka.broker.network.response import EncodedBody, FileSlice
from minikafka.broker.security.sasl.errors import SaslFailure, SessionExpired
from minikafka.protocol.errors import UNSUPPORTED_VERSION

if TYPE_CHECKING:
    from minikafka.broker.security.sasl.authenticator import SaslAuthenticator
    from minikafka.broker.network.connection_registry import ConnectionRegistry
    from minikafka.broker.state import BrokerState
    from minikafka.broker.security.tls import ListenerTls

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
WRITE_HIGH_WATER = 1024 * 1024  # unmute once the transport's buffer has drained (low water 0)
FILE_CHUNK = 256 * 1024  # pread chunk of a FileSlice that cannot go out with sendfile
STASH_MAX = 64 * 1024  # bytes a paused transport may still deliver (should be none)

# APIs whose in-flight request is cancelled when its client disconnects: a parked Fetch long poll
# would otherwise hold a task and its pool memory for up to the client-chosen max_wait_ms after the
# client is gone (and resetting connections would get around max.connections). The Fetch handler
# holds nothing while parked and must stay cancel-safe (shutdown cancels every request anyway).
# Other APIs run to completion: their effects (appends, group/transaction state) must not be cut.
CANCEL_ON_DISCONNECT = frozenset({1})

# reading states
_HEADER, _WAIT_POOL, _BODY, _SIZE_PENDING = range(4)
_API_VERSIONS_KEY = b"\x00\x12"  # api key 18, the first two bytes of a request frame


class CloseConnection(Exception):
    """The peer sent something that cannot be answered; close this connection only."""

    level = logging.WARNING


class HandlerFailed(CloseConnection):
    """A handler raised: our bug or an unexpected state; close this connection only."""

    level = logging.ERROR


class InjectedDisconnect(CloseConnection):
    """An injected fault (broker/ops/faults.py) closes this connection unanswered."""

    level = logging.INFO


class _ConnectionGone(Exception):
    """The transport closed while a response was being written."""


def api_versions_list(controller: bool = False, quorum: bool = False) -> list:
    """Every API the broker serves (the static table: handler modules need not be imported); on a
    controller listener when `controller`, on a broker listener of a quorum node when `quorum`."""
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, lo, hi in advertised_versions(controller, quorum)]


def unsupported_api_versions_frame(correlation_id: int, controller: bool = False, quorum: bool = False) -> bytes:
    """The v0-shaped ApiVersions answer for a version we do not know: error + our version list."""
    body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION,
                               api_keys=api_versions_list(controller, quorum)).encode(version=0)
    return encode_response_frame(correlation_id, body, flexible_header=False)


def describe_tls_error(exc: BaseException) -> str:
    """One line about a failed handshake; a hint where the peer is no TLS client at all."""
    import ssl
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate not trusted: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate (ssl.client.auth=required)"
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "PACKET_LENGTH_TOO_LONG",
                      "RECORD_LAYER_FAILURE", "UNEXPECTED_RECORD", "HTTPS_PROXY_REQUEST"):
            return f"{reason} (not a TLS client: a plaintext client on an SSL listener?)"
        return str(reason)
    if isinstance(exc, (ConnectionAbortedError, asyncio.TimeoutError)):
        return f"{exc} (minikafka.ssl.handshake.timeout.ms)" if str(exc) else "timed out (minikafka.ssl.handshake.timeout.ms)"
    return repr(exc) if not str(exc) else f"{type(exc).__name__}: {exc}"


def _new_authenticator(state: "BrokerState | None", listener: str) -> "SaslAuthenticator | None":
    """The SASL authenticator of a new connection on `listener`, or None on a non-SASL listener."""
    settings = getattr(state.config, "sasl", {}).get(listener) if state is not None else None
    if settings is None:
        return None
    from minikafka.broker.security.sasl.authenticator import SaslAuthenticator  # SASL listeners only: not at start-up
    return SaslAuthenticator(settings, state.scram_credentials.get,
                             token_lookup=lambda token_id, mechanism: state.delegation_tokens.scram_lookup(
                                 token_id, mechanism))  # the token store is read on a token's first login


def _flatten(parts: Iterable[Any]) -> Iterable[Any]:
    for part in parts:
        if isinstance(part, EncodedBody):
            yield from part.parts
        else:
            yield part


def _close_slices(parts: Iterable[Any]) -> None:
    for part in parts:
        if isinstance(part, (FileSlice, EncodedBody)):
            part.close()


class Connection(asyncio.BufferedProtocol):
    """One client connection (see the module docstring)."""

    def __init__(self, registry: "ConnectionRegistry", state: "BrokerState | None", listener: str = "PLAINTEXT",
                 tls: "ListenerTls | None" = None) -> None:
        self.registry = registry
        self.state = state
        self.metrics = state.metrics if state is not None else None
        self.faults = getattr(state, "faults", None)  # broker/ops/faults.py; None unless enabled
        self.listener = listener
        self.security_protocol = (state.config.security_protocols.get(listener, "PLAINTEXT")
                                  if state is not None else "PLAINTEXT")
        self.principal = "User:ANONYMOUS"  # replaced by TLS client certificates or SASL
        self.tls = tls
        self.tls_ready = False  # TLS listeners: the handshake finished and connection_made ran
        # SASL listeners: the authenticator (broker/security/sasl/authenticator.py) gates every request until
        # the client has authenticated; after a failed authentication the connection answers after
        # `_close_delay` seconds (Kafka's connection.failed.authentication.delay.ms) and closes
        self.sasl = _new_authenticator(state, listener)
        self._close_after_response = False
        self._close_delay = 0.0
        self._throttle_s = 0.0  # client quotas: read nothing more for this long after the response (KIP-219)
        self.refused_delay_s = 0.0  # set by the registry: an ip over its connection_creation_rate
        self.accept_delay_s = 0.0  # set by the registry: over max.connection.creation.rate (then a deadline)
        # a controller listener (KRaft combined mode) serves registry.CONTROLLER_API_TABLE only
        self.controller = state is not None and listener in getattr(state.config, "controller_listener_names", ())
        self.quorum = state is not None and getattr(state.config, "quorum", None) is not None
        # a cluster node serves its broker listeners only once it has caught up with the metadata log
        # (Kafka enables request processing after the initial catch-up): no answers from a stale image.
        # ApiVersions is answered at once (it carries no metadata; readiness probes use it).
        cluster = getattr(state, "cluster", None) if self.quorum and not self.controller else None
        self._start_gate: asyncio.Event | None = (
            cluster.caught_up_once if cluster is not None and not cluster.caught_up_once.is_set() else None)
        self.pool = registry.pool
        self.max_request = registry.max_request
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = "?"
        self._sock_fd = -1
        self._hdr = bytearray(4)
        self._hdr_view = memoryview(self._hdr)
        self._hdr_pos = 0
        self._read_state = _HEADER
        self._frame: bytearray | None = None
        self._frame_view: memoryview | None = None
        self._frame_pos = 0
        self._pending_size = 0
        self._grant: Grant | None = None
        self._waiter = None
        self._stash: bytearray | None = None
        self._stash_buf: bytearray | None = None
        now = self.loop.time()
        self.frame_started: float | None = None
        self.last_io = now
        self.busy = False  # a request in flight (from its last byte until its response drained)
        self._reading = True
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self._wbuf_seen = -1
        self._wbuf_progress_at = now
        self._eof = False
        self.closed = False
        self._logged = False
        self.task: asyncio.Task | None = None
        self.inflight_api = -1
        self.client_id: str | None = None
        self.admitted = False
        self._sasl_response_header: tuple[int, int, bool] | None = None

    # -- transport callbacks ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.tls is not None:  # the TLS handshake is done; admitted at accept (tcp_accepted)
            self.transport = transport  # type: ignore[assignment]
            self.tls_ready = True
            if self.closed:
                transport.abort()
                return
            try:
                ssl_object = transport.get_extra_info("ssl_object")
                der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
                if self.security_protocol == "SSL":  # SASL_SSL: the principal comes from SASL
                    from minikafka.broker.security.ssl_principal import principal_of  # TLS listeners only: not at start-up
                    self.principal = principal_of(der, self.tls.mapper)
            except Exception as exc:  # no rule maps the name, an undecodable certificate: refused
                self.close(logging.INFO, f"client certificate refused: {exc}")
                return
            self.last_io = self.loop.time()
            self._transport_ready(transport)
            return
        if self.tcp_accepted(transport):
            self._transport_ready(transport)

    def tcp_accepted(self, transport: asyncio.BaseTransport) -> bool:
        """Peer address and admission (max.connections); False: refused and closed."""
        self.transport = transport  # type: ignore[assignment]  (uvloop's is no asyncio.Transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.ip = str(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
        else:
            self.ip = self.peer = str(peer)
        if not self.registry.admit(self):
            self.closed = True
            if self.refused_delay_s > 0:  # over an ip's connection_creation_rate: closed after the throttle time
                try:
                    transport.pause_reading()
                except (RuntimeError, AttributeError):
                    pass
                self.loop.call_later(self.refused_delay_s, transport.close)
            else:
                transport.close()
            return False
        if self.accept_delay_s > 0:  # Kafka's acceptor takes the connection this much later: its first
            self.accept_delay_s += self.loop.time()  # request is handled no earlier (see _process)
        return True

    def tls_failed(self, exc: BaseException) -> None:
        """The TLS handshake failed or timed out (the TLS layer closes the socket): one line, teardown."""
        self._log_once(logging.INFO, "closing connection %s: TLS handshake failed: %s", self.peer,
                       describe_tls_error(exc))
        self._teardown()

    def _transport_ready(self, transport: asyncio.BaseTransport) -> None:
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=0)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            try:
                self._sock_fd = sock.fileno()
            except (OSError, ValueError):
                self._sock_fd = -1

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self._log_once(logging.DEBUG, "connection %s lost: %r", self.peer, exc)
        self._teardown()

    def eof_received(self) -> bool:
        # a client that half-closes after its last request still gets the answer to it
        if self.busy or self._read_state == _SIZE_PENDING:
            self._eof = True
            return self.tls is None  # TLS has no half-close: the transport closes whatever we answer
        if self._read_state != _HEADER or self._hdr_pos:
            self._log_once(logging.INFO, "connection %s closed mid-frame", self.peer)
        return False

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drainers()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.closed:  # bytes still arriving on a connection we closed: discarded
            return self._hdr_view
        state = self._read_state
        if state == _BODY:
            assert self._frame_view is not None
            return self._frame_view[self._frame_pos:]
        if state == _HEADER:
            return self._hdr_view[self._hdr_pos:]
        # paused but the transport still reads: keep the bytes for later (bounded)
        if self._stash_buf is None:
            self._stash_buf = bytearray(4096)
        return memoryview(self._stash_buf)

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self.last_io = self.loop.time()
        state = self._read_state
        if state == _BODY:
            self._frame_pos += nbytes
            if self._frame_pos == len(self._frame):  # type: ignore[arg-type]
                self._frame_complete()
        elif state == _HEADER:
            if self._hdr_pos == 0:
                self.frame_started = self.last_io
            self._hdr_pos += nbytes
            if self._hdr_pos == 4:
                self._size_complete()
        else:
            assert self._stash_buf is not None
            if self._stash is None:
                self._stash = bytearray()
            self._stash += self._stash_buf[:nbytes]
            if len(self._stash) > STASH_MAX:
                self.close(logging.WARNING, f"read {len(self._stash)} bytes while muted")

    # -- reading state machine --------------------------------------------------------------
    def _size_complete(self) -> None:
        (size,) = _SIZE.unpack(self._hdr)
        self._hdr_pos = 0
        if size < 0 or size > self.max_request:
            self.close(logging.WARNING, f"frame size {size} outside [0, {self.max_request}] (socket.request.max.bytes)")
            return
        sasl = self.sasl
        if sasl is not None and not sasl.authenticated and size > sasl.settings.max_receive_size:
            self.close(logging.INFO, f"SASL frame size {size} before authentication exceeds "
                                     f"sasl.server.max.receive.size {sasl.settings.max_receive_size}")
            return
        if self.busy:  # only if the transport delivered bytes after pause_reading
            self._pending_size = size
            self._read_state = _SIZE_PENDING
            self._set_reading(False)
            return
        self._start_frame(size)

    def _start_frame(self, size: int) -> None:
        if size == 0:
            self._frame = bytearray()
            self._frame_complete()
            return
        grant = self.pool.try_allocate(size)
        if grant is None:
            self._read_state = _WAIT_POOL
            self._set_reading(False)
            self._waiter = self.pool.wait(size, self._granted)
            return
        self._begin_body(grant, size)

    def _granted(self, grant: Grant) -> None:
        """Pool callback: memory for the frame whose size we read is now ours."""
        self._waiter = None
        if self.closed:
            self.pool.release(grant)
            return
        self.frame_started = self.loop.time()  # waiting for the pool is not the client's fault
        self._begin_body(grant, grant[1])
        self._feed_stash()

    def _begin_body(self, grant: Grant, size: int) -> None:
        self._grant = grant
        self._frame = bytearray(size)
        self._frame_view = memoryview(self._frame)
        self._frame_pos = 0
        self._read_state = _BODY
        self._set_reading(True)

    def _frame_complete(self) -> None:
        frame, grant = self._frame, self._grant
        assert frame is not None
        self._frame = self._frame_view = None
        self._grant = None
        self._read_state = _HEADER
        self.frame_started = None
        self.busy = True
        # Muted lazily: the socket stays armed, and only if the client sends more while this request
        # is in flight do we read (at most) the next 4-byte size and then pause_reading. A client that
        # waits for its answer, the common case, so costs no pause/resume calls per request.
        box = [grant] if grant is not None else []  # released once: by _process, or when the task ends
        self.task = task = self.loop.create_task(self._process(frame, box))
        self.registry.track(task, box)

    def _set_reading(self, want: bool) -> None:
        want = want and not self.closed and not self._eof
        if want == self._reading or self.transport is None:
            return
        self._reading = want
        try:
            if want:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()
        except (RuntimeError, AttributeError):  # transport closing
            pass

    def _feed_stash(self) -> None:
        """Bytes read while muted, fed through the state machine (normally there are none)."""
        while self._stash and not self.closed and self._read_state in (_HEADER, _BODY):
            view = self.get_buffer(len(self._stash))
            n = min(len(view), len(self._stash))
            view[:n] = self._stash[:n]
            del view
            del self._stash[:n]
            self.buffer_updated(n)

    def _unmute(self) -> None:
        self.busy = False
        if self.closed:
            return
        self.last_io = self.loop.time()  # idle time counts from the end of the last response
        if self._eof or self._close_after_response:
            self.close()
            return
        if self._read_state == _SIZE_PENDING:
            self._read_state = _HEADER
            self._start_frame(self._pending_size)
        else:
            self._set_reading(self._read_state in (_HEADER, _BODY))
        self._feed_stash()

    # -- request processing -----------------------------------------------------------------
    async def _process(self, frame: bytearray, box: list[Grant]) -> None:
        response = None
        try:
            try:
                if self.accept_delay_s:  # accepted past max.connection.creation.rate
                    wait, self.accept_delay_s = self.accept_delay_s - self.loop.time(), 0.0
                    if wait > 0:
                        await asyncio.sleep(wait)
                if self._start_gate is not None:
                    await self._wait_for_metadata(frame)
                response = await self.dispatch(frame)
            finally:
                del frame
                if box:
                    self.pool.release(box.pop())
            if self._close_after_response and self._close_delay > 0:
                await asyncio.sleep(self._close_delay)  # failed authentication: answer late, then close
            if response is not None:
                if self.closed:
                    return
                if len(response) == 2 and not isinstance(response[1], EncodedBody):
                    self._writelines(response)  # the common case: prefix + encoded body
                else:
                    await self._write_response(response)
            if self._write_paused:
                await self._drain()
            if self._throttle_s > 0:  # over a client quota: the channel stays muted for the throttle time
                delay, self._throttle_s = self._throttle_s, 0.0
                await asyncio.sleep(delay)
        except CloseConnection as exc:
            self.close(exc.level, str(exc))
            return
        except _ConnectionGone:
            self.close()
            return
        except (ConnectionError, OSError) as exc:
            self.close(logging.DEBUG, f"write failed: {exc!r}")
            return
        except asyncio.CancelledError:
            self.abort()  # broker shutdown: an in-flight request gets no answer, as in Kafka
            raise
        except Exception as exc:  # our bug anywhere on the way out: close, never leave the connection muted
            log.error("connection %s: request processing failed: %r", self.peer, exc, exc_info=True)
            self.close(logging.DEBUG, f"request processing failed: {exc!r}")
            return
        finally:
            if response is not None:
                _close_slices(response)
            self.task = None
        self._unmute()

    async def _wait_for_metadata(self, frame: bytearray) -> None:
        gate = self._start_gate
        assert gate is not None
        if not gate.is_set() and frame[:2] != _API_VERSIONS_KEY:
            await gate.wait()
        if gate.is_set():
            self._start_gate = None

    async def dispatch(self, frame: bytes | bytearray) -> tuple[Any, ...] | None:
        """The response frame as parts to write in order (bytes-like, or an `EncodedBody` after
        its prefix), or None when no response is due (acks=0)."""
        if self.sasl is None:
            return await self._dispatch(frame)
        try:
            return await self._dispatch_sasl(frame, self.sasl)
        except SaslFailure as exc:
            return self._sasl_failed(exc)

    async def _dispatch_sasl(self, frame: bytes | bytearray, sasl: "SaslAuthenticator") -> tuple[Any, ...] | None:
        """A request on a SASL listener: raw SASL tokens after SaslHandshake v0; otherwise a Kafka
        request, processed only if the authenticator lets it through (`check_request`)."""
        self._sasl_response_header = None
        if sasl.raw_tokens:
            await sasl.prepare(bytes(frame))
            answer, _ = sasl.evaluate(bytes(frame))
            self.principal = sasl.principal or self.principal
            return (_SIZE.pack(len(answer)), answer)
        try:
            header = peek_header(frame)
        except HeaderError as exc:
            raise SaslFailure(f"bad request header before authentication: {exc}") from None
        try:
            sasl.check_request(header.api_key)
        except SessionExpired as exc:  # KIP-368: closed unanswered, as Kafka's SocketServer does
            self._close_after_response = True
            self._log_once(logging.INFO, "closing connection %s: %s", self.peer, exc)
            return None
        if sasl.authenticated and header.api_key not in (17, 36):
            return await self._dispatch(frame)
        response = await self._dispatch(frame)
        if header.api_key == API_VERSIONS_KEY and not sasl.authenticated:
            sasl.api_versions_answered(response is not None and len(response) == 2
                                       and bytes(response[1][:2]) == b"\x00\x00")
        if sasl.authenticated:
            self.principal = sasl.principal or self.principal
        return response

    def _sasl_failed(self, exc: "SaslFailure") -> tuple[Any, ...] | None:
        """Authentication failed: log it, answer (if Kafka answers) after the failure delay, close."""
        self._close_after_response = True
        self._close_delay = self.sasl.failure_delay_s if exc.delayed and self.sasl is not None else 0.0
        self._log_once(logging.INFO, "authentication of %s failed on listener %s: %s", self.peer, self.listener, exc)
        response = exc.response
        if response is None or self._sasl_response_header is None:
            return None
        correlation_id, version, flexible = self._sasl_response_header
        body = response.encode(version=version)
        return (encode_response_prefix(correlation_id, len(body), flexible), body)

    async def _dispatch(self, frame: bytes | bytearray) -> tuple[Any, ...] | None:
        try:
            header = peek_header(frame)
        except HeaderError as exc:
            raise CloseConnection(f"bad request header: {exc}") from None
        try:
            # imports the handler module on the API's first request
            spec = spec_for(header.api_key, self.controller, self.quorum)
        except Exception as exc:  # our bug: the module does not import
            raise HandlerFailed(f"loading the handler for API key {header.api_key} failed: {exc!r}") from None
        if spec is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        version = header.api_version
        if not spec.min_version <= version <= spec.max_version:
            if header.api_key == API_VERSIONS_KEY:
                return (unsupported_api_versions_frame(header.correlation_id, self.controller, self.quorum),)
            raise CloseConnection(f"unsupported version {version} of API key {header.api_key}")
        flexible = spec.flexible(version)
        try:
            start = body_offset(frame, flexible)
            request = decode_body(spec.request_class, memoryview(frame)[start:], version)
        except Exception as exc:  # any decode failure of untrusted bytes
            raise CloseConnection(f"undecodable {spec.request_class.__name__} v{version}: {exc!r}") from None
        self.client_id = header.client_id
        ctx = RequestContext(self.state, version, header.correlation_id, header.client_id, self.peer, self.listener,
                             self.principal, self.security_protocol, self.sasl)
        if self.sasl is not None:  # a SaslFailure's answer is encoded for this request
            self._sasl_response_header = (header.correlation_id, version, flexible and header.api_key != API_VERSIONS_KEY)
        self.inflight_api = header.api_key
        t0 = perf_counter()
        fault = self.faults.take(spec.api_name, request, header.client_id) if self.faults is not None else None
        try:
            response = None if fault is None else await self.faults.before(fault, request, version)
            if response is None:
                response = await spec.handler(ctx, request)
            if fault is not None and fault.disconnect == "after_apply":
                raise InjectedDisconnect(f"injected disconnect after_apply (rule {fault.id})")
        except (CloseConnection, SaslFailure):
            raise
        except Exception as exc:
            if self.metrics is not None:
                self.metrics.request_done(header.api_key, spec.api_name, perf_counter() - t0, HANDLER_FAILED)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("handler for API key %d v%d failed", header.api_key, version, exc_info=True)
            raise HandlerFailed(f"handler for API key {header.api_key} v{version} failed: {exc!r}") from None
        if self.metrics is not None:
            self.metrics.request_done(header.api_key, spec.api_name, perf_counter() - t0, response_error(response))
        quotas = getattr(self.state, "quotas", None)
        if quotas is not None and quotas.active:  # the one check when no client quota exists
            from minikafka.broker.quota.throttle import set_throttle, throttle_ms
            ms = throttle_ms(quotas, header.api_key, request, len(frame), response, self.principal, header.client_id,
                             perf_counter() - t0)
            if ms > 0:
                response = set_throttle(header.api_key, version, flexible, response, ms)
                self._throttle_s = ms / 1000.0
        if response is None:
            return None
        header_flexible = flexible and header.api_key != API_VERSIONS_KEY
        if isinstance(response, EncodedBody):
            return (encode_response_prefix(header.correlation_id, response.size, header_flexible), response)
        # a handler's own fast-path encoding (protocol/produce_encoding.py), or kafka-python's
        try:
            body = response if isinstance(response, (bytes, bytearray)) else response.encode(version=version)
        except Exception as exc:  # our bug: a field the schema cannot carry; never leave the request hanging
            raise HandlerFailed(f"encoding {type(response).__name__} v{version} failed: {exc!r}") from None
        # prefix and body go out as two buffers: a large body is not copied again
        return (encode_response_prefix(header.correlation_id, len(body), header_flexible), body)

    # -- writing ----------------------------------------------------------------------------
    def _write(self, data: Any) -> None:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise _ConnectionGone()
        try:
            transport.write(data)
        except RuntimeError:  # uvloop: "handler is closed"
            raise _ConnectionGone() from None

    def _writelines(self, parts: list[Any]) -> None:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise _ConnectionGone()
        try:
            transport.writelines(parts)  # one writev for the prefix and the body
        except RuntimeError:
            raise _ConnectionGone() from None

    async def _write_response(self, parts: Iterable[Any]) -> None:
        pending: list[Any] = []
        for part in _flatten(parts):
            if isinstance(part, FileSlice):
                if pending:
                    self._writelines(pending)
                    pending = []
                try:
                    await self._write_file(part)
                finally:
                    part.close()
            else:
                pending.append(part)
        if pending:
            self._writelines(pending)

    async def _write_file(self, part: FileSlice) -> None:
        offset, remaining = part.offset, part.length
        while remaining:
            transport = self.transport
            if self.closed or transport is None or transport.is_closing():
                raise _ConnectionGone()
            if self._sock_fd >= 0 and transport.get_write_buffer_size() == 0:
                try:
                    sent = os.sendfile(self._sock_fd, part.fd, offset, remaining)
                except (BlockingIOError, InterruptedError):
                    sent = -1
                except (BrokenPipeError, ConnectionResetError):
                    raise _ConnectionGone() from None
                except OSError as exc:  # the file side (EIO, EBADF, ...): our problem, not the peer's
                    raise CloseConnection(f"sendfile of a response part failed: {exc!r}") from None
                if sent == 0:
                    raise CloseConnection(f"file slice ends {remaining} bytes early (fd {part.fd} at {offset})")
                if sent > 0:
                    offset += sent
                    remaining -= sent
                    self.last_io = self.loop.time()
                    continue
                # socket buffer full: hand one chunk to the transport, which waits for writability
            try:
                chunk = os.pread(part.fd, min(FILE_CHUNK, remaining), offset)
            except OSError as exc:
                raise CloseConnection(f"reading a response part failed: {exc!r}") from None
            if not chunk:
                raise CloseConnection(f"file slice ends {remaining} bytes early (fd {part.fd} at {offset})")
            self._write(chunk)
            offset += len(chunk)
            remaining -= len(chunk)
            if self._write_paused:
                await self._drain()

    async def _drain(self) -> None:
        while self._write_paused:
            if self.closed:
                raise _ConnectionGone()
            fut = self.loop.create_future()
            self._drain_waiters.append(fut)
            await fut

    def _wake_drainers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # -- closing ----------------------------------------------------------------------------
    def _log_once(self, level: int, msg: str, *args: Any) -> None:
        if not self._logged:
            self._logged = True
            fields = {"peer": str(self.peer), "listener": self.listener}
            if self.inflight_api >= 0:
                fields["api_key"] = self.inflight_api
            if self.client_id is not None:
                fields["client_id"] = self.client_id
            if self.principal != "User:ANONYMOUS":
                fields["principal"] = self.principal
            log.log(level, msg, *args, extra=fields)

    def close(self, level: int | None = None, reason: str = "") -> None:
        """Close this connection (pending writes are flushed); log `reason` once at `level`."""
        if level is not None and reason:
            self._log_once(level, "closing connection %s: %s", self.peer, reason)
        transport = self.transport
        self._teardown()
        if transport is not None and not transport.is_closing():
            transport.close()

    def abort(self) -> None:
        transport = self.transport
        self._teardown()
        if transport is not None:
            transport.abort()

    def _teardown(self) -> None:
        """Give back everything this connection holds (idempotent)."""
        if self.closed and not self.admitted:
            return
        self.closed = True
        closed = getattr(self.state, "connection_closed", None)  # share sessions of this connection go
        if closed is not None:
            try:
                closed(self.peer)
            except Exception:
                log.exception("connection %s: releasing its share sessions failed", self.peer)
        if self._waiter is not None:
            self.pool.cancel(self._waiter)
            self._waiter = None
        if self._grant is not None:  # a frame being read; an in-flight request's grant goes with its task
            grant, self._grant = self._grant, None
            self.pool.release(grant)
        self._frame = self._frame_view = None
        self._read_state = _HEADER
        self._hdr_pos = 0
        self._stash = self._stash_buf = None
        self._wake_drainers()
        task = self.task
        if (task is not None and self.inflight_api in CANCEL_ON_DISCONNECT and not task.done()
                and task is not asyncio.current_task()):
            task.cancel()
        if self.admitted:
            self.admitted = False
            self.registry.remove(self)
