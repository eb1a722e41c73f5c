"""The active controller's decisions (Kafka's QuorumController / ReplicationControlManager /
ClusterControlManager), pure: every method validates against the controller's image and emits the
metadata records of its decision through `propose(record) -> offset`, applying each to that image at
once, so the next decision sees it (the image holds uncommitted records; the caller answers clients
only once they are committed, and throws the controller away when it loses the quorum leadership).

* Brokers register (fenced), heartbeat every broker.heartbeat.interval.ms, are unfenced once caught up
  with the metadata log past their registration, fenced when no heartbeat came for
  broker.session.timeout.ms (`tick`). A fenced or shutting-down broker leaves every ISR (the last ISR
  member stays, with no leader: unclean election is off) and leaders move to another ISR member.
* Leaders are chosen from the ISR among live brokers, preferring the replica order. Only when no ISR
  member is alive and `unclean.leader.election.enable` is true (topic config, else the cluster default
  of the dynamic broker configs, else this controller's static config) does a live replica outside the
  ISR lead, with an ISR of itself (Kafka's unclean election: what only the lost ISR had is lost);
  ElectLeaders UNCLEAN does the same on request, whatever the config.
* Reassignments (KIP-455, Kafka's PartitionReassignmentReplicas): `replicas` becomes the target
  followed by the replicas being removed, with adding/removing set; every partition change completes
  the reassignment as soon as the ISR, without the removed replicas, holds every target replica
  (replicas = target, the removed ones leave the ISR, the leader moves if it was removed, the leader
  epoch is bumped when replicas go). Cancelling reverts to the original replicas.
* AlterPartition is checked as Kafka does: leader epoch (FENCED_LEADER_EPOCH), sender is the leader
  (INVALID_REQUEST), partition epoch (INVALID_UPDATE_VERSION), new ISR members registered with the
  given broker epoch, unfenced, not shutting down (INELIGIBLE_REPLICA).
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from minikafka.protocol.uuids import random_uuid
from minikafka.metadata import records as r
from minikafka.metadata.image import NO_LEADER, MetadataImage, PartitionInfo
from minikafka.metadata.partition_change import effective_min_isr, elr_change
from minikafka.metadata.placement import PlacementError, place
from minikafka.protocol.errors import (
    BROKER_ID_NOT_REGISTERED,
    DUPLICATE_BROKER_REGISTRATION,
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_PARTITIONS,
    INVALID_REPLICATION_FACTOR,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST,
    INVALID_UPDATE_VERSION,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    NO_REASSIGNMENT_IN_PROGRESS,
    PREFERRED_LEADER_NOT_AVAILABLE,
    STALE_BROKER_EPOCH,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)

UNCLEAN_KEY = "unclean.leader.election.enable"
MIN_ISR_KEY = "min.insync.replicas"
ELR_FEATURE = "eligible.leader.replicas.version"
UNCLEAN_SCAN_MS = 1000

PRODUCER_ID_BLOCK = 1000  # KIP-730's block size


class ControllerError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ControllerConfig:
    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    unclean_leader_election: bool = False  # this controller's static unclean.leader.election.enable
    min_insync_replicas: int = 1  # this controller's static min.insync.replicas
    # eligible.leader.replicas.version >= 1 finalized (KIP-966; a new Kafka 4.3 cluster's default)
    elr_enabled: Callable[[], bool] | None = None


@dataclass(frozen=True)
class Heartbeat:
    error: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


class Controller:
    def __init__(self, image: MetadataImage, propose: Callable[[dict], int], config: ControllerConfig = ControllerConfig(),
                 now_ms: int = 0, rng: random.Random | None = None) -> None:
        self.image = image
        self._propose = propose
        self.config = config
        self.rng = rng or random.Random()
        # broker id -> session deadline (ms); every registered broker gets a full session on activation
        self.sessions: dict[int, int] = {b: now_ms + config.session_timeout_ms for b in image.brokers}
        self.emitted = 0  # records proposed so far
        self._next_unclean_scan = now_ms

    def _emit(self, record: dict) -> int:
        self.emitted += 1
        offset = self._propose(record)
        self.image.apply(record, offset)
        return offset

    # -- brokers --------------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, incarnation_id: str, endpoints: Iterable[tuple[str, str, int, str]],
                        rack: str | None, now_ms: int, next_offset: int, previous_broker_epoch: int = -1,
                        log_dirs: Iterable[str] = ()) -> int:
        """The new broker epoch (= the offset of the RegisterBroker record). A live session of another
        incarnation refuses with DUPLICATE_BROKER_REGISTRATION (the old process may still run)."""
        old = self.image.brokers.get(broker_id)
        if old is not None and old.incarnation_id != incarnation_id and not old.fenced \
                and self.sessions.get(broker_id, 0) > now_ms:
            raise ControllerError(DUPLICATE_BROKER_REGISTRATION,
                                  f"Another broker is registered with that broker id {broker_id}.")
        before = self.emitted
        if self.elr_enabled() and (old is None or old.incarnation_id != incarnation_id):
            # Kafka's handleBrokerShutdown: a new incarnation leaves every ISR; after an unclean shutdown
            # (its clean-shutdown marker did not carry the registered epoch) every ELR too
            clean = old is not None and old.epoch == previous_broker_epoch
            self._leave_isrs(broker_id, unclean_shutdown=not clean)
        elif old is not None:  # a new incarnation knows nothing of its replicas' state: out of every ISR first
            self._leave_isrs(broker_id)
        expected = next_offset + (self.emitted - before)  # `next_offset` was the log end when called
        epoch = self._emit(r.register_broker(broker_id, expected, incarnation_id, endpoints, rack, log_dirs))
        if epoch != expected:
            raise AssertionError(f"registration record at {epoch}, expected {expected}")
        self.sessions[broker_id] = now_ms + self.config.session_timeout_ms
        return epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, committed_offset: int, now_ms: int,
                  cordoned_log_dirs: Iterable[str] | None = None) -> Heartbeat:
        """`cordoned_log_dirs`: the ids the broker reports cordoned (BrokerHeartbeat v2, KIP-1066; None
        before it knows them): a change is recorded in the registration (BrokerRegistrationChangeRecord)."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            return Heartbeat(BROKER_ID_NOT_REGISTERED)
        if b.epoch != broker_epoch:
            return Heartbeat(STALE_BROKER_EPOCH)
        self.sessions[broker_id] = now_ms + self.config.session_timeout_ms
        if cordoned_log_dirs is not None:
            cordoned = tuple(sorted(set(cordoned_log_dirs)))
            if b.cordoned_log_dirs is None or tuple(sorted(b.cordoned_log_dirs)) != cordoned:
                self._emit(r.broker_state(broker_id, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
                                          cordoned_log_dirs=cordoned))
                b = self.image.brokers[broker_id]
        caught_up = metadata_offset >= broker_epoch and committed_offset > broker_epoch
        if want_shut_down:  # controlled shutdown; once nothing is led by it, fenced (Kafka's SHUTDOWN_NOW)
            if not b.in_controlled_shutdown and not b.fenced:
                self._emit(r.broker_state(broker_id, fenced=False, in_controlled_shutdown=True))
                self._leave_isrs(broker_id)
            led = any(p.leader == broker_id for t in self.image.topics.values() for p in t.partitions.values())
            if not led and not self.image.brokers[broker_id].fenced:
                self.fence(broker_id)
            return Heartbeat(NONE, caught_up, self.image.brokers[broker_id].fenced, should_shut_down=not led)
        if want_fence and not b.fenced:
            self.fence(broker_id)
        elif not want_fence and b.fenced and caught_up:
            self._emit(r.broker_state(broker_id, fenced=False))
            self._elect_leaderless(broker_id)
        return Heartbeat(NONE, caught_up, self.image.brokers[broker_id].fenced)

    def tick(self, now_ms: int) -> list[int]:
        """Fence brokers whose session expired (the brokers fenced); about every second, leaderless
        partitions of topics that allow unclean election get a live replica as leader (a config that
        changed to true takes effect so)."""
        expired = [b.id for b in self.image.brokers.values()
                   if not b.fenced and self.sessions.get(b.id, 0) <= now_ms]
        for broker_id in expired:
            self.fence(broker_id)
        if now_ms >= self._next_unclean_scan:
            self._next_unclean_scan = now_ms + UNCLEAN_SCAN_MS
            for t in list(self.image.topics.values()):
                leaderless = [p for p in t.partitions.values() if p.leader == NO_LEADER]
                if leaderless and self.unclean_enabled(t.name):
                    for p in leaderless:
                        self._elect_unclean(t.topic_id, p)
        return expired

    def register_controller(self, controller_id: int, incarnation_id: str,
                            endpoints: Iterable[tuple[str, str, int, str]],
                            features: Iterable[tuple[str, int, int]]) -> None:
        """Kafka's ClusterControlManager.registerController (KIP-919): one RegisterController record, the
        request's listeners and features as they are (Kafka 4.3 checks neither against anything)."""
        self._emit(r.register_controller(controller_id, incarnation_id, endpoints, features))

    def unregister_broker(self, broker_id: int) -> None:
        """Kafka's UnregisterBroker (`kafka-cluster unregister`): the broker leaves every ISR and
        leadership as when fenced, then its registration is removed; BROKER_ID_NOT_REGISTERED when none."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise ControllerError(BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
        self._leave_isrs(broker_id)
        self._emit(r.unregister_broker(broker_id, b.epoch))
        self.sessions.pop(broker_id, None)

    def fence(self, broker_id: int) -> None:
        self._emit(r.broker_state(broker_id, fenced=True))
        self._leave_isrs(broker_id)

    def elr_enabled(self) -> bool:
        return self.config.elr_enabled is not None and bool(self.config.elr_enabled())

    def min_isr(self, topic: str) -> int:
        """The topic's effective min.insync.replicas (Kafka's getTopicEffectiveMinIsr): its config, else
        the cluster-wide dynamic default, else this controller's static config; capped by the replicas."""
        t = self.image.topics.get(topic)
        value = self.config.min_insync_replicas
        for layer in (t.configs if t is not None else {}, self.image.broker_configs.get("", {})):
            if MIN_ISR_KEY in layer:
                try:
                    value = int(str(layer[MIN_ISR_KEY]).strip())
                except ValueError:
                    pass
                break
        first = next(iter(t.partitions.values()), None) if t is not None else None
        rf = len(first.replicas) - len(first.removing) if first is not None else 0
        return effective_min_isr(value, rf)

    def _elr_step(self, t, p: PartitionInfo, target_isr: Iterable[int], *, remove: int = NO_LEADER,
                  add: int = NO_LEADER, unclean_shutdown: int = NO_LEADER, unclean: bool | None = None) -> None:
        """One PartitionChange with eligible leader replicas (Kafka's generateLeaderAndIsrUpdates and
        PartitionChangeBuilder): `remove` never leads, `add` may lead although the image still shows it
        fenced, `unclean_shutdown` leaves ISR and ELR."""
        def acceptable(b: int) -> bool:
            return b != remove and b != unclean_shutdown and (b == add or self._live(b))
        ch = elr_change(replicas=p.replicas, isr=p.isr, elr=p.elr, last_known_elr=p.last_known_elr, leader=p.leader,
                        target_isr=target_isr, min_isr=self.min_isr(t.name), acceptable=acceptable,
                        unclean_allowed=self.unclean_enabled(t.name) if unclean is None else unclean,
                        unclean_shutdown=() if unclean_shutdown == NO_LEADER else (unclean_shutdown,))
        if not ch.empty:
            self._emit(r.partition_change(
                _sid(t.topic_id), p.partition, isr=None if ch.isr is None else list(ch.isr), leader=ch.leader,
                elr=None if ch.elr is None else list(ch.elr),
                last_known_elr=None if ch.last_known_elr is None else list(ch.last_known_elr)))

    def clear_elrs(self, topic: str | None) -> None:
        """Kafka's ClearElrRecord after a min.insync.replicas change (of `topic`, or None: cluster-wide):
        the ELR and LastKnownElr of those partitions are emptied."""
        topics = [self.image.topics[topic]] if topic in self.image.topics else [] if topic is not None \
            else list(self.image.topics.values())
        for t in topics:
            for p in list(t.partitions.values()):
                if p.elr or p.last_known_elr:
                    self._emit(r.partition_change(_sid(t.topic_id), p.partition, elr=[], last_known_elr=[]))

    def _live(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def _pick_leader(self, replicas: Iterable[int], isr: Iterable[int], exclude: int = -1) -> int:
        allowed = set(isr)
        for b in replicas:
            if b in allowed and b != exclude and self._live(b):
                return b
        return NO_LEADER

    def _leave_isrs(self, broker_id: int, unclean_shutdown: bool = False) -> None:
        """`broker_id` out of every ISR it is in (the last member stays, leaderless unless unclean
        election is allowed); leaders move. With eligible leader replicas: as Kafka's handleBrokerFenced
        (the ISR may become empty, members that leave an ISR below min.insync.replicas become ELR), and
        with `unclean_shutdown` out of every ELR too."""
        if self.elr_enabled():
            for t in list(self.image.topics.values()):
                for p in list(t.partitions.values()):
                    if broker_id in p.isr or p.leader == broker_id or (unclean_shutdown and broker_id in p.elr):
                        self._elr_step(t, p, [b for b in p.isr if b != broker_id],
                                       remove=NO_LEADER if unclean_shutdown else broker_id,
                                       unclean_shutdown=broker_id if unclean_shutdown else NO_LEADER)
            return
        for t in list(self.image.topics.values()):
            for p in list(t.partitions.values()):
                if broker_id not in p.isr and p.leader != broker_id:
                    continue
                isr = [b for b in p.isr if b != broker_id] or list(p.isr)
                leader = p.leader
                if leader == broker_id or leader == NO_LEADER:
                    leader = self._pick_leader(p.replicas, isr, exclude=broker_id)
                if tuple(isr) == p.isr and leader == p.leader:
                    continue
                self._emit(r.partition_change(_sid(t.topic_id), p.partition,
                                              isr=isr if tuple(isr) != p.isr else None,
                                              leader=leader if leader != p.leader else None))
                if leader == NO_LEADER and self.unclean_enabled(t.name):
                    self._elect_unclean(t.topic_id, t.partitions[p.partition])

    def _elect_leaderless(self, broker_id: int) -> None:
        """A broker came back: partitions without a leader whose ISR holds it get one (or, where unclean
        election is allowed, whose replicas hold it). With eligible leader replicas every leaderless
        partition is examined (Kafka's handleBrokerUnfenced): an ISR member, else an ELR member when the
        ISR is empty, else the last known leader may lead."""
        if self.elr_enabled():
            for t in list(self.image.topics.values()):
                for p in list(t.partitions.values()):
                    if p.leader == NO_LEADER:
                        self._elr_step(t, p, p.isr, add=broker_id)
            return
        for t in list(self.image.topics.values()):
            unclean: bool | None = None
            for p in list(t.partitions.values()):
                if p.leader != NO_LEADER or broker_id not in p.replicas:
                    continue
                if broker_id in p.isr:
                    leader = self._pick_leader(p.replicas, p.isr)
                    if leader != NO_LEADER:
                        self._emit(r.partition_change(_sid(t.topic_id), p.partition, leader=leader))
                    continue
                if unclean is None:
                    unclean = self.unclean_enabled(t.name)
                if unclean:
                    self._elect_unclean(t.topic_id, p)

    def unclean_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable for `topic`: its config, else the cluster-wide dynamic
        default, else this controller's static config (Kafka's ConfigurationControlManager)."""
        t = self.image.topics.get(topic)
        for layer in (t.configs if t is not None else {}, self.image.broker_configs.get("", {})):
            if UNCLEAN_KEY in layer:
                return str(layer[UNCLEAN_KEY]).strip().lower() == "true"
        return self.config.unclean_leader_election

    def _elect_unclean(self, topic_id: bytes, p: PartitionInfo) -> int:
        """A leaderless partition led by its first live replica, alone in the ISR; the leader chosen
        (NO_LEADER when no replica is alive). With eligible leader replicas: an ISR or ELR member or the
        last known leader first, as Kafka's UNCLEAN election; ELR and LastKnownElr are cleared."""
        if self.elr_enabled():
            t = self.image.topic_by_id(topic_id)
            if t is None:
                return NO_LEADER
            self._elr_step(t, p, p.isr, unclean=True)
            return t.partitions[p.partition].leader
        leader = next((b for b in p.replicas if self._live(b)), NO_LEADER)
        if leader != NO_LEADER:
            self._emit(r.partition_change(_sid(topic_id), p.partition, leader=leader, isr=[leader]))
        return leader

    # -- topics ---------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignments: dict[int, list[int]] | None = None, validate_only: bool = False) -> tuple[str, dict[int, list[int]]]:
        """(topic id, replicas per partition); raises ControllerError."""
        if name in self.image.topics:
            raise ControllerError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            plan = self._check_assignments(assignments, 0)
        else:
            if partitions <= 0:
                raise ControllerError(INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
            if replication_factor <= 0:
                raise ControllerError(INVALID_REPLICATION_FACTOR,
                                      "Replication factor must be larger than 0, or -1 to use the default value.")
            try:
                plan = place(self.image.usable_brokers(), partitions, replication_factor, rng=self.rng)
            except PlacementError as exc:
                raise ControllerError(INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition "
                                      f"{replication_factor} time(s): {exc}") from None
        topic_id = str(random_uuid())
        if validate_only:
            return topic_id, plan
        self._emit(r.topic(name, topic_id, configs))
        for index, replicas in sorted(plan.items()):
            self._emit(self._new_partition(topic_id, index, replicas))
        return topic_id, plan

    def _new_partition(self, topic_id: str, index: int, replicas: list[int]) -> dict:
        isr = [b for b in replicas if self._live(b)]
        leader = isr[0] if isr else NO_LEADER
        return r.partition(topic_id, index, replicas, isr or list(replicas), leader,
                           directories=[self.default_dir(b) for b in replicas])

    def default_dir(self, broker_id: int) -> str:
        """Kafka's ClusterDescriber.defaultDir: a broker with a single log dir puts new replicas there;
        with several (or none known) the dir is UNASSIGNED until the broker assigns it (KIP-858)."""
        b = self.image.brokers.get(broker_id)
        return b.log_dirs[0] if b is not None and len(b.log_dirs) == 1 else r.UNASSIGNED_DIR

    # -- directory assignments (KIP-858) --------------------------------------------------------------
    def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                directories: Iterable[tuple[str, Iterable[tuple[bytes, Iterable[int]]]]]
                                ) -> list[tuple[str, list[tuple[bytes, list[tuple[int, int]]]]]]:
        """Kafka's ReplicationControlManager.handleAssignReplicasToDirs: `directories` is (dir id, [(topic
        id, [partition])]); the answer has the same shape with an error code per partition. The broker's
        epoch must be its registered one (STALE_BROKER_EPOCH, also for a broker not registered: raised).
        Per partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the broker
        holds no replica of it), else a PartitionChange with the replica's new dir (none when it is
        there already). A dir the broker did not register (or LOST) is offline: the replica also leaves
        the ISR, and leadership, as when Kafka's controller handles an offline-dir assignment."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise ControllerError(STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
        if b.epoch != broker_epoch:
            raise ControllerError(STALE_BROKER_EPOCH,
                                  f"Expected broker epoch {b.epoch}, but got broker epoch {broker_epoch}")
        out: list[tuple[str, list[tuple[bytes, list[tuple[int, int]]]]]] = []
        offline_parts: list[tuple[bytes, int]] = []
        for dir_id, topics in directories:
            dir_id = str(dir_id)
            online = dir_online(dir_id, b.log_dirs)
            res_topics: list[tuple[bytes, list[tuple[int, int]]]] = []
            for topic_id, partitions in topics:
                t = self.image.topic_by_id(topic_id)
                res_parts: list[tuple[int, int]] = []
                for index in partitions:
                    if t is None:
                        res_parts.append((index, UNKNOWN_TOPIC_ID))
                        continue
                    p = t.partitions.get(index)
                    if p is None:
                        res_parts.append((index, UNKNOWN_TOPIC_OR_PARTITION))
                    elif broker_id not in p.replicas:
                        res_parts.append((index, NOT_LEADER_OR_FOLLOWER))
                    else:
                        if p.directory(broker_id) != dir_id:
                            dirs = [dir_id if rb == broker_id else p.directory(rb) or r.UNASSIGNED_DIR
                                    for rb in p.replicas]
                            self._emit(r.partition_change(_sid(t.topic_id), index, directories=dirs))
                        if not online:
                            offline_parts.append((t.topic_id, index))
                        res_parts.append((index, NONE))
                res_topics.append((topic_id, res_parts))
            out.append((dir_id, res_topics))
        for topic_id, index in offline_parts:  # Kafka's generateLeaderAndIsrUpdates("offline-dir-assignment")
            t = self.image.topic_by_id(topic_id)
            p = t.partitions.get(index) if t is not None else None
            if p is not None and (broker_id in p.isr or p.leader == broker_id):
                self._leave_isr(t, p, broker_id)
        return out

    def _leave_isr(self, t, p: PartitionInfo, broker_id: int) -> None:
        """`broker_id` out of one partition's ISR and leadership (one partition of _leave_isrs)."""
        if self.elr_enabled():
            self._elr_step(t, p, [b for b in p.isr if b != broker_id], remove=broker_id)
            return
        isr = [b for b in p.isr if b != broker_id] or list(p.isr)
        leader = p.leader
        if leader == broker_id or leader == NO_LEADER:
            leader = self._pick_leader(p.replicas, isr, exclude=broker_id)
        if tuple(isr) != p.isr or leader != p.leader:
            self._emit(r.partition_change(_sid(t.topic_id), p.partition, isr=isr if tuple(isr) != p.isr else None,
                                          leader=leader if leader != p.leader else None))

    def _check_assignments(self, assignments: dict[int, list[int]], first: int) -> dict[int, list[int]]:
        indexes = sorted(assignments)
        if indexes != list(range(first, first + len(indexes))):
            raise ControllerError(INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered consecutively")
        sizes = {len(v) for v in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ControllerError(INVALID_REPLICA_ASSIGNMENT,
                                  "All partitions in the manual partition assignment must have the same number of replicas.")
        for index, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise ControllerError(INVALID_REPLICA_ASSIGNMENT,
                                      f"The manual partition assignment includes the broker {replicas} more than once.")
            for b in replicas:
                if b not in self.image.brokers:
                    raise ControllerError(INVALID_REPLICA_ASSIGNMENT,
                                          f"The manual partition assignment includes broker {b}, but no broker with "
                                          f"that id is registered.")
        return {i: list(v) for i, v in assignments.items()}

    def delete_topic(self, name: str) -> str:
        t = self.image.topics.get(name)
        if t is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self._emit(r.remove_topic(_sid(t.topic_id)))
        return _sid(t.topic_id)

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None,
                          validate_only: bool = False) -> None:
        t = self.image.topics.get(name)
        if t is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        have = len(t.partitions)
        if count < have:
            raise ControllerError(INVALID_PARTITIONS, f"The topic {name} currently has {have} partition(s); {count} "
                                                      f"would not be an increase.")
        if count == have:
            raise ControllerError(INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
        first = next(iter(t.partitions.values()), None)  # a reassigning one also lists the replicas it removes
        rf = len(first.replicas) - len(first.removing) if first is not None else 1
        if assignments is not None:
            if len(assignments) != count - have:
                raise ControllerError(INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {count - have} additional "
                                      f"partition(s), but only {len(assignments)} assignment(s) were specified.")
            plan = self._check_assignments({have + i: a for i, a in enumerate(assignments)}, have)
        else:
            try:
                plan = place(self.image.usable_brokers(), count - have, rf, start_partition=have, rng=self.rng)
            except PlacementError as exc:
                raise ControllerError(INVALID_REPLICATION_FACTOR, str(exc)) from None
        if validate_only:
            return
        for index, replicas in sorted(plan.items()):
            self._emit(self._new_partition(_sid(t.topic_id), index, replicas))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Make the topic's overrides exactly `configs` (validated by the caller): a Config record per
        changed key (value null = deleted)."""
        t = self.image.topics.get(name)
        if t is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        current = dict(t.configs)
        for key in sorted(set(current) | set(configs)):
            if current.get(key) != configs.get(key):
                self._emit(r.config(r.TOPIC_RESOURCE, name, key, configs.get(key)))
        if self.elr_enabled() and current.get(MIN_ISR_KEY) != configs.get(MIN_ISR_KEY):
            self.clear_elrs(name)  # Kafka's ClearElrRecord for the topic

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Make the BROKER resource's layer ("" = cluster default, else a broker id) exactly `configs`
        (validated by the caller): a Config record per changed key (value null = deleted)."""
        current = dict(self.image.broker_configs.get(resource_name, {}))
        for key in sorted(set(current) | set(configs)):
            if current.get(key) != configs.get(key):
                self._emit(r.config(r.BROKER_RESOURCE, resource_name, key, configs.get(key)))
        if self.elr_enabled() and current.get(MIN_ISR_KEY) != configs.get(MIN_ISR_KEY):
            self.clear_elrs(None)  # Kafka's ClearElrRecord for every topic

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Make the GROUP resource's overrides exactly `configs` (validated by the caller as Kafka's
        GroupConfig.validate does: the broker layer owns that table): a Config record per changed key
        (value null = deleted). The default group resource ("") is refused, as Kafka refuses it."""
        if not group_id:
            raise ControllerError(INVALID_REQUEST, "Default group resources are not allowed.")
        current = dict(self.image.group_configs.get(group_id, {}))
        for key in sorted(set(current) | set(configs)):
            if current.get(key) != configs.get(key):
                self._emit(r.config(r.GROUP_RESOURCE, group_id, key, configs.get(key)))

    def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        """Make the CLIENT_METRICS resource's configs exactly `configs` (validated by the caller as Kafka's
        ClientMetricsConfigs.validate does): a Config record per changed key (value null = deleted)."""
        if not name:
            raise ControllerError(INVALID_REQUEST, "Subscription name can't be empty")
        current = dict(self.image.client_metrics_configs.get(name, {}))
        for key in sorted(set(current) | set(configs)):
            if current.get(key) != configs.get(key):
                self._emit(r.config(r.CLIENT_METRICS_RESOURCE, name, key, configs.get(key)))

    # -- ACLs and SCRAM credentials (Kafka's AclControlManager / ScramControlManager) ------------------
    def create_acls(self, rows: Iterable[r.AclRow]) -> None:
        """One AccessControlEntry per (validated) binding not already there: an existing one is a success."""
        have = set(self.image.acls.values())
        for row in rows:
            if row not in have:
                self._emit(r.access_control_entry(str(uuid.UUID(int=self.rng.getrandbits(128))), row))
                have.add(row)

    def delete_acls(self, matchers: list[Callable[[r.AclRow], bool]]) -> list[list[r.AclRow]]:
        """Per filter the bindings it matched; each matched binding is removed once."""
        out, removed = [], set()
        for matches in matchers:
            hits = sorted((acl_id, row) for acl_id, row in self.image.acls.items() if matches(row))
            out.append(sorted(row for _id, row in hits))
            removed.update(acl_id for acl_id, _row in hits)
        for acl_id in sorted(removed):
            self._emit(r.remove_access_control_entry(acl_id))
        return out

    def alter_scram(self, upserts: Iterable[tuple[str, str, str, str, str, int]],
                    deletions: Iterable[tuple[str, str]]) -> None:
        """(user, mechanism) deletions, then upserts (user, mechanism, salt, stored key, server key,
        iterations, base64), all validated by the caller against this image."""
        for user, mechanism in deletions:
            self._emit(r.remove_user_scram_credential(user, mechanism))
        for user, mechanism, salt, stored, server, iterations in upserts:
            self._emit(r.user_scram_credential(user, mechanism, salt, stored, server, iterations))

    def alter_client_quotas(self, changes: Iterable[tuple[tuple, str, float | None]]) -> None:
        """(entity, key, value or None to remove), validated by the caller against this image
        (Kafka's ClientQuotaControlManager)."""
        for entity, key, value in changes:
            self._emit(r.client_quota(entity, key, value))

    def set_feature_levels(self, levels: dict[str, int]) -> None:
        """FeatureLevel records (Kafka's FeatureControlManager): `levels` validated by the caller against this
        image (broker/config/features.py plan_update); a level 0 removes the feature."""
        for name, level in sorted(levels.items()):
            self._emit(r.feature_level(name, level))
        elr = levels.get(ELR_FEATURE)
        if elr is not None and elr >= 1:  # Kafka's maybeGenerateElrSafetyRecords
            if MIN_ISR_KEY not in self.image.broker_configs.get("", {}):
                self._emit(r.config(r.BROKER_RESOURCE, "", MIN_ISR_KEY, str(self.config.min_insync_replicas)))
            for name, layer in sorted(self.image.broker_configs.items()):
                if name and MIN_ISR_KEY in layer:
                    self._emit(r.config(r.BROKER_RESOURCE, name, MIN_ISR_KEY, None))
        elif elr is not None:  # disabled: no partition keeps an ELR (Kafka's ClearElrRecord)
            for t in list(self.image.topics.values()):
                for p in list(t.partitions.values()):
                    if p.elr or p.last_known_elr:
                        self._emit(r.partition_change(_sid(t.topic_id), p.partition, elr=[], last_known_elr=[]))

    def bootstrap(self, upserts: Iterable[tuple[str, str, str, str, str, int]]) -> bool:
        """Once per cluster (Kafka: the bootstrap checkpoint written by `kafka-storage format --add-scram`):
        the formatted credentials not yet in the log, then BootstrapDone. False when already done."""
        if self.image.bootstrapped:
            return False
        self.alter_scram([u for u in upserts if u[1] not in self.image.scram.get(u[0], {})], [])
        if self.elr_enabled() and MIN_ISR_KEY not in self.image.broker_configs.get("", {}):
            # Kafka's ELR safety record at format time: the static min.insync.replicas, cluster-wide
            self._emit(r.config(r.BROKER_RESOURCE, "", MIN_ISR_KEY, str(self.config.min_insync_replicas)))
        self._emit(r.bootstrap_done())
        return True

    # -- partitions -----------------------------------------------------------------------------------
    def alter_partition(self, broker_id: int, topic_id: bytes, partition: int, leader_epoch: int,
                        partition_epoch: int, new_isr: list[tuple[int, int]]) -> PartitionInfo:
        """The partition after the change; raises ControllerError with the partition's error."""
        t = self.image.topic_by_id(topic_id)
        if t is None:
            raise ControllerError(UNKNOWN_TOPIC_ID)
        p = t.partitions.get(partition)
        if p is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION)
        if leader_epoch != p.leader_epoch:
            raise ControllerError(FENCED_LEADER_EPOCH)
        if broker_id != p.leader:
            raise ControllerError(INVALID_REQUEST)
        if partition_epoch != p.partition_epoch:
            raise ControllerError(INVALID_UPDATE_VERSION)
        isr = [b for b, _e in new_isr]
        if not isr or p.leader not in isr or len(set(isr)) != len(isr):
            raise ControllerError(INVALID_REQUEST)
        for b, epoch in new_isr:
            info = self.image.brokers.get(b)
            if b not in p.replicas or info is None or info.fenced or info.in_controlled_shutdown \
                    or (epoch != -1 and epoch != info.epoch):
                raise ControllerError(INELIGIBLE_REPLICA, f"replica {b} ({info}) cannot join the ISR of "
                                                          f"{t.name}-{partition} (replicas {list(p.replicas)})")
        self._change(t, p, isr=isr)
        return t.partitions[partition]

    # -- reassignments (KIP-455) ----------------------------------------------------------------------
    def alter_reassignment(self, name: str, partition: int, target: list[int] | None,
                           allow_replication_factor_change: bool = True) -> None:
        """Start (or replace) the reassignment of one partition to `target`, or cancel it (None);
        raises ControllerError."""
        t = self.image.topics.get(name)
        if t is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
        p = t.partitions.get(partition)
        if p is None:
            raise ControllerError(UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{partition}.")
        if target is None:
            if not p.reassigning:
                raise ControllerError(NO_REASSIGNMENT_IN_PROGRESS,
                                      "No partition reassignment is in progress for this topic-partition.")
            isr = [b for b in p.isr if b not in p.adding]
            if not isr:  # only added replicas are in sync: going back would be an unclean election
                raise ControllerError(INVALID_REPLICA_ASSIGNMENT, f"Unable to revert partition assignment for "
                                      f"{name}:{partition} because it would require an unclean leader election.")
            self._change(t, p, replicas=[b for b in p.replicas if b not in p.adding], isr=isr, adding=[], removing=[])
            return
        check_reassignment_target(target, lambda b: b in self.image.brokers)
        current_rf = len(p.replicas) - len(p.removing)
        if not allow_replication_factor_change and len(target) != current_rf:
            raise ControllerError(INVALID_REPLICATION_FACTOR, f"The replication factor is changed from "
                                  f"{current_rf} to {len(target)} but allowReplicationFactorChange is false.")
        removing = sorted(set(p.replicas) - set(target))
        adding = sorted(set(target) - set(p.replicas))
        self._change(t, p, replicas=[*target, *removing], adding=adding, removing=removing)

    def _change(self, t, p: PartitionInfo, *, isr: list[int] | None = None, replicas: list[int] | None = None,
                adding: list[int] | None = None, removing: list[int] | None = None) -> None:
        """One PartitionChange towards these targets (Kafka's PartitionChangeBuilder): a reassignment
        the ISR allows is completed, the leader stays if it may (in the ISR, alive), else the first
        eligible replica leads; nothing is emitted when nothing changes."""
        isr = list(p.isr if isr is None else isr)
        replicas = list(p.replicas if replicas is None else replicas)
        adding = list(p.adding if adding is None else adding)
        removing = list(p.removing if removing is None else removing)
        if adding or removing:
            kept_isr = [b for b in isr if b not in removing]
            kept = [b for b in replicas if b not in removing]
            if kept_isr and kept and set(kept) <= set(kept_isr):
                isr, replicas, adding, removing = kept_isr, kept, [], []
        if self.elr_enabled():
            ch = elr_change(replicas=replicas, isr=p.isr, elr=[b for b in p.elr if b in replicas],
                            last_known_elr=p.last_known_elr, leader=p.leader, target_isr=isr,
                            min_isr=self.min_isr(t.name), acceptable=self._live)
            leader = p.leader if ch.leader is None else ch.leader
            isr = list(p.isr if ch.isr is None else ch.isr)
            bump = leader == p.leader and not set(p.replicas) <= set(replicas)
            change = r.partition_change(
                _sid(t.topic_id), p.partition, isr=isr if tuple(isr) != p.isr else None,
                leader=leader if leader != p.leader else None,
                replicas=replicas if tuple(replicas) != p.replicas else None,
                adding=adding if tuple(adding) != p.adding else None,
                removing=removing if tuple(removing) != p.removing else None, bump_leader_epoch=bump,
                elr=list(ch.elr) if ch.elr is not None else ([b for b in p.elr if b in replicas]
                                                              if not set(p.elr) <= set(replicas) else None),
                last_known_elr=None if ch.last_known_elr is None else list(ch.last_known_elr))
            if len(change) > 3:
                self._emit(change)
            return
        leader = p.leader
        if not (leader in isr and self._live(leader)):
            leader = self._pick_leader(replicas, isr)
        bump = leader == p.leader and not set(p.replicas) <= set(replicas)
        change = r.partition_change(
            _sid(t.topic_id), p.partition, isr=isr if isr and tuple(isr) != p.isr else None,
            leader=leader if leader != p.leader else None,
            replicas=replicas if tuple(replicas) != p.replicas else None,
            adding=adding if tuple(adding) != p.adding else None,
            removing=removing if tuple(removing) != p.removing else None, bump_leader_epoch=bump)
        if len(change) > 3:  # more than type, topicId and partition
            self._emit(change)

    def reassignments(self, wanted: list[tuple[str, list[int]]] | None) -> list[tuple[str, list[PartitionInfo]]]:
        """Ongoing reassignments per topic: all (None), or among the named partitions (unknown names
        are left out, as Kafka's listPartitionReassignments does)."""
        if wanted is None:
            wanted = [(name, sorted(t.partitions)) for name, t in sorted(self.image.topics.items())]
        out = []
        for name, indexes in wanted:
            t = self.image.topics.get(name)
            parts = [p for i in indexes if t is not None and (p := t.partitions.get(i)) is not None and p.reassigning]
            if parts:
                out.append((name, parts))
        return out

    def elect_preferred(self, name: str, partition: int) -> int:
        """Preferred leader election of one partition: the error code (0 when elected)."""
        p = self.image.partition(name, partition)
        if p is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        preferred = p.replicas[0] if p.replicas else NO_LEADER
        if p.leader == preferred:
            return ELECTION_NOT_NEEDED
        if preferred not in p.isr or not self._live(preferred):
            return PREFERRED_LEADER_NOT_AVAILABLE
        t = self.image.topics[name]
        self._emit(r.partition_change(_sid(t.topic_id), partition, leader=preferred))
        return NONE

    def elect_unclean(self, name: str, partition: int) -> int:
        """ElectLeaders UNCLEAN of one partition (Kafka: regardless of the topic's config): a partition
        with a live leader needs none; else a live ISR member, else a live replica leads."""
        t = self.image.topics.get(name)
        p = t.partitions.get(partition) if t is not None else None
        if p is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        if p.leader != NO_LEADER and self._live(p.leader):
            return ELECTION_NOT_NEEDED
        leader = self._pick_leader(p.replicas, p.isr)
        if leader != NO_LEADER:
            self._emit(r.partition_change(_sid(t.topic_id), partition, leader=leader))
            return NONE
        return NONE if self._elect_unclean(t.topic_id, p) != NO_LEADER else ELIGIBLE_LEADERS_NOT_AVAILABLE

    # -- producer ids ---------------------------------------------------------------------------------
    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise ControllerError(BROKER_ID_NOT_REGISTERED)
        if b.epoch != broker_epoch:
            raise ControllerError(STALE_BROKER_EPOCH)
        start = self.image.next_producer_id
        self._emit(r.producer_ids(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK))
        return start, PRODUCER_ID_BLOCK


def check_reassignment_target(target: list[int], registered: Callable[[int], bool]) -> None:
    """Kafka's validateManualPartitionAssignment for a reassignment target: not empty, every broker
    registered, none twice (checked in broker id order); raises INVALID_REPLICA_ASSIGNMENT."""
    if not target:
        raise ControllerError(INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(target):
        if not registered(b):
            raise ControllerError(INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {b}, "
                                  f"but no such broker is registered.")
        if b == previous:
            raise ControllerError(INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes the broker {b} more than once.")
        previous = b


def dir_online(dir_id: str, registered: Iterable[str]) -> bool:
    """Kafka's DirectoryId.isOnline: UNASSIGNED and MIGRATING count as online, LOST never; else the dir
    must be one the broker registered (a broker that registered none: any)."""
    if dir_id in (r.UNASSIGNED_DIR, r.MIGRATING_DIR):
        return True
    if dir_id == r.LOST_DIR:
        return False
    registered = list(registered)
    return not registered or dir_id in registered


def _sid(topic_id: bytes) -> str:
    return str(uuid.UUID(bytes=topic_id))
