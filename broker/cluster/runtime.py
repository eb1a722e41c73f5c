"""`state.cluster` on a node of a multi-node cluster: the metadata image this node follows, its
registration with the active controller, and requests to that controller.

* **Image.** Every committed entry of the metadata log is applied in order (QuorumDriver.on_commit)
  to `image`. After each run of entries, the local partition directories are made to follow it (a
  partition with a replica on this node gets its log, created with the topic id; a removed topic's
  logs go) and only then are the listeners told: `fn(image, changed, deleted_topics)` on the event
  loop, in commit order, one run at a time (`deleted_topics` first: a name deleted and created again
  in one run is in both).
* **Lifecycle** (Kafka's BrokerLifecycleManager): register with the active controller (BrokerRegistration
  over the CONTROLLER listener) once the cluster id is agreed, heartbeat every
  broker.heartbeat.interval.ms; re-register on STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED. On
  shutdown, heartbeats ask wantShutDown until the controller answers shouldShutDown (leadership moved
  away) or a bound passes.
* **Controller requests** go to the quorum leader's controller endpoint and are retried on
  NOT_CONTROLLER or a lost connection until the leader answers or the timeout passes.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from minikafka.metadata.image import MetadataImage
from minikafka.protocol.peer_client import PeerClient, PeerError
from minikafka.protocol.errors import BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER, STALE_BROKER_EPOCH

if TYPE_CHECKING:
    from minikafka.broker.security.peer_security import PeerFactory
    from minikafka.raft.driver import QuorumDriver
    from minikafka.broker.state import BrokerState
    from minikafka.metadata.active_controller import ActiveController

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 2  # v2: CordonedLogDirs (KIP-1066)
SHUTDOWN_WAIT_S = 5.0
NO_QUORUM_WAIT_S = 1.0
SECURITY_RECORDS = frozenset({"AccessControlEntry", "RemoveAccessControlEntry", "UserScramCredential",
                              "RemoveUserScramCredential", "Config", "ClientQuota", "DelegationToken",
                              "RemoveDelegationToken"})
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}

Listener = Callable[[MetadataImage, list[tuple[str, int]], list[str]], Any]


class ControllerUnavailableError(Exception):
    """No active controller answered in time (`code`: what the client is answered)."""
    code = 7  # REQUEST_TIMED_OUT


def _top_level_not_controller(resp: Any) -> bool:
    return getattr(resp, "error_code", 0) == NOT_CONTROLLER


class ClusterRuntime:
    def __init__(self, state: "BrokerState", driver: "QuorumDriver", peer_factory: "PeerFactory | None" = None) -> None:
        from minikafka.broker.security.peer_security import PeerFactory
        self.state = state
        self.driver = driver
        # every connection to another node (controller requests, replica fetches, coordinator lookups) comes
        # from here: the controller / inter-broker listener's TLS and SASL (broker/security/peer_security.py)
        self.peer_factory = peer_factory or PeerFactory()
        self.node_id = state.node_id
        config = state.config
        self.image = MetadataImage()
        self.active: ActiveController | None = None  # set by broker/server.py (every voter may become it)
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.caught_up_once = asyncio.Event()
        self.heartbeat_interval_s = int(config.get("broker.heartbeat.interval.ms") or 2000) / 1000
        self.request_timeout_s = max(driver.quorum.request_timeout_ms / 1000, 1.0)
        session_s = int(config.get("broker.session.timeout.ms") or 9000) / 1000
        self.lifecycle_timeout_s = max(0.2, min(driver.quorum.request_timeout_ms / 1000, session_s / 3))
        self.controller_timeout_s = 30.0
        names = [l.name for l in config.listeners if l.name not in config.controller_listener_names]
        resolved = self.peer_factory.inter_broker_listener  # broker/security/peer_security.py, checked at start-up
        self.inter_broker_listener: str = resolved if resolved in names or not names else names[0]
        # endpoints registered besides the Kafka listeners, e.g. the schema registry's (name, host, port, protocol):
        # clients' Metadata never names them (it answers the endpoints of the listener asked on)
        self.extra_endpoints: list[tuple[str, str, int, str]] = []
        self._listeners: list[Listener] = []
        self._security_changed = True  # an ACL / SCRAM / broker config record committed since the last flush (first: load)
        self._late: list[Listener] = []  # added after partitions existed: told of all of them first
        self._pending_changed: dict[tuple[str, int], None] = {}
        self._pending_deleted: dict[str, None] = {}
        self._dirty: dict[str, None] = {}
        self._flush_task: asyncio.Task | None = None
        self._clients: dict[tuple[int, str], PeerClient] = {}
        self._tasks: list[asyncio.Task] = []
        self.controller_registration = None  # a controller's ControllerRegistrationManager (start)
        self._registration_task: asyncio.Task | None = None
        self.dir_assigner = None  # a broker's DirAssigner (KIP-858: AssignReplicasToDirs), started by start()
        self._dir_assign_task: asyncio.Task | None = None
        self._want_shut_down = False
        self._should_shut_down = asyncio.Event()
        self._applied_event = asyncio.Event()
        driver.on_commit = self._on_commit
        driver.snapshot_state = self._snapshot_state
        driver.on_snapshot = self._on_snapshot

    # -- the image --------------------------------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        """`fn(image, changed, deleted_topics)` after each committed run; a listener added once the
        image already has partitions is first called with all of them (in the flush order)."""
        self._listeners.append(fn)
        if any(t.partitions for t in self.image.topics.values()):
            self._late.append(fn)
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # not running yet: the first commit schedules it
            self._flush_task = loop.create_task(self._flush(), name="cluster-image-flush")

    @property
    def controller_id(self) -> int:
        leader = self.driver.node.leader
        return -1 if leader is None else leader

    def _on_commit(self, entries: list[tuple[int, Any]]) -> None:
        for offset, payload in entries:
            changed, deleted = self.image.apply(payload, offset)
            for tp in changed:
                self._pending_changed[tp] = None
                self._dirty[tp[0]] = None
            for name in deleted:
                self._pending_deleted[name] = None
                self._dirty[name] = None
            if isinstance(payload, dict) and payload.get("type") in SECURITY_RECORDS:
                self._security_changed = True  # no partition changes, but the listeners must hear of it
            if isinstance(payload, dict) and payload.get("type") in ("Topic", "Config"):
                name = payload.get("name") if payload.get("type") == "Topic" else payload.get("resourceName")
                if name:
                    self._dirty[name] = None
        self._schedule_flush()

    def _snapshot_state(self):
        """KIP-630: a copy of the image now (the committed state), serialized later in a worker thread."""
        return self.image.copy().to_json

    def _on_snapshot(self, offset: int, data: Any) -> None:
        """The image replaced by a snapshot's (start-up, or installed from the leader): every topic is
        looked at again, topics it no longer has are deleted."""
        image = MetadataImage.from_json(data) if data else MetadataImage()
        image.offset = max(image.offset, offset - 1)
        gone = [name for name in self.image.topics if name not in image.topics]
        self.image = image
        for name in gone:
            self._pending_deleted[name] = None
            self._dirty[name] = None
        for t in image.topics.values():
            self._dirty[t.name] = None
            for p in t.partitions:
                self._pending_changed[(t.name, p)] = None
        self._schedule_flush()

    async def _flush(self) -> None:
        """Local partitions follow the image, then the listeners are told (repeated while more arrives)."""
        while self._dirty or self._pending_changed or self._pending_deleted or self._late or self._security_changed:
            self._security_changed = False
            dirty, self._dirty = list(self._dirty), {}
            changed, self._pending_changed = list(self._pending_changed), {}
            deleted, self._pending_deleted = list(self._pending_deleted), {}
            for name in dirty:
                try:
                    await self._follow(name)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("cluster: making local partitions of %s follow the metadata failed", name)
            late, self._late = self._late, []
            for fn in late:  # added after partitions existed: every partition first (deletions seen are gone)
                await self._tell(fn, [(t.name, p) for t in self.image.topics.values() for p in t.partitions], [])
            for fn in list(self._listeners):
                await self._tell(fn, changed, deleted)
            self._applied_event.set()
            self._applied_event = asyncio.Event()

    async def _tell(self, fn, changed: list, deleted: list) -> None:
        """One metadata listener told of a change; its failure is logged, never stops the others."""
        try:
            result = fn(self.image, changed, deleted)
            if asyncio.iscoroutine(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("cluster: metadata listener %r failed", fn)

    async def _follow(self, name: str) -> None:
        catalog = self.state.catalog
        topic = self.image.topics.get(name)
        if topic is None:
            if catalog.get(name) is not None:
                await catalog.delete_async(name)
            return
        local = frozenset(p.partition for p in topic.partitions.values() if self.node_id in p.replicas)
        await catalog.follow(name, topic.uuid, len(topic.partitions), topic.configs, local,
                             internal=name in INTERNAL_TOPICS)

    async def _remove_strays(self) -> None:
        """Once caught up: local topics the metadata does not know (deleted while this node was away) go."""
        catalog = self.state.catalog
        for name, info in list(catalog.topics.items()):
            topic = self.image.topics.get(name)
            if topic is None or topic.topic_id != info.topic_id.bytes:
                log.info("cluster: removing local topic %s: not in the cluster metadata", name)
                self._dirty[name] = None
        if self._dirty:
            self._schedule_flush()

    async def _open_once_followed(self) -> None:
        """Unfenced for the first time: strays removed and every record applied so far followed by the
        local partitions and the listeners, then `caught_up_once` (Kafka: the metadata publishers have
        caught up before request processing starts). A task of its own: heartbeats go on meanwhile."""
        await self._remove_strays()
        while self._dirty or self._pending_changed or self._pending_deleted or self._late or \
                (self._flush_task is not None and not self._flush_task.done()):
            self._schedule_flush()
            if self._flush_task is not None:
                await asyncio.wait({self._flush_task})
        self.caught_up_once.set()

    async def wait_for_topic(self, name: str, timeout_s: float, present: bool = True) -> bool:
        """Wait until the local view has (or no longer has) topic `name`."""
        deadline = time.monotonic() + timeout_s
        while (self.state.catalog.get(name) is not None) != present or \
                (present and name not in self.image.topics):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._applied_event.wait(), min(left, 0.1))
            except asyncio.TimeoutError:
                pass
        return True

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str] | None = None, timeout_s: float = 30.0) -> int:
        """Create a topic through the active controller (e.g. an internal topic on first use) and wait
        until this node's view has it; 0, or Kafka's error code (TOPIC_ALREADY_EXISTS 36 included: the
        topic is then there, or about to be). REQUEST_TIMED_OUT without an answering controller."""
        from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
        C = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[C(name=name, num_partitions=partitions, replication_factor=replication_factor,
                                            assignments=[], configs=[C.CreatableTopicConfig(name=k, value=v)
                                                                     for k, v in (configs or {}).items()])],
                                  timeout_ms=int(timeout_s * 1000), validate_only=False)
        try:
            resp = await self.controller_request(req, 7, CreateTopicsResponse, timeout_s=timeout_s,
                                                 not_controller=lambda r: r.topics[0].error_code == NOT_CONTROLLER)
        except ControllerUnavailableError:
            return 7
        code = resp.topics[0].error_code
        if code in (0, 36):
            await self.wait_for_topic(name, timeout_s)
        return code

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._lifecycle(), name="broker-lifecycle"))
        if self.driver.quorum.is_controller:  # KIP-919: every controller registers with the active one
            from minikafka.broker.cluster.controller_registration import ControllerRegistrationManager
            self.controller_registration = ControllerRegistrationManager(self)
            self._registration_task = asyncio.get_running_loop().create_task(
                self.controller_registration.run(), name="controller-registration")
        if self.driver.quorum.is_broker:  # KIP-858: the controller learns in which dir each replica lives
            from minikafka.broker.cluster.dir_assignments import DirAssigner
            self.dir_assigner = DirAssigner(self)
            self._dir_assign_task = asyncio.get_running_loop().create_task(self.dir_assigner.run(),
                                                                           name="dir-assignments")

    async def controlled_shutdown(self, timeout_s: float | None = None) -> bool:
        """Ask the controller to move leadership away (heartbeat wantShutDown) and wait for its
        shouldShutDown, at most `timeout_s` (default: a few heartbeats, at most SHUTDOWN_WAIT_S); True
        if it came."""
        if self.broker_epoch < 0 or not self._tasks or self._tasks[0].done():
            return False
        if not any(self.node_id in p.replicas and (p.leader == self.node_id or self.node_id in p.isr)
                   for t in self.image.topics.values() for p in t.partitions.values()):
            return True  # leads nothing, in no ISR: nothing to move
        if timeout_s is None:
            timeout_s = min(SHUTDOWN_WAIT_S, 4 * self.heartbeat_interval_s + 0.5)
        self._want_shut_down = True
        deadline = time.monotonic() + timeout_s
        leaderless_since = None
        while not self._should_shut_down.is_set():
            now = time.monotonic()
            if self.driver.node.leader is None:  # no quorum (the last nodes going): nobody can move anything
                leaderless_since = leaderless_since or now
                if now - leaderless_since > NO_QUORUM_WAIT_S:
                    log.warning("cluster: controlled shutdown without an active controller: stopping anyway")
                    return False
            else:
                leaderless_since = None
            if now >= deadline:
                log.warning("cluster: no shouldShutDown from the controller within %.0f s", timeout_s)
                return False
            try:
                await asyncio.wait_for(self._should_shut_down.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
        return True

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._registration_task is not None:
            self._registration_task.cancel()
        if self._dir_assign_task is not None:
            self._dir_assign_task.cancel()
        if self._flush_task is not None:
            self._flush_task.cancel()
        if self.active is not None:
            await self.active.stop()
        for client in self._clients.values():
            client.close()

    def _endpoints(self) -> list[tuple[str, str, int, str]]:
        config = self.state.config
        out = []
        for listener in config.listeners:
            if listener.name in config.controller_listener_names:
                continue
            adv = self.state.advertised_for(listener.name)
            out.append((listener.name, adv.host, adv.port, config.security_protocols.get(listener.name, "PLAINTEXT")))
        return out + self.extra_endpoints

    def _dir_ids(self) -> dict:
        """Each log dir's id (meta.properties directory.id, Kafka's url-safe base64 of a UUID) as a UUID,
        what BrokerRegistration's LogDirs and BrokerHeartbeat's CordonedLogDirs carry (KIP-1066)."""
        import base64
        from minikafka.broker.config.core import parse_properties
        out = {}
        for d in self.state.config.log_dirs:
            try:
                value = parse_properties((d / "meta.properties").read_text()).get("directory.id", "")
                out[d] = uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
            except (OSError, ValueError):  # no id recorded: a stable one from the path
                out[d] = uuid.uuid5(uuid.NAMESPACE_URL, str(d))
        return out

    def _cordoned_dir_ids(self) -> list:
        """The ids of the dirs cordoned.log.dirs names now (a dynamic change goes with the next heartbeat)."""
        cordoned = self.state.config.cordoned_log_dirs
        if not hasattr(self, "_log_dir_ids"):
            self._log_dir_ids = self._dir_ids()
        return [i for d, i in self._log_dir_ids.items() if d in cordoned]

    async def _register(self) -> None:
        from minikafka.protocol.messages import BrokerRegistrationRequest, BrokerRegistrationResponse
        while self.state.cluster_id is None:
            await asyncio.sleep(0.05)
        rack = (self.state.config.props.get("broker.rack") or "").strip() or None
        self._log_dir_ids = self._dir_ids()
        L = BrokerRegistrationRequest.Listener
        while True:
            req = BrokerRegistrationRequest(
                broker_id=self.node_id, cluster_id=self.state.cluster_id, incarnation_id=self.incarnation_id,
                listeners=[L(name=n, host=h, port=p, security_protocol=SECURITY_PROTOCOL_IDS.get(sp, 0))
                           for n, h, p, sp in self._endpoints()],
                features=[], rack=rack, is_migrating_zk_broker=False, log_dirs=list(self._log_dir_ids.values()),
                previous_broker_epoch=self.state.logs.previous_broker_epoch)
            try:
                resp = await self.controller_request(req, REGISTRATION_VERSION, BrokerRegistrationResponse,
                                                     channel="lifecycle")
            except ControllerUnavailableError:
                continue
            if resp.error_code == 0:
                self.broker_epoch = resp.broker_epoch
                self.state.logs.broker_epoch = resp.broker_epoch  # written by a clean shutdown (KIP-966)
                log.info("cluster: registered as broker %d with epoch %d", self.node_id, self.broker_epoch)
                return
            log.info("cluster: registration refused with error %d; retrying", resp.error_code)
            await asyncio.sleep(self.heartbeat_interval_s / 2)

    async def _lifecycle(self) -> None:
        from minikafka.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
        if not self.driver.quorum.is_broker:  # a controller-only node: no registration, no partitions
            await self._controller_caught_up()
            return
        await self._register()
        while True:
            req = BrokerHeartbeatRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                                         current_metadata_offset=self.image.offset, want_fence=False,
                                         want_shut_down=self._want_shut_down, offline_log_dirs=[],
                                         cordoned_log_dirs=self._cordoned_dir_ids())
            try:
                resp = await self.controller_request(req, HEARTBEAT_VERSION, BrokerHeartbeatResponse,
                                                     channel="lifecycle", timeout_s=self.heartbeat_interval_s * 2)
            except ControllerUnavailableError:
                continue
            if resp.error_code in (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED):
                log.info("cluster: heartbeat refused with error %d; registering again", resp.error_code)
                self.fenced = True
                await self._register()
                continue
            if resp.error_code == 0:
                if self.fenced != resp.is_fenced:
                    log.info("cluster: broker %d is %s", self.node_id, "fenced" if resp.is_fenced else "unfenced")
                self.fenced = resp.is_fenced
                if not resp.is_fenced and not self.caught_up_once.is_set() and len(self._tasks) == 1:
                    self._tasks.append(asyncio.get_running_loop().create_task(
                        self._open_once_followed(), name="broker-caught-up"))
                if self._want_shut_down and resp.should_shut_down:
                    log.info("cluster: controlled shutdown: the controller moved this broker's leaderships away")
                    self._should_shut_down.set()
                    return
            # faster while waiting to be unfenced or to shut down (Kafka: the same)
            await asyncio.sleep(self.heartbeat_interval_s / 10 if self.fenced or self._want_shut_down
                                else self.heartbeat_interval_s)

    async def _controller_caught_up(self) -> None:
        """Controller-only node: ready once its image has applied the metadata log up to the high watermark
        it first learned of (what a broker's unfencing means for a broker)."""
        node = self.driver.node
        while node.high_watermark <= 0 or self.image.offset < node.high_watermark - 1:
            await asyncio.sleep(0.05)
        await self._open_once_followed()

    # -- requests to the active controller ---------------------------------------------------------------
    def _controller_endpoint(self, node: int) -> tuple[str, int]:
        """The controller's endpoint: the static voters, or (KIP-853) the voter set in the log."""
        address = self.driver.endpoint(node)
        if address is None:
            raise PeerError(f"no endpoint known for controller {node}")
        return address

    def _client(self, node: int, channel: str) -> PeerClient:
        client = self._clients.get((node, channel))
        if client is None:
            # heartbeats must not hang on a paused old controller for longer than a fraction of the
            # session, or the new controller fences this live broker
            timeout = self.lifecycle_timeout_s if channel == "lifecycle" else self.request_timeout_s * 5
            client = self._clients[(node, channel)] = self.peer_factory.controller_client(
                node, self._controller_endpoint(node), f"broker-{self.node_id}-{channel}", timeout,
                self.driver.quorum.retry_backoff_ms / 1000, max_backoff_s=0.25 if channel == "lifecycle" else 1.0)
        return client

    async def controller_request(self, req: Any, version: int, resp_cls: type,
                                 not_controller: Callable[[Any], bool] = _top_level_not_controller,
                                 timeout_s: float | None = None, channel: str = "requests",
                                 on_behalf: "ForwardedFor | None" = None) -> Any:
        """`req` answered by the active controller (retried on NOT_CONTROLLER, a lost connection or no
        known leader); ControllerUnavailableError when `timeout_s` (default 30 s) passes first.
        `on_behalf`: a client's request, sent inside an Envelope carrying that client's principal and
        address, so that the controller authorizes it as that client (Kafka's ForwardingManager); without
        it the request goes as this broker's own (its inter-broker principal)."""
        deadline = time.monotonic() + (self.controller_timeout_s if timeout_s is None else timeout_s)
        backoff = 0.02
        while True:
            leader = self.driver.node.leader
            if leader is not None:
                try:
                    client = self._client(leader, channel)
                    if on_behalf is None:
                        resp = await client.request(req, version, resp_cls)
                    else:
                        resp = await _enveloped(client, req, version, resp_cls, on_behalf)
                    resp._header = None
                    if not not_controller(resp):
                        return resp
                except PeerError as exc:
                    log.debug("cluster: controller request to node %d failed: %s", leader, exc)
            if time.monotonic() + backoff >= deadline:
                raise ControllerUnavailableError(f"no active controller answered within the timeout")
            if await self._new_leader_within(backoff, leader):
                backoff = 0.02  # a new quorum leader: asked at once, as Kafka's controller channel does
            else:
                backoff = min(backoff * 2, 0.5)

    async def _new_leader_within(self, timeout_s: float, leader: int | None) -> bool:
        """Wait up to `timeout_s`; True as soon as the quorum names a leader other than `leader` (so a
        request is not left sleeping out its backoff while a new controller is already there)."""
        end = time.monotonic() + timeout_s
        while True:
            current = self.driver.node.leader
            if current is not None and current != leader:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            await self.driver.wait_for_change(left)


class ForwardedFor(NamedTuple):
    """Whose request a broker forwards: the client's principal ("User:alice"), address and client id."""
    principal: str
    host: str
    client_id: str | None = None


class EnvelopeRefused(ControllerUnavailableError):
    """The controller refused the Envelope itself (not the request inside, e.g. this broker lacks
    CLUSTER_ACTION): as Kafka's ForwardingManager, the client gets UNKNOWN_SERVER_ERROR."""
    code = -1

    def __init__(self, envelope_error: int) -> None:
        super().__init__(f"the controller refused the forwarding envelope: error {envelope_error}")
        self.envelope_error = envelope_error


async def _enveloped(client: PeerClient, req: Any, version: int, resp_cls: type, who: ForwardedFor) -> Any:
    """`req` inside an Envelope on behalf of `who`; the inner response, decoded. NOT_CONTROLLER on the
    envelope reads as "not the controller" for the retry (the answer is then re-sent to the new one)."""
    from minikafka.protocol.envelope import (address_bytes, inner_request_bytes, inner_response_body,
                                      principal_bytes)
    from minikafka.protocol.messages import EnvelopeRequest, EnvelopeResponse
    env = EnvelopeRequest(request_data=inner_request_bytes(req, version, who.client_id),
                          request_principal=principal_bytes(who.principal),
                          client_host_address=address_bytes(who.host))
    answer = await client.request(env, ENVELOPE_VERSION, EnvelopeResponse)
    if answer.error_code == NOT_CONTROLLER:
        raise PeerError("the envelope reached a node that is not the active controller")
    if answer.error_code or answer.response_data is None:
        raise EnvelopeRefused(answer.error_code)
    flexible = req.flexible_version_q(version)
    return resp_cls.decode(bytes(inner_response_body(bytes(answer.response_data), flexible)), version=version,
                           header=False)
