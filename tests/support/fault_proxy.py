"""A loopback TCP proxy for Kafka connections that drops replies: it forwards a request to the broker,
waits until the broker has answered it, and then cuts both connections instead of passing the answer on.

That is the failure idempotence exists for: the broker has appended the batch, the client never hears
so and retries it (on a new connection, together with whatever else it had in flight). Which requests
are doomed is decided by a seeded RNG, one draw per request of the chosen API keys, so a run is
reproducible up to thread scheduling.

    proxy = FaultProxy(seed=7, cut_probability=0.05, max_cuts=20)   # binds 127.0.0.1:<free port>
    broker = start_broker(advertised=f"127.0.0.1:{proxy.port}")    # clients must come back through it
    proxy.start(("127.0.0.1", broker.port))
    ...
    proxy.stop(); proxy.cuts  # how many replies were dropped
"""
from __future__ import annotations

import random
import socket
import struct
import threading

_SIZE = struct.Struct(">i")
_API_KEY_AND_CORRELATION = struct.Struct(">hhi")  # request header: api_key, api_version, correlation_id
PRODUCE = 0


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: "FaultProxy", client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.doomed: set[int] = set()
        self.lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _frames(self, src: socket.socket):
        """Yield whole frames (size prefix included) read from `src` until EOF or error."""
        buf = bytearray()
        while True:
            try:
                chunk = src.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if len(buf) - pos < 4 + size:
                    break
                yield bytes(buf[pos:pos + 4 + size])
                pos += 4 + size
            del buf[:pos]

    def client_to_upstream(self) -> None:
        try:
            for frame in self._frames(self.client):
                api_key, _version, correlation_id = _API_KEY_AND_CORRELATION.unpack_from(frame, 4)
                if api_key in self.proxy.api_keys and self.proxy._draw():
                    with self.lock:
                        self.doomed.add(correlation_id)
                self.upstream.sendall(frame)
        except OSError:
            pass
        finally:
            self.close()

    def upstream_to_client(self) -> None:
        try:
            for frame in self._frames(self.upstream):
                (correlation_id,) = _SIZE.unpack_from(frame, 4)
                with self.lock:
                    doomed = correlation_id in self.doomed
                if doomed:  # the broker has handled it; the client will never know
                    self.proxy._count_cut()
                    return
                self.client.sendall(frame)
        except OSError:
            pass
        finally:
            self.close()


class FaultProxy:
    def __init__(self, *, seed: int, cut_probability: float, max_cuts: int | None = None,
                 api_keys: frozenset[int] = frozenset({PRODUCE})) -> None:
        self.api_keys = api_keys
        self.cut_probability = cut_probability
        self.max_cuts = max_cuts
        self.cuts = 0
        self.connections = 0
        self._doomed_total = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._upstream: tuple[str, int] | None = None
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._stopped = False
        self._acceptor: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, upstream: tuple[str, int]) -> "FaultProxy":
        self._upstream = upstream
        self._acceptor = threading.Thread(target=self._accept_loop, name="fault-proxy-accept", daemon=True)
        self._acceptor.start()
        return self

    def _draw(self) -> bool:
        with self._lock:
            if self.max_cuts is not None and self._doomed_total >= self.max_cuts:
                return False
            hit = self._rng.random() < self.cut_probability
            if hit:
                self._doomed_total += 1
            return hit

    def _count_cut(self) -> None:
        with self._lock:
            self.cuts += 1

    def _accept_loop(self) -> None:
        assert self._upstream is not None
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream)
            with self._lock:
                self._links.append(link)
                self.connections += 1
            threading.Thread(target=link.client_to_upstream, daemon=True).start()
            threading.Thread(target=link.upstream_to_client, daemon=True).start()

    def stop(self) -> None:
        self._stopped = True
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()
        if self._acceptor is not None:
            self._acceptor.join(5)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
