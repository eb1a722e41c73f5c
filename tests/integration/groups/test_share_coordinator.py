"""The share coordinator over real sockets (KIP-932 state RPCs 83-87 and FindCoordinator key type SHARE), as
Kafka 4.3.1 answers them: initialize / write / read / summary / delete, epoch fencing, errors of
uninitialized share-partitions; the state survives a restart and a kill -9; Kafka's kafka-dump-log
--share-group-state-decoder reads the records minikafka wrote."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minikafka.protocol import messages as m
from tests.support.group_helpers import create_topic, unique
from tests.support.helpers import RawClient, metadata_raw, wait_until

INVALID_REQUEST, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH = 42, 74, 124
UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 3, 14, 16


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    with RawClient(bootstrap) as c:
        md = metadata_raw(c, [topic], version=12)
    return md.topics[0].topic_id


def kafka_uuid(u: uuid.UUID) -> str:
    import base64
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def find_share_coordinator(c: RawClient, key: str):
    resp = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6, FindCoordinatorResponse)
    return resp.coordinators[0]


def ready(c: RawClient, key: str) -> None:
    """Until the share coordinator of `key` is found (Kafka answers COORDINATOR_NOT_AVAILABLE while it
    creates __share_group_state) and has loaded the key's partition (NOT_COORDINATOR /
    COORDINATOR_LOAD_IN_PROGRESS before)."""
    wait_until(lambda: find_share_coordinator(c, key).error_code == 0, 30, 0.2, "share coordinator")
    group, tid, partition = key.rsplit(":", 2)
    import base64
    topic = uuid.UUID(bytes=base64.urlsafe_b64decode(tid + "=="))

    def loaded():
        r = summary(c, group, topic, int(partition), -1)
        return r.error_code not in (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
    wait_until(loaded, 30, 0.2, "share coordinator loaded")


def initialize(c, group, tid, partition, state_epoch, start_offset):
    R = m.InitializeShareGroupStateRequest
    P = R.InitializeStateData.PartitionData
    req = R(group_id=group, topics=[R.InitializeStateData(topic_id=tid, partitions=[
        P(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
    return c.request(req, 0, m.InitializeShareGroupStateResponse).results[0].partitions[0]


def write(c, group, tid, partition, state_epoch, leader_epoch, start_offset, batches, dcc=-1, version=1):
    R = m.WriteShareGroupStateRequest
    P = R.WriteStateData.PartitionData
    req = R(group_id=group, topics=[R.WriteStateData(topic_id=tid, partitions=[P(
        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=dcc,
        state_batches=[P.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=n)
                       for f, la, s, n in batches])])])
    return c.request(req, version, m.WriteShareGroupStateResponse).results[0].partitions[0]


def read(c, group, tid, partition, leader_epoch):
    R = m.ReadShareGroupStateRequest
    P = R.ReadStateData.PartitionData
    req = R(group_id=group, topics=[R.ReadStateData(topic_id=tid, partitions=[
        P(partition=partition, leader_epoch=leader_epoch)])])
    return c.request(req, 0, m.ReadShareGroupStateResponse).results[0].partitions[0]


def summary(c, group, tid, partition, leader_epoch, version=1):
    R = m.ReadShareGroupStateSummaryRequest
    P = R.ReadStateSummaryData.PartitionData
    req = R(group_id=group, topics=[R.ReadStateSummaryData(topic_id=tid, partitions=[
        P(partition=partition, leader_epoch=leader_epoch)])])
    return c.request(req, version, m.ReadShareGroupStateSummaryResponse).results[0].partitions[0]


def delete(c, group, tid, partition):
    R = m.DeleteShareGroupStateRequest
    P = R.DeleteStateData.PartitionData
    req = R(group_id=group, topics=[R.DeleteStateData(topic_id=tid, partitions=[P(partition=partition)])])
    return c.request(req, 0, m.DeleteShareGroupStateResponse).results[0].partitions[0]


def batches_of(result):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def test_state_rpcs(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("share-state"), 2)
    tid = topic_id(bs, topic)
    group = unique("sg")
    with RawClient(bs) as c:
        ready(c, f"{group}:{kafka_uuid(tid)}:0")
        r = read(c, group, tid, 0, 0)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "Read operation on uninitialized share "
                                                                    "partition not allowed.")
        w = write(c, group, tid, 0, 0, 0, 0, [])
        assert (w.error_code, w.error_message) == (INVALID_REQUEST, "Write operation on uninitialized share "
                                                                    "partition not allowed.")
        s = summary(c, group, tid, 0, 0)
        assert (s.error_code, s.start_offset, s.state_epoch, s.leader_epoch, s.delivery_complete_count) == \
            (0, -1, 0, 0, -1)
        assert initialize(c, group, tid, 0, 1, 0).error_code == 0
        assert write(c, group, tid, 0, 1, 2, 5, [(5, 9, 2, 1), (10, 14, 0, 1)], dcc=5).error_code == 0
        r = read(c, group, tid, 0, 2)
        assert (r.error_code, r.state_epoch, r.start_offset) == (0, 1, 5)
        assert batches_of(r) == [(5, 9, 2, 1), (10, 14, 0, 1)]
        s = summary(c, group, tid, 0, 2)
        assert (s.error_code, s.start_offset, s.state_epoch, s.leader_epoch, s.delivery_complete_count) == \
            (0, 5, 1, 2, 5)
        assert summary(c, group, tid, 0, 2, version=0).start_offset == 5
        # start offset -1 keeps it; overlapping batches merge, the higher delivery count wins
        assert write(c, group, tid, 0, 1, 2, -1, [(8, 12, 4, 2)], version=0).error_code == 0
        assert batches_of(read(c, group, tid, 0, 2)) == [(5, 7, 2, 1), (8, 12, 4, 2), (13, 14, 0, 1)]
        # fencing
        w = write(c, group, tid, 0, 1, 1, -1, [])
        assert (w.error_code, w.error_message) == (FENCED_LEADER_EPOCH, "The leader epoch in the request is older "
                                                                        "than the epoch on the broker.")
        assert read(c, group, tid, 0, 1).error_code == FENCED_LEADER_EPOCH
        assert write(c, group, tid, 0, 0, 2, -1, []).error_code == FENCED_STATE_EPOCH
        assert initialize(c, group, tid, 0, 0, 0).error_code == FENCED_STATE_EPOCH
        # a newer state epoch re-initializes: new start offset, no batches
        assert initialize(c, group, tid, 0, 2, 20).error_code == 0
        r = read(c, group, tid, 0, 2)
        assert (r.state_epoch, r.start_offset, batches_of(r)) == (2, 20, [])
        # a partition the topic does not have
        assert initialize(c, group, tid, 5, 0, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert initialize(c, group, uuid.uuid4(), 0, 0, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        # delete: uninitialized again; deleting what does not exist succeeds
        assert delete(c, group, tid, 0).error_code == 0
        assert read(c, group, tid, 0, 2).error_code == INVALID_REQUEST
        assert delete(c, group, tid, 1).error_code == 0
        # an empty group id: an empty answer
        R = m.ReadShareGroupStateRequest
        req = R(group_id="", topics=[R.ReadStateData(topic_id=tid, partitions=[
            R.ReadStateData.PartitionData(partition=0, leader_epoch=0)])])
        assert c.request(req, 0, m.ReadShareGroupStateResponse).results == []


def test_find_share_coordinator(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("share-find"), 1)
    key = f"{unique('sg')}:{kafka_uuid(topic_id(bs, topic))}:0"
    with RawClient(bs) as c:
        ready(c, key)
        found = find_share_coordinator(c, key)
        assert found.node_id >= 0 and found.port > 0
        bad = find_share_coordinator(c, "no-colons")
        assert (bad.error_code, bad.node_id) == (INVALID_REQUEST, -1)
        # SHARE before v6
        old = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 5, FindCoordinatorResponse)
        assert old.coordinators[0].error_code == INVALID_REQUEST


def _wait_readable(bs, group, tid, partition):
    """A restarted broker answers COORDINATOR_LOAD_IN_PROGRESS until __share_group_state is replayed."""
    with RawClient(bs) as c:
        def loaded():
            r = read(c, group, tid, partition, -1)
            assert r.error_code in (0, COORDINATOR_LOAD_IN_PROGRESS), r
            return r if r.error_code == 0 else None
        return wait_until(loaded, 30, 0.1, "share state loaded")


@pytest.mark.minikafka_only
def test_state_survives_restart_and_kill(broker_factory):
    broker = broker_factory({"share.coordinator.snapshot.update.records.per.snapshot": "3"})
    bs = broker.bootstrap
    topic = create_topic(bs, unique("share-restart"), 3)
    tid = topic_id(bs, topic)
    group = unique("sg")
    with RawClient(bs) as c:
        for p in range(3):
            assert initialize(c, group, tid, p, 1, 0).error_code == 0
        for i in range(8):  # snapshots and updates interleave (a snapshot every 3 updates)
            assert write(c, group, tid, 0, 1, 4, i * 10, [(i * 10, i * 10 + 9, 2, 1)], dcc=10).error_code == 0
        assert write(c, group, tid, 1, 1, 1, 0, [(0, 4, 4, 5)]).error_code == 0
        assert delete(c, group, tid, 2).error_code == 0
    broker.stop()
    broker.start()
    r = _wait_readable(bs, group, tid, 0)
    assert (r.state_epoch, r.start_offset, batches_of(r)) == (1, 70, [(70, 79, 2, 1)])
    with RawClient(bs) as c:
        assert batches_of(read(c, group, tid, 1, -1)) == [(0, 4, 4, 5)]
        assert read(c, group, tid, 2, -1).error_code == INVALID_REQUEST
        assert summary(c, group, tid, 0, -1).leader_epoch == 0  # writes never moved it
        assert write(c, group, tid, 1, 1, 7, 5, [(5, 6, 2, 1)]).error_code == 0
        assert read(c, group, tid, 1, 7).error_code == 0  # the read records leader epoch 7
    broker.kill()
    broker.start()
    r = _wait_readable(bs, group, tid, 1)
    assert (r.start_offset, batches_of(r)) == (5, [(5, 6, 2, 1)])
    with RawClient(bs) as c:
        assert read(c, group, tid, 1, 6).error_code == FENCED_LEADER_EPOCH
    broker.stop()
    assert "Traceback" not in broker.log_text()


@pytest.mark.minikafka_only
def test_records_decode_with_kafka_dump_log(broker_factory):
    """Kafka's DumpLogSegments --share-group-state-decoder reads ShareSnapshot, ShareUpdate and tombstones
    written by minikafka."""
    import sys

    from minikafka.coordinator.share.coordinator import share_key
    from minikafka.coordinator.partitioning import partition_for
    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab

    broker = broker_factory()
    bs = broker.bootstrap
    topic = create_topic(bs, unique("share-dump"), 1)
    tid = topic_id(bs, topic)
    group = unique("sg")
    with RawClient(bs) as c:
        assert initialize(c, group, tid, 0, 3, 0).error_code == 0
        assert write(c, group, tid, 0, 3, 1, 2, [(2, 9, 2, 1)], dcc=8).error_code == 0
        assert delete(c, group, tid, 0).error_code == 0
    broker.stop()
    p = partition_for(share_key(group, tid, 0), 50)
    segment = broker.data_dir / f"__share_group_state-{p}" / "00000000000000000000.log"
    lab.fetch()
    out = lab.run_tool("kafka-dump-log", ["--files", str(segment), "--share-group-state-decoder"], timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "Error" not in text and "Exception" not in text, text[-3000:]
    assert f'"groupId":"{group}"' in text and f'"topicId":"{kafka_uuid(tid)}"' in text, text[-3000:]
    assert '"stateEpoch":3' in text and '"firstOffset":2' in text and '"lastOffset":9' in text, text[-3000:]
    assert '"deliveryCompleteCount":8' in text, text[-3000:]
    assert text.count("payload: <DELETE>") == 1, text[-3000:]


@pytest.mark.minikafka_only
def test_routing_persister_over_the_wire(broker_factory):
    """The cluster's persister (broker/share_coordination.RoutingSharePersister) sends each call as its state RPC
    to the node its metadata names as the key's coordinator: here a broker process seen as node 99 of a
    fake cluster view; every answer decodes back to what the coordinator holds."""
    import asyncio
    from types import SimpleNamespace

    from minikafka.broker.share_coordination import RoutingSharePersister
    from minikafka.coordinator.share.config import ShareCoordinatorConfig
    from minikafka.coordinator.share.coordinator import ShareCoordinator
    from minikafka.coordinator.share.persister import StateBatch
    from minikafka.protocol.peer_client import PeerClient

    broker = broker_factory()
    bs = broker.bootstrap
    topic = create_topic(bs, unique("share-route"), 1)
    tid = topic_id(bs, topic)
    group = unique("sg")
    with RawClient(bs) as c:
        ready(c, f"{group}:{kafka_uuid(tid)}:0")
    host, port = bs.rsplit(":", 1)
    image = SimpleNamespace(
        topics={"__share_group_state": object()},
        partition=lambda _t, _p: SimpleNamespace(leader=99),
        brokers={99: SimpleNamespace(fenced=False, endpoints={"PLAINTEXT": (host, int(port))})})
    cluster = SimpleNamespace(image=image, inter_broker_listener="PLAINTEXT", peer_factory=SimpleNamespace(
        inter_broker_client=lambda n, a, cid, t: PeerClient(n, a[0], a[1], cid, t)))
    state = SimpleNamespace(cluster=cluster, node_id=1, catalog=SimpleNamespace(get=lambda _n: object()),
                            config=SimpleNamespace(get=lambda _k: ""))
    state.share_coordinator = ShareCoordinator(ShareCoordinatorConfig(), state.catalog, lambda e: -1)

    async def main():
        p = RoutingSharePersister(state)
        try:
            assert (await p.read(group, tid, 0, 0)).error_code == INVALID_REQUEST
            assert (await p.initialize(group, tid, 0, 2, 3)).error_code == 0
            assert (await p.write(group, tid, 0, 2, 1, 3, [StateBatch(3, 5, 2, 1)], 3)).error_code == 0
            r = await p.read(group, tid, 0, 1)
            assert (r.error_code, r.state_epoch, r.start_offset, r.state_batches) == (0, 2, 3, [StateBatch(3, 5, 2, 1)])
            s = await p.read_summary(group, tid, 0, 1)
            assert (s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count) == (2, 1, 3, 3)
            assert (await p.write(group, tid, 0, 2, 0, -1, [])).error_code == FENCED_LEADER_EPOCH
            assert (await p.delete(group, tid, 0)).error_code == 0
            assert (await p.read(group, tid, 0, 1)).error_code == INVALID_REQUEST
        finally:
            p.close()
    asyncio.run(main())


@pytest.mark.minikafka_only
def test_state_rpcs_need_cluster_action(broker_factory):
    """Without CLUSTER_ACTION on the cluster every share-partition of a state RPC, and a FindCoordinator of
    key type SHARE, is refused with CLUSTER_AUTHORIZATION_FAILED (Kafka's KafkaApis)."""
    from tests.support.authz_helpers import STANDARD_AUTHORIZER

    broker = broker_factory({"authorizer.class.name": STANDARD_AUTHORIZER,
                             "allow.everyone.if.no.acl.found": "false"})
    tid = uuid.uuid4()
    with RawClient(broker.bootstrap) as c:
        for r in (initialize(c, "g", tid, 0, 0, 0), read(c, "g", tid, 0, 0), write(c, "g", tid, 0, 0, 0, 0, []),
                  summary(c, "g", tid, 0, 0), delete(c, "g", tid, 0)):
            assert (r.error_code, r.error_message) == (31, "Cluster authorization failed.")
        assert find_share_coordinator(c, f"g:{kafka_uuid(tid)}:0").error_code == 31


@pytest.mark.minikafka_only
def test_metadata_auto_creates_the_state_topic_as_the_coordinator_does(broker_factory):
    broker = broker_factory({"share.coordinator.state.topic.num.partitions": "7"})
    with RawClient(broker.bootstrap) as c:
        md = metadata_raw(c, ["__share_group_state"], version=12, auto_create=True)
        wait_until(lambda: len(metadata_raw(c, ["__share_group_state"], version=12).topics[0].partitions) == 7,
                   10, 0.1, "__share_group_state")
        topic = metadata_raw(c, ["__share_group_state"], version=12).topics[0]
    assert md.topics[0].name == "__share_group_state" and topic.is_internal
