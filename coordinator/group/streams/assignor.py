"""The server-side task assignor of streams groups (Kafka 4.3.1's StickyTaskAssignor, "sticky").

Members are grouped by process (a Kafka Streams instance runs several stream threads, each a member);
a process's load is its tasks per member. Active tasks of every subtopology, with a per-member quota of
ceil(active tasks / members) that is recomputed for the others whenever a member reaches it:
1. (tasks by partition, then subtopology) to the member that had the task active, while under quota;
2. to the least loaded member that had it as standby or warm-up, while under quota;
3. (tasks by subtopology, then partition) to the least loaded process, and in it its least loaded member.
Standby tasks (num.standby.replicas per task of a stateful subtopology), with a quota of all tasks per
member: to the previous active owner, else the least loaded previous standby holder, else the least
loaded process; a process never holds a task twice (fewer processes than replicas + 1: fewer standbys).
Deterministic: ties break on process id and member id.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Mapping

from minikafka.coordinator.group.streams.model import TasksTuple, freeze

STICKY_ASSIGNOR = "sticky"

Task = tuple[str, int]


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    current: TasksTuple  # the member's tasks before this assignment (what stickiness keeps)


def _per_member(tasks: int, members: int) -> int:
    return 0 if members <= 0 else -(-tasks // members)


@dataclass
class _Process:
    process_id: str
    members: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # member -> tasks (active and standby)
    tasks: set[Task] = field(default_factory=set)
    active: dict[str, set[Task]] = field(default_factory=dict)
    standby: dict[str, set[Task]] = field(default_factory=dict)

    @property
    def load(self) -> float:
        return sum(self.counts.values()) / len(self.members)

    def add(self, member_id: str, task: Task, active: bool) -> int:
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def add_to_least_loaded(self, task: Task, active: bool) -> int:
        return self.add(min(self.members, key=lambda m: (self.counts[m], m)), task, active)


class _Quota:
    """Kafka's tasks-per-member quota: when a member reaches it, the rest is shared by the others."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per_member = _per_member(tasks, members)

    def reached(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.tasks -= count
            self.per_member = _per_member(self.tasks, self.members)


class _ByLoad:
    """Processes by load (least first, ties by process id) for step 3 and the last standby pass."""

    def __init__(self, processes) -> None:
        self._seq = itertools.count()
        self._heap = [(p.load, p.process_id, next(self._seq), p) for p in processes]
        heapq.heapify(self._heap)

    def poll(self) -> "_Process | None":
        return heapq.heappop(self._heap)[3] if self._heap else None

    def add(self, p: _Process) -> None:
        heapq.heappush(self._heap, (p.load, p.process_id, next(self._seq), p))


def assign(members: Mapping[str, MemberSpec], tasks: Mapping[str, int], stateful: set[str],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """`tasks`: subtopology id -> number of tasks; `stateful`: subtopologies with state stores.
    Returns member id -> target (active and standby tasks)."""
    if not members:
        return {}
    processes: dict[str, _Process] = {}
    for mid in sorted(members):
        p = processes.setdefault(members[mid].process_id, _Process(members[mid].process_id))
        p.members.append(mid)
        p.counts[mid] = 0
    prev_active: dict[Task, str] = {}
    prev_standby: dict[Task, list[str]] = {}
    for mid in sorted(members):
        cur = members[mid].current
        for s, ps in cur.active.items():
            for part in ps:
                prev_active[(s, part)] = mid
        for d in (cur.standby, cur.warmup):
            for s, ps in d.items():
                for part in ps:
                    prev_standby.setdefault((s, part), []).append(mid)
    active_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    standby_tasks = [(s, p) for s in sorted(tasks) if s in stateful for p in range(tasks[s])]
    total = len(active_tasks) + len(standby_tasks) * num_standby_replicas
    active_quota = _Quota(len(active_tasks), len(members))
    total_quota = _Quota(total, len(members))

    def proc(mid: str) -> _Process:
        return processes[members[mid].process_id]

    def give(mid: str, task: Task, active: bool) -> None:
        n = proc(mid).add(mid, task, active)
        if active:
            active_quota.reached(n)
        total_quota.reached(n)

    # active tasks: 1. the previous owner
    todo = sorted(active_tasks, key=lambda t: (t[1], t[0]))
    rest = []
    for task in todo:
        mid = prev_active.get(task)
        if mid is not None and proc(mid).counts[mid] < active_quota.per_member:
            give(mid, task, True)
        else:
            rest.append(task)
    # 2. a previous standby / warm-up holder
    todo, rest = rest, []
    for task in todo:
        mid = _least_loaded_prev(prev_standby.get(task), processes, members, None)
        if mid is not None and proc(mid).counts[mid] < active_quota.per_member:
            give(mid, task, True)
        else:
            rest.append(task)
    # 3. the least loaded process
    by_load = _ByLoad(processes.values())
    for task in sorted(rest):
        p = by_load.poll()
        n = p.add_to_least_loaded(task, True)
        active_quota.reached(n)
        total_quota.reached(n)
        by_load.add(p)
    if num_standby_replicas > 0:
        _assign_standby(standby_tasks, num_standby_replicas, members, processes, prev_active, prev_standby,
                        total_quota)
    out: dict[str, TasksTuple] = {}
    for mid in members:
        p = proc(mid)
        active: dict[str, set[int]] = {}
        standby: dict[str, set[int]] = {}
        for s, part in p.active.get(mid, ()):
            active.setdefault(s, set()).add(part)
        for s, part in p.standby.get(mid, ()):
            standby.setdefault(s, set()).add(part)
        out[mid] = TasksTuple(freeze(active), freeze(standby), {})
    return out


def _least_loaded_prev(candidates: list[str] | None, processes: dict[str, _Process],
                       members: Mapping[str, MemberSpec], task: Task | None) -> str | None:
    """Kafka's findPrevMemberWithLeastLoad: the first candidate, replaced by a later one only when both its
    process and itself are less loaded; processes already holding `task` are skipped."""
    chosen = None
    best = (float("inf"), float("inf"))
    for mid in candidates or ():
        if mid not in members:
            continue
        p = processes[members[mid].process_id]
        if task is not None and task in p.tasks:
            continue
        load = (p.load, p.counts[mid])
        if chosen is None or (load[0] < best[0] and load[1] < best[1]):
            chosen, best = mid, load
    return chosen


def _assign_standby(tasks: list[Task], replicas: int, members: Mapping[str, MemberSpec],
                    processes: dict[str, _Process], prev_active: dict[Task, str],
                    prev_standby: dict[Task, list[str]], quota: _Quota) -> None:
    def give(mid: str, task: Task) -> None:
        quota.reached(processes[members[mid].process_id].add(mid, task, False))

    to_least_loaded: list[tuple[Task, int]] = []
    for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
        for i in range(replicas):
            mid = prev_active.get(task)
            if mid is not None and mid in members:
                p = processes[members[mid].process_id]
                if task not in p.tasks and p.counts[mid] < quota.per_member:
                    give(mid, task)
                    continue
            mid = _least_loaded_prev(prev_standby.get(task), processes, members, task)
            if mid is not None and processes[members[mid].process_id].counts[mid] < quota.per_member:
                give(mid, task)
                continue
            to_least_loaded.append((task, replicas - i))
            break
    by_load = _ByLoad(processes.values())
    for task, remaining in sorted(to_least_loaded, reverse=True):
        for _ in range(remaining):
            if not _standby_to_least_loaded(by_load, task, quota):
                break  # not enough processes: fewer standbys (Kafka logs a warning)


def _standby_to_least_loaded(by_load: _ByLoad, task: Task, quota: _Quota) -> bool:
    """Kafka's assignStandbyToMemberWithLeastLoad: the least loaded process without the task."""
    skipped = []
    found = False
    while (p := by_load.poll()) is not None:
        skipped.append(p)
        if task not in p.tasks:
            quota.reached(p.add_to_least_loaded(task, False))
            found = True
            break
    for p in skipped:
        by_load.add(p)
    return found
