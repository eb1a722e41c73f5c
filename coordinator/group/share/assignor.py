"""Kafka's `simple` share-group assignor, per topic: with no more members than partitions each partition goes
to one member (round robin over sorted members); with more members than partitions the members share them
(member i gets partition i mod P), so no member of a subscribed, non-empty topic is left without one."""
from __future__ import annotations

import uuid

from minikafka.coordinator.group.share.model import Assignment, ShareMember

NAME = "simple"


def assign(members: list[ShareMember], topics: dict[str, tuple[uuid.UUID, int]]) -> dict[str, Assignment]:
    """member id -> assignment, over `topics` (name -> (id, partition count)) as each member subscribes."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    for name, (topic_id, count) in sorted(topics.items()):
        subscribers = sorted(m.member_id for m in members if name in m.subscribed_topic_names)
        if not subscribers or count <= 0:
            continue
        if len(subscribers) <= count:
            for p in range(count):
                out[subscribers[p % len(subscribers)]].setdefault(topic_id, set()).add(p)
        else:
            for i, member_id in enumerate(subscribers):
                out[member_id].setdefault(topic_id, set()).add(i % count)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}
