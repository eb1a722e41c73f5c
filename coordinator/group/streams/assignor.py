"""The server-side task assignor of streams groups (Kafka's StickyTaskAssignor, "sticky").

Members are grouped by process (a Kafka Streams instance may run several stream threads, each a
member). Active tasks go first — stateful ones balanced on their own, then stateless ones filling every member up
to the quota of all active tasks:
1. to the member that had the task active, while it is under its quota;
2. to a member that had it as standby or warm-up (least loaded first), while under its quota;
3. the rest to the least loaded process, and in it to its least loaded member.
Then standby tasks (num.standby.replicas per stateful task): to a previous standby holder first, else
to the least loaded process that does not hold the task yet; a process never holds a task twice.
Quota = ceil(tasks / members). Deterministic: ties break on process id and member id.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from minikafka.coordinator.group.streams.model import TasksTuple, freeze

STICKY_ASSIGNOR = "sticky"

Task = tuple[str, int]


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    current: TasksTuple  # the member's target assignment before this one (what stickiness keeps)


@dataclass
class _Process:
    process_id: str
    members: list[str]
    active: dict[str, set[Task]] = field(default_factory=dict)
    standby: dict[str, set[Task]] = field(default_factory=dict)
    stateless: int = 0

    def tasks(self) -> set[Task]:
        out: set[Task] = set()
        for d in (self.active, self.standby):
            for ts in d.values():
                out |= ts
        return out

    def member_load(self, member_id: str) -> int:
        return len(self.active.get(member_id, ())) + len(self.standby.get(member_id, ()))

    def load(self) -> float:
        return sum(self.member_load(m) for m in self.members) / len(self.members)


def assign(members: Mapping[str, MemberSpec], tasks: Mapping[str, int], stateful: set[str],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """`tasks`: subtopology id -> number of tasks; `stateful`: subtopologies with state stores.
    Returns member id -> target (active and standby tasks)."""
    if not members:
        return {}
    processes: dict[str, _Process] = {}
    for mid in sorted(members):
        pid = members[mid].process_id
        processes.setdefault(pid, _Process(pid, [])).members.append(mid)
    prev_active: dict[Task, str] = {}
    prev_standby: dict[Task, list[str]] = {}
    for mid in sorted(members):
        cur = members[mid].current
        for s, ps in cur.active.items():
            for p in ps:
                prev_active[(s, p)] = mid
        for d in (cur.standby, cur.warmup):
            for s, ps in d.items():
                for p in ps:
                    prev_standby.setdefault((s, p), []).append(mid)
    stateful_tasks = [(s, p) for s in sorted(tasks) if s in stateful for p in range(tasks[s])]
    stateless_tasks = [(s, p) for s in sorted(tasks) if s not in stateful for p in range(tasks[s])]
    n = len(members)
    owner_of: dict[Task, str] = {}
    # stateful tasks balanced on their own (quota: stateful tasks per member), then stateless ones fill
    # up to the quota of all active tasks per member
    count: dict[str, int] = {m: 0 for m in members}
    _assign_active(stateful_tasks, math.ceil(len(stateful_tasks) / n), count, members, processes, prev_active,
                   prev_standby, owner_of, True)
    _assign_active(stateless_tasks, math.ceil((len(stateful_tasks) + len(stateless_tasks)) / n), count, members,
                   processes, prev_active, prev_standby, owner_of, False)
    if num_standby_replicas > 0:
        _assign_standby(stateful_tasks, num_standby_replicas, members, processes, prev_standby, owner_of)
    out: dict[str, TasksTuple] = {}
    for mid in members:
        proc = processes[members[mid].process_id]
        active: dict[str, set[int]] = {}
        standby: dict[str, set[int]] = {}
        for s, p in proc.active.get(mid, ()):
            active.setdefault(s, set()).add(p)
        for s, p in proc.standby.get(mid, ()):
            standby.setdefault(s, set()).add(p)
        out[mid] = TasksTuple(freeze(active), freeze(standby), {})
    return out


def _assign_active(todo: list[Task], quota: int, count: dict[str, int], members: Mapping[str, MemberSpec],
                   processes: dict[str, _Process], prev_active: dict[Task, str], prev_standby: dict[Task, list[str]],
                   owner_of: dict[Task, str], stateful: bool) -> None:
    todo = sorted(todo, key=lambda t: (t[1], t[0]))  # same partitions together (range-like)

    def give(mid: str, task: Task) -> None:
        proc = processes[members[mid].process_id]
        proc.active.setdefault(mid, set()).add(task)
        if not stateful:
            proc.stateless += 1
        count[mid] += 1
        owner_of[task] = mid

    rest = []
    for task in todo:  # 1. the previous active owner
        mid = prev_active.get(task)
        if mid is not None and mid in members and count[mid] < quota:
            give(mid, task)
        else:
            rest.append(task)
    todo, rest = rest, []
    for task in todo:  # 2. a previous standby / warm-up holder, least loaded first
        candidates = [m for m in prev_standby.get(task, ()) if m in members and count[m] < quota]
        if candidates:
            give(min(candidates, key=lambda m: (count[m], m)), task)
        else:
            rest.append(task)
    for task in rest:  # 3. the least loaded process, its least loaded member
        def proc_key(p: _Process):
            return (p.load(), p.stateless, p.process_id)
        open_procs = [p for p in processes.values() if any(count[m] < quota for m in p.members)]
        proc = min(open_procs or processes.values(), key=proc_key)
        mid = min(proc.members, key=lambda m: (count[m], proc.member_load(m), m))
        give(mid, task)


def _assign_standby(tasks: list[Task], replicas: int, members: Mapping[str, MemberSpec],
                    processes: dict[str, _Process], prev_standby: dict[Task, list[str]],
                    owner_of: dict[Task, str]) -> None:
    def holds(proc: _Process, task: Task) -> bool:
        return task in proc.tasks()

    for task in sorted(tasks, key=lambda t: (t[1], t[0])):
        for _ in range(replicas):
            chosen = None
            for mid in prev_standby.get(task, ()):
                if mid in members and not holds(processes[members[mid].process_id], task):
                    chosen = mid
                    break
            if chosen is None:
                free = [p for p in processes.values() if not holds(p, task)]
                if not free:
                    break  # fewer processes than replicas + 1: Kafka leaves the rest unassigned
                proc = min(free, key=lambda p: (p.load(), p.process_id))
                chosen = min(proc.members, key=lambda m: (proc.member_load(m), m))
            proc = processes[members[chosen].process_id]
            proc.standby.setdefault(chosen, set()).add(task)
