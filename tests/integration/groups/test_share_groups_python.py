"""confluent-kafka's ShareConsumer (librdkafka's KIP-932 share consumer): two consumers of one share group
read every record exactly once between them (implicit acknowledgement); explicit RELEASE redelivers with a
higher delivery count and REJECT never redelivers. Runs against minikafka and Kafka (--broker=kafka)."""
from __future__ import annotations

import time

from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.support.group_helpers import create_topic, group_broker, produce, unique  # noqa: F401  (fixture)


def earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest as a GROUP config (the group starts at the log start)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def consumer(bootstrap: str, group: str, topic: str, **extra) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def drain(consumers: list[ShareConsumer], want: int, deadline_s: float = 60, idle_s: float = 6) -> dict[bytes, list[int]]:
    """Poll every consumer in turn until `want` distinct values arrived and nothing came for `idle_s`."""
    seen: dict[bytes, list[int]] = {}
    owner: dict[bytes, set[int]] = {}
    end = time.monotonic() + deadline_s
    last = time.monotonic()
    while time.monotonic() < end:
        for i, c in enumerate(consumers):
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                seen.setdefault(m.value(), []).append(i)
                owner.setdefault(m.value(), set()).add(i)
                last = time.monotonic()
        if len(seen) >= want and time.monotonic() - last > idle_s:
            break
    return seen


def test_two_share_consumers_split_the_records(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-py"), 3)
    group = unique("sg-py")
    earliest(bs, group)
    values = produce(bs, topic, 3, 300)
    cs = [consumer(bs, group, topic), consumer(bs, group, topic)]
    try:
        seen = drain(cs, len(values))
    finally:
        for c in cs:
            c.close()
    assert sorted(seen) == sorted(values)
    assert all(len(v) == 1 for v in seen.values()), {k: v for k, v in seen.items() if len(v) > 1}


def test_explicit_release_and_reject(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-py-x"), 1)
    group = unique("sg-py-x")
    earliest(bs, group)
    values = produce(bs, topic, 1, 30)
    c = consumer(bs, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries: dict[bytes, list[int]] = {}
    end = time.monotonic() + 60
    try:
        while time.monotonic() < end:
            msgs = c.poll(1.0)
            for m in msgs:
                assert m.error() is None, m.error()
                v = m.value()
                deliveries.setdefault(v, []).append(m.delivery_count() if hasattr(m, "delivery_count") else 0)
                i = int(v[1:])
                first = len(deliveries[v]) == 1
                if i % 3 == 1 and first:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                elif i % 3 == 2:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                c.commit_sync()
            if len(deliveries) == len(values) and all(len(d) == 2 for v, d in deliveries.items() if int(v[1:]) % 3 == 1):
                time.sleep(2)  # nothing else may come: a rejected or accepted record is never redelivered
                extra = c.poll(2.0)
                assert [m.value() for m in extra] == []
                break
    finally:
        c.close()
    assert sorted(deliveries) == sorted(values)
    for v, counts in deliveries.items():
        assert len(counts) == (2 if int(v[1:]) % 3 == 1 else 1), (v, counts)
