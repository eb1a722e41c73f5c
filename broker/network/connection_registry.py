"""The set of open client connections: admission limits, the sweep that closes idle and too-slow
connections, in-flight request tracking, and closing everything at shutdown.

`max.connections` / `max.connections.per.ip`: a new connection over the limit is closed at once (one
log line per 10 s). The sweep closes a connection with nothing in flight and no bytes for
`connections.max.idle.ms`, a frame not complete `minikafka.request.read.timeout.ms` after its first
byte (time waiting for pool memory excluded), and a response the client does not read for
`connections.max.idle.ms`. It reads the connections' reading state, which broker/network/connection.py owns.
"""
from __future__ import annotations

import asyncio
import logging
import resource
from typing import TYPE_CHECKING, Callable

from minikafka.broker.network.connection import _BODY, _HEADER, Connection
from minikafka.broker.network.memory_pool import Grant, MemoryPool

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState
    from minikafka.broker.security.tls import ListenerTls

log = logging.getLogger(__name__)

REFUSAL_LOG_PERIOD = 10.0


class ConnectionRegistry:
    """The broker's open connections, their limits, and the sweep that enforces the timeouts."""

    def __init__(self, pool: MemoryPool, *, max_request: int, max_connections: int, max_connections_per_ip: int,
                 idle_ms: int, read_timeout_ms: int, per_ip_overrides: dict[str, int] | None = None,
                 quotas=None) -> None:
        self.pool = pool
        self.max_request = max_request
        self.configured_max_connections = max_connections
        self.max_connections = min(max_connections, _fd_bound())
        self.max_connections_per_ip = max_connections_per_ip
        self.quotas = quotas  # broker/quota/manager.ClientQuotaManager: ip connection_creation_rate
        self.per_ip_overrides: dict[str, int] = dict(per_ip_overrides or {})  # ip -> its own limit
        # listeners max.connection.creation.rate's broker-wide rate leaves alone: Kafka's protected
        # inter-broker listener (when there are others) and the controller listeners (the quorum's links)
        self.rate_exempt: frozenset[str] = frozenset()
        self.idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self.read_timeout_s = read_timeout_ms / 1000 if read_timeout_ms > 0 else None
        self.open: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        # requests being handled, also those whose connection is already gone (they hold pool memory)
        self.tasks: set[asyncio.Task] = set()
        # counters (tests, metrics)
        self.accepted = 0
        self.refused = 0
        self.closed_idle = 0
        self.closed_read_timeout = 0
        self.closed_write_stalled = 0
        self._refused_unlogged = 0
        self._refusal_logged_at = float("-inf")
        self._refusal_last = ""
        self._sweeper: asyncio.Task | None = None

    @classmethod
    def from_state(cls, state: "BrokerState") -> "ConnectionRegistry":
        cfg = state.config
        reg = cls(state.memory_pool, max_request=cfg.socket_request_max_bytes,
                  max_connections=cfg.max_connections, max_connections_per_ip=cfg.max_connections_per_ip,
                  idle_ms=cfg.connections_max_idle_ms, read_timeout_ms=cfg.request_read_timeout_ms,
                  per_ip_overrides=cfg.max_connections_per_ip_overrides, quotas=getattr(state, "quotas", None))
        reg.rate_exempt = _rate_exempt(cfg)
        if reg.quotas is not None:
            reg.quotas.set_connection_rates(cfg.max_connection_creation_rate, cfg.listener_connection_creation_rates)
        return reg

    def set_limits(self, max_connections: int, max_connections_per_ip: int,
                   per_ip_overrides: dict[str, int] | None = None, creation_rates: tuple[int, dict[str, int]] | None = None) -> None:
        """New limits (dynamic broker config): they apply to connections accepted from now on."""
        if creation_rates is not None and self.quotas is not None:
            self.quotas.set_connection_rates(*creation_rates)
        self.configured_max_connections = max_connections
        self.max_connections = min(max_connections, _fd_bound())
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})

    def factory(self, state: "BrokerState | None", listener: str,
                cls: type[Connection] = Connection, tls: "ListenerTls | None" = None) -> Callable[[], Connection]:
        if tls is not None:
            return lambda: cls(self, state, listener, tls)
        return lambda: cls(self, state, listener)

    @property
    def count(self) -> int:
        return len(self.open)

    def stats(self) -> dict[str, int]:
        return {"open": len(self.open), "accepted": self.accepted, "refused": self.refused,
                "closed_idle": self.closed_idle, "closed_read_timeout": self.closed_read_timeout,
                "closed_write_stalled": self.closed_write_stalled}

    # -- admission --------------------------------------------------------------------------
    def admit(self, conn: Connection) -> bool:
        reason = None
        if len(self.open) >= self.max_connections:
            reason = f"max.connections={self.max_connections}"
        elif self.per_ip.get(conn.ip, 0) >= (limit := self.per_ip_overrides.get(conn.ip, self.max_connections_per_ip)):
            reason = (f"max.connections.per.ip.overrides={limit}" if conn.ip in self.per_ip_overrides
                      else f"max.connections.per.ip={limit}") + f" for {conn.ip}"
        if reason is not None:
            self.refused += 1
            self._refused_unlogged += 1
            self._refusal_last = reason
            self._maybe_log_refusals()
            return False
        quotas = self.quotas
        if quotas is not None and quotas.listener_rates:  # max.connection.creation.rate: accepted later
            delay_ms = quotas.record_listener_connection(conn.listener, conn.listener in self.rate_exempt)
            if delay_ms > 0:
                conn.accept_delay_s = delay_ms / 1000.0
        if quotas is not None and quotas.ip_active:  # connection_creation_rate (broker/quota/)
            delay_ms = quotas.record_connection(conn.ip)
            if delay_ms > 0:
                self.refused += 1
                conn.refused_delay_s = delay_ms / 1000.0  # closed after the throttle time, as Kafka does
                return False
        self.accepted += 1
        self.open.add(conn)
        self.per_ip[conn.ip] = self.per_ip.get(conn.ip, 0) + 1
        conn.admitted = True
        return True

    def _maybe_log_refusals(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._refused_unlogged and now - self._refusal_logged_at >= REFUSAL_LOG_PERIOD:
            log.warning("refused %d new connection(s) over the limit (%s); %d open",
                        self._refused_unlogged, self._refusal_last, len(self.open))
            self._refused_unlogged = 0
            self._refusal_logged_at = now

    def track(self, task: asyncio.Task, box: list[Grant]) -> None:
        """`task` handles a request whose memory grant is in `box` (empty once released)."""
        self.tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self.tasks.discard(t)
            if box:  # cancelled before it ever ran (shutdown, disconnect): give the memory back
                self.pool.release(box.pop())
        task.add_done_callback(done)

    def remove(self, conn: Connection) -> None:
        self.open.discard(conn)
        n = self.per_ip.get(conn.ip, 0) - 1
        if n > 0:
            self.per_ip[conn.ip] = n
        else:
            self.per_ip.pop(conn.ip, None)

    # -- timeouts ---------------------------------------------------------------------------
    def start(self) -> None:
        limits = [t for t in (self.idle_s, self.read_timeout_s) if t is not None]
        interval = min([t / 4 for t in limits] + [1.0])
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop(max(interval, 0.02)))

    async def _sweep_loop(self, interval: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            try:
                self.sweep(loop.time())
            except Exception:  # never let the sweep die
                log.exception("connection sweep failed")

    def sweep(self, now: float) -> None:
        self._maybe_log_refusals()
        idle, read_timeout = self.idle_s, self.read_timeout_s
        for conn in list(self.open):
            if conn.closed:
                continue
            if conn.busy:
                if idle is not None and conn._write_paused and conn.transport is not None:
                    size = conn.transport.get_write_buffer_size()
                    if size != conn._wbuf_seen:
                        conn._wbuf_seen, conn._wbuf_progress_at = size, now
                    elif now - conn._wbuf_progress_at > idle:
                        self.closed_write_stalled += 1
                        conn.close(logging.INFO, f"response not read for {idle * 1000:.0f} ms "
                                                 "(connections.max.idle.ms)")
                continue
            started = conn.frame_started
            if started is not None and conn._read_state in (_HEADER, _BODY):
                if read_timeout is not None and now - started > read_timeout:
                    self.closed_read_timeout += 1
                    conn.close(logging.INFO, f"request frame not complete {read_timeout * 1000:.0f} ms after its "
                                             "first byte (minikafka.request.read.timeout.ms)")
                continue
            if (idle is not None and conn._read_state == _HEADER and conn._hdr_pos == 0
                    and now - conn.last_io > idle):
                self.closed_idle += 1
                conn.close(logging.DEBUG, f"idle for {idle * 1000:.0f} ms (connections.max.idle.ms)")

    # -- shutdown ---------------------------------------------------------------------------
    async def close_all(self, timeout: float) -> int:
        """Abort every connection and cancel in-flight requests; wait at most `timeout` for them.
        Returns how many requests were still running after that."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.open):
            conn.abort()
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            if pending:
                log.warning("%d request(s) still running after %.1f s of shutdown; not waiting", len(pending), timeout)
            return len(pending)
        return 0


def _fd_bound() -> int:
    """Connections are capped below the open-file limit, so the logs keep descriptors to open."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover
        return 2**31 - 1
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 2**31 - 1
    return max(soft * 3 // 4, 16)


def _rate_exempt(cfg) -> frozenset[str]:
    """Kafka's protectedListener: the inter-broker listener when the node has more than one listener;
    and the controller listeners."""
    names = [listener.name for listener in getattr(cfg, "listeners", ())]
    exempt = set(getattr(cfg, "controller_listener_names", ()))
    props = getattr(cfg, "props", {})
    inter = (props.get("inter.broker.listener.name") or props.get("security.inter.broker.protocol") or "").strip()
    inter = inter.upper() or ("PLAINTEXT" if "PLAINTEXT" in names else "")
    if inter and len(names) > 1:
        exempt.add(inter)
    return frozenset(exempt)
