"""Server-side assignors of the consumer group protocol: `uniform` and `range` (Kafka's
UniformAssignor / RangeAssignor names). Pure functions, no I/O.

Input: the members' subscriptions (member id -> set of topic ids), the partition count of each
subscribed topic, and the current target assignment (for stickiness). Output: member id ->
{topic id: set of partitions}. Invariants (tests/unit/coordinator/test_consumer_assignors.py): every partition of
a subscribed topic goes to exactly one member subscribed to it; no partition goes to a member not
subscribed to its topic or to a non-existent partition.
"""
from __future__ import annotations

import heapq
import uuid
from typing import Callable, Mapping

Assignment = dict[uuid.UUID, set[int]]
Subscriptions = Mapping[str, frozenset[uuid.UUID] | set[uuid.UUID]]
AssignFn = Callable[[Subscriptions, Mapping[uuid.UUID, int], Mapping[str, Mapping[uuid.UUID, set[int]]]],
                    dict[str, Assignment]]


def _empty(members: Subscriptions) -> dict[str, Assignment]:
    return {m: {} for m in members}


def uniform(subscriptions: Subscriptions, partitions: Mapping[uuid.UUID, int],
            current: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    """Balance the partitions over the members (counts differ by at most one among members with the
    same subscription), keeping each member's current partitions where that stays balanced."""
    out = _empty(subscriptions)
    members = sorted(subscriptions)
    if not members:
        return out
    # eligible members per topic
    eligible: dict[uuid.UUID, list[str]] = {}
    for t in sorted(partitions, key=str):
        ms = [m for m in members if t in subscriptions[m]]
        if ms:
            eligible[t] = ms
    all_parts = [(t, p) for t in eligible for p in range(partitions[t])]
    total = len(all_parts)
    homogeneous = len({frozenset(subscriptions[m]) for m in members}) == 1
    counts = {m: 0 for m in members}
    if homogeneous:
        base, extra = divmod(total, len(members))
        quota = {m: base for m in members}
    else:
        quota = None
    taken: set[tuple[uuid.UUID, int]] = set()
    # 1. sticky: keep current partitions up to the base quota (homogeneous) or a fair share
    fair = {m: max(1, -(-sum(partitions[t] for t in subscriptions[m] if t in eligible)
                        // max(1, len(members)))) for m in members} if not homogeneous else None
    for m in members:
        limit = quota[m] if quota is not None else fair[m]
        for t in sorted(current.get(m, {}), key=str):
            if t not in eligible or m not in eligible[t]:
                continue
            for p in sorted(current[m][t]):
                if p < partitions[t] and (t, p) not in taken and counts[m] < limit:
                    out[m].setdefault(t, set()).add(p)
                    taken.add((t, p))
                    counts[m] += 1
    if homogeneous:
        # members that kept more than base may keep one extra while extras remain
        for m in members:
            if extra <= 0:
                break
            for t in sorted(current.get(m, {}), key=str):
                if counts[m] > base or t not in eligible or m not in eligible[t]:
                    continue
                free = [p for p in sorted(current[m][t]) if p < partitions[t] and (t, p) not in taken]
                if free:
                    p = free[0]
                    out[m].setdefault(t, set()).add(p)
                    taken.add((t, p))
                    counts[m] += 1
                    extra -= 1
                    break
    # 2. the rest to the least-loaded eligible member (a heap when every member is eligible)
    heap = [(counts[m], m) for m in members] if homogeneous else None
    if heap is not None:
        heapq.heapify(heap)
    for t, p in all_parts:
        if (t, p) in taken:
            continue
        if heap is not None:
            _, m = heapq.heappop(heap)
            heapq.heappush(heap, (counts[m] + 1, m))
        else:
            m = min(eligible[t], key=lambda x: (counts[x], x))
        out[m].setdefault(t, set()).add(p)
        taken.add((t, p))
        counts[m] += 1
    if homogeneous:
        _rebalance(out, counts, eligible)
    return out


def _rebalance(out: dict[str, Assignment], counts: dict[str, int], eligible: dict[uuid.UUID, list[str]]) -> None:
    """Move partitions from the most to the least loaded member until counts differ by at most one."""
    while True:
        hi = max(counts, key=lambda m: (counts[m], m))
        lo = min(counts, key=lambda m: (counts[m], m))
        if counts[hi] - counts[lo] <= 1:
            return
        moved = False
        for t in sorted(out[hi], key=str):
            if lo in eligible.get(t, ()) and out[hi][t]:
                p = max(out[hi][t])
                out[hi][t].discard(p)
                if not out[hi][t]:
                    del out[hi][t]
                out[lo].setdefault(t, set()).add(p)
                counts[hi] -= 1
                counts[lo] += 1
                moved = True
                break
        if not moved:
            return


def range_(subscriptions: Subscriptions, partitions: Mapping[uuid.UUID, int],
           current: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    """Per topic, contiguous ranges of partitions to the subscribed members sorted by member id; the
    first (partitions % members) members get one more."""
    out = _empty(subscriptions)
    for t in sorted(partitions, key=str):
        ms = sorted(m for m in subscriptions if t in subscriptions[m])
        if not ms:
            continue
        n = partitions[t]
        base, extra = divmod(n, len(ms))
        start = 0
        for i, m in enumerate(ms):
            size = base + (1 if i < extra else 0)
            if size:
                out[m][t] = set(range(start, start + size))
            start += size
    return out


ASSIGNORS: dict[str, AssignFn] = {"uniform": uniform, "range": range_}
# Kafka's default `group.consumer.assignors` names the classes; both spellings resolve to a name
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def resolve_names(spec: str) -> list[str]:
    """The assignor names of a `group.consumer.assignors` value (order kept: the first is the default)."""
    names = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name = CLASS_NAMES.get(item, item)
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {item!r}")
        if name not in names:
            names.append(name)
    return names
