"""Broker lifecycle: load state, open listeners, run periodic tasks, shut down cleanly on signals."""
from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time

from .. import __version__
from . import handlers  # noqa: F401  (registers every handler in the dispatch table)
from .background import start_background
from .config import BrokerConfig
from .connection import Connection
from .state import BrokerState

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state: BrokerState | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[asyncio.Task] = set()
        self._stopping = asyncio.Event()
        self.bound_ports: list[int] = []

    async def start(self) -> None:
        t0 = time.monotonic()
        self.state = BrokerState(self.config)
        self.state.load()
        for listener in self.config.listeners:
            server = await asyncio.start_server(functools.partial(self._on_connect, listener.name),
                                                listener.host or None, listener.port,
                                                reuse_address=True, limit=1 << 20)
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.bound_ports.append(port)
            self.state.set_bound_port(listener, port)
            log.info("listening on %s://%s:%d", listener.name, listener.host or "0.0.0.0", port)
        adv = self.state.advertised
        log.info("minikafka %s ready in %.0f ms: node %d, cluster %s, data dir %s, advertised %s:%d",
                 __version__, (time.monotonic() - t0) * 1000, self.config.node_id, self.state.cluster_id,
                 ",".join(str(d) for d in self.config.log_dirs), adv.host, adv.port)
        self._periodic = [asyncio.create_task(self._retention_loop()), asyncio.create_task(self._flush_loop())]
        self._periodic += start_background(self.state)  # group state loading, offsets retention, log cleaner
        self.state.txns.start()  # __transaction_state loading, transaction timeouts, marker retries

    async def _on_connect(self, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.state is not None
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await Connection(self.state, reader, writer, listener).run()
        finally:
            self._connections.discard(task)

    async def _retention_loop(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                assert self.state is not None
                self.state.logs.enforce_retention(int(time.time() * 1000))
            except Exception:
                log.exception("retention pass failed")

    async def _flush_loop(self) -> None:
        """flush.ms for idle partitions (appends check it themselves); Kafka's flush scheduler."""
        while True:
            await asyncio.sleep(1.0)
            assert self.state is not None
            now = int(time.time() * 1000)
            for plog in self.state.logs.logs():
                try:
                    plog.maybe_flush(now)
                except Exception:
                    log.exception("flush of %s failed", plog)

    def request_stop(self) -> None:
        self._stopping.set()

    async def wait_stopped(self) -> None:
        await self._stopping.wait()
        await self.stop()

    async def stop(self) -> None:
        log.info("shutting down")
        for server in self._servers:
            server.close()
        for task in self._periodic:
            task.cancel()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        if self.state is not None:
            await self.state.txns.stop()
            self.state.close()
        log.info("shut down cleanly")


async def serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    await broker.start()
    await broker.wait_stopped()


def run(config: BrokerConfig) -> None:
    try:
        import uvloop
        uvloop.run(serve(config))
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        asyncio.run(serve(config))
