"""The streams group coordinator (KIP-1071): StreamsGroupHeartbeat, StreamsGroupDescribe, member timers,
the topology and its internal topics, target assignment, and the records that make the state survive a
restart.

Runs on the event loop thread beside the classic and consumer groups (a group id is in at most one of
them); the runtime (`rt`) owns the `__consumer_offsets` partitions, their loading state, appends and
timers. A state change is written before the heartbeat that caused it is answered; if the append fails
the group is restored from a copy taken before the change. Behaviour follows Kafka 4.3.1's
GroupMetadataManager.streamsGroupHeartbeat / streamsGroupLeave: (1) the member is created or updated,
(2) the first member's topology initializes the group's, (3) the topology is configured against the
existing topics — missing internal topics are returned for the broker to create and reported in the
`status` — (4) a new group epoch gets a new target assignment (after the initial rebalance delay of a
new group, at most once per assignment interval), (5) the member moves one reconciliation step.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import kafka.errors as ke

from minikafka.coordinator.group.errors import APPEND_ERRORS_GROUP, AppendFailed
from minikafka.coordinator.group.metadata import GroupError
from minikafka.coordinator.group.records import GroupMetadataKey, encode_group_metadata_key
from minikafka.coordinator.group.streams import records as rec
from minikafka.coordinator.group.streams.assignor import MemberSpec, assign
from minikafka.coordinator.group.streams.config import StreamsGroupConfigs, StreamsGroupSettings
from minikafka.coordinator.group.streams.model import (
    EMPTY_TASKS,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Endpoint,
    MemberState,
    StreamsGroup,
    StreamsMember,
    TasksTuple,
)
from minikafka.coordinator.group.streams.reconciliation import UnknownMemberState, reconcile
from minikafka.coordinator.group.streams.topology import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    InternalTopic,
    InvalidTopology,
    StreamsTopology,
    configure_topics,
)
from minikafka.protocol.errors import STREAMS_INVALID_TOPOLOGY

if TYPE_CHECKING:
    from minikafka.coordinator.group.runtime import GroupRuntime

log = logging.getLogger(__name__)

GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno


class HeartbeatError(GroupError):
    """A heartbeat failure with Kafka's error code and message."""


def _fail(error_class: type, message: str) -> HeartbeatError:
    return HeartbeatError(error_class.errno, message)


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ke.InvalidRequestError.errno, message)


@dataclass
class StreamsHeartbeatData:
    """A StreamsGroupHeartbeat request, decoded (None = not sent / unchanged)."""
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsTopology | None = None
    active: dict[str, frozenset[int]] | None = None
    standby: dict[str, frozenset[int]] | None = None
    warmup: dict[str, frozenset[int]] | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: list | None = None
    task_end_offsets: list | None = None
    shutdown_application: bool = False
    source_topic_regex: bool = False  # a subtopology of the topology has source topic regexes
    client_id: str = ""
    client_host: str = ""


@dataclass
class StreamsHeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    status: list[tuple[int, str]] | None = None
    tasks: TasksTuple | None = None  # sent when joining or when the member's tasks changed
    endpoint_information_epoch: int = 0
    partitions_by_endpoint: list[tuple[Endpoint, dict[str, set[int]], dict[str, set[int]]]] | None = None
    internal_topics: dict[str, InternalTopic] = field(default_factory=dict)  # for the broker to create


def new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class StreamsGroupCoordinator:
    def __init__(self, rt: "GroupRuntime", settings: StreamsGroupSettings, group_configs: Any = None,
                 other_group_type: Any = None) -> None:
        self.rt = rt
        self.configs = StreamsGroupConfigs(settings, group_configs)
        self.groups: dict[str, StreamsGroup] = {}
        # group id -> "classic" / "consumer" / None: a group id is in at most one protocol (set by the wiring)
        self.other_group_type = other_group_type or (lambda _g: None)
        self._initial_delay: set[str] = set()  # groups waiting for their initial rebalance delay
        self.classic: Any = None  # the classic groups (GroupMembership): an empty one is replaced (set by the wiring)

    # ============================================================== validation

    @staticmethod
    def _validate(req: StreamsHeartbeatData) -> None:
        """Kafka's throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures, then ...IsInvalid."""
        if req.instance_id is not None:
            raise _invalid("Static membership is not yet supported.")
        if req.task_offsets is not None:
            raise _invalid("TaskOffsets are not supported yet.")
        if req.task_end_offsets is not None:
            raise _invalid("TaskEndOffsets are not supported yet.")
        if req.warmup:
            raise _invalid("WarmupTasks are not supported yet.")
        if req.source_topic_regex:
            raise _invalid("Regular expressions for source topics are not supported yet.")

        def empty(value: str | None) -> bool:
            return value is not None and not value.strip()
        if empty(req.member_id) or req.member_id is None:
            raise _invalid("MemberId can't be empty.")
        if empty(req.group_id) or req.group_id is None:
            raise _invalid("GroupId can't be empty.")
        if empty(req.rack_id):
            raise _invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            for name, tasks in (("ActiveTasks", req.active), ("StandbyTasks", req.standby), ("WarmupTasks", req.warmup)):
                if tasks:
                    raise _invalid(f"{name} must be empty when (re-)joining.")
            if req.topology is None:
                raise _invalid("Topology must be non-null when (re-)joining.")
            for s in req.topology.subtopologies:
                for t in s.state_changelog_topics:
                    if t.partitions != 0:
                        raise HeartbeatError(STREAMS_INVALID_TOPOLOGY,
                                             f"Changelog topic {t.name} must have an undefined partition count, but "
                                             f"it is set to {t.partitions}.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
        if req.active is not None or req.standby is not None or req.warmup is not None:
            if req.active is None or req.standby is None or req.warmup is None:
                raise _invalid("If one task-type is non-null, all must be non-null.")
        if req.member_epoch != 0 and req.topology is not None:
            raise _invalid("Topology can only be provided when (re-)joining.")

    # ============================================================== heartbeat

    def heartbeat(self, req: StreamsHeartbeatData) -> StreamsHeartbeatResult:
        try:
            self._validate(req)
            self.rt.check_partition(req.group_id, create=True)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except GroupError as exc:
            return StreamsHeartbeatResult(error=exc.errno, message=str(exc) or None)
        except AppendFailed as exc:
            return StreamsHeartbeatResult(error=exc.errno)

    def _group_for(self, group_id: str, create: bool) -> tuple[StreamsGroup, bool]:
        group = self.groups.get(group_id)
        if group is not None:
            return group, False
        other = self.other_group_type(group_id)
        if other is not None and other != "empty-classic":
            raise _fail(ke.GroupIdNotFoundError, f"Group {group_id} is not a streams group.")
        if not create:
            raise _fail(ke.GroupIdNotFoundError, f"Streams group {group_id} not found.")
        return StreamsGroup(group_id), True

    def _heartbeat(self, req: StreamsHeartbeatData) -> StreamsHeartbeatResult:
        settings = self.configs.settings_for(req.group_id)
        joining = req.member_epoch == 0
        group, created = self._group_for(req.group_id, create=joining)
        if joining and len(group.members) >= settings.max_size:
            raise _fail(ke.GroupMaxSizeReachedError,
                        f"The streams group has reached its maximum capacity of {settings.max_size} members.")
        now = self.rt.now_ms()
        records: list[rec.Record] = []
        status: list[tuple[int, str]] = []
        snapshot = None if created else group.snapshot()
        try:
            member = group.members.get(req.member_id)
            if joining:
                # a known member rejoining keeps its state (as Kafka): it reported no tasks, so what it must
                # give up counts as revoked and it is sent its whole assignment
                if member is None:
                    member = StreamsMember(req.member_id)
            else:
                if member is None:
                    raise _fail(ke.UnknownMemberIdError,
                                f"Member {req.member_id} is not a member of group {group.group_id}.")
                self._check_epoch(member, req)
            updated = member.replace(
                rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms,
                topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
                client_id=req.client_id, client_host=req.client_host,
                process_id=req.process_id if req.process_id is not None else member.process_id,
                client_tags=req.client_tags if req.client_tags is not None else member.client_tags,
                user_endpoint=req.user_endpoint if req.user_endpoint is not None else member.user_endpoint)
            bump = False
            if _metadata_changed(member, updated) or req.member_id not in group.members:
                records.append(rec.member_metadata(group.group_id, updated))
                bump = True
            was_empty = not group.members
            # 2. the topology
            topology = self._update_topology(group, req, records)
            if updated.topology_epoch < topology.epoch:
                status.append((STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is behind the "
                                               f"group's topology epoch {topology.epoch}."))
            # 3. configure it against the topics (re-checked on every heartbeat: topics come and go)
            metadata_hash = self._metadata_hash(topology)
            if metadata_hash != group.metadata_hash:
                bump = True
                group.configured = None
            if group.configured is None or group.configured.topology_epoch != topology.epoch:
                try:
                    group.configured = configure_topics(topology, metadata_hash, self._partitions_of)
                except InvalidTopology as exc:
                    raise HeartbeatError(STREAMS_INVALID_TOPOLOGY, str(exc)) from None
            configured = group.configured
            validated = -1
            if configured.is_ready:
                validated = topology.epoch
                for tasks in (req.active, req.standby, req.warmup):
                    self._check_tasks(configured, tasks)
            if validated != group.validated_topology_epoch:
                bump = True
            assignment_configs = {"num.standby.replicas": str(settings.num_standby_replicas)}
            if not bump and assignment_configs != group.last_assignment_configs:
                bump = True
            if bump:
                group.group_epoch += 1
                group.metadata_hash = metadata_hash
                group.validated_topology_epoch = validated
                group.last_assignment_configs = assignment_configs
                delayed = was_empty and settings.initial_rebalance_delay_ms > 0
                if created:
                    # Kafka 4.3.1 moves a new group to epoch 2 in its first heartbeat; with the initial
                    # rebalance delay, an empty target assignment at epoch 1 lets the member in meanwhile
                    if delayed:
                        group.assignment_epoch, group.assignment_timestamp = group.group_epoch, now
                        records.append(rec.target_metadata(group.group_id, group.group_epoch, now))
                    group.group_epoch += 1
                records.append(rec.group_metadata(group.group_id, group.group_epoch, metadata_hash, validated,
                                                  assignment_configs))
                if delayed:
                    self._schedule_initial_rebalance(group.group_id, settings.initial_rebalance_delay_ms)
            group.update_member(updated)
            # 4. the target assignment
            target_epoch, target = self._maybe_update_target(group, updated.member_id, settings, now, records, status)
            # 5. reconciliation
            current = group.members[updated.member_id]
            nxt = current
            if not current.is_reconciled_to(target_epoch):
                owned = None
                if req.active is not None:
                    owned = TasksTuple(req.active, req.standby or {}, req.warmup or {})
                try:
                    nxt = reconcile(current, target_epoch, target, owned, group.current_active_process,
                                    group.current_standby_processes, group.current_warmup_processes)
                except UnknownMemberState as exc:
                    raise _fail(ke.FencedMemberEpochError, str(exc)) from None
            if nxt != current or req.member_id not in (snapshot.members if snapshot else {}):
                group.update_member(nxt)
                records.append(rec.current_assignment(group.group_id, nxt))
            if req.shutdown_application and group.shutdown_request_member_id is None:
                group.shutdown_request_member_id = req.member_id
            replaced = created and self.classic is not None and group.group_id in self.classic.groups
            if replaced:  # Kafka converts an empty classic group: its GroupMetadata gets a tombstone
                records.insert(0, (encode_group_metadata_key(GroupMetadataKey(group.group_id)), None))
            if records:
                self.rt.append(group.group_id, records, APPEND_ERRORS_GROUP)
        except Exception:
            if snapshot is not None:
                self.groups[group.group_id] = snapshot
            else:
                self.groups.pop(group.group_id, None)
            if created:
                self._cancel_initial(group.group_id)
            raise
        if created:
            self.groups[group.group_id] = group
            classic = self.classic.groups.pop(group.group_id, None) if self.classic is not None else None
            if classic is not None:
                self.classic.cancel_group_timers(classic)
        self._after_change(group, member, nxt, settings)
        result = StreamsHeartbeatResult(member_id=nxt.member_id, member_epoch=nxt.member_epoch,
                                        heartbeat_interval_ms=settings.heartbeat_interval_ms)
        if joining or nxt.assigned() != member.assigned():
            result.tasks = nxt.assigned()
            if nxt.user_endpoint is not None and not created:
                # (Kafka's in-memory epoch of a group created by this heartbeat is not kept: it stays 0)
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != req.endpoint_information_epoch or (
                created and nxt.user_endpoint is not None):
            result.partitions_by_endpoint = self._endpoint_partitions(group, nxt)
        result.endpoint_information_epoch = group.endpoint_information_epoch
        if configured.status is not None:
            result.internal_topics = dict(configured.internal_topics_to_create)
            status.append(configured.status)
        if group.shutdown_request_member_id is not None:
            status.append((SHUTDOWN_APPLICATION, f"Streams group member {group.shutdown_request_member_id} encountered "
                                                 f"a fatal error and requested a shutdown for the entire application."))
        result.status = status  # Kafka 4.3.1 answers an empty list when there is no status
        return result

    def _update_topology(self, group: StreamsGroup, req: StreamsHeartbeatData, records: list) -> StreamsTopology:
        """Kafka's maybeUpdateTopology: the first topology initializes the group's; a stale one is ignored;
        a different one at the same or a newer epoch is refused."""
        if req.topology is not None:
            if group.topology is None:
                group.topology = req.topology
                group.configured = None
                records.append(rec.topology_record(group.group_id, req.topology))
            elif group.topology.epoch > req.topology.epoch:
                pass
            elif group.topology != req.topology:
                raise _invalid("Topology updates are not supported yet.")
            return group.topology
        if group.topology is None:
            raise _invalid("The topology is null and the group topology is also null.")
        return group.topology

    def _partitions_of(self, topic: str) -> int | None:
        info = self.rt.catalog.get(topic)
        return info.partitions if info is not None else None

    def _metadata_hash(self, topology: StreamsTopology) -> int:
        """A 64-bit hash of the required topics that exist (name, id, partition count): a change bumps the
        group epoch (Kafka hashes the same facts with its own function)."""
        h = hashlib.blake2b(digest_size=8)
        for name in sorted(topology.required_topics()):
            info = self.rt.catalog.get(name)
            if info is not None:
                h.update(f"{name}\0{info.topic_id}\0{info.partitions}\0".encode())
        return int.from_bytes(h.digest(), "big", signed=True)

    @staticmethod
    def _check_tasks(configured, tasks) -> None:
        for s, ps in (tasks or {}).items():
            sub = configured.subtopologies.get(s)
            if sub is None:
                raise _invalid(f"Subtopology {s} does not exist in the topology.")
            for p in sorted(ps):
                if p < 0 or p >= sub.number_of_tasks:
                    raise _invalid(f"Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: "
                                   f"{sub.number_of_tasks}")

    @staticmethod
    def _check_epoch(member: StreamsMember, req: StreamsHeartbeatData) -> None:
        received = req.member_epoch
        if received > member.member_epoch:
            raise _fail(ke.FencedMemberEpochError,
                        f"The streams group member has a greater member epoch ({received}) than the one known by the "
                        f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                        f"rejoin.")
        if received < member.member_epoch:
            assigned = member.assigned()
            ok = received == member.previous_member_epoch and all(
                owned is not None and all(ps <= mine.get(s, frozenset()) for s, ps in owned.items())
                for owned, mine in ((req.active, assigned.active), (req.standby, assigned.standby),
                                    (req.warmup, assigned.warmup)))
            if not ok:
                raise _fail(ke.FencedMemberEpochError,
                            f"The streams group member has a smaller member epoch ({received}) than the one known by "
                            f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                            f"partitions and rejoin.")

    # ============================================================== target assignment

    def _maybe_update_target(self, group: StreamsGroup, member_id: str, settings: StreamsGroupSettings, now: int,
                             records: list, status: list) -> tuple[int, TasksTuple]:
        """Kafka's maybeUpdateStreamsTargetAssignment."""
        if group.group_id in self._initial_delay:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
            return group.assignment_epoch, EMPTY_TASKS
        if group.group_epoch <= group.assignment_epoch:
            return group.assignment_epoch, group.target.get(member_id, EMPTY_TASKS)
        interval = settings.assignment_interval_ms
        if interval > 0 and group.assignment_timestamp > 0 and now < group.assignment_timestamp + interval:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."))
            return group.assignment_epoch, group.target.get(member_id, EMPTY_TASKS)
        self._compute_target(group, settings, now, records)
        return group.assignment_epoch, group.target.get(member_id, EMPTY_TASKS)

    def _compute_target(self, group: StreamsGroup, settings: StreamsGroupSettings, now: int, records: list) -> None:
        configured = group.configured
        tasks: dict[str, int] = {}
        stateful: set[str] = set()
        if configured is not None and configured.is_ready:
            for sid, sub in configured.subtopologies.items():
                tasks[sid] = sub.number_of_tasks
                if sub.state_changelog_topics:
                    stateful.add(sid)
        specs = {mid: MemberSpec(m.process_id or mid, group.target.get(mid, EMPTY_TASKS))
                 for mid, m in group.members.items()}
        new = assign(specs, tasks, stateful, settings.num_standby_replicas)
        for mid, target in sorted(new.items()):
            if group.target.get(mid) != target:
                records.append(rec.target_member(group.group_id, mid, target))
        for mid in sorted(set(group.target) - set(new)):
            records.append(rec.target_member(group.group_id, mid, None))
        group.target = new
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = now
        records.append(rec.target_metadata(group.group_id, group.assignment_epoch, now))

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int) -> None:
        if group_id not in self._initial_delay:
            self._initial_delay.add(group_id)
            self.rt.schedule(self._key(group_id, "", "initial"), delay_ms, self._delayed_target, group_id)

    def _cancel_initial(self, group_id: str) -> None:
        self._initial_delay.discard(group_id)
        self.rt.cancel(self._key(group_id, "", "initial"))

    def _delayed_target(self, group_id: str) -> None:
        """Kafka's computeDelayedTargetAssignment: the initial rebalance delay is over."""
        self._initial_delay.discard(group_id)
        group = self.groups.get(group_id)
        if group is None or not group.members or group.configured is None:
            return
        if group.group_epoch <= group.assignment_epoch:
            return
        snapshot = group.snapshot()
        records: list = []
        try:
            self._compute_target(group, self.configs.settings_for(group_id), self.rt.now_ms(), records)
            self.rt.append(group_id, records, APPEND_ERRORS_GROUP)
        except Exception as exc:
            self.groups[group_id] = snapshot
            log.warning("streams group %s: delayed target assignment failed: %r", group_id, exc)

    # ============================================================== endpoints (interactive queries)

    def _endpoint_partitions(self, group: StreamsGroup, updated: StreamsMember):
        """Kafka's EndpointToPartitionsManager: per member with a user endpoint, the source topic partitions
        (and changelogs) of its active and standby tasks."""
        out = []
        configured = group.configured
        if configured is None or not configured.is_ready:
            return out
        members = [m for mid, m in group.members.items() if mid != updated.member_id] + [updated]
        for m in members:
            if m.user_endpoint is None:
                continue
            assigned = m.assigned()
            active: dict[str, set[int]] = {}
            standby: dict[str, set[int]] = {}
            for tasks, into in ((assigned.active, active), (assigned.standby, standby)):
                for s, ps in tasks.items():
                    sub = configured.subtopologies.get(s)
                    if sub is None:
                        continue
                    topics = sorted(sub.source_topics) + sorted(sub.repartition_source_topics)
                    for t in topics:
                        n = self._partitions_of(t)
                        into.setdefault(t, set()).update(p for p in ps if n is None or p < n)
            out.append((m.user_endpoint, active, standby))
        return out

    # ============================================================== leave / fence / timers

    def _leave(self, req: StreamsHeartbeatData) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if self.other_group_type(req.group_id) is not None:
                raise _fail(ke.GroupIdNotFoundError, f"Group {req.group_id} is not a streams group.")
            raise _fail(ke.GroupIdNotFoundError, f"Streams group {req.group_id} not found.")
        if req.member_id not in group.members:
            raise _fail(ke.UnknownMemberIdError, f"Member {req.member_id} is not a member of group {group.group_id}.")
        self._remove_member(group, req.member_id)
        return StreamsHeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    def _remove_member(self, group: StreamsGroup, member_id: str) -> None:
        """Remove a member (leave, session or rebalance timeout): tombstones and a new group epoch."""
        snapshot = group.snapshot()
        try:
            group.remove_member(member_id)
            group.target.pop(member_id, None)
            group.group_epoch += 1
            records = [rec.current_assignment(group.group_id, member_id),
                       rec.target_member(group.group_id, member_id, None),
                       rec.member_metadata(group.group_id, member_id),
                       rec.group_metadata(group.group_id, group.group_epoch, group.metadata_hash,
                                          group.validated_topology_epoch, group.last_assignment_configs)]
            self.rt.append(group.group_id, records, APPEND_ERRORS_GROUP)
        except Exception:
            self.groups[group.group_id] = snapshot
            raise
        self._fence_timers(group.group_id, member_id)

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("streams group %s: member %s fenced (%s)", group_id, member_id, why)
        try:
            self._remove_member(group, member_id)
        except AppendFailed as exc:
            log.warning("streams group %s: fencing %s failed: %r", group_id, member_id, exc)

    @staticmethod
    def _key(group_id: str, member_id: str, kind: str) -> str:
        return f"sg-{kind}-{group_id}-{member_id}"

    def _fence_timers(self, group_id: str, member_id: str) -> None:
        self.rt.cancel(self._key(group_id, member_id, "session"))
        self.rt.cancel(self._key(group_id, member_id, "rebalance"))

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.rt.schedule(self._key(group_id, member_id, "session"), timeout_ms, self._fence, group_id, member_id,
                         "session timeout")

    def _after_change(self, group: StreamsGroup, before: StreamsMember, after: StreamsMember,
                      settings: StreamsGroupSettings) -> None:
        self._schedule_session(group.group_id, after.member_id, settings.session_timeout_ms)
        if after.state == MemberState.UNREVOKED_TASKS:
            if before.state != MemberState.UNREVOKED_TASKS or before.member_epoch != after.member_epoch \
                    or before.pending() != after.pending():
                timeout = after.rebalance_timeout_ms if after.rebalance_timeout_ms > 0 else settings.session_timeout_ms
                self.rt.schedule(self._key(group.group_id, after.member_id, "rebalance"), timeout,
                                 self._rebalance_timeout, group.group_id, after.member_id, after.member_epoch)
        else:
            self.rt.cancel(self._key(group.group_id, after.member_id, "rebalance"))

    def _rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and member.state == MemberState.UNREVOKED_TASKS and member.member_epoch == epoch:
            self._fence(group_id, member_id, "did not revoke its tasks within the rebalance timeout")

    # ============================================================== offsets of streams groups

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int | None,
                               transactional: bool = False, instance_id: str | None = None):
        """Kafka 4.3.1's StreamsGroup.validateOffsetCommit: None, or a per-partition check
        (topic, partition) -> error code for a commit made with an older member epoch."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return None
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            raise _fail(ke.UnknownMemberIdError, f"Member {member_id} is not a member of group {group_id}.")
        if not transactional and api_version is not None and api_version < 9:
            raise _fail(ke.UnsupportedVersionError, "OffsetCommit version 9 or above must be used by members using "
                                                    "the streams group protocol")
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise _fail(ke.StaleMemberEpochError, f"Received member epoch {member_epoch} is newer than current member "
                                                  f"epoch {member.member_epoch}.")
        source_map = group.topology.source_topic_map() if group.topology is not None else None
        if source_map is None:
            raise _fail(ke.StaleMemberEpochError, "Topology is not available for offset commit validation.")
        stale = ke.StaleMemberEpochError.errno

        def check(topic: str, partition: int) -> int:
            sid = source_map.get(topic)
            if sid is None:
                return stale
            epoch = member.active_epoch(sid, partition)
            return stale if epoch is None or member_epoch < epoch else 0
        return check

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = self.groups[group_id].members.get(member_id or "")
        if member is None:
            raise _fail(ke.UnknownMemberIdError, f"Member {member_id} is not a member of group {group_id}.")
        if member_epoch != member.member_epoch:
            raise _fail(ke.StaleMemberEpochError, f"The received member epoch {member_epoch} does not match the "
                                                  f"expected member epoch {member.member_epoch}.")

    # ============================================================== loading (replay)

    def replay(self, key: rec.StreamsRecordKey, value: Any) -> None:
        """Apply one loaded record (value decoded, None = tombstone); ownership is rebuilt in
        `on_partition_loaded`."""
        group = self.groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[key.group_id] = StreamsGroup(key.group_id)
            if self.classic is not None:
                self.classic.groups.pop(key.group_id, None)
        t = key.record_type
        if t == rec.GROUP_METADATA:
            if value is None:
                del self.groups[key.group_id]
                return
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
            group.validated_topology_epoch = value.validated_topology_epoch
            group.last_assignment_configs = {c.key: c.value for c in value.last_assignment_configs or ()}
        elif t == rec.TOPOLOGY:
            group.topology = rec.topology_from(value) if value is not None else None
            group.configured = None
        elif t == rec.TARGET_METADATA:
            group.assignment_epoch = value.assignment_epoch if value is not None else 0
            group.assignment_timestamp = value.assignment_timestamp if value is not None else 0
        elif t == rec.TARGET_MEMBER:
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = rec.target_from(value)
        elif t == rec.MEMBER_METADATA:
            if value is None:
                group.members.pop(key.member_id, None)
                return
            member = group.members.get(key.member_id) or StreamsMember(key.member_id)
            group.members[key.member_id] = rec.apply_member_metadata(member, value)
        elif t == rec.CURRENT_ASSIGNMENT:
            if value is None:
                return  # the member metadata tombstone removes the member
            member = group.members.get(key.member_id) or StreamsMember(key.member_id)
            group.members[key.member_id] = rec.apply_current_assignment(member, value)

    def on_partition_loaded(self, partition: int) -> None:
        """Rebuild derived state of the partition's groups and start their members' session timers."""
        for group in list(self.groups.values()):
            if self.rt.partition_for(group.group_id) != partition:
                continue
            for member_id in group.rebuild_ownership():
                log.warning("streams group %s: member %s holds a task of another process; its tasks are reset",
                            group.group_id, member_id)
            settings = self.configs.settings_for(group.group_id)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, settings.session_timeout_ms)

    # ============================================================== administration

    def delete_group(self, group_id: str) -> None:
        group = self.groups[group_id]
        if group.members:
            raise _fail(ke.NonEmptyGroupError, f"Group {group_id} is not empty.")
        self.rt.append(group_id, self.tombstones(group), APPEND_ERRORS_GROUP)
        self.forget(group_id)

    @staticmethod
    def tombstones(group: StreamsGroup) -> list[rec.Record]:
        """Kafka's StreamsGroup.createGroupTombstoneRecords."""
        out: list[rec.Record] = []
        for mid in group.members:
            out.append(rec.current_assignment(group.group_id, mid))
        for mid in set(group.members) | set(group.target):
            out.append(rec.target_member(group.group_id, mid, None))
        out.append(rec.target_metadata(group.group_id, None))
        for mid in group.members:
            out.append(rec.member_metadata(group.group_id, mid))
        out += [rec.group_metadata(group.group_id, None), rec.topology_record(group.group_id, None)]
        return out

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        self._cancel_initial(group_id)
        if group is not None:
            for mid in group.members:
                self._fence_timers(group_id, mid)

    def list_groups(self, states: set[str], types: set[str]) -> list[StreamsGroup]:
        if types and "streams" not in types:
            return []
        return [g for g in self.groups.values()
                if not self.rt.is_loading(self.rt.partition_for(g.group_id))
                and (not states or g.state.value.lower() in states)]

    def describe(self, group_id: str) -> tuple[int, str | None, StreamsGroup | None]:
        """(error, message, group) as StreamsGroupDescribe reports a group."""
        if not group_id:
            return ke.InvalidGroupIdError.errno, None, None
        partition = self.rt.partition_for(group_id)
        if self.rt.topic_exists and self.rt.is_loading(partition):
            return ke.CoordinatorLoadInProgressError.errno, None, None
        if self.rt.owned is not None and partition not in self.rt.owned:  # a cluster: not this node's group
            return ke.NotCoordinatorError.errno, None, None
        group = self.groups.get(group_id)
        if group is not None:
            if group.configured is None and group.topology is not None:
                try:
                    group.configured = configure_topics(group.topology, self._metadata_hash(group.topology),
                                                        self._partitions_of)
                except InvalidTopology:
                    pass  # described as sent
            return 0, None, group
        if self.other_group_type(group_id) is not None:
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.", None
        return GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None


def _metadata_changed(a: StreamsMember, b: StreamsMember) -> bool:
    return (a.instance_id != b.instance_id or a.rack_id != b.rack_id or a.client_id != b.client_id
            or a.client_host != b.client_host or a.rebalance_timeout_ms != b.rebalance_timeout_ms
            or a.topology_epoch != b.topology_epoch or a.process_id != b.process_id
            or a.user_endpoint != b.user_endpoint or a.client_tags != b.client_tags)
