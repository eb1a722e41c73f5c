"""OffsetForLeaderEpoch (KIP-101/320) on a single broker, raw protocol: the partition is led in epoch 0
from its start, so epoch 0 ends at the log end offset; undefined (-1) and newer epochs are unknown
(-1, -1); a client's current leader epoch is checked (FENCED/UNKNOWN_LEADER_EPOCH). Runs on the
oracle too (`--broker=kafka`)."""
from __future__ import annotations

import kafka.errors as ke
import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from tests.support.helpers import RawClient, build_batch, metadata_raw, produce_raw, wait_topic_ready

T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
P = T.OffsetForLeaderPartition
TOPIC = "olep-data"
EMPTY = "olep-empty"
NONE = (0, -1, -1)


@pytest.fixture(scope="module")
def bootstrap(shared_broker):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(EMPTY, 1, 1)]).values():
        f.result(timeout=30)
    wait_topic_ready(shared_broker.bootstrap, TOPIC, 1)
    wait_topic_ready(shared_broker.bootstrap, EMPTY, 1)
    with RawClient(shared_broker.bootstrap) as c:
        for n in (3, 2):
            assert produce_raw(c, TOPIC, build_batch([b"v"] * n)).error_code == 0
    return shared_broker.bootstrap


def ask(bootstrap: str, topic: str, leader_epoch: int, current: int = -1, version: int = 4,
        partition: int = 0) -> tuple[int, int, int]:
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=topic, partitions=[
        P(partition=partition, current_leader_epoch=current, leader_epoch=leader_epoch)])])
    with RawClient(bootstrap) as c:
        resp = c.request(req, version, OffsetForLeaderEpochResponse)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


@pytest.mark.parametrize("version", [2, 3, 4])
def test_epoch_zero_ends_at_the_log_end(bootstrap, version) -> None:
    assert ask(bootstrap, TOPIC, 0, version=version) == (0, 0, 5)
    assert ask(bootstrap, EMPTY, 0, version=version) == (0, 0, 0)


def test_undefined_and_newer_epochs(bootstrap) -> None:
    assert ask(bootstrap, TOPIC, -1) == NONE
    assert ask(bootstrap, TOPIC, 1) == NONE
    assert ask(bootstrap, TOPIC, 7) == NONE
    assert ask(bootstrap, EMPTY, 3) == NONE


def test_current_leader_epoch_is_checked(bootstrap) -> None:
    assert ask(bootstrap, TOPIC, 0, current=0) == (0, 0, 5)
    unknown_epoch = ke.UnknownLeaderEpochError.errno  # the client's epoch is newer than the broker's
    assert ask(bootstrap, TOPIC, 0, current=1) == (unknown_epoch, -1, -1)
    unknown = ke.UnknownTopicOrPartitionError.errno
    assert ask(bootstrap, "olep-missing", 0) == (unknown, -1, -1)
    assert ask(bootstrap, TOPIC, 0, partition=5) == (unknown, -1, -1)


@pytest.mark.minikafka_only
def test_checkpoint_file_as_kafka_writes_it_and_restarts(broker_factory) -> None:
    """The partition's leader-epoch-checkpoint holds the bytes Apache Kafka 4.3.1 writes for the same
    history (checked against the oracle's log dir: "0\\n1\\n0 0\\n" after producing to a new topic);
    the answers survive a SIGTERM and a kill -9."""
    broker = broker_factory()
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, ["olep-restart"], auto_create=True)
        assert produce_raw(c, "olep-restart", build_batch([b"a"] * 3)).error_code == 0
    path = broker.data_dir / "olep-restart-0" / "leader-epoch-checkpoint"
    assert path.read_bytes() == b"0\n1\n0 0\n"
    assert broker.stop() == 0
    broker.start()
    assert ask(broker.bootstrap, "olep-restart", 0) == (0, 0, 3)
    with RawClient(broker.bootstrap) as c:
        assert produce_raw(c, "olep-restart", build_batch([b"b"] * 2)).error_code == 0
    broker.kill()
    broker.start()
    assert ask(broker.bootstrap, "olep-restart", 0) == (0, 0, 5)
    assert path.read_bytes() == b"0\n1\n0 0\n"
