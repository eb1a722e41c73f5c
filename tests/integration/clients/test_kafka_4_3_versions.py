"""The versions Kafka 4.3 added to the client APIs, raw protocol at the new versions (black-box: also runs
with --broker=kafka, where every expectation below was first observed on Apache Kafka 4.3.1):

- ListOffsets v11 (KIP-1023): EARLIEST_PENDING_UPLOAD (-6) finds nothing without tiered storage
  (offset -1, leader epoch -1, no error); each special timestamp is UNSUPPORTED_VERSION below the
  version that introduced it (-3 v7, -4 v8, -5 v9, -6 v11) and any other negative one at every version,
  checked before the partition is looked up; a lookup that finds nothing has leader epoch -1.
- Fetch v18 (KIP-1166): the follower's HighWatermark tagged field is accepted and a consumer's fetch
  answers as v17 (a broker's replica fetch path does not use it in 4.3.1; only the metadata quorum does).
- Metadata v13 (KIP-1102): a top-level error code, 0 for a served request; a request asking a topic by a
  null name without an id fails whole (UNKNOWN_SERVER_ERROR at the top and for each topic, no brokers);
  once a topic is asked by id, only the ids count.
- DescribeLogDirs v5 (KIP-1066): IsCordoned per log dir, false without `cordoned.log.dirs`.
"""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.support.helpers import (RawClient, build_batch, decode_records, metadata_raw, produce_raw,
                                   wait_broker_connections_closed, wait_topic_ready)

UNSUPPORTED_VERSION, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_ID = 35, 3, -1, 100
ZERO = uuid.UUID(int=0)
T0 = int(time.time() * 1000) - 600_000
# the first ListOffsets version that knows each special timestamp (Kafka 4.3.1's ListOffsetsRequest)
SPECIAL = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def _topic_with_records(bootstrap: str) -> str:
    """A one-partition topic holding offsets 0-2 with timestamps T0, T0+1, T0+2."""
    topic = f"v43-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    wait_topic_ready(bootstrap, topic, 1)
    with RawClient(bootstrap) as c:
        assert produce_raw(c, topic, build_batch([b"a", b"b", b"c"], timestamp_ms=T0)).error_code == 0
    return topic


def _list_offsets(c: RawClient, topic: str, timestamp: int, version: int, partition: int = 0):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    (p,) = c.request(req, version).topics[0].partitions
    return p


def _expected(timestamp: int, version: int) -> tuple[int, int, int]:
    """(error, offset, timestamp) for the topic of _topic_with_records()."""
    if timestamp < 0 and SPECIAL.get(timestamp, 99) > version:
        return UNSUPPORTED_VERSION, -1, -1
    return {-1: (0, 3, -1), -2: (0, 0, -1), -3: (0, 2, T0 + 2), -4: (0, 0, -1), -5: (0, -1, -1),
            -6: (0, -1, -1), T0 + 1: (0, 1, T0 + 1), T0 + 10: (0, -1, -1)}[timestamp]


def test_list_offsets_special_timestamps_by_version(shared_broker):
    topic = _topic_with_records(shared_broker.bootstrap)
    with RawClient(shared_broker.bootstrap) as c:
        for version in (1, 4, 6, 7, 8, 9, 10, 11):
            for ts in (-1, -2, -3, -4, -5, -6, -7, -100, T0 + 1, T0 + 10):
                p = _list_offsets(c, topic, ts, version)
                want = _expected(ts, version) if ts not in (-7, -100) else (UNSUPPORTED_VERSION, -1, -1)
                assert (p.error_code, p.offset, p.timestamp) == want, (version, ts)
                if version >= 4:  # an answer without an offset carries no leader epoch
                    assert (p.leader_epoch == -1) == (p.offset == -1), (version, ts, p)


def test_list_offsets_unsupported_timestamp_is_checked_before_the_partition(shared_broker):
    topic = _topic_with_records(shared_broker.bootstrap)
    with RawClient(shared_broker.bootstrap) as c:
        for name, partition in ((f"v43-missing-{uuid.uuid4().hex[:6]}", 0), (topic, 7)):
            assert _list_offsets(c, name, -7, 11, partition).error_code == UNSUPPORTED_VERSION
            assert _list_offsets(c, name, -6, 10, partition).error_code == UNSUPPORTED_VERSION
            assert _list_offsets(c, name, -6, 11, partition).error_code == UNKNOWN_TOPIC_OR_PARTITION


def _fetch(c: RawClient, topic_id: uuid.UUID, version: int, high_watermark: int | None):
    part = FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                  log_start_offset=-1, partition_max_bytes=1 << 20)
    if high_watermark is not None:
        part.high_watermark = high_watermark
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                       topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[part])])
    resp = c.request(req, version, FetchResponse)
    assert resp.error_code == 0
    (t,) = resp.responses
    (p,) = t.partitions
    return t, p


def test_fetch_v18_answers_as_v17(shared_broker):
    topic = _topic_with_records(shared_broker.bootstrap)
    with RawClient(shared_broker.bootstrap) as c:
        (md,) = metadata_raw(c, [topic], version=12).topics
        answers = []
        for version, hw in ((17, None), (18, None), (18, -1), (18, 0), (18, 3), (18, 2**63 - 1)):
            t, p = _fetch(c, md.topic_id, version, hw)
            assert t.topic_id == md.topic_id and p.error_code == 0, (version, hw, p)
            answers.append((p.high_watermark, p.last_stable_offset, p.log_start_offset,
                            [(o, v) for o, _k, v in decode_records(bytes(p.records or b""))]))
        assert all(a == (3, 3, 0, [(0, b"a"), (1, b"b"), (2, b"c")]) for a in answers), answers


def _metadata(c: RawClient, topics: list[tuple[str | None, uuid.UUID | None]], version: int):
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=i) for n, i in topics],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return c.request(req, version)


def test_metadata_v13_top_level_error_code(shared_broker):
    topic = _topic_with_records(shared_broker.bootstrap)
    missing = f"v43-missing-{uuid.uuid4().hex[:6]}"
    with RawClient(shared_broker.bootstrap) as c:
        served = _metadata(c, [(topic, None), (missing, None)], 13)
        assert served.error_code == 0 and len(served.brokers) == 1
        assert sorted((t.name, t.error_code) for t in served.topics) == sorted(
            [(topic, 0), (missing, UNKNOWN_TOPIC_OR_PARTITION)])
        (mine,) = [t for t in served.topics if t.name == topic]
        everything = metadata_raw(c, None, version=13)
        assert everything.error_code == 0 and topic in {t.name for t in everything.topics}

        # asked by id: only the ids count (a name without an id is ignored), each id once
        unknown = uuid.uuid4()
        by_id = _metadata(c, [(missing, None), (None, mine.topic_id), (None, unknown), (topic, mine.topic_id)], 13)
        assert by_id.error_code == 0
        assert sorted(((t.name or ""), t.error_code, str(t.topic_id)) for t in by_id.topics) == sorted(
            [(topic, 0, str(mine.topic_id)), ("", UNKNOWN_TOPIC_ID, str(unknown))])

        # a null name without an id (and no id asked): the whole request fails
        for version in (12, 13):
            failed = _metadata(c, [(None, None), (missing, None)], version)
            assert failed.brokers == [] and failed.controller_id == -1
            assert [(t.name, t.error_code) for t in failed.topics] == [("", UNKNOWN_SERVER_ERROR),
                                                                        (missing, UNKNOWN_SERVER_ERROR)]
            if version == 13:
                assert failed.error_code == UNKNOWN_SERVER_ERROR
        assert metadata_raw(c, [topic], version=13).error_code == 0  # the connection still serves


def test_describe_log_dirs_v5_is_cordoned(shared_broker):
    topic = _topic_with_records(shared_broker.bootstrap)
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    with RawClient(shared_broker.bootstrap) as c:
        v4 = c.request(DescribeLogDirsRequest(topics=[T(topic=topic, partitions=[0])]), 4, DescribeLogDirsResponse)
        v5 = c.request(DescribeLogDirsRequest(topics=[T(topic=topic, partitions=[0])]), 5, DescribeLogDirsResponse)
    assert v5.error_code == 0 and v5.results
    assert [r.log_dir for r in v5.results] == [r.log_dir for r in v4.results]
    assert all(r.error_code == 0 and r.is_cordoned is False and r.total_bytes > 0 for r in v5.results)
    held = [(t.name, p.partition_index) for r in v5.results for t in r.topics for p in t.partitions]
    assert held == [(topic, 0)]
