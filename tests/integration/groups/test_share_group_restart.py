"""Share-group state across broker restarts (SIGTERM and kill -9): what was accepted stays accepted (the share
coordinator's `__share_group_state` and the group's records in `__consumer_offsets` are replayed), records
released or still in flight are delivered again, and the group and its start offsets are there for
kafka-share-groups' describe. minikafka only (restarts the broker process)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from minikafka.protocol.messages import DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest
from tests.integration.groups.test_share_groups_python import earliest
from tests.support.group_helpers import FAST_GROUPS, create_topic, produce, unique
from tests.support.helpers import RawClient, wait_until


def _poll_accepting(c: ShareConsumer, want: int, deadline_s: float = 30) -> list[bytes]:
    got: list[bytes] = []
    end = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < end:
        msgs = [m for m in c.poll(1.0) if m.error() is None]
        for m in msgs:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            got.append(m.value())
        if msgs:
            c.commit_sync()
    return got


pytestmark = pytest.mark.minikafka_only


@pytest.mark.parametrize("how", ["sigterm", "kill"])
def test_accepted_records_are_not_delivered_again_after_a_restart(broker_factory, how):
    broker = broker_factory(FAST_GROUPS)
    bs = broker.bootstrap
    topic = create_topic(bs, unique("sg-restart"), 1)
    group = unique("sg-restart")
    earliest(bs, group)
    values = produce(bs, topic, 1, 200)
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 50})
    c.subscribe([topic])
    try:
        first = _poll_accepting(c, 100)
    finally:
        c.close()
    assert len(set(first)) >= 100
    if how == "sigterm":
        broker.stop()
    else:
        broker.kill()
    broker.start()
    with RawClient(bs) as raw:
        Group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        req = DescribeShareGroupOffsetsRequest(groups=[Group(group_id=group, topics=None)])
        wait_until(lambda: raw.request(req, 1).groups[0].error_code != 14, timeout=30, interval=0.1,
                   what="the group coordinator loaded")  # COORDINATOR_LOAD_IN_PROGRESS until then
        resp = raw.request(req, 1)
        starts = [p.start_offset for t in resp.groups[0].topics for p in t.partitions]
        assert resp.groups[0].error_code == 0 and starts and starts[0] >= 100, resp
        d = raw.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1)
        assert d.groups[0].error_code == 0 and d.groups[0].group_state == "Empty"
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    try:
        rest = _poll_accepting(c, len(values) - len(set(first)), deadline_s=60)
    finally:
        c.close()
    assert not set(rest) & set(first)
    assert set(first) | set(rest) == set(values)
    assert "Traceback" not in broker.log_text()
