"""The consumer group coordinator (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe, member
timers, target assignment, and the records that make the state survive a restart.

Runs on the event loop thread beside the classic groups (`classic`, GroupMembership); the runtime (`rt`)
owns the `__consumer_offsets` partitions, their loading state, record appends and timers. A state
change is written to `__consumer_offsets` before the heartbeat that caused it is answered; if the
append fails the in-memory group is restored from a copy taken before the change. Behaviour follows
Kafka 4.3's GroupMetadataManager (consumerGroupHeartbeat / consumerGroupLeave / fencing), checked
against the reference broker: the target assignment is recomputed by a heartbeat at most once per
`group.consumer.assignment.interval.ms`; topic regexes are resolved right after the heartbeat that
needs them (a timer), and a changed result bumps the group epoch on its own.
"""
from __future__ import annotations

import base64
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

import kafka.errors as ke

from minikafka.coordinator.group.errors import APPEND_ERRORS_GROUP, AppendFailed
from minikafka.coordinator.group.metadata import GroupError
from minikafka.coordinator.group.records import GroupMetadataKey, encode_group_metadata_key
from minikafka.coordinator.group.consumer import records as rec
from minikafka.coordinator.group.consumer.assignors import ASSIGNORS
from minikafka.coordinator.group.consumer.classic_members import ClassicMembers
from minikafka.coordinator.group.consumer.config import ConsumerGroupConfigs, ConsumerGroupSettings, GroupConfigSource
from minikafka.coordinator.group.consumer.model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    freeze,
)
from minikafka.coordinator.group.consumer.reconciliation import reconcile
from minikafka.coordinator.group.consumer.regex import InvalidRegex, compile_topic_regex
from minikafka.protocol.errors import INVALID_REGULAR_EXPRESSION

if TYPE_CHECKING:
    from minikafka.coordinator.group.membership import GroupMembership
    from minikafka.coordinator.group.runtime import GroupRuntime

log = logging.getLogger(__name__)

GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno


class HeartbeatError(GroupError):
    """A heartbeat failure with Kafka's error code and message."""


def _fail(error_class: type, message: str) -> HeartbeatError:
    return HeartbeatError(error_class.errno, message)


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 random bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass
class HeartbeatRequestData:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    # the topics (of those given) this member may see; regex resolution keeps only these (Kafka 4.3
    # filters resolved regexes by DESCRIBE with the heartbeat's principal); None = all
    topic_filter: Callable[[Iterable[str]], set[str]] | None = None


@dataclass
class HeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass
class _Change:
    """Records a heartbeat produces, collected while the group is mutated."""
    records: list[rec.Record] = field(default_factory=list)


class ConsumerGroupCoordinator(ClassicMembers):
    def __init__(self, rt: "GroupRuntime", classic: "GroupMembership", settings: ConsumerGroupSettings,
                 group_configs: "GroupConfigSource | None" = None) -> None:
        self.rt = rt  # partitions, appends, timers
        self.classic = classic  # the classic groups: a group id is in at most one of the two
        self.configs = ConsumerGroupConfigs(settings, group_configs)
        self.groups: dict[str, ConsumerGroup] = {}
        self._regex_refreshed: dict[str, tuple[float, int]] = {}
        # group id -> the topic filter of its latest heartbeat (what regex resolution applies)
        self._topic_filters: dict[str, Callable[[Iterable[str]], set[str]]] = {}
        self._last_assignment: dict[str, float] = {}  # group id -> monotonic time of its last target

    # ============================================================== validation

    def _validate(self, req: HeartbeatRequestData, api_version: int, settings: ConsumerGroupSettings) -> None:
        def empty(value: str | None) -> bool:
            return value is not None and not value.strip()

        if (api_version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) \
                and empty(req.member_id):
            raise _fail(ke.InvalidRequestError, "MemberId can't be empty.")
        if empty(req.group_id) or req.group_id is None:
            raise _fail(ke.InvalidRequestError, "GroupId can't be empty.")
        if empty(req.instance_id):
            raise _fail(ke.InvalidRequestError, "InstanceId can't be empty.")
        if empty(req.rack_id):
            raise _fail(ke.InvalidRequestError, "RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _fail(ke.InvalidRequestError, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise _fail(ke.InvalidRequestError, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _fail(ke.InvalidRequestError,
                            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _fail(ke.InvalidRequestError, "InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _fail(ke.InvalidRequestError, "MemberEpoch is invalid.")
        if req.subscribed_topic_regex is not None:
            try:
                compile_topic_regex(req.subscribed_topic_regex)
            except InvalidRegex as exc:
                raise HeartbeatError(INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                                     f"expression: {exc}.") from None
        if req.server_assignor is not None and req.server_assignor not in settings.assignors:
            raise _fail(ke.UnsupportedAssignorError,
                        f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                        f"{', '.join(settings.assignors)}.")

    # ============================================================== heartbeat

    def heartbeat(self, req: HeartbeatRequestData, api_version: int) -> HeartbeatResult:
        settings = self.configs.settings_for(req.group_id or "")
        try:
            self._validate(req, api_version, settings)
            self.rt.check_partition(req.group_id, create=True)
            if req.topic_filter is not None:
                self._topic_filters[req.group_id] = req.topic_filter
            else:
                self._topic_filters.pop(req.group_id, None)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, api_version, settings)
        except GroupError as exc:
            return HeartbeatResult(error=exc.errno, message=str(exc) or None)
        except AppendFailed as exc:
            return HeartbeatResult(error=exc.errno)

    def _group_for(self, group_id: str, create: bool) -> tuple[ConsumerGroup, bool, list[rec.Record] | None]:
        """(group, created by this request, the records of an online upgrade of a classic group)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, False, None
        if any(group_id in getattr(getattr(self, part, None), "groups", ()) for part in ("streams", "share")):
            raise _fail(ke.GroupIdNotFoundError, f"Group {group_id} is not a consumer group.")  # streams or share
        classic = self.classic.groups.get(group_id)
        if classic is not None:
            if create and not classic.members and not classic.pending_join_members:
                return ConsumerGroup(group_id), True, None  # an empty classic group is replaced
            converted = self.convert_classic_group(classic) if create else None
            if converted is not None:
                return converted[0], True, converted[1]
            raise _fail(ke.GroupIdNotFoundError, f"Group {group_id} is not a consumer group")
        if not create:
            raise _fail(ke.GroupIdNotFoundError, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id), True, None

    def _heartbeat(self, req: HeartbeatRequestData, api_version: int,
                   settings: ConsumerGroupSettings) -> HeartbeatResult:
        group, created, upgrade = self._group_for(req.group_id, create=req.member_epoch == 0)
        snapshot = None if created else group.snapshot()
        change = _Change(list(upgrade or ()))
        bump = is_new = False
        replaced: ConsumerMember | None = None
        member_id = req.member_id
        if req.member_epoch == 0:
            if not member_id:
                member_id = new_member_id()
            member, replaced, is_new = self._joining_member(group, req, member_id, settings, change)
            bump = is_new and replaced is None
        elif req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            if static_id is None:
                raise _fail(ke.UnknownMemberIdError, f"Instance id {req.instance_id} is unknown.")
            if static_id != member_id:
                raise _fail(ke.FencedInstanceIdError,
                            f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                            f"{static_id}.")
            member = group.members[static_id]
            self._check_epoch(member, req.member_epoch, req.owned)
        else:
            member = group.members.get(member_id)
            if member is None:
                raise _fail(ke.UnknownMemberIdError, f"Member {member_id} is not a member of group {group.group_id}.")
            self._check_epoch(member, req.member_epoch, req.owned)
        updated = member.replace(
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor)
        nxt = self._update_and_reconcile(group, created, snapshot, member, updated, is_new, bump, req.owned,
                                         settings, change, converted=upgrade is not None)
        if upgrade is not None:  # the classic members keep their sessions
            for m in group.members.values():
                if m.classic is not None:
                    self._schedule_session(group.group_id, m.member_id, m.classic.session_timeout_ms)
        if replaced is not None:
            self._fence_timers(group.group_id, replaced.member_id)
        self._after_change(group, member, nxt, settings)
        full_request = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.owned is not None
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        send_assignment = full_request or nxt.assigned != member.assigned
        return HeartbeatResult(member_id=nxt.member_id, member_epoch=nxt.member_epoch,
                               heartbeat_interval_ms=settings.heartbeat_interval_ms,
                               assignment=nxt.assigned if send_assignment else None)

    def _update_and_reconcile(self, group: ConsumerGroup, created: bool, snapshot: ConsumerGroup | None,
                              member: ConsumerMember, updated: ConsumerMember, is_new: bool, bump: bool,
                              owned: Assignment | None, settings: ConsumerGroupSettings, change: _Change,
                              converted: bool = False) -> ConsumerMember:
        """Store the member's new metadata, bump the group epoch as needed, compute the target, move the
        member one reconciliation step, write it all; restores the group if anything fails."""
        req_owned = owned
        try:
            if _metadata_changed(member, updated) or is_new:
                change.records.append(rec.member_metadata(group.group_id, updated))
                if _subscription_changed(member, updated):
                    bump = True
            group.update_member(updated)
            # one bump for a changed subscription or topic metadata; Kafka 4.3 bumps a group created by
            # this heartbeat twice when its first member's topics exist (subscription, then metadata)
            metadata_changed = self._refresh_subscriptions(group, settings, change)
            twice = created and not converted and bump and metadata_changed
            bumps = 2 if twice else int(bump or metadata_changed)
            if bumps:
                group.group_epoch += bumps
                change.records.append(rec.group_metadata(group.group_id, group.group_epoch))
            if group.group_epoch > group.assignment_epoch:
                self._maybe_compute_target(group, settings, change)
            current = group.members[updated.member_id]
            target = group.target.get(current.member_id, {})
            nxt = reconcile(current, group.assignment_epoch, target, req_owned, group.owner_of)
            if nxt != current or is_new:
                group.update_member(nxt)
                change.records.append(rec.current_assignment(group.group_id, nxt))
            if created and group.group_id in self.classic.groups:  # an empty classic group is replaced
                change.records.insert(0, (encode_group_metadata_key(GroupMetadataKey(group.group_id)), None))
            if change.records:
                self.rt.append(group.group_id, change.records, APPEND_ERRORS_GROUP)
        except Exception:
            if snapshot is not None:
                self.groups[group.group_id] = snapshot
            else:
                self.groups.pop(group.group_id, None)
            raise
        if created:
            self.groups[group.group_id] = group
            classic = self.classic.groups.pop(group.group_id, None)
            if classic is not None:  # its GroupMetadata tombstone went out with this heartbeat's records
                self.classic.cancel_group_timers(classic)
        return nxt

    def _joining_member(self, group: ConsumerGroup, req: HeartbeatRequestData, member_id: str,
                        settings: ConsumerGroupSettings, change: _Change
                        ) -> tuple[ConsumerMember, ConsumerMember | None, bool]:
        """(member before this heartbeat's changes, the static member it replaces, is it new)."""
        if req.instance_id is not None:
            existing_id = group.static_members.get(req.instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if existing is not None and existing.member_id != member_id:
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise _fail(ke.UnreleasedInstanceIdError,
                                f"Static member {member_id} with instance id {req.instance_id} cannot join the group "
                                f"because the instance id is owned by {existing.member_id} member.")
                # the static member comes back under a new member id: it takes over the old one's
                # assignment, without a rebalance (the old one's timers stop once this is written)
                group.remove_member(existing.member_id)
                target = group.target.pop(existing.member_id, None)
                change.records += [rec.current_assignment(group.group_id, existing.member_id),
                                   rec.target_member(group.group_id, existing.member_id, None),
                                   rec.member_metadata(group.group_id, existing.member_id)]
                # its epochs restart at 0: reconciliation moves it to the target epoch with what it holds
                member = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
                if target is not None:
                    group.target[member_id] = target
                    change.records.append(rec.target_member(group.group_id, member_id, target))
                group.update_member(member)
                return member, existing, True
            if existing is not None and existing.member_id == member_id:
                return self._rejoin(group, existing), None, False
        member = group.members.get(member_id)
        if member is not None:
            return self._rejoin(group, member), None, False
        if len(group.members) >= settings.max_size:
            raise _fail(ke.GroupMaxSizeReachedError,
                        f"The consumer group has reached its maximum capacity of {settings.max_size} members.")
        return ConsumerMember(member_id=member_id, instance_id=req.instance_id), None, True

    @staticmethod
    def _rejoin(group: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
        """A known member joining again with epoch 0 has given up everything it held."""
        reset = member.replace(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE, assigned={},
                               pending_revocation={})
        group.update_member(reset)
        return reset

    @staticmethod
    def _check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
        if received > member.member_epoch:
            raise _fail(ke.FencedMemberEpochError,
                        f"The consumer group member has a greater member epoch ({received}) than the one known by "
                        f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                        f"and rejoin.")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or (owned is not None and not _subset(owned, member.assigned)):
                raise _fail(ke.FencedMemberEpochError,
                            f"The consumer group member has a smaller member epoch ({received}) than the one known "
                            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                            f"partitions and rejoin.")

    # ============================================================== leave / fence

    def _leave(self, req: HeartbeatRequestData) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.group_id in self.classic.groups:
                raise _fail(ke.GroupIdNotFoundError, f"Group {req.group_id} is not a consumer group")
            raise _fail(ke.GroupIdNotFoundError, f"Group {req.group_id} not found.")
        if req.instance_id is not None:
            member_id = group.static_members.get(req.instance_id)
            if member_id is None:
                raise _fail(ke.UnknownMemberIdError, f"Instance id {req.instance_id} is unknown.")
            if member_id != req.member_id:
                raise _fail(ke.FencedInstanceIdError,
                            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                            f"member {member_id}.")
        member = group.members.get(req.member_id)
        if member is None:
            raise _fail(ke.UnknownMemberIdError,
                        f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # a static member leaving temporarily keeps its assignment until its session times out
            left = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            snapshot = group.snapshot()
            try:
                group.update_member(left)
                self.rt.append(group.group_id, [rec.current_assignment(group.group_id, left)], APPEND_ERRORS_GROUP)
            except Exception:
                self.groups[group.group_id] = snapshot
                raise
            self._cancel(group.group_id, member.member_id, "rebalance")
        else:
            self._remove_member(group, member.member_id)
        return HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    def _remove_member(self, group: ConsumerGroup, member_id: str, downgrade: bool = True) -> None:
        """Remove a member (leave, session or rebalance timeout) and bump the group epoch; a group left
        with classic members only becomes a classic group again (`downgrade`)."""
        snapshot = group.snapshot()
        try:
            group.remove_member(member_id)
            group.target.pop(member_id, None)
            group.group_epoch += 1
            records = [rec.current_assignment(group.group_id, member_id),
                       rec.target_member(group.group_id, member_id, None),
                       rec.member_metadata(group.group_id, member_id)]
            settings = self.configs.settings_for(group.group_id)
            change = _Change()
            self._refresh_subscriptions(group, settings, change)
            records += change.records
            records.append(rec.group_metadata(group.group_id, group.group_epoch))
            self.rt.append(group.group_id, records, APPEND_ERRORS_GROUP)
        except Exception:
            self.groups[group.group_id] = snapshot
            raise
        self._fence_timers(group.group_id, member_id)
        if downgrade:
            self.maybe_downgrade(group)

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("consumer group %s: member %s fenced (%s)", group_id, member_id, why)
        try:
            self._remove_member(group, member_id)
        except AppendFailed as exc:
            log.warning("consumer group %s: fencing %s failed: %r", group_id, member_id, exc)

    # ============================================================== timers

    def _key(self, group_id: str, member_id: str, kind: str) -> str:
        return f"cg-{kind}-{group_id}-{member_id}"

    def _cancel(self, group_id: str, member_id: str, kind: str) -> None:
        self.rt.cancel(self._key(group_id, member_id, kind))

    def _fence_timers(self, group_id: str, member_id: str) -> None:
        self._cancel(group_id, member_id, "session")
        self._cancel(group_id, member_id, "rebalance")

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.rt.schedule(self._key(group_id, member_id, "session"), timeout_ms,
                            self._fence, group_id, member_id, "session timeout")

    @staticmethod
    def _session_timeout(member: ConsumerMember, settings: ConsumerGroupSettings) -> int:
        return member.classic.session_timeout_ms if member.classic is not None else settings.session_timeout_ms

    @staticmethod
    def _change() -> "_Change":
        return _Change()

    def _after_change(self, group: ConsumerGroup, before: ConsumerMember, after: ConsumerMember,
                      settings: ConsumerGroupSettings) -> None:
        self._schedule_session(group.group_id, after.member_id, self._session_timeout(after, settings))
        if after.state == MemberState.UNREVOKED_PARTITIONS:
            if before.state != MemberState.UNREVOKED_PARTITIONS or before.member_epoch != after.member_epoch \
                    or before.pending_revocation != after.pending_revocation:
                timeout = after.rebalance_timeout_ms if after.rebalance_timeout_ms > 0 else settings.session_timeout_ms
                self.rt.schedule(self._key(group.group_id, after.member_id, "rebalance"), timeout,
                                    self._rebalance_timeout, group.group_id, after.member_id, after.member_epoch)
        else:
            self._cancel(group.group_id, after.member_id, "rebalance")

    def _rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and member.state == MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch:
            self._fence(group_id, member_id, "did not revoke its partitions within the rebalance timeout")

    def close(self) -> None:
        pass  # timers live in the runtime's table

    # ============================================================== subscriptions and assignment

    def _resolve_regexes(self, group: ConsumerGroup, settings: ConsumerGroupSettings, inline: bool) -> bool:
        """Drop regexes no member uses; resolve new ones and refresh the others when topics changed or
        `group.consumer.regex.refresh.interval.ms` passed. As in Kafka, a heartbeat only schedules the
        resolution (`inline` False): it runs right after, and its result bumps the group epoch."""
        regexes = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        changed = False
        for stale in set(group.resolved_regexes) - regexes:
            del group.resolved_regexes[stale]
            changed = True
        topics = self.rt.catalog.topics
        now = time.monotonic()
        last = self._regex_refreshed.get(group.group_id)
        due = last is None or last[1] != len(topics) or \
            (now - last[0]) * 1000 >= settings.regex_refresh_interval_ms
        missing = regexes - set(group.resolved_regexes)
        if not regexes or not (due or missing):
            return changed
        if not inline:
            self.rt.schedule(f"cg-regex-{group.group_id}", 0, self._resolve_later, group.group_id)
            return changed
        todo = regexes
        visible = self._topic_filters.get(group.group_id)
        for regex in todo:
            matches = compile_topic_regex(regex)
            matched = frozenset(name for name, info in topics.items() if not info.internal and matches(name))
            if visible is not None:
                matched = frozenset(visible(matched))
            if group.resolved_regexes.get(regex) != matched:
                group.resolved_regexes[regex] = matched
                changed = True
        self._regex_refreshed[group.group_id] = (now, len(topics))
        return changed

    def _resolve_later(self, group_id: str) -> None:
        """The scheduled regex resolution: a changed topic set bumps the group epoch (the next
        heartbeat computes the target assignment)."""
        group = self.groups.get(group_id)
        if group is None:
            return
        snapshot = group.snapshot()
        change = _Change()
        try:
            if not self._refresh_subscriptions(group, self.configs.settings_for(group_id), change, inline=True):
                return
            group.group_epoch += 1
            change.records.append(rec.group_metadata(group_id, group.group_epoch))
            self.rt.append(group_id, change.records, APPEND_ERRORS_GROUP)
        except Exception as exc:
            self.groups[group_id] = snapshot
            log.warning("consumer group %s: regex resolution failed: %r", group_id, exc)

    def _refresh_subscriptions(self, group: ConsumerGroup, settings: ConsumerGroupSettings, change: _Change,
                               inline: bool = False) -> bool:
        """Re-read the metadata of the subscribed topics; True (and a record) when it changed."""
        self._resolve_regexes(group, settings, inline)
        metadata: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topic_names():
            info = self.rt.catalog.get(name)
            if info is not None:
                metadata[name] = (info.topic_id, info.partitions)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        change.records.append(rec.partition_metadata(group.group_id, metadata))
        return True

    def _assignor_for(self, group: ConsumerGroup, settings: ConsumerGroupSettings) -> str:
        """The server assignor most members ask for, else the broker's default (the first configured)."""
        counts: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if counts:
            return max(sorted(counts), key=lambda n: counts[n])
        return settings.assignors[0]

    def _maybe_compute_target(self, group: ConsumerGroup, settings: ConsumerGroupSettings, change: _Change) -> None:
        """Assignment batching (`group.consumer.assignment.interval.ms`): a new target at most once
        per interval; a change inside the interval is assigned by the first heartbeat after it, as in
        Kafka (no timer: members heartbeat anyway)."""
        now = time.monotonic()
        last = self._last_assignment.get(group.group_id)
        interval = settings.assignment_interval_ms
        if interval <= 0 or last is None or (now - last) * 1000 >= interval:
            self._compute_target(group, settings, change)
            self._last_assignment[group.group_id] = now

    def _compute_target(self, group: ConsumerGroup, settings: ConsumerGroupSettings, change: _Change) -> None:
        name = self._assignor_for(group, settings)
        metadata = group.subscription_metadata
        subscriptions = {}
        for mid, m in group.members.items():
            subscriptions[mid] = frozenset(metadata[n][0] for n in group.member_topic_names(m) if n in metadata)
        partitions = {tid: n for tid, n in metadata.values()}
        current = {mid: {t: set(ps) for t, ps in a.items()} for mid, a in group.target.items() if mid in group.members}
        new = ASSIGNORS[name](subscriptions, partitions, current)
        target = {mid: freeze(a) for mid, a in new.items()}
        for mid, a in target.items():
            if group.target.get(mid) != a:
                change.records.append(rec.target_member(group.group_id, mid, a))
        for mid in set(group.target) - set(target):
            change.records.append(rec.target_member(group.group_id, mid, None))
        group.target = target
        group.assignor_name = name
        group.assignment_epoch = group.group_epoch
        change.records.append(rec.target_metadata(group.group_id, group.assignment_epoch))

    # ============================================================== offsets of consumer groups

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int | None,
                               transactional: bool = False) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit without member epoch is accepted only
        while the group has no members; otherwise the member must exist and commit at its epoch."""
        group = self.groups[group_id]
        if member_epoch < 0 and (transactional or not group.members):
            return  # admin / manual-assignment commits; TxnOffsetCommit without group metadata (as Kafka)
        member = group.members.get(member_id)
        if member is None:
            raise _fail(ke.UnknownMemberIdError, f"Member {member_id} is not a member of group {group_id}.")
        if member.classic is not None:  # a classic member commits with its generation (= member epoch)
            if member_epoch != member.member_epoch:
                raise _fail(ke.IllegalGenerationError, "")
            return
        if not transactional and api_version is not None and api_version < 9:
            raise _fail(ke.UnsupportedVersionError, "OffsetCommit version 9 or above must be used by members "
                                                    "using the modern group protocol")
        try:
            self._check_commit_epoch(member, member_epoch)
        except HeartbeatError as exc:
            if transactional:  # TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION
                raise _fail(ke.IllegalGenerationError, str(exc)) from None
            raise

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ names the member)."""
        if member_id is None and member_epoch < 0:
            return
        group = self.groups[group_id]
        member = group.members.get(member_id or "")
        if member is None:
            raise _fail(ke.UnknownMemberIdError, f"Member {member_id} is not a member of group {group_id}.")
        self._check_commit_epoch(member, member_epoch)

    @staticmethod
    def _check_commit_epoch(member: ConsumerMember, received: int) -> None:
        if received != member.member_epoch:
            raise _fail(ke.StaleMemberEpochError,
                        f"The member epoch {received} is stale; the current epoch is {member.member_epoch}.")

    # ============================================================== loading (replay)

    def replay(self, key: rec.ConsumerRecordKey, value: Any) -> None:
        """Apply one loaded record (value decoded, None = tombstone). Ownership and the static-member
        index are rebuilt in `on_partition_loaded`, once the partition's records are all in."""
        group = self.groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[key.group_id] = ConsumerGroup(key.group_id)
            self.classic.groups.pop(key.group_id, None)
        t = key.record_type
        if t == rec.GROUP_METADATA:
            if value is None:
                del self.groups[key.group_id]
            else:
                group.group_epoch = value
        elif t == rec.PARTITION_METADATA:
            group.subscription_metadata = dict(value or {})
        elif t == rec.TARGET_METADATA:
            group.assignment_epoch = value if value is not None else 0
        elif t == rec.TARGET_MEMBER:
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = value
        elif t == rec.MEMBER_METADATA:
            if value is None:
                group.members.pop(key.member_id, None)
                return
            member = group.members.get(key.member_id) or ConsumerMember(key.member_id)
            group.members[key.member_id] = member.replace(
                instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
                subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor, classic=value.classic)
        elif t == rec.CURRENT_ASSIGNMENT:
            if value is None:
                return  # the member metadata tombstone removes the member
            member = group.members.get(key.member_id) or ConsumerMember(key.member_id)
            group.members[key.member_id] = member.replace(
                member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                state=value.state, assigned=value.assigned, pending_revocation=value.pending_revocation)

    def on_partition_loaded(self, partition: int) -> None:
        """Rebuild derived state of the partition's groups and start their members' session timers."""
        for group in list(self.groups.values()):
            if self.rt.partition_for(group.group_id) != partition:
                continue
            members = list(group.members.values())
            group.members.clear()
            group.partition_owner.clear()
            group.static_members.clear()
            for member in members:
                try:
                    group.update_member(member)
                except Exception:  # a log Kafka's rules would not have written: drop what conflicts
                    log.warning("consumer group %s: member %s holds a partition of another member; its "
                                "assignment is reset", group.group_id, member.member_id)
                    group.update_member(member.replace(assigned={}, pending_revocation={},
                                                       state=MemberState.STABLE))
            if group.members:
                group.assignor_name = self._assignor_for(group, self.configs.settings_for(group.group_id))
            settings = self.configs.settings_for(group.group_id)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, self._session_timeout(member, settings))

    # ============================================================== administration

    def delete_group(self, group_id: str) -> None:
        """Delete an empty consumer group: tombstones for its records (offsets are the caller's).
        Raises NON_EMPTY_GROUP while it has members."""
        group = self.groups[group_id]
        if group.members:
            raise _fail(ke.NonEmptyGroupError, f"Group {group_id} is not empty.")
        self.rt.append(group_id, self.tombstones(group), APPEND_ERRORS_GROUP)
        self.forget(group_id)

    @staticmethod
    def tombstones(group: ConsumerGroup) -> list[rec.Record]:
        out: list[rec.Record] = []
        for mid in group.target:
            out.append(rec.target_member(group.group_id, mid, None))
        out += [rec.target_metadata(group.group_id, None), rec.partition_metadata(group.group_id, None),
                rec.group_metadata(group.group_id, None)]
        return out

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        self._regex_refreshed.pop(group_id, None)
        self._topic_filters.pop(group_id, None)
        self._last_assignment.pop(group_id, None)
        self.rt.cancel(f"cg-regex-{group_id}")
        if group is not None:
            for mid in group.members:
                self._fence_timers(group_id, mid)

    def list_groups(self, states: set[str], types: set[str]) -> list[ConsumerGroup]:
        """Consumer groups matching the (lower-cased) state and type filters of ListGroups."""
        if types and "consumer" not in types:
            return []
        return [g for g in self.groups.values()
                if not self.rt.is_loading(self.rt.partition_for(g.group_id))
                and (not states or g.state.value.lower() in states)]

    # ============================================================== queries

    def describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error, message, group) as ConsumerGroupDescribe reports a group."""
        if not group_id:
            return ke.InvalidGroupIdError.errno, None, None
        if self.rt.topic_exists and self.rt.is_loading(self.rt.partition_for(group_id)):
            return ke.CoordinatorLoadInProgressError.errno, None, None
        group = self.groups.get(group_id)
        if group is not None:
            return 0, None, group
        if group_id in self.classic.groups:
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group", None
        if any(group_id in getattr(getattr(self, part, None), "groups", ()) for part in ("streams", "share")):
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.rt.catalog.by_id.get(topic_id)
        return info.name if info is not None else None


def _subset(a: Assignment, b: Assignment) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def _subscription_changed(a: ConsumerMember, b: ConsumerMember) -> bool:
    return (a.subscribed_topic_names != b.subscribed_topic_names or a.subscribed_topic_regex != b.subscribed_topic_regex
            or a.server_assignor != b.server_assignor)


def _metadata_changed(a: ConsumerMember, b: ConsumerMember) -> bool:
    return (_subscription_changed(a, b) or a.instance_id != b.instance_id or a.rack_id != b.rack_id
            or a.client_id != b.client_id or a.client_host != b.client_host
            or a.rebalance_timeout_ms != b.rebalance_timeout_ms)
