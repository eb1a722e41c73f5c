"""DescribeLogDirs (API 35) on a single node, raw protocol: every partition held here under its log
dir with its size on disk (one that holds records is not empty), a request naming partitions gets
only those that exist, v4 adds the dir's total and usable bytes. Black-box: also runs with
--broker=kafka."""
from __future__ import annotations

import os
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from tests.support.helpers import RawClient, wait_topic_ready


def describe(bootstrap: str, topics: dict[str, list[int]] | None, version: int = 4) -> DescribeLogDirsResponse:
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    req = DescribeLogDirsRequest(topics=None if topics is None else [T(topic=t, partitions=ps)
                                                                      for t, ps in topics.items()])
    with RawClient(bootstrap) as c:
        return c.request(req, version, DescribeLogDirsResponse)


def sizes(resp: DescribeLogDirsResponse, topic: str) -> dict[int, int]:
    return {p.partition_index: p.partition_size for r in resp.results for t in r.topics if t.name == topic
            for p in t.partitions}


def test_describe_log_dirs_lists_partitions_with_their_sizes(broker):
    topic = f"dirs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    wait_topic_ready(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce(topic, b"x" * 200, partition=0)
    assert producer.flush(30) == 0
    everything = describe(broker.bootstrap, None)
    assert everything.error_code == 0 and everything.results
    assert all(r.error_code == 0 and os.path.isabs(r.log_dir) for r in everything.results)
    assert all(r.total_bytes > 0 and 0 <= r.usable_bytes <= r.total_bytes for r in everything.results)
    got = sizes(everything, topic)
    assert sorted(got) == [0, 1] and got[0] >= 50 * 200 and got[1] == 0
    assert all(not p.is_future_key and p.offset_lag == 0 for r in everything.results for t in r.topics
               if t.name == topic for p in t.partitions)
    named = describe(broker.bootstrap, {topic: [0, 9], "no-such-topic": [0]}, version=1)
    assert sizes(named, topic) == {0: got[0]}
    assert not any(t.name == "no-such-topic" for r in named.results for t in r.topics)
