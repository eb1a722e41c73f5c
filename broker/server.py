"""Broker lifecycle: load state, open listeners, run periodic tasks, shut down cleanly on signals.

Start-up does as little as it can before the port accepts: read the config and the topic catalog,
list the partition directories (logs open on first use, storage/log_manager.py), import the handlers
of ApiVersions and Metadata only (broker/network/registry.py). Everything else is loaded afterwards, while
clients are served (broker/warmup.py).

Shutdown (SIGTERM/SIGINT) is bounded: listeners close, every connection is aborted and its in-flight
request cancelled (waiting at most CONNECTION_CLOSE_WAIT_S), the transaction coordinator gets
TXN_STOP_WAIT_S, then the logs are closed. A watchdog thread ends the process after
SHUTDOWN_HARD_LIMIT_S whatever happens (a crash-like exit; recovery handles it). A failure to close
the logs (e.g. ENOSPC writing the clean-shutdown marker) is one error line and exit code 1.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time

from minikafka import __version__
from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.network.connection_registry import ConnectionRegistry
from minikafka.broker.network.registry import import_eager_handlers
from minikafka.broker.state import BrokerState

import_eager_handlers()  # ApiVersions, Metadata; every other handler module loads on first use or in warm_up

log = logging.getLogger(__name__)


CONNECTION_CLOSE_WAIT_S = 2.0
TXN_STOP_WAIT_S = 3.0
SHUTDOWN_HARD_LIMIT_S = 10.0
STARTUP_SETTLE_S = 0.2  # after the listeners open: then the GC resumes and malloc is tuned


class StartupError(Exception):
    """The broker cannot start (e.g. a listener's address is taken); one clear error line, exit 2."""


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state: BrokerState | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self.connections: ConnectionRegistry | None = None
        self._stopping = asyncio.Event()
        self._periodic: list[asyncio.Task] = []
        self._watchdog: threading.Timer | None = None
        self.bound_ports: list[int] = []
        self.exit_code = 0
        self.ready = False  # /health/ready: listeners up and the start-up recovery (warm-up) finished
        self.admin = None  # broker/admin_http.AdminHttpServer when minikafka.metrics.listener is set
        self.admin_port: int | None = None
        self.schema_registry = None  # schema_registry/rest.RestServer when schema.registry.listener is set

    async def start(self) -> None:
        t0 = time.monotonic()
        self._check_installation()
        tls_contexts = self._tls_contexts()  # keystores first: a bad one fails start-up before anything opens
        peers = self._peer_factory()  # the client side of the inter-broker / controller listeners, as early
        await self._start_admin()
        from minikafka.broker.security.sasl.errors import CredentialStoreError
        try:
            self.state = BrokerState(self.config)
        except CredentialStoreError as exc:
            raise StartupError(str(exc)) from None
        if self.admin is not None:
            self.admin.ctx.state = self.state
        self.state.load()
        if self.state.faults is not None:
            log.warning("fault injection is enabled (minikafka.faults.enable=true): for client tests only%s",
                        "" if self.admin is not None else "; no admin listener (minikafka.metrics.listener), "
                        "so no rule can be injected")
        self.connections = ConnectionRegistry.from_state(self.state)
        self.state.connections = self.connections
        if self.config.quorum is not None:
            self._open_quorum(peers)
        await self._start_schema_registry()
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            tls = tls_contexts.get(listener.name)
            factory = self.connections.factory(self.state, listener.name, tls=tls)
            if tls is not None:
                from minikafka.broker.security.tls import tls_protocol_factory
                factory = tls_protocol_factory(loop, factory, tls, self.config.ssl_handshake_timeout_ms / 1000)
            try:
                sock = _bound_socket(listener.host, listener.port)
                if sock is not None:  # a numeric address: no resolver (nor its idna codec) on the way to ready
                    server = await loop.create_server(factory, sock=sock, backlog=1024, start_serving=False)
                else:
                    server = await loop.create_server(factory, listener.host or None, listener.port,
                                                      reuse_address=True, backlog=1024, start_serving=False)
            except OSError as exc:  # Kafka: "Socket server failed to bind to host:port: <reason>."
                raise StartupError(f"Socket server failed to bind to {listener.host or '0.0.0.0'}:{listener.port}: "
                                   f"{os.strerror(exc.errno) if exc.errno else exc}.") from None
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.bound_ports.append(port)
            self.state.set_bound_port(listener, port)
            log.info("listening on %s://%s:%d (%s%s)", listener.name, listener.host or "0.0.0.0", port,
                     self.config.security_protocols.get(listener.name, "PLAINTEXT"),
                     f", {'/'.join(tls.protocols)}, ssl.client.auth={tls.client_auth}" if tls else "")
        for server in self._servers:  # all bound first: a client answered on one listener finds every other open
            await server.start_serving()
        adv = self.state.advertised
        log.info("minikafka %s started in %.0f ms (ready once start-up recovery finishes): node %d, cluster %s, "
                 "data dir %s, advertised %s:%d",
                 __version__, (time.monotonic() - t0) * 1000, self.config.node_id, self.state.cluster_id,
                 ",".join(str(d) for d in self.config.log_dirs), adv.host, adv.port)
        reg, pool = self.connections, self.state.memory_pool
        log.info("request memory %d bytes (queued.max.request.bytes, %d reserved for frames <= %d bytes); "
                 "max.connections %d%s, per ip %d; idle close %s ms, request read timeout %s ms",
                 pool.capacity, pool.reserve, pool.small_max, reg.max_connections,
                 " (bounded by the open-file limit)" if reg.max_connections < reg.configured_max_connections else "",
                 reg.max_connections_per_ip, self.config.connections_max_idle_ms, self.config.request_read_timeout_ms)
        reg.start()
        if self.state.quorum is not None:
            self.state.quorum.start()
        if self.state.cluster is not None:
            self.state.cluster.start()
        self.state.start()  # coordinators start as they are built (warm_up builds those with state)
        if self.state.cluster is not None:  # a multi-node cluster: partition replication
            from minikafka.broker.replication.replica_manager import ReplicaManager
            self.state.replicas = ReplicaManager(self.state, self.state.cluster)
            self.state.replicas.start()
            self.state.coordinator_failover.start()  # coordinators follow partition leadership
        from minikafka.broker.background import start_log_cleaner
        self._periodic = [asyncio.create_task(self._retention_loop()), asyncio.create_task(self._flush_loop())]
        self._periodic += start_log_cleaner(self.state)
        if self.state.cluster is None and self.config.get("delegation.token.secret.key"):
            from minikafka.broker.security.delegation_tokens import expiry_loop  # the expired tokens' sweep
            self._periodic.append(asyncio.create_task(expiry_loop(self.state.delegation_tokens)))
        elif self.config.get("delegation.token.secret.key"):  # a cluster: the active controller sweeps
            from minikafka.broker.handlers.delegation_tokens import cluster_expiry_loop
            self._periodic.append(asyncio.create_task(cluster_expiry_loop(self.state)))
        self._periodic.append(asyncio.create_task(self._warm_up()))

    def _check_installation(self) -> None:
        """Every module this role needs is present (broker/installation.py), before anything opens."""
        from minikafka.broker.installation import missing_modules
        missing = missing_modules(quorum=self.config.quorum is not None)
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise StartupError(f"this installation of minikafka is incomplete: {len(missing)} module(s) that "
                               f"the configured role needs are missing ({shown}); reinstall minikafka")

    def _tls_contexts(self) -> dict:
        """A TLS context per SSL / SASL_SSL listener (broker/security/tls.py); StartupError if one cannot be built."""
        from minikafka.broker.config.core import TLS_SECURITY_PROTOCOLS, ConfigError
        out = {}
        for listener in self.config.listeners:
            protocol = self.config.security_protocols.get(listener.name, "PLAINTEXT")
            if protocol in TLS_SECURITY_PROTOCOLS:
                from minikafka.broker.security.tls import build_listener_tls, listener_ssl_props
                try:
                    out[listener.name] = build_listener_tls(
                        listener_ssl_props(self.config.get, listener.name, protocol), listener.name)
                except ConfigError as exc:
                    raise StartupError(f"invalid SSL configuration: {exc}") from None
        return out

    def _peer_factory(self):
        """broker/security/peer_security.py's PeerFactory of a cluster node (None alone); StartupError if a side
        (TLS client context, SASL mechanism, JAAS credentials) cannot be built."""
        if self.config.quorum is None:
            return None
        from minikafka.broker.config.core import ConfigError
        from minikafka.broker.security.peer_security import peer_factory
        try:
            return peer_factory(self.config)
        except ConfigError as exc:
            raise StartupError(f"cannot connect to the other nodes: {exc}") from None

    def _open_quorum(self, peers=None) -> None:
        """KRaft combined mode (raft/driver.py): the metadata quorum's durable state is
        opened before the listeners; its tasks start once they accept (peers may call at once)."""
        from minikafka.raft.driver import QuorumDriver
        from minikafka.broker.meta_properties import write_meta
        state, config = self.state, self.config
        assert state is not None and config.quorum is not None

        def agreed(cluster_id: str) -> None:
            state.cluster_id = cluster_id
            write_meta(config.log_dirs, config.node_id, cluster_id)

        state.quorum = QuorumDriver(config.node_id, config.quorum, config.log_dirs[0], state.cluster_id, agreed,
                                    connect=peers.controller_client if peers is not None else None)
        if config.quorum.dynamic:  # KIP-853: fetches carry the metadata log dir's id (Fetch v17)
            from minikafka.broker.cluster.storage_format import directory_id_of
            state.quorum.directory_id = directory_id_of(config.log_dirs[0])
        # KIP-853: this controller's listeners as a voter record has them (UpdateRaftVoter when they differ)
        advertised = {l.name: l for l in config.advertised_listeners}
        state.quorum.own_endpoints = [
            {"name": l.name, "host": advertised.get(l.name, l).host, "port": advertised.get(l.name, l).port}
            for l in config.listeners if l.name in config.controller_listener_names]
        # the cluster metadata (issue 16): every node follows the image; the quorum leader is the controller
        from minikafka.metadata.controller import ControllerConfig
        from minikafka.metadata.active_controller import ActiveController
        from minikafka.broker.cluster.runtime import ClusterRuntime
        state.cluster = ClusterRuntime(state, state.quorum, peers)
        from minikafka.broker.cluster.security_sync import attach, bootstrap_credentials
        state.cluster.active = ActiveController(
            state.quorum, lambda: state.cluster.image,
            ControllerConfig(session_timeout_ms=int(config.get("broker.session.timeout.ms")),
                             unclean_leader_election=config.get("unclean.leader.election.enable").strip().lower()
                             == "true",
                             min_insync_replicas=int(config.get("min.insync.replicas")),
                             elr_enabled=lambda: state.features.level("eligible.leader.replicas.version") >= 1),
            on_activate=bootstrap_credentials(state))
        attach(state)  # ACLs, SCRAM credentials, dynamic broker configs from the metadata image

    async def _start_admin(self) -> None:
        """The HTTP admin listener (broker/ops/admin_http.py), first: a taken port fails start-up early."""
        url = self.config.get("minikafka.metrics.listener").strip()
        if not url:
            return
        from minikafka.broker.ops.admin_http import AdminContext, AdminHttpServer, parse_listener
        from minikafka.broker.ops import faults  # noqa: F401  (its import registers the /faults routes)
        host, port = parse_listener(url)
        ctx = AdminContext(None, lambda: self.ready)  # type: ignore[arg-type]  # state follows at once
        server = AdminHttpServer(ctx, host, port)
        try:
            self.admin_port = await server.start()
        except OSError as exc:
            raise StartupError(f"cannot bind the metrics listener {url}: {exc.strerror or exc}") from None
        self.admin = server
        log.info("metrics and health listener on http://%s:%d (/metrics, /health/live, /health/ready)",
                 host, self.admin_port)

    async def _start_schema_registry(self) -> None:
        """The built-in Schema Registry (broker/schema_registry_listener.py): `_schemas` replayed, then its
        HTTP listener bound, before the Kafka listeners open (a taken port fails start-up early); on a cluster
        the listener is bound here and `_schemas` loaded once the node caught up with the cluster metadata."""
        url = self.config.get("schema.registry.listener").strip()
        if not url:
            return
        from minikafka.broker.schema_registry_listener import start_schema_registry
        assert self.state is not None
        from minikafka.broker.config.core import ConfigError
        try:
            self.schema_registry = await start_schema_registry(self.state, url)
        except OSError as exc:
            raise StartupError(f"cannot bind the schema registry listener {url}: {exc.strerror or exc}") from None
        except ConfigError as exc:
            raise StartupError(f"invalid SSL configuration of the schema registry listener: {exc}") from None

    async def _warm_up(self) -> None:
        """Handlers, coordinators with state, then every partition log (broker/warmup.py); ready after.
        A warm-up that fails ends the process (exit 2) before it is ever ready: what it could not load,
        requests would fail on."""
        assert self.state is not None
        try:
            from minikafka.broker.warmup import warm_up
            await warm_up(self.state)
        except asyncio.CancelledError:
            raise
        except ImportError as exc:
            from minikafka.broker.installation import missing_module_message
            self.fail_startup(missing_module_message(exc))
            return
        except Exception as exc:
            self.fail_startup(f"start-up failed while loading the broker's modules and coordinators: "
                              f"{type(exc).__name__}: {exc}")
            return
        await self._coordinators_loaded()
        if self.state.cluster is not None:  # a cluster node is ready once registered and unfenced (Kafka: RUNNING)
            await self.state.cluster.caught_up_once.wait()
        self.ready = True
        log.info("ready: start-up recovery finished")

    async def _coordinators_loaded(self) -> None:
        """Wait until the group and transaction coordinators built so far have replayed their state topics."""
        state = self.state
        assert state is not None
        while True:
            groups_built, txns_built = state.coordinators_built()
            loading = (groups_built and any(state.groups.is_loading(p) for p in range(state.groups.config.num_partitions))) \
                or (txns_built and state.txns.txns.is_loading)
            if not loading:
                return
            await asyncio.sleep(0.05)

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

    def fail_startup(self, message: str) -> None:
        """A start-up step after the listeners opened failed: one error line, never ready, exit 2."""
        log.error("%s", message)
        sys.stderr.write(f"minikafka: {message}\n")
        if self.exit_code == 0:
            self.exit_code = 2
        self.request_stop()

    def request_stop(self) -> None:
        if self._stopping.is_set():
            log.info("already shutting down")
            return
        self._stopping.set()
        self._watchdog = threading.Timer(SHUTDOWN_HARD_LIMIT_S, _hard_exit)
        self._watchdog.daemon = True
        self._watchdog.start()

    async def wait_stopped(self) -> None:
        await self._stopping.wait()
        await self.stop()

    async def stop(self) -> None:
        log.info("shutting down")
        self.ready = False
        if self.admin is not None:
            await self.admin.stop()
        if self.schema_registry is not None:
            try:
                await self.schema_registry.stop()
            except Exception:
                log.exception("schema registry: stop failed")
        if self.state is not None and self.state.cluster is not None:
            try:  # controlled shutdown: leadership moves away before this node goes
                await self.state.cluster.controlled_shutdown()
                await self.state.cluster.stop()
            except Exception:
                log.exception("cluster: controlled shutdown failed")
        if self.state is not None and self.state.quorum is not None:
            try:
                await self.state.quorum.stop()
            except Exception:
                log.exception("metadata quorum: stop failed")
        if self.state is not None and self.state.replicas is not None:
            try:
                await self.state.replicas.stop()
            except Exception:
                log.exception("replica manager: stop failed")
        for server in self._servers:
            server.close()
        for task in self._periodic:
            task.cancel()
        if self.state is not None:
            for task in self.state.service_tasks:
                task.cancel()
        if self.connections is not None:
            pool = self.connections.pool
            if pool.in_use:
                log.info("at shutdown %d bytes of request memory are held by requests being read or handled",
                         pool.in_use)
            stuck = await self.connections.close_all(CONNECTION_CLOSE_WAIT_S)
            if pool.in_use and not stuck:  # every request ended and every connection was aborted: a leak
                log.warning("request memory leaked: %d bytes still in use after closing all connections",
                            pool.in_use)
        if self.state is not None:
            try:
                await asyncio.wait_for(self.state.stop_coordinators(), TXN_STOP_WAIT_S)
            except asyncio.TimeoutError:
                log.warning("transaction coordinator did not stop within %.0f s; closing the logs anyway",
                            TXN_STOP_WAIT_S)
            except Exception as exc:
                log.error("transaction coordinator stop failed: %r", exc)
            try:
                self.state.close()
            except OSError as exc:
                log.error("shutdown failed: could not close the logs cleanly: %s", exc)
                self.exit_code = 1
        if self.exit_code == 0:
            log.info("shut down cleanly")
        elif self.exit_code == 2:
            log.info("shut down after a failed start-up")

    def cancel_watchdog(self) -> None:
        """After the event loop has closed (its own teardown waits for cancelled tasks too)."""
        if self._watchdog is not None:
            self._watchdog.cancel()


def _hard_exit() -> None:
    """Watchdog: the orderly shutdown hung (a handler or a disk); end the process anyway."""
    try:
        sys.stderr.write(f"minikafka: shutdown did not finish within {SHUTDOWN_HARD_LIMIT_S:.0f} s; exiting\n")
        sys.stderr.flush()
    finally:
        os._exit(1)


async def serve(config: BrokerConfig, started: list[Broker] | None = None) -> int:
    broker = Broker(config)
    if started is not None:
        started.append(broker)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    try:
        await broker.start()
    except (StartupError, ImportError) as exc:
        from minikafka.broker.installation import missing_module_message
        message = str(exc) if isinstance(exc, StartupError) else missing_module_message(exc)
        log.error("%s", message)
        sys.stderr.write(f"minikafka: {message}\n")
        broker.exit_code = 2
        await broker.stop()
        return 2
    # after the first requests had their chance: ctypes and a full GC pass are not needed to answer them
    loop.call_later(STARTUP_SETTLE_S, _tune_malloc)
    loop.call_later(STARTUP_SETTLE_S, _resume_gc)
    await broker.wait_stopped()
    return broker.exit_code


def _bound_socket(host: str, port: int) -> socket.socket | None:
    """A listening TCP socket on a numeric `host` (an IPv4 or IPv6 literal), bound as create_server binds it
    (SO_REUSEADDR, IPv6 only on an IPv6 address); None for a host name or "" (every interface, both
    families), which create_server resolves itself."""
    if not host:
        return None
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.inet_pton(family, host)
    except OSError:
        return None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def _resume_gc() -> None:
    """`minikafka serve` pauses the cyclic GC while it imports and loads (each collection there would
    walk every module object only to free nothing); the survivors move to the permanent generation."""
    import gc
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


MALLOC_TRIM_THRESHOLD = 32 << 20
MALLOC_MMAP_THRESHOLD = 8 << 20


def _tune_malloc() -> None:
    """glibc: keep up to 32 MiB free at the top of each malloc arena instead of returning it after
    every batch. A worker thread's arena otherwise gives back the ~2 MB a compressed batch's
    validation allocates, and the next batch pays ~700 page faults for it (measured: 3x the broker
    CPU per MB on lz4). Allocations above 8 MiB are mapped and unmapped as before, so memory taken
    by a burst still goes back. No-op where glibc's mallopt is absent."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)
    mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)


def run(config: BrokerConfig) -> int:
    """Serve until SIGTERM/SIGINT; the process exit code (0 after a clean shutdown)."""
    started: list[Broker] = []
    try:
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a pinned dependency
            return asyncio.run(serve(config, started))
        return uvloop.run(serve(config, started))
    finally:
        for broker in started:
            broker.cancel_watchdog()
