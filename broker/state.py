"""Everything a handler may reach: config, topic catalog, partition logs, notifier, allocators.

The group and transaction coordinators are built on first use (`groups`, `txns`): importing them is
a good part of start-up, and a broker that serves neither groups nor transactions never needs them.
Once the broker runs (`start`), a coordinator starts its loading and timers as soon as it is built;
broker/warmup.py builds those whose state topic exists right after the listeners open.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from minikafka.storage.log_manager import LogManager
from minikafka.broker.append_notifier import AppendNotifier
from minikafka.broker.security.authorizer import build_authorizer
from minikafka.broker.config.core import BrokerConfig, Listener
from minikafka.broker.config.dynamic import DynamicBrokerConfig
from minikafka.broker.config.features import FEATURES_FILE, FeatureState
from minikafka.broker.meta_properties import ensure_meta
from minikafka.broker.network.memory_pool import MemoryPool, pool_capacity
from minikafka.broker.ops.metrics import BrokerMetrics
from minikafka.broker.security.sasl.errors import CREDENTIALS_FILE
from minikafka.broker.topic_catalog import DEFAULT_MAX_PARTITIONS_PER_REQUEST, TopicCatalog, TopicInfo

if TYPE_CHECKING:
    from minikafka.coordinator.group.coordinator import GroupCoordinator
    from minikafka.coordinator.txn.producer_ids import ProducerIdManager
    from minikafka.coordinator.txn.coordinator import TransactionCoordinator
    from minikafka.storage.partition_log import PartitionLog
    from minikafka.broker.security.delegation_tokens import DelegationTokenStore
    from minikafka.broker.config.group_configs import GroupConfigStore
    from minikafka.broker.security.sasl.credentials import ScramCredentialStore

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"  # = coordinator.group_errors.OFFSETS_TOPIC (checked by a unit test)
TXN_TOPIC = "__transaction_state"  # = coordinator.txn_state_manager.TXN_TOPIC


class BrokerState:
    """Domain objects of one broker; created and loaded before any listener opens."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # None only in a metadata quorum until its voters agreed on the id (raft/driver.py)
        self.cluster_id: str | None = ensure_meta(config.log_dirs, config.node_id, config.get("cluster.id"),
                                                  agreed=config.quorum is not None)
        self.quorum = None  # coordinator/quorum/driver.QuorumDriver in a multi-node quorum (broker/server.py)
        # a multi-node cluster (issue 16): broker/cluster/runtime.ClusterRuntime (the metadata image, the
        # controller) and the replica manager; both None on a single node
        self.cluster = None
        self.replicas = None
        # dynamic broker configs are laid over the static ones before anything reads them
        # (in a cluster the metadata image holds them, ACLs and SCRAM credentials too: cluster/security_sync.py)
        in_cluster = getattr(config, "quorum", None) is not None
        self.dynamic_config = DynamicBrokerConfig(config, config.log_dirs[0])
        if not in_cluster:
            self.dynamic_config.load()
        self.dynamic_config.on_change(self._config_changed)
        self._group_configs: GroupConfigStore | None = None  # per-group overrides: loaded on first use / warm-up
        self._client_metrics_configs = None  # CLIENT_METRICS subscriptions (KIP-714): loaded on first use
        self._client_telemetry = None  # broker/ops/client_telemetry.ClientTelemetry: made on first use
        # SCRAM credentials (AlterUserScramCredentials, `minikafka storage format --add-scram`); read now:
        # an unreadable file refuses start-up rather than looking like "no users"
        self._scram_credentials = None
        if in_cluster:
            from minikafka.broker.security.sasl.credentials import ScramCredentialStore
            self._scram_credentials = ScramCredentialStore(config.log_dirs[0])
        elif (config.log_dirs[0] / CREDENTIALS_FILE).exists():
            self._scram_credentials = self.scram_credentials  # noqa: the property loads it
        # delegation tokens (broker/security/delegation_tokens.py): read now when the file exists, as SCRAM
        self._delegation_tokens = None
        if not in_cluster and (config.log_dirs[0] / "delegation-tokens.json").exists():
            self._delegation_tokens = self.delegation_tokens  # noqa: the property loads it
        # client quotas (broker/quota/): enforced by `quotas`; stored in the log dir on a single node, the
        # metadata image on a cluster (cluster/security_sync.py)
        from minikafka.broker.quota.manager import ClientQuotaManager
        from minikafka.broker.quota.store import ClientQuotaStore
        self.quotas = ClientQuotaManager(int(config.get("quota.window.num") or 11),
                                         float(config.get("quota.window.size.seconds") or 1))
        self.client_quotas = ClientQuotaStore(config.log_dirs[0], self.quotas)
        if not in_cluster:
            self.client_quotas.load()
        # None without authorizer.class.name: handlers then skip every check (broker/security/authorizer.py)
        self.authorizer = build_authorizer(config, config.log_dirs[0])
        self.notifier = AppendNotifier()
        self.logs = LogManager(config.log_dirs, config.log_config)
        max_partitions = config.get("minikafka.max.partitions")
        self.catalog = TopicCatalog(self.logs, config.log_config, config.log_dirs[0], self._hook_log,
                                    max_partitions_per_request=int(config.get("minikafka.max.partitions.per.request")
                                                                   or DEFAULT_MAX_PARTITIONS_PER_REQUEST),
                                    max_partitions=int(max_partitions) if max_partitions else None)
        self.catalog.all_dirs_cordoned = lambda: config.all_log_dirs_cordoned  # cordoned.log.dirs (KIP-1066)
        self.logs.cordoned_dirs = lambda: config.cordoned_log_dirs  # new partitions go to the other dirs
        # finalized feature levels (transaction.version, group.version, ...): a small file, read now
        self.features = FeatureState(config.log_dirs[0] / FEATURES_FILE, config.node_id)
        self._producer_ids: ProducerIdManager | None = None
        self._groups: GroupCoordinator | None = None
        self._txns: TransactionCoordinator | None = None
        self._share_sessions = None  # broker/share/sessions.ShareSessionCache, on first ShareFetch
        self._share_manager = None  # broker/share/manager.SharePartitionManager, on first use
        self._share_coordinator = None  # coordinator/share ShareCoordinator (broker/share_coordination.py)
        self._share_persister = None
        self._failover = None  # broker/coordinator_failover.CoordinatorFailover on a cluster
        self._running = False
        self.service_tasks: list[asyncio.Task] = []  # started with a coordinator; cancelled at shutdown
        self._advertised: dict[str, Listener] = {l.name: l for l in config.advertised_listeners}
        # a controller-only node (process.roles=controller) has no broker listener: its controller listener
        self.advertised: Listener = (config.advertised_listeners or config.listeners)[0]
        self.started_at = time.time()
        # connection layer: the request memory budget (queued.max.request.bytes) and, while the server
        # runs, its broker.connection_registry.ConnectionRegistry (open connections, limits, counters)
        self.memory_pool = MemoryPool(pool_capacity(config.queued_max_request_bytes))
        self.connections = None
        self.metrics = BrokerMetrics()  # traffic counters; the rest of /metrics is read at scrape time
        self.schema_registry_metrics = None  # schema_registry/metrics.RegistryMetrics while its listener runs
        self.faults = None  # broker/faults.FaultEngine when minikafka.faults.enable=true (tests only)
        if config.get("minikafka.faults.enable").strip().lower() == "true":
            from minikafka.broker.ops.faults import FaultEngine
            self.faults = FaultEngine(self)

    @property
    def group_configs(self) -> "GroupConfigStore":
        """Per-group config overrides (broker/config/group_configs.py), read from the log dir on first use."""
        if self._group_configs is None:
            from minikafka.broker.config.group_configs import GroupConfigStore
            store = GroupConfigStore(self.config, self.config.log_dirs[0])
            store.load()
            self._group_configs = store
        return self._group_configs

    @property
    def client_metrics_configs(self):
        """CLIENT_METRICS config resources (broker/config/client_metrics_configs.py), read on first use."""
        if self._client_metrics_configs is None:
            from minikafka.broker.config.client_metrics_configs import ClientMetricsConfigStore
            store = ClientMetricsConfigStore(self.config, self.config.log_dirs[0])
            store.load()
            self._client_metrics_configs = store
        return self._client_metrics_configs

    @property
    def client_telemetry(self):
        """Kafka's ClientMetricsManager and the series clients push (broker/ops/client_telemetry.py)."""
        if self._client_telemetry is None:
            from minikafka.broker.ops.client_telemetry import DEFAULT_TELEMETRY_MAX_BYTES, ClientTelemetry
            self._client_telemetry = ClientTelemetry(
                self.client_metrics_configs, getattr(self.config, "telemetry_max_bytes", DEFAULT_TELEMETRY_MAX_BYTES))
        return self._client_telemetry

    def _config_changed(self, config: BrokerConfig) -> None:
        """A dynamic broker config changed (`config` already updated): topics without their own
        override get the new log defaults at once; the connection limits apply to new connections."""
        self.logs.default_config = config.log_config
        self.catalog.set_default_config(config.log_config)
        if self.connections is not None:
            self.connections.set_limits(config.max_connections, config.max_connections_per_ip,
                                        config.max_connections_per_ip_overrides,
                                        (config.max_connection_creation_rate, config.listener_connection_creation_rates))
        if self._txns is not None:  # KIP-890 verification follows its dynamic switch
            verify = config.get_bool("transaction.partition.verification.enable")
            self._txns.config = self._txns.config._replace(verification_enabled=verify)
        if self._groups is not None:  # the one dynamic consumer-group key (groups without their own override)
            import dataclasses
            configs = self._groups.consumer.configs
            configs.defaults = dataclasses.replace(
                configs.defaults, assignment_interval_ms=int(config.get("group.consumer.assignment.interval.ms")))

    # -- coordinators, built on first use -------------------------------------------------------
    @property
    def producer_ids(self) -> ProducerIdManager:
        if self._producer_ids is None and self.cluster is not None:  # blocks from the active controller
            from minikafka.broker.cluster.producer_ids import ClusterProducerIdManager
            self._producer_ids = ClusterProducerIdManager(self.cluster)  # type: ignore[assignment]
        if self._producer_ids is None:
            from minikafka.coordinator.txn.producer_ids import ProducerIdManager
            self._producer_ids = ProducerIdManager(self.config.log_dirs[0] / "producer_id_block")
        return self._producer_ids

    @property
    def groups(self) -> GroupCoordinator:
        """The group coordinator; once running, built with its loading of `__consumer_offsets` and
        its offsets retention timer started."""
        if self._groups is None:
            from minikafka.coordinator.group.coordinator import GroupConfig, GroupCoordinator
            from minikafka.broker.errors import error_code
            self._groups = GroupCoordinator(GroupConfig.from_props(self.config.get), self.catalog, error_code,
                                            group_configs=self.group_configs)
            if (failover := self.coordinator_failover) is not None:
                failover.attach_groups(self._groups)
            if self._running:
                self._start_groups()
        return self._groups

    @property
    def txns(self) -> TransactionCoordinator:
        """The transaction coordinator; once running, built with its loading of
        `__transaction_state`, transaction timeouts and marker retries started."""
        if self._txns is None:
            from minikafka.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
            from minikafka.broker.errors import error_code
            self._txns = TransactionCoordinator(TxnConfig.from_props(self.config.get), self.catalog,
                                                self.producer_ids.next_id, error_code,
                                                transaction_version=lambda: self.features.transaction_version)
            # a COMMIT/ABORT marker in a group's __consumer_offsets partition settles the producer's
            # transactional offset commits
            self._txns.markers.add_listener(OFFSETS_TOPIC,
                                            lambda _partition, pid, commit: self.groups.replay_marker(pid, commit))
            if (failover := self.coordinator_failover) is not None:
                failover.attach_txns(self._txns)
            if self._running:
                self._txns.start()
        return self._txns

    @property
    def share_coordinator(self):
        """The share coordinator (`__share_group_state`), built on first use or at start when its topic exists."""
        if self._share_coordinator is None:
            from minikafka.broker import share_coordination
            self._share_coordinator = share_coordination.build(self)
            if self._running and self.cluster is None:
                self._share_coordinator.start_loading()
        return self._share_coordinator

    @property
    def share_persister(self):
        """The share-group state persister share-partition leaders use (coordinator/share/persister.py)."""
        if self._share_persister is None:
            from minikafka.broker import share_coordination
            self._share_persister = share_coordination.persister(self)
        return self._share_persister

    async def ensure_share_state_topic(self) -> None:
        from minikafka.broker import share_coordination
        await share_coordination.ensure_topic(self)

    @property
    def share_sessions(self):
        """Share sessions of the consumers fetching from this broker (broker/share/sessions.py)."""
        if self._share_sessions is None:
            from minikafka.broker.share.sessions import ShareSessionCache
            self._share_sessions = ShareSessionCache(int(self.config.get("group.share.max.share.sessions") or 2000))
        return self._share_sessions

    @property
    def share_manager(self):
        """The share-partitions this broker leads (broker/share/manager.py), their state kept by the share
        coordinator through `share_persister`."""
        if self._share_manager is None:
            from minikafka.broker.share.manager import SharePartitionManager
            replicas = self.replicas
            self._share_manager = SharePartitionManager(
                self.catalog, self.share_persister, self.group_configs.group_config, self.notifier.notify,
                leader_epoch=(lambda t, p: replicas.leader_epoch(t, p)) if replicas is not None else (lambda _t, _p: 0))
            if replicas is not None:  # a new leader (or leader epoch) loads share-partitions afresh
                manager = self._share_manager
                replicas.add_leadership_listener(lambda t, p, _epoch: manager.drop_partition(t, p),
                                                 manager.drop_partition)
        return self._share_manager

    def connection_closed(self, peer: str) -> None:
        """A client connection closed: the share sessions it opened go, and their members' records are
        released (Kafka's ShareSessionCache disconnect listener); its client telemetry instance is
        forgotten (Kafka's ClientMetricsManager disconnect listener); its ApiVersions software info too."""
        if self._client_telemetry is not None:
            self._client_telemetry.connection_closed(peer)
        software = getattr(self, "client_software", None)
        if software:
            software.pop(peer, None)
        if self._share_sessions is None:
            return
        for session in self._share_sessions.close_connection(peer):
            self.share_manager.release_member(session.group_id, session.member_id,
                                              [(None, t, p) for t, p in session.partitions])

    @property
    def coordinator_failover(self):
        """On a cluster (cluster runtime and replica manager in place): the coordinators' wiring to
        partition leadership (broker/cluster/coordinator_failover.py); None on a single node."""
        if self._failover is None and getattr(self, "replicas", None) is not None \
                and getattr(self, "cluster", None) is not None:
            from minikafka.broker.cluster.coordinator_failover import CoordinatorFailover
            self._failover = CoordinatorFailover(self)
        return self._failover

    def coordinators_built(self) -> tuple[bool, bool]:
        """(group coordinator built, transaction coordinator built)."""
        return self._groups is not None, self._txns is not None

    def start(self) -> None:
        """The listeners are open: coordinators built from now on start at once (those built before,
        in tests, start here)."""
        self._running = True
        if self._groups is not None:
            self._start_groups()
        if self._txns is not None:
            self._txns.start()
        if self.cluster is None and (self._share_coordinator is not None or
                                     self.catalog.get("__share_group_state") is not None):
            self.share_coordinator.start_loading()

    def _start_groups(self) -> None:
        from minikafka.broker.background import start_group_services
        self.service_tasks += start_group_services(self)

    async def stop_coordinators(self) -> None:
        """Shutdown: the transaction coordinator's tasks (if it was built)."""
        if self._txns is not None:
            await self._txns.stop()

    def advertised_for(self, listener_name: str) -> Listener:
        """The address clients of `listener_name` are told to use (Kafka matches listener names)."""
        return self._advertised.get(listener_name, self.advertised)

    def set_bound_port(self, listener: Listener, port: int) -> None:
        """Port 0 listeners: advertise the port actually bound unless advertised explicitly."""
        adv = self._advertised.get(listener.name)
        if adv is not None and adv.port == 0:
            self._advertised[listener.name] = Listener(adv.name, adv.host, port)
            if self.advertised.name == listener.name:
                self.advertised = self._advertised[listener.name]


    @property
    def scram_credentials(self) -> "ScramCredentialStore":
        """The SCRAM credential store, read when the file exists at start-up, else on first use."""
        if self._scram_credentials is None:
            from minikafka.broker.security.sasl.credentials import ScramCredentialStore
            self._scram_credentials = ScramCredentialStore(self.config.log_dirs[0]).load()
        return self._scram_credentials

    @property
    def delegation_tokens(self) -> "DelegationTokenStore":
        """The delegation tokens: a file on a single node, the metadata image's in a cluster."""
        if self._delegation_tokens is None:
            from minikafka.broker.security.delegation_tokens import DelegationTokenStore, TokenSettings
            in_cluster = getattr(self.config, "quorum", None) is not None
            self._delegation_tokens = DelegationTokenStore(None if in_cluster else self.config.log_dirs[0],
                                                           TokenSettings.from_config(self.config.get)).load()
        return self._delegation_tokens

    def _elr_safety_config(self) -> None:
        """Kafka's maybeGenerateElrSafetyRecords at format time: with eligible leader replicas on, a new
        cluster keeps min.insync.replicas in its cluster-wide dynamic configs (the static value), which then
        cannot be removed (a cluster: the controller's bootstrap records, metadata/controller.py)."""
        from minikafka.broker.config.features import ELR_VERSION
        layer = self.dynamic_config.layer(False)
        if self.features.level(ELR_VERSION) >= 1 and "min.insync.replicas" not in layer:
            self.dynamic_config.replace(False, {**layer, "min.insync.replicas": self.config.get("min.insync.replicas")})

    def load(self) -> None:
        if self.features.created and getattr(self.config, "quorum", None) is None:
            self._elr_safety_config()
        self.catalog.load()  # reads the catalog and lists the partitions; logs open on first use

    def _hook_log(self, plog: PartitionLog) -> None:
        tp = (plog.topic, plog.partition)
        notify = self.notifier.notify
        plog.append_listeners.append(lambda: notify(tp))

    async def auto_create_async(self, name: str) -> TopicInfo | None:
        """Create `name` with broker defaults if auto-creation is on (partition files made off the
        event loop; concurrent requests for one name share the creation); None if off, refused or
        failed. The internal topics get their coordinator's partition count and configs, as Kafka's
        AutoTopicCreationManager does."""
        if not self.config.auto_create_topics:
            return None
        if name == "__share_group_state":  # the share coordinator's partitions and configs (single node or cluster)
            try:
                await self.ensure_share_state_topic()
            except Exception as exc:
                log.warning("auto-create of %s failed: %s", name, exc)
            return self.catalog.get(name)
        if self.cluster is not None and name not in (OFFSETS_TOPIC, TXN_TOPIC):
            return await self._auto_create_on_cluster(name)
        if name in (OFFSETS_TOPIC, TXN_TOPIC):
            try:
                await self.ensure_internal_topic(name)
            except Exception as exc:
                log.warning("auto-create of %s failed: %s", name, exc)
            return self.catalog.get(name)
        try:
            return await self.catalog.create_async(name, self.config.num_partitions, 1, exist_ok=True)
        except Exception as exc:
            log.info("auto-create of %r refused: %s", name, exc)
            return None

    async def _auto_create_on_cluster(self, name: str) -> TopicInfo | None:
        """A cluster: the active controller creates it (num.partitions, default.replication.factor; the
        internal topics as their coordinators ask); this node's view once its metadata has it."""
        if name in (OFFSETS_TOPIC, TXN_TOPIC):
            partitions = self.config.offsets_topic_partitions if name == OFFSETS_TOPIC else self.config.txn_state_partitions
            rf = int(self.config.get("offsets.topic.replication.factor" if name == OFFSETS_TOPIC
                                     else "transaction.state.log.replication.factor") or 1)
        else:
            partitions, rf = self.config.num_partitions, self.config.default_replication_factor
        code = await self.cluster.create_topic(name, partitions, rf)
        if code not in (0, 36):  # created, or TOPIC_ALREADY_EXISTS (a concurrent creation)
            log.info("auto-create of %r refused by the controller: error %d", name, code)
            return None
        return self.catalog.get(name)

    async def ensure_internal_topic(self, name: str) -> None:
        """Create `__consumer_offsets` / `__transaction_state` if missing, off the event loop (on a
        cluster through the controller)."""
        if (failover := self.coordinator_failover) is not None:
            await failover.ensure_topic(name)
            return
        if name == OFFSETS_TOPIC:
            await self.groups.ensure_topic_async()
        elif name == TXN_TOPIC:
            await self.txns.txns.ensure_topic_async()

    def close(self) -> None:
        self.catalog.close()  # stop topic file work in flight first
        if self._groups is not None:
            self._groups.close()
        if self._failover is not None:
            self._failover.close()
        if self._share_coordinator is not None:
            self._share_coordinator.close()
        self.logs.close()
