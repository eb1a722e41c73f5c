"""Share groups (KIP-932) over raw sockets: ShareGroupHeartbeat errors and assignments, share sessions and
their epochs, acquisition, ACCEPT / RELEASE / REJECT acknowledgements and their errors, the release of a
closed session's records. The cases a stock client cannot provoke, each answered with Kafka's error code.
Runs against minikafka and Kafka (--broker=kafka)."""
from __future__ import annotations

import uuid

import kafka.errors as ke

from minikafka.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.support.consumer_protocol_helpers import ready_coordinator
from tests.support.group_helpers import create_topic, group_broker, produce, unique  # noqa: F401  (fixture)
from tests.support.helpers import RawClient, metadata_raw, wait_until

INVALID_REQUEST = ke.InvalidRequestError.errno
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
FENCED_MEMBER_EPOCH = ke.FencedMemberEpochError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
INVALID_RECORD_STATE = ke.InvalidRecordStateError.errno
SHARE_SESSION_NOT_FOUND = ke.ShareSessionNotFoundError.errno
INVALID_SHARE_SESSION_EPOCH = ke.InvalidShareSessionEpochError.errno
ACCEPT, RELEASE, REJECT = 1, 2, 3
FetchTopic = ShareFetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
AckBatch = FetchPartition.AcknowledgementBatch
AckTopic = ShareAcknowledgeRequest.AcknowledgeTopic
AckPartition = AckTopic.AcknowledgePartition
AckAckBatch = AckPartition.AcknowledgementBatch


def member() -> str:
    return str(uuid.uuid4())


def hb(c: RawClient, group: str, member_id: str, epoch: int, topics=None):
    return c.request(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch, rack_id=None,
                                                subscribed_topic_names=topics), 1)


def join(c: RawClient, group: str, member_id: str, topic: str, partitions: int) -> int:
    """Heartbeat until the member holds `partitions` partitions; returns its epoch."""
    r = hb(c, group, member_id, 0, [topic])
    assert r.error_code == 0, r
    epoch = r.member_epoch

    def assigned():
        nonlocal epoch
        resp = hb(c, group, member_id, epoch)
        assert resp.error_code == 0, resp
        epoch = resp.member_epoch
        got = describe(c, group)
        mine = [m for m in got.members if m.member_id == member_id]
        return mine and sum(len(t.partitions) for t in mine[0].assignment.topic_partitions) == partitions
    wait_until(assigned, timeout=30, interval=0.3, what="the share assignment")
    return epoch


def describe(c: RawClient, group: str):
    return c.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1).groups[0]


def fetch(c: RawClient, group: str, member_id: str, epoch: int, tid, partition: int = 0, acks=(), wait_ms: int = 2000,
          max_records: int = 500, forget=()):
    topics = [FetchTopic(topic_id=tid, partitions=[FetchPartition(
        partition_index=partition, partition_max_bytes=0,
        acknowledgement_batches=[AckBatch(first_offset=a, last_offset=b, acknowledge_types=list(t)) for a, b, t in acks])])]
    return c.request(ShareFetchRequest(
        group_id=group, member_id=member_id, share_session_epoch=epoch, max_wait_ms=wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=0, is_renew_ack=False,
        topics=topics, forgotten_topics_data=[]), 1)


def acknowledge(c: RawClient, group: str, member_id: str, epoch: int, tid, acks, partition: int = 0):
    return c.request(ShareAcknowledgeRequest(
        group_id=group, member_id=member_id, share_session_epoch=epoch, is_renew_ack=False,
        topics=[AckTopic(topic_id=tid, partitions=[AckPartition(partition_index=partition, acknowledgement_batches=[
            AckAckBatch(first_offset=a, last_offset=b, acknowledge_types=list(t)) for a, b, t in acks])])]), 1)


def acquired(resp) -> list[tuple[int, int, int]]:
    assert resp.error_code == 0, resp
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def part(resp):
    return [p for t in resp.responses for p in t.partitions][0]


def test_heartbeat_errors_and_assignment(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-raw"), 2)
    group = unique("sg-raw")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        assert hb(c, group, "", 0, [topic]).error_code == INVALID_REQUEST
        assert hb(c, group, member(), 0, None).error_code == INVALID_REQUEST
        assert hb(c, group, member(), 3).error_code in (GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID)
        m1, m2 = member(), member()
        e1 = join(c, group, m1, topic, 2)
        assert hb(c, group, member(), 5).error_code == UNKNOWN_MEMBER_ID
        assert hb(c, group, m1, e1 + 7).error_code == FENCED_MEMBER_EPOCH
        join(c, group, m2, topic, 1)
        # m1 keeps what it had until its next heartbeat, which moves it to the new target
        d = describe(c, group)
        assert [len(m.assignment.topic_partitions[0].partitions) for m in d.members if m.member_id == m1] == [2]
        r = hb(c, group, m1, e1)
        assert r.error_code == 0 and r.member_epoch > e1 and r.assignment is not None
        d = describe(c, group)
        assert d.error_code == 0 and d.group_state == "Stable" and d.assignor_name == "simple"
        assert sorted(p for m in d.members for t in m.assignment.topic_partitions for p in t.partitions) == [0, 1]
        r = hb(c, group, m2, -1)
        assert (r.error_code, r.member_epoch) == (0, -1)
        assert [m.member_id for m in describe(c, group).members] == [m1]


def test_share_sessions_and_acknowledgements(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-ack"), 1, {})
    group = unique("sg-ack")
    with RawClient(bs) as c, RawClient(bs) as c2:
        ready_coordinator(c, group)
        tid = metadata_raw(c, [topic], version=12).topics[0].topic_id
        m1, m2 = member(), member()
        join(c, group, m1, topic, 1)
        join(c2, group, m2, topic, 1)
        # sessions: continuing one that does not exist; acknowledging in the opening request; bad epochs
        assert fetch(c, group, m1, 1, tid).error_code == SHARE_SESSION_NOT_FOUND
        assert fetch(c, group, m1, 0, tid, acks=[(0, 0, [ACCEPT])]).error_code == INVALID_REQUEST
        assert acknowledge(c, group, m1, 0, tid, [(0, 0, [ACCEPT])]).error_code == INVALID_SHARE_SESSION_EPOCH
        # the group starts at the log end (share.auto.offset.reset=latest): open both sessions, then produce
        assert acquired(fetch(c, group, m1, 0, tid, wait_ms=500)) == []
        assert acquired(fetch(c2, group, m2, 0, tid, wait_ms=500)) == []
        produce(bs, topic, 1, 10)
        got = []
        epoch = 1
        while not got:
            got = acquired(fetch(c, group, m1, epoch, tid))
            epoch += 1
        assert got == [(0, 9, 1)]
        assert fetch(c, group, m1, epoch + 5, tid).error_code == INVALID_SHARE_SESSION_EPOCH
        # nobody else gets records another member holds
        assert acquired(fetch(c2, group, m2, 1, tid, wait_ms=300)) == []
        # only the holder acknowledges; offsets beyond what was acquired are refused
        r = acknowledge(c2, group, m2, 2, tid, [(0, 0, [ACCEPT])])
        assert r.error_code == 0 and part(r).error_code == INVALID_RECORD_STATE
        r = acknowledge(c, group, m1, epoch, tid, [(5, 12, [ACCEPT])])
        epoch += 1
        assert (part(r).error_code, part(r).error_message) == (
            INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records.")
        # 0-3 accepted, 4-5 released, 6 rejected, 7-9 still held
        r = acknowledge(c, group, m1, epoch, tid, [(0, 3, [ACCEPT]), (4, 5, [RELEASE]), (6, 6, [REJECT])])
        epoch += 1
        assert part(r).error_code == 0, r
        assert acquired(fetch(c2, group, m2, 3, tid)) == [(4, 5, 2)]
        # closing m1's session gives back what it held
        r = fetch(c, group, m1, -1, tid, acks=[])
        assert r.error_code == 0
        got = acquired(fetch(c2, group, m2, 4, tid))
        assert got == [(7, 9, 2)], got


def test_fetch_of_a_share_partition_the_group_never_assigned(group_broker):
    """Kafka initializes a share-partition's state when the group coordinator first assigns it; a ShareFetch
    for one it never assigned gets UNKNOWN_SERVER_ERROR for that partition."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-none"), 1)
    with RawClient(bs) as c:
        tid = metadata_raw(c, [topic], version=12).topics[0].topic_id
        r = fetch(c, unique("sg-none"), member(), 0, tid, wait_ms=500)
        assert r.error_code == 0
        assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, -1)]


def test_a_group_id_belongs_to_one_kind_of_group(group_broker):
    """A share group is not a consumer group, and a consumer group not a share group (Kafka's messages)."""
    from tests.support.consumer_protocol_helpers import describe as cg_describe, heartbeat as cg_heartbeat
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("sg-kind"), 1)
    share_group, consumer_group = unique("sg-kind"), unique("cg-kind")
    with RawClient(bs) as c:
        ready_coordinator(c, share_group)
        assert hb(c, share_group, member(), 0, [topic]).error_code == 0
        d = cg_describe(c, share_group)[share_group]
        assert (d.error_code, d.error_message) == (GROUP_ID_NOT_FOUND, f"Group {share_group} is not a consumer group.")
        ready_coordinator(c, consumer_group)
        assert cg_heartbeat(c, consumer_group, member(), 0, topics=[topic]).error_code == 0
        d = describe(c, consumer_group)
        assert (d.error_code, d.error_message) == (GROUP_ID_NOT_FOUND, f"Group {consumer_group} is not a share group.")
        r = hb(c, consumer_group, member(), 0, [topic])
        assert (r.error_code, r.error_message) == (GROUP_ID_NOT_FOUND, f"Group {consumer_group} is not a share group.")
