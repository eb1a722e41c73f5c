"""Member reconciliation of streams groups (Kafka 4.3's streams CurrentAssignmentBuilder): move a member
from its current tasks towards its target, one safe step per heartbeat.

Revoke before assign: tasks leaving the member become pending revocation and the member stays in its
epoch (UNREVOKED_TASKS) until a heartbeat's owned tasks no longer contain them. A task the target
gives the member is withheld while it is unreleased — an active task still held by any process, or a
task whose process already holds it in another role (active/standby/warm-up) — and the member is
UNRELEASED_TASKS until it is free. Newly assigned active tasks carry the target epoch as their
assignment epoch; kept ones keep theirs.
"""
from __future__ import annotations

from typing import Callable

from minikafka.coordinator.group.streams.model import (
    ActiveEpochs,
    MemberState,
    StreamsMember,
    Tasks,
    TasksTuple,
    freeze,
)

ActiveProcess = Callable[[str, int], "str | None"]
Processes = Callable[[str, int], "set[str]"]


class UnknownMemberState(Exception):
    """Kafka fences a member in a state this coordinator does not know (FENCED_MEMBER_EPOCH)."""


def reconcile(member: StreamsMember, target_epoch: int, target: TasksTuple, owned: TasksTuple | None,
              active_process: ActiveProcess, standby_processes: Processes, warmup_processes: Processes
              ) -> StreamsMember:
    """The member's next state; `owned` is what the heartbeat reported (None: not sent)."""
    builder = _Builder(member, target_epoch, target, owned, active_process, standby_processes, warmup_processes)
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return builder.next(member.member_epoch)
        return member
    if state == MemberState.UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending()):
            return member
        return builder.next(member.member_epoch + 1)
    if state == MemberState.UNRELEASED_TASKS:
        return builder.next(member.member_epoch)
    if owned is None or not owned.is_empty():
        raise UnknownMemberState("The streams group member is in a unknown state. "
                                 "The member must abandon all its tasks and rejoin.")
    return builder.next(target_epoch)


class _Builder:
    def __init__(self, member, target_epoch, target, owned, active_process, standby_processes, warmup_processes):
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.owned = owned
        self.active_process = active_process
        self.standby_processes = standby_processes
        self.warmup_processes = warmup_processes

    def _held_here(self, s: str, p: int) -> bool:
        pid = self.member.process_id
        return pid in self.standby_processes(s, p) or pid in self.warmup_processes(s, p)

    def _unreleased_active(self, s: str, p: int) -> bool:
        return self.active_process(s, p) is not None or self._held_here(s, p)

    def _unreleased_other(self, s: str, p: int) -> bool:
        return self.active_process(s, p) == self.member.process_id or self._held_here(s, p)

    def next(self, epoch: int) -> StreamsMember:
        m = self.member
        keep_a, revoke_a, add_a, unrel_a = _diff_active(m.active, self.target.active, self.target_epoch,
                                                        self._unreleased_active)
        keep_s, revoke_s, add_s, unrel_s = _diff(m.standby, self.target.standby, self._unreleased_other)
        keep_w, revoke_w, add_w, unrel_w = _diff(m.warmup, self.target.warmup, self._unreleased_other)
        unreleased = unrel_a or unrel_s or unrel_w
        revoke = TasksTuple({s: frozenset(ps) for s, ps in revoke_a.items()}, revoke_s, revoke_w)
        if not revoke.is_empty() and (self.owned is None or self.owned.contains_any(revoke)):
            return _update_epoch(m, epoch).replace(
                state=MemberState.UNREVOKED_TASKS, active=keep_a, standby=keep_s, warmup=keep_w,
                pending_active=revoke_a, pending_standby=revoke_s, pending_warmup=revoke_w)
        if add_a or add_s or add_w:
            state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
            active = {s: dict(ps) for s, ps in keep_a.items()}
            for s, ps in add_a.items():
                active.setdefault(s, {}).update(ps)
            return _update_epoch(m, self.target_epoch).replace(
                state=state, active=active, standby=_merge(keep_s, add_s), warmup=_merge(keep_w, add_w),
                pending_active={}, pending_standby={}, pending_warmup={})
        state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        return _update_epoch(m, self.target_epoch).replace(
            state=state, active=keep_a, standby=keep_s, warmup=keep_w,
            pending_active={}, pending_standby={}, pending_warmup={})


def _update_epoch(member: StreamsMember, epoch: int) -> StreamsMember:
    """Kafka's StreamsGroupMember.Builder.updateMemberEpoch: the current epoch becomes the previous one."""
    return member.replace(previous_member_epoch=member.member_epoch, member_epoch=epoch)


def _merge(a: Tasks, b: Tasks) -> dict[str, frozenset[int]]:
    out = {s: set(ps) for s, ps in a.items()}
    for s, ps in b.items():
        out.setdefault(s, set()).update(ps)
    return freeze(out)


def _diff(current: Tasks, target: Tasks, unreleased: Callable[[str, int], bool]):
    keep, revoke, add = {}, {}, {}
    has_unreleased = False
    for s in set(current) | set(target):
        cur, tgt = current.get(s, frozenset()), target.get(s, frozenset())
        pending = {p for p in tgt - cur}
        blocked = {p for p in pending if unreleased(s, p)}
        has_unreleased |= bool(blocked)
        keep[s], revoke[s], add[s] = cur & tgt, cur - tgt, frozenset(pending - blocked)
    return freeze(keep), freeze(revoke), freeze(add), has_unreleased


def _diff_active(current: ActiveEpochs, target: Tasks, target_epoch: int, unreleased: Callable[[str, int], bool]):
    keep: dict[str, dict[int, int]] = {}
    revoke: dict[str, dict[int, int]] = {}
    add: dict[str, dict[int, int]] = {}
    has_unreleased = False
    for s in set(current) | set(target):
        cur = current.get(s, {})
        tgt = target.get(s, frozenset())
        k = {p: e for p, e in cur.items() if p in tgt}
        r = {p: e for p, e in cur.items() if p not in tgt}
        a = {}
        for p in tgt:
            if p in cur:
                continue
            if unreleased(s, p):
                has_unreleased = True
            else:
                a[p] = target_epoch
        if k:
            keep[s] = k
        if r:
            revoke[s] = r
        if a:
            add[s] = a
    return keep, revoke, add, has_unreleased
